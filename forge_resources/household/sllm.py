"""The household tasks of ``ai2thor/tasks_goal_states.json`` (SMART-LLM's multi-robot set, as
LLMTaskPlanner_ ships it) in the backend.

A task names a floor plan with a real THOR dump, a goal (``object_states``: a type, the state it
must be in, the types it must hold) and a solution written against robots and object *types*:
``PutObject(robots[1], 'Cup', 'CounterTop')``. Each robot is an agent. A type name is resolved to
an instance when the step runs: the one the step can act on (held, in reach, in the state the
verb changes), preferring - for an openable - the one holding something the rest of the plan
names, else the first in the dump. Once an object is sliced its pieces stand for it.

The dataset's own simulator (``src/sllm/sllm_env.py``) places anything in any receptacle and
answers a state already reached with success; the scenes here carry those rules
(``Rules("any", "noop")``). It toggles a StoveBurner directly; AI2-THOR toggles the StoveKnob that
controls it, which is what a StoveBurner toggle resolves to here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .catalog import BASE_TYPE
from .data import load_dump, shared_data
from .goals import Verifier, compile_object_states
from .protocol import Action
from .scene import Rules, Scene
from .world import World

VERBS = {"GoToObject": "GotoObject", "PickUpObject": "PickupObject", "PutObject": "PutObject",
         "OpenObject": "OpenObject", "CloseObject": "CloseObject", "ToggleOnObject": "ToggleObjectOn",
         "ToggleOffObject": "ToggleObjectOff", "SliceObject": "SliceObject", "CleanObject": "CleanObject",
         "DirtyObject": "DirtyObject", "BreakObject": "BreakObject", "FillObjectWithLiquid": "FillObjectWithLiquid",
         "EmptyLiquidFromObject": "EmptyLiquidFromObject", "DropHandObject": "DropObject"}
RULES = Rules("any", "noop")
_STEP = re.compile(r"^\s*(\w+)\(\s*robots\[(\d+)\]\s*((?:,\s*'[^']*'\s*)*)\)\s*$")


def load_tasks(root: Path | None = None) -> list[dict[str, Any]]:
    return json.loads(((root or shared_data()) / "ai2thor" / "tasks_goal_states.json").read_text())


def task_scene(task: dict[str, Any], root: Path | None = None) -> Scene:
    return load_dump(int(task["floorplan"]), root, rules=RULES, agents=len(task["robot_list"]))


def task_verifier(task: dict[str, Any]) -> Verifier:
    return compile_object_states(task["object_states"], source=f"tasks_goal_states:{task['task']}")


def parse_step(line: str) -> tuple[str, int, tuple[str, ...]]:
    """``PutObject(robots[0], 'Cup', 'CounterTop')`` -> ``("PutObject", 0, ("Cup", "CounterTop"))``."""
    match = _STEP.match(line)
    if not match or match.group(1) not in VERBS:
        raise ValueError(f"not a solution step: {line!r}")
    return VERBS[match.group(1)], int(match.group(2)), tuple(re.findall(r"'([^']*)'", match.group(3)))


def _instances(world: World, kind: str) -> list[str]:
    return [o for o in world.order if world.exists(o)
            and (world.type_of(o) == kind or BASE_TYPE.get(world.type_of(o)) == kind)]


def _rank(world: World, oid: str, verb: str, agent: int, needed: set[str], reach: bool) -> tuple:
    d = world.dyn[oid]
    mine = world.holder(oid) == agent
    near = world.in_reach(agent, oid) if reach else True
    holds_needed = any(world.type_of(c) in needed or BASE_TYPE.get(world.type_of(c)) in needed
                       for c in world.descendants(oid))
    wrong_state = {"OpenObject": not d["isOpen"], "CloseObject": bool(d["isOpen"]),
                   "ToggleObjectOn": not d["isToggled"], "ToggleObjectOff": bool(d["isToggled"]),
                   "PickupObject": world.holder(oid) is None and world.closed_around(oid) is None,
                   "PutObject": not world.can(oid, "openable") or bool(d["isOpen"]),
                   "SliceObject": not d["isSliced"]}.get(verb, True)
    return (not mine, not near, not holds_needed if verb == "OpenObject" else False, not wrong_state)


def resolve(world: World, verb: str, agent: int, kind: str, later: list[tuple[str, int, tuple[str, ...]]],
            role: str = "object", reach: bool = True) -> str:
    """The instance a type name means for this step (see the module docstring)."""
    if role == "held":
        held = world.agents[agent].held
        if held and (world.type_of(held) == kind or BASE_TYPE.get(world.type_of(held)) == kind):
            return held
    found = _instances(world, kind)
    if not found:
        raise LookupError(f"FloorPlan has no {kind}")
    if kind == "StoveBurner" and verb in ("ToggleObjectOn", "ToggleObjectOff"):
        burner = min(found, key=lambda o: (not world.children(o), found.index(o)))
        knobs = [o for o in world.order if burner in (world.record(o).get("controlledObjects") or ())]
        return knobs[0] if knobs else burner
    needed = {a for _, _, args in later for a in args}
    return min(found, key=lambda o: (*_rank(world, o, verb, agent, needed, reach), found.index(o)))


def ground(world: World, plan: list[str], index: int) -> Action:
    """Step ``index`` of a solution as a grounded backend action in the current state."""
    verb, agent, names = parse_step(plan[index])
    later = [parse_step(line) for line in plan[index + 1:]]
    if verb == "GotoObject":
        nxt = next(((v, args) for v, a, args in later if a == agent and names[0] in args), None)
        next_verb = nxt[0] if nxt else "GotoObject"
        role = "receptacle" if nxt and next_verb == "PutObject" and nxt[1][-1] == names[0] else "object"
        return Action(verb, (resolve(world, next_verb, agent, names[0], later, role, reach=False),), agent)
    if verb == "PutObject":
        return Action(verb, (resolve(world, verb, agent, names[0], later, "held"),
                             resolve(world, verb, agent, names[1], later, "receptacle")), agent)
    if verb == "FillObjectWithLiquid":
        return Action(verb, (resolve(world, verb, agent, names[0], later, "held"), names[1]), agent)
    if verb == "DropObject":
        return Action(verb, (world.agents[agent].held or "",), agent)
    return Action(verb, (resolve(world, verb, agent, names[0], later),), agent)
