"""IE fixtures: TaskSpecs built here from the real data (tests skip without it).

* every ALFRED trial with an expert plan: its scene, the verifier compiled from its
  ``pddl_params``, its ``plan.high_pddl`` expanded in the backend as the reference plan;
* every task of ``tasks_goal_states.json`` whose goal does not already hold at the start: its
  floor plan's THOR dump with one agent, its ``object_states`` verifier, and its own solution
  with every robot mapped to that agent, grounded step by step, as the reference plan.

A reference plan is cut after the first action that reaches the goal (an episode ends there).
"""

from __future__ import annotations

import dataclasses
import re
from functools import lru_cache

import pytest

from forge_resources.household import HouseholdEnv, evaluate
from forge_resources.household.actions import SPECS
from forge_resources.household.alfred import alfred_scene, expand, high_level_plan, load_trial, trial_paths, \
    trial_verifier
from forge_resources.household.data import load_dump, shared_data
from forge_resources.household.goals import Goal
from forge_resources.household.sllm import RULES, ground, load_tasks, task_verifier
from forge_skills.ie.spec import MAX_STEPS, TaskSpec

DATA = shared_data()
HAVE_DATA = (DATA / "ai2thor" / "tasks_goal_states.json").is_file() and (DATA / "alfred").is_dir()
needs_data = pytest.mark.skipif(not HAVE_DATA, reason=f"the real data folder {DATA} (ai2thor/, alfred/) is absent")
INTERFACE = {"actions": [dataclasses.asdict(s) for s in SPECS], "grounded": True}


def _split(plan_len: int, subtasks: int) -> str:
    return f"{'long' if plan_len > 8 else 'short'}_{'hard' if subtasks > 1 else 'simple'}"


def _spec(task_id: str, env: HouseholdEnv, task_type: str, macro: str, micro: list[str], goal: dict,
          verifier, plan: list) -> TaskSpec:
    subtasks = max(1, len(verifier.predicates))
    return TaskSpec(task_id=task_id, scene=env.scene.floor_plan, scene_type=env.scene.kind,
                    split=_split(len(plan), subtasks), task_type=task_type,
                    instruction={"macro": macro, "micro": micro}, action_interface=INTERFACE, max_steps=MAX_STEPS,
                    goal=goal, verifier=verifier.to_dict(), reference_plan=[a.to_dict() for a in plan],
                    subtasks=subtasks, budget_steps=min(MAX_STEPS, max(1, 3 * len(plan))))


def _run_until_goal(env: HouseholdEnv, verifier, actions) -> list:
    plan = []
    for action in actions:
        result = env.step(action)
        assert result.valid, f"{action}: {result.message}"
        plan.append(action)
        if evaluate(verifier, env.objects())[0]:
            return plan
    raise AssertionError("the plan does not reach the goal")


def alfred_tasks() -> list[tuple[TaskSpec, dict]]:
    out = []
    for path in trial_paths(DATA):
        trial = load_trial(path)
        if not trial.get("plan", {}).get("high_pddl"):
            continue
        env = HouseholdEnv(alfred_scene(trial, DATA))
        verifier = trial_verifier(trial)
        state = env.get_state()

        def actions():
            for step in high_level_plan(trial):
                yield from expand(step, env.world)

        plan = _run_until_goal(env, verifier, actions())
        ann = (trial.get("turk_annotations", {}).get("anns") or [{}])[0]
        goal = {**dataclasses.asdict(Goal.from_trial(trial)), "pddl_params": trial["pddl_params"], "mode": "all"}
        out.append((_spec(f"alfred-{trial['task_id']}", env, trial["task_type"], ann.get("task_desc", ""),
                          list(ann.get("high_descs", [])), goal, verifier, plan), state))
    return out


def sllm_tasks() -> list[tuple[TaskSpec, dict]]:
    out = []
    for i, task in enumerate(load_tasks(DATA)):
        env = HouseholdEnv(load_dump(int(task["floorplan"]), DATA, rules=RULES, agents=1))
        verifier = task_verifier(task)
        if evaluate(verifier, env.objects())[0]:
            continue  # the goal holds before any action: no task
        state = env.get_state()
        solution = [re.sub(r"robots\[\d+\]", "robots[0]", line) for line in task["solution"]]

        def actions():
            for k in range(len(solution)):
                yield ground(env.world, solution, k)

        plan = _run_until_goal(env, verifier, actions())
        goal = {"object_states": task["object_states"], "mode": "all"}
        out.append((_spec(f"sllm-{task['floorplan']}-{i:02d}", env, "household", task["task"], [], goal, verifier,
                          plan), state))
    return out


@lru_cache(maxsize=1)
def all_tasks() -> tuple[tuple[TaskSpec, dict], ...]:
    return tuple(alfred_tasks() + sllm_tasks()) if HAVE_DATA else ()


@pytest.fixture(scope="session")
def tasks() -> tuple[tuple[TaskSpec, dict], ...]:
    if not HAVE_DATA:
        pytest.skip(f"the real data folder {DATA} (ai2thor/, alfred/) is absent")
    return all_tasks()


def write_package(folder, pairs, name: str = "ie-test", version: str = "0.1.0"):
    """An IE package as ``forge eval --agent`` reads it (see forge_skills/ie/evaluation.py):
    visible task fields in tasks/, the hidden rest in answers/, initial states in states/."""
    import json
    from pathlib import Path

    folder = Path(folder)
    for sub in ("tasks", "answers", "states"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    for task, state in pairs:
        visible = task.visible()
        hidden = {k: v for k, v in task.model_dump().items() if k not in visible}
        (folder / "tasks" / f"{task.task_id}.json").write_text(json.dumps(visible, indent=1))
        (folder / "answers" / f"{task.task_id}.json").write_text(json.dumps(hidden, indent=1))
        (folder / "states" / f"{task.task_id}.json").write_text(json.dumps(state))
    manifest = {"format_version": 1, "track": "ie", "name": name, "version": version,
                "tasks": [t.task_id for t, _ in pairs]}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return folder
