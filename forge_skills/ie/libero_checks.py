"""Gates B2, C2 and D2 for LIBERO's tasks (the ``libero`` IE world), on simulator state, with
LIBERO's own success check as the oracle the compiled verifier answers to.

- B2: every planned step names a thing of the restored scene and an action of the interface, and
  the verifier's bodies, sites and joints are the model's; the instruction is LIBERO's own for the
  task; the names the agent acts on are each one thing of the scene, none an internal index
  ("bowl 2"); the split follows from the goal's facts and the plan's length.
- C2: the reference reaches the goal on every one of ``REPEATS`` executions from the restored
  state, LIBERO's check agreeing after every control step, ending in the same state each time,
  with no strict prefix reaching it; the reference cut before its last step and a wrong-target
  control reach neither forge's goal nor LIBERO's success, the two agreeing throughout (the cut
  control's states are the reference's own up to its last step, compared on its runs).
- D2: the stored state restores exactly, also after an episode ran; every object is back where
  it was within ``POSE_TOLERANCE``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from forge.contracts import CheckContext, Outcome
from forge_skills.ie.checks import indexed, instruction_texts
from forge_skills.ie.manipulation_checks import restorable_by, restore_check
from forge_skills.ie.types import IETask

REPEATS = 3
POSE_TOLERANCE = 1e-6  # metres: a restore gives the same poses


def _env(task: IETask, ctx: CheckContext):
    from forge.skills import held
    from forge_resources.libero.tasks import LiberoTaskEnv

    env = held("libero.tasks", LiberoTaskEnv)
    state = json.loads(ctx.store.get_blob(task.initial_state))
    env.set_state(state)
    return env, state


def variables_resolve(task: IETask, ctx: CheckContext) -> Outcome:
    import mujoco

    env, _ = _env(task, ctx)
    names = {t.name for t in env.things()}
    known = {a["name"] for a in task.action_interface.get("actions", [])}
    problems = []
    for step in task.reference_plan:
        if step["name"] not in known:
            problems.append(f"action {step['name']} is not in the action interface")
        if step["name"] != "MoveDelta":
            problems += [f"plan names the {a}, which the scene lacks" for a in step.get("args", []) if a not in names]
    kinds = {"object": mujoco.mjtObj.mjOBJ_BODY, "support": mujoco.mjtObj.mjOBJ_BODY,
             "owner": mujoco.mjtObj.mjOBJ_BODY, "site": mujoco.mjtObj.mjOBJ_SITE}
    from forge_resources.libero.goals import facts

    for fact in facts(task.verifier.get("goal") or {"kind": "all", "goals": []}):
        refs = [(k, fact[k]) for k in kinds if fact.get(k)] + [("joint", j["joint"]) for j in fact.get("joints", [])]
        for key, name in refs:
            kind = kinds.get(key, mujoco.mjtObj.mjOBJ_JOINT)
            if mujoco.mj_name2id(env.model, kind, name) < 0:
                problems.append(f"the verifier names {key} {name!r}, which the model lacks")
    return Outcome(not problems, "; ".join(problems[:4]))


def instruction_matches_goal(task: IETask, ctx: CheckContext) -> Outcome:
    """The instruction is LIBERO's own for the task (its language line, word for word), and the
    task's goal is the one LIBERO's file states."""
    env, _ = _env(task, ctx)
    problem = env.env.parsed_problem
    language = " ".join(problem["language_instruction"]).strip().lower().rstrip(".")
    said = task.instruction.get("macro", "").strip().lower().rstrip(".")
    bddl = [list(f) for f in problem["goal_state"]]
    if said != language:
        return Outcome(False, f"the instruction {task.instruction.get('macro')!r} is not LIBERO's ({language!r})")
    if task.goal.get("bddl") != bddl:
        return Outcome(False, f"the goal {task.goal.get('bddl')} is not LIBERO's {bddl}")
    return Outcome(True, "")


def names_unambiguous(task: IETask, ctx: CheckContext) -> Outcome:
    """Each name the agent acts on (the plan's arguments, the steps in words) is one thing of the
    restored scene, and no text names a thing by an internal index."""
    env, _ = _env(task, ctx)
    counts: dict[str, int] = {}
    for t in env.things():
        counts[t.name] = counts.get(t.name, 0) + 1
    problems = [f"{name!r} names {n} things of the scene" for name, n in counts.items() if n > 1]
    for text in instruction_texts(task):
        problems += [f"{p!r} is an internal index ({text!r})" for p in indexed(text)]
    for step in task.reference_plan:
        problems += [f"the plan names {a!r}, which no thing of the scene is" for a in step.get("args", [])
                     if step["name"] != "MoveDelta" and counts.get(a, 0) != 1]
    problems = list(dict.fromkeys(problems))
    return Outcome(not problems, f"task {task.task_id}: " + "; ".join(problems[:4]) if problems else "")


def split_consistent(task: IETask, ctx: CheckContext) -> Outcome:
    n = int(task.goal.get("facts", 0))
    want = f"{'long' if len(task.reference_plan) > 5 * n else 'short'}_{'hard' if n >= 2 else 'simple'}"
    ok = task.split == want and task.subtasks == n
    return Outcome(ok, "" if ok else f"split {task.split!r} with {task.subtasks} subtasks; the goal and plan give "
                                     f"{want!r} with {n}")


def reference_completes(task: IETask, ctx: CheckContext) -> Outcome:
    """Three executions from the restored state, LIBERO's check compared after every control step;
    they also stand for the control cut before the reference's last step (its states are the
    reference's own up to there: the goal must not hold after a strict prefix)."""
    from forge_skills.ie.libero import execute

    goal = task.verifier["goal"]
    finals = []
    for _ in range(REPEATS):
        env, _state = _env(task, ctx)
        run = execute(env, task.reference_plan, goal, compare=True)
        if run["disagree"]:
            return Outcome(False, f"forge's verifier and LIBERO's success check disagree after control step "
                                  f"{run['disagree'][0]} of the reference")
        if not run["valid"]:
            return Outcome(False, f"non-executable: a reference step was refused ({run['refused']})")
        if not run["after"] or not run["after"][-1] or not run["success"]:
            return Outcome(False, "the reference ends without reaching the goal (forge's verifier or LIBERO's check)")
        if any(run["after"][:-1]):
            return Outcome(False, f"a strict prefix of {run['after'].index(True) + 1} steps already reaches the goal")
        finals.append(env.get_state()["mujoco_state"])
    if any(not np.allclose(f, finals[0], rtol=0, atol=POSE_TOLERANCE) for f in finals):
        return Outcome(False, "repeated executions from the restored state ended in different states")
    return Outcome(True, "")


def controls_fail(task: IETask, ctx: CheckContext) -> Outcome:
    """A wrong-target control reaches neither forge's goal nor LIBERO's success, the two agreeing
    after every control step. The control cut before the reference's last step needs no run of
    its own: its states are the reference's up to there, which ``reference_completes`` compared
    step by step and found short of the goal (repeated runs agree to a micrometre)."""
    from forge_resources.household.protocol import Action
    from forge_resources.libero.plans import wrong_target_control
    from forge_skills.ie.libero import execute

    goal = task.verifier["goal"]
    env, _ = _env(task, ctx)
    steps = wrong_target_control(env, [Action.from_dict(s) for s in task.reference_plan])
    if steps is None:
        return Outcome(True, "no other object, drawer or knob to aim at: only the cut control applies")
    env, _ = _env(task, ctx)
    run = execute(env, [a.to_dict() for a in steps], goal, compare=True)
    if run["disagree"]:
        return Outcome(False, f"forge's verifier and LIBERO's success check disagree after control step "
                              f"{run['disagree'][0]} of the wrong-target control")
    if run["success"]:
        return Outcome(False, "the wrong target control reaches the goal")
    return Outcome(True, "")


def _half_episode(env: Any, task: IETask) -> None:
    """An episode that moves the arm and, mostly, an object: the first half of the reference."""
    from forge_skills.ie.libero import execute

    execute(env, task.reference_plan[: max(1, len(task.reference_plan) // 2)], task.verifier["goal"])


state_restores = restore_check(_env, _half_episode)
_leaves_restore_to_d2 = restorable_by(_env)


LIBERO_CHECKS = {
    "ie_variables_resolve": _leaves_restore_to_d2(variables_resolve),
    "ie_instruction_matches_goal": _leaves_restore_to_d2(instruction_matches_goal),
    "ie_names_unambiguous": _leaves_restore_to_d2(names_unambiguous),
    "ie_split_consistent": split_consistent, "ie_reference_completes": _leaves_restore_to_d2(reference_completes),
    "ie_controls_fail": _leaves_restore_to_d2(controls_fail), "ie_state_restores": state_restores,
}
