"""S4 of the IE track: task templates bound to structured states, and bindings made into tasks.

A binding chooses object types for a template's slots among what the state holds (an object
ALFRED's table lets the receptacle take, a closed openable to open...), skipping goals the initial
state already meets. A task is a binding with its goal compiled into a verifier (data), a
reference plan found by search over the grounded high-level actions from the restored initial
state, the instruction realized from the goal (macro) and the plan (micro), and its split from
the number of subtasks and the plan's length.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict
from typing import Any

from forge.keys import digest
from forge.skills import SkillContext, skill
from forge_resources.household import HouseholdEnv
from forge_resources.household.catalog import ALFRED_RECEPTACLES, BASE_TYPE
from forge_resources.household.goals import Goal, Subtask, Verifier, compile_goal, compile_subtasks, evaluate
from forge_resources.household.planner import PlanNotFound, plan
from forge_resources.household.protocol import Action
from forge_skills.ie.spec import MAX_STEPS
from forge_skills.ie.templates import SURFACES, natural, realize
from forge_skills.ie.types import HouseholdStructure, IETask, TaskBinding, TaskTemplate

STEPS_PER_SUBTASK = 4  # walk, pick up, walk, put: a plan needing more per subtask is long
BUDGET_FACTOR = 4  # an agent's step budget: this multiple of the reference plan's length
PLANNER_EXPANSIONS = 6000


# -- binding ----------------------------------------------------------------------------------

@skill("ie.bind_task_template", stage="S4")
def bind_task_template(ctx: SkillContext, template: TaskTemplate, structure: HouseholdStructure) -> list[TaskBinding]:
    """Slot assignments of the template on this state whose goal is not already met."""
    objects = structure.objects
    types = {o["objectType"] for o in objects}
    needs = template.goal.get("requires") or []
    any_of = template.goal.get("requires_any") or []
    if any(t not in types for t in needs) or (any_of and not types & set(any_of)):
        return []
    assignments = list(_assignments(template.slots, objects))
    if not assignments:
        return []
    env = HouseholdEnv()
    env.set_state(json.loads(ctx.get_blob(structure.state_blob)))
    initial = env.objects()
    order = ctx.rng.permutation(len(assignments))
    out: list[TaskBinding] = []
    for i in order:
        slots = assignments[int(i)]
        goal = bind_goal(template.goal, slots)
        if evaluate(compile_verifier(goal), initial)[1] > 0.0:
            continue  # part of the goal already holds at the start: the task would ask less than it says
        variant = int(digest(template.id, slots, length=8), 16) % len(template.instruction["macro"])
        out.append(TaskBinding(template=template.id, template_artifact=ctx.input_ids["template"],
                               structure=ctx.input_ids["structure"], state=structure.state,
                               state_blob=structure.state_blob, scene=structure.floor_plan,
                               scene_type=structure.scene_type, task_type=template.task_type,
                               difficulty=template.difficulty, slots=slots, goal=goal,
                               macro=realize(template.instruction["macro"][variant], slots), variant=variant))
        if len(out) >= 3 * template.max_per_state:  # synthesis finds plans for most; the rest are spares
            break
    return out


def _assignments(slots: dict[str, dict[str, Any]], objects: list[dict[str, Any]]):
    """Every assignment of object types to slots, each slot after the slots it refers to (stored
    content has its keys sorted, so the template's own order is not kept)."""
    def refs(name: str) -> list[str]:
        spec = slots[name]
        of = spec.get("of")
        return ([of] if isinstance(of, str) else list(of or [])) + ([spec["differs_from"]] if spec.get("differs_from") else [])

    names: list[str] = []
    while len(names) < len(slots):
        ready = [n for n in sorted(slots) if n not in names and all(r in names for r in refs(n))]
        if not ready:
            raise ValueError(f"slots refer to each other in a cycle: {sorted(set(slots) - set(names))}")
        names.append(ready[0])

    def options(name: str, chosen: dict[str, str]) -> list[str]:
        spec = slots[name]
        kind = spec["kind"]
        allowed = set(spec.get("types") or []) or None
        excluded = set(spec.get("exclude") or [])
        count: dict[str, int] = {}
        for o in objects:
            count[o["objectType"]] = count.get(o["objectType"], 0) + 1
        if kind == "pickupable":
            found = {o["objectType"] for o in objects if o["pickupable"] and o["objectType"] not in BASE_TYPE}
            found = {t for t in found if count[t] >= spec.get("at_least", 1)}
        elif kind in ("receptacle_for", "movable_receptacle_for"):
            of = spec.get("of")
            held = [chosen[s] for s in ([of] if isinstance(of, str) else of)]
            movable = kind == "movable_receptacle_for"
            found = {o["objectType"] for o in objects if o["receptacle"] and bool(o["pickupable"]) == movable
                     and all(h in ALFRED_RECEPTACLES.get(o["objectType"], ()) for h in held)}
            found -= set(held)
        elif kind == "present":
            found = {o["objectType"] for o in objects}
        else:  # state_change: objects that can take the state and are not in it yet
            flag, field, want = spec["flag"], spec["field"], spec.get("want", True)
            found = {o["objectType"] for o in objects if o.get(flag) and o.get(field) != want
                     and (spec.get("receptacle") is None or bool(o["receptacle"]) == spec["receptacle"])}
        if spec.get("differs_from"):
            found.discard(chosen.get(spec["differs_from"]))
        if allowed is not None:
            found &= allowed
        return sorted(found - excluded)

    def walk(i: int, chosen: dict[str, str]):
        if i == len(names):
            yield dict(chosen)
            return
        for value in options(names[i], chosen):
            chosen[names[i]] = value
            yield from walk(i + 1, chosen)
            del chosen[names[i]]

    yield from itertools.islice(walk(0, {}), 400)


def bind_goal(goal: dict[str, Any], slots: dict[str, str]) -> dict[str, Any]:
    """The template's goal with the slots' object types in place."""
    def fill(value: Any) -> Any:
        if isinstance(value, str):
            for name, kind in slots.items():
                value = value.replace("{" + name + "}", kind)
            return value
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value
    bound = fill({k: v for k, v in goal.items() if k not in ("requires", "requires_any")})
    bound.setdefault("mode", "all")
    return bound


# Subgoals of ALFRED's task types: what a person does in turn (a state change, then the placement).
ALFRED_SUBGOALS = {"pick_and_place_simple": 1, "pick_two_obj_and_place": 2, "look_at_obj_in_light": 2,
                   "pick_clean_then_place_in_recep": 2, "pick_heat_then_place_in_recep": 2,
                   "pick_cool_then_place_in_recep": 2, "pick_and_place_with_movable_recep": 2}


def subgoal_count(goal: dict[str, Any]) -> int:
    if "alfred" in goal:
        return ALFRED_SUBGOALS[goal["alfred"]["task_type"]]
    return len(goal["subtasks"])


def goal_subtasks(goal: dict[str, Any]) -> list[Subtask]:
    if "alfred" in goal:
        return list(_alfred(goal).subtasks())
    return [Subtask(s["object"], dict(s.get("state") or {}), s.get("receptacle", ""), tuple(s.get("contains") or ()))
            for s in goal["subtasks"]]


def _alfred(goal: dict[str, Any]) -> Goal:
    a = goal["alfred"]
    return Goal(a["task_type"], a["object_target"], a.get("parent_target", ""), a.get("toggle_target", ""),
                a.get("mrecep_target", ""), bool(a.get("object_sliced", False)))


def compile_verifier(goal: dict[str, Any]) -> Verifier:
    """The verifier compiled from a bound goal: ALFRED's checks for its task types, one predicate
    per subtask otherwise."""
    if "alfred" in goal:
        return compile_goal(_alfred(goal))
    return compile_subtasks(goal_subtasks(goal), goal.get("mode", "all"), source="subtasks")


def goal_targets(goal: dict[str, Any]) -> set[str]:
    """The object types a goal names (what its instruction must name, and nothing else)."""
    if "alfred" in goal:
        a = goal["alfred"]
        return {a[k] for k in ("object_target", "parent_target", "toggle_target", "mrecep_target") if a.get(k)}
    out = set()
    for s in goal["subtasks"]:
        out.add(s["object"])
        if s.get("receptacle"):
            out.add(s["receptacle"])
    return out


# -- tasks ------------------------------------------------------------------------------------

@skill("ie.synthesize_task", stage="S4", parallel=True)
def synthesize_task(ctx: SkillContext, binding: TaskBinding) -> list[IETask]:
    """The binding as a task: verifier, reference plan (none found: no task), instruction, split."""
    state = json.loads(ctx.get_blob(binding.state_blob))
    env = HouseholdEnv()
    env.set_state(state)
    verifier = compile_verifier(binding.goal)
    try:
        actions = direct_walks(env, reference_plan(env, verifier), verifier, state)
    except PlanNotFound:
        return []
    env.set_state(state)
    steps = [a.to_dict() for a in actions]
    subtasks = subgoal_count(binding.goal)
    return [IETask(
        task_id=f"{binding.scene.lower()}-{binding.template}-{digest(ctx.input_ids['binding'], length=8)}",
        scene=binding.scene, scene_type=binding.scene_type, split=split_of(subtasks, len(steps)),
        task_type=binding.task_type, instruction={"macro": binding.macro, "micro": micro_steps(env, actions, state)},
        action_interface=action_interface(env), max_steps=MAX_STEPS, goal=binding.goal,
        verifier=verifier.to_dict(), reference_plan=steps, subtasks=subtasks,
        budget_steps=min(MAX_STEPS, max(10, BUDGET_FACTOR * len(steps))), initial_state=binding.state_blob,
        template=binding.template, binding=ctx.input_ids["binding"], state_artifact=binding.state,
        difficulty=binding.difficulty)]


def split_of(subtasks: int, plan_length: int) -> str:
    """simple/hard by the number of subtasks; short/long by whether the reference plan needs more
    steps than the bare walk, pick up, walk, put per subtask (closed receptacles, appliances)."""
    return f"{'long' if plan_length > STEPS_PER_SUBTASK * subtasks else 'short'}_{'hard' if subtasks >= 2 else 'simple'}"


def action_interface(env: HouseholdEnv) -> dict[str, Any]:
    return {"actions": [asdict(spec) for spec in env.action_space()], "grounded": True,
            "stop": "Stop: end the episode", "max_steps": MAX_STEPS}


_VERBS = {"GotoObject": "Go to the {0}.", "PickupObject": "Pick up the {0}.", "PutObject": "Put the {0} {in} the {1}.",
          "OpenObject": "Open the {0}.", "CloseObject": "Close the {0}.", "ToggleObjectOn": "Turn on the {0}.",
          "ToggleObjectOff": "Turn off the {0}.", "SliceObject": "Slice the {0}.", "DropObject": "Drop the {0}.",
          "CleanObject": "Clean the {0}.", "FillObjectWithLiquid": "Fill the {0} with {1}.",
          "EmptyLiquidFromObject": "Empty the {0}."}


def micro_steps(env: HouseholdEnv, actions: list[Action], state: dict[str, Any]) -> list[str]:
    """The reference plan in words, one sentence per step (objects named by their type)."""
    env.set_state(state)
    out = []
    for a in actions:
        if a.name == "GotoLocation":
            out.append("Walk to the next spot.")
        else:
            kinds = [env.world.type_of(arg) if arg in env.world.dyn else arg for arg in a.args]
            names = [natural(k) for k in kinds]
            onto = "on" if len(kinds) > 1 and kinds[1] in SURFACES else "in"
            out.append(_VERBS.get(a.name, a.name + " {0}.").format(*names, "", "", **{"in": onto}))
        env.step(a)
    env.set_state(state)
    return out


def reference_plan(env: HouseholdEnv, verifier: Verifier) -> list[Action]:
    """A plan reaching the verifier from the environment's state: the goal's conditions are met
    in turn (states such as cleaned or heated before placements; one object before two), each by
    its own bounded search from where the previous one left the world, so every search stays
    shallow; the whole goal is searched at once when the stages do not reach it."""
    import dataclasses

    start = env.get_state()
    stages: list[tuple] = []
    preds = sorted(verifier.predicates, key=lambda p: (p.inside is not None, len(p.contains), p.count))
    for i in range(1, len(preds) + 1):
        stage = preds[:i]
        if stage[-1].count > 1:
            stages.append(tuple(stage[:-1]) + (dataclasses.replace(stage[-1], count=1),))
        stages.append(tuple(stage))
    actions: list[Action] = []
    try:
        for stage in stages:
            part = plan(env, Verifier(stage, verifier.mode, verifier.source), max_expansions=PLANNER_EXPANSIONS // 4)
            for a in part:
                if not env.step(a).valid:
                    raise PlanNotFound(f"a planned step was refused: {a}")
            actions += part
        if evaluate(verifier, env.objects())[0]:
            return actions
    except PlanNotFound:
        pass
    env.set_state(start)
    return plan(env, verifier, max_expansions=PLANNER_EXPANSIONS)


def direct_walks(env: HouseholdEnv, actions: list[Action], verifier: Verifier, state: dict[str, Any]) -> list[Action]:
    """The plan with each walk aimed at the object the next step acts on (a search reaches a spot
    from whichever object lies near it first: "go to the knife, pick up the egg"), wherever the
    plan stays valid and still reaches the goal that way."""
    out = list(actions)
    for i, a in enumerate(out[:-1]):
        nxt = out[i + 1]
        if a.name != "GotoObject" or not nxt.args:
            continue
        target = nxt.args[1] if nxt.name == "PutObject" else nxt.args[0]
        if target == a.args[0]:
            continue
        trial = out[:i] + [Action("GotoObject", (target,), a.agent)] + out[i + 1:]
        env.set_state(state)
        if all(env.step(step).valid for step in trial) and evaluate(verifier, env.objects())[0]:
            out = trial
    env.set_state(state)
    return out
