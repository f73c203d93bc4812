"""Episodes on manipulation tasks, and the trajectory EQA asked about them.

The harness is the household one's (same agents, same record): the agent sees the task's
visible fields, then per step the observation and the high-level actions valid now (plus Stop);
an action the environment refuses, or a reply naming none, is an invalid step. The episode ends
on success (the physical goal holds after a step), Stop, the step budget, or the control-step
budget (a fixed multiple of the reference's). Success is judged on the terminal state.

Trajectory questions are read from what the episode logged: which object was nearest the
gripper at the start, which the gripper held after a middle step, which it held first, what it
held at the end and how many actions were refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forge_resources.household.protocol import Action
from forge_skills.ie.episodes import STOP, STOP_NAMES, Episode, Step, Unreadable, _refused

NOTHING = "nothing"


def run_manipulation_episode(task: Any, initial_state: dict[str, Any], agent: Any, *, env: Any = None,
                             max_steps: int | None = None, image: bool = False, holds: Any = None) -> Episode:
    """One episode on a manipulation environment (robosuite's by default; any world's environment
    with the same protocol, ``holds`` evaluating its verifier's goal)."""
    from forge.skills import held
    from forge_resources.robosuite.manipulation import ManipulationEnv

    if holds is None:
        from forge_resources.robosuite.outcomes import holds
    env = env if env is not None else held("robosuite.manipulation", ManipulationEnv)
    env.image = image
    env.set_state(initial_state)
    goal = task.verifier["goal"]
    parts = goal["goals"] if goal.get("kind") == "all" else [goal]
    cap = task.max_steps if max_steps is None else max_steps
    control_cap = (task.budget or {}).get("control_steps")
    observation = env.observation(0)
    episode = Episode(task_id=task.task_id, scene=task.scene, scene_type=task.scene_type, split=task.split,
                      agent=getattr(agent, "name", type(agent).__name__), max_steps=cap, initial=env.objects(),
                      initial_held=observation.holding, initial_location=_point(env.motion.eef()),
                      initial_observation=observation.text, environment=task.environment)
    agent.start(task.visible(), observation)
    ended = "timeout"
    while len(episode.steps) < cap and (control_cap is None or env.control_steps() < control_cap):
        valid_now = [*env.valid_actions(0), STOP]
        choice = agent.act(observation, valid_now)
        reply = getattr(agent, "last_reply", None)
        if isinstance(choice, Action) and choice.name in STOP_NAMES:
            ended = "stop"
            break
        index = len(episode.steps) + 1
        if isinstance(choice, Unreadable):
            observation = _refused(env.observation(0), choice)
            episode.steps.append(Step(index=index, action=None, text=choice.reply[:500], valid=False,
                                      message=choice.reason, held=observation.holding, observation=observation.text,
                                      reply=reply))
            continue
        result = env.step(choice)
        observation = result.observation
        progress = sum(holds(p, env) for p in parts) / len(parts)
        episode.steps.append(Step(index=index, action=choice.to_dict(), text=str(choice), valid=result.valid,
                                  message=result.message, held=observation.holding,
                                  location=_point(env.motion.eef()), progress=progress,
                                  observation=observation.text, reply=reply))
        if holds(goal, env):
            ended = "success"
            break
    episode.final = env.objects()
    met = [holds(p, env) for p in parts]
    episode.success = all(met)
    episode.progress = sum(met) / len(met)
    episode.unmet = [f"{p['kind']} {p.get('object') or p.get('top')}" for p, ok in zip(parts, met) if not ok]
    episode.ended = ended
    return episode


def _point(p: np.ndarray) -> str:
    return ",".join(f"{v:.4f}" for v in p)


# -- trajectory EQA ------------------------------------------------------------------------------


def questions_for(task: Any, episode: Episode) -> list[dict[str, Any]]:
    from forge_skills.ie.trajectory_eqa import _key

    objects = sorted(o["name"] for o in episode.initial if o["kind"] == "object")
    if not objects:
        return []
    held_opts = objects + [NOTHING]
    rows = [_key("nearest_at_start", "initial", "single_choice",
                 "At the start, which object was nearest the gripper?", {"kind": "nearest_at_start"}, objects,
                 _truth({"kind": "nearest_at_start"}, episode))]
    if episode.steps:
        k = (len(episode.steps) + 1) // 2
        query = {"kind": "held_after", "step": k}
        rows.append(_key("held_after", "intermediate", "single_choice",
                         f"What did the gripper hold right after step {k}?", query, held_opts, _truth(query, episode)))
    for kind, text in (("first_held", "Which object did the gripper hold first during the episode?"),
                       ("held_at_end", "What did the gripper hold when the episode ended?")):
        rows.append(_key(kind, "final", "single_choice", text, {"kind": kind}, held_opts,
                         _truth({"kind": kind}, episode)))
    rows.append(_key("refused", "final", "numeric", "How many of the episode's actions were refused?",
                     {"kind": "refused"}, [], _truth({"kind": "refused"}, episode)))
    for i, q in enumerate(rows, 1):
        q["id"] = f"{task.task_id}:q{i:02d}"
        q["task_id"] = task.task_id
    return rows


def _truth(query: dict[str, Any], episode: Episode) -> Any:
    kind = query["kind"]
    if kind == "nearest_at_start":
        grip = np.array([float(v) for v in (episode.initial_location or "0,0,0").split(",")])
        objs = [o for o in episode.initial if o["kind"] == "object"]
        return min(objs, key=lambda o: (float(np.linalg.norm(np.array(o["position"]) - grip)), o["name"]))["name"]
    if kind == "held_after":
        return episode.steps[query["step"] - 1].held or NOTHING
    if kind == "first_held":
        return next((s.held for s in episode.steps if s.held), NOTHING)
    if kind == "held_at_end":
        return (episode.steps[-1].held if episode.steps else episode.initial_held) or NOTHING
    if kind == "refused":
        return sum(not s.valid for s in episode.steps)
    raise ValueError(f"unknown manipulation EQA query {kind!r}")


def answer_from_log(questions: list[dict[str, Any]], episode: Episode) -> list[str]:
    from forge_skills.ie.trajectory_answers import response

    return [response(q, _truth(q["query"], episode)) for q in questions]

