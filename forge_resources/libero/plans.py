"""Reference plans for LIBERO's goals: the high-level motions that reach a compiled goal from a
task's initial state, and the negative controls that must not reach it.

Facts are reached in a fixed order: drawers and doors opened first, objects placed, knobs turned,
drawers and doors closed last (a bowl goes into the open drawer before it is shut). A fact that
already holds at the start needs no step. A placement opens the drawer it goes into when that is
shut, and a goal that asks the drawer shut again closes it after.
"""

from __future__ import annotations

from typing import Any

from forge_resources.household.protocol import Action
from forge_resources.libero import goals

ORDER = {"open": 0, "in_site": 1, "on_site": 1, "on_object": 1, "on": 2, "off": 2, "closed": 3}
STEP = {"open": "Open", "closed": "Close", "on": "TurnOn", "off": "TurnOff"}


class PlanError(ValueError):
    """A goal fact no high-level step of forge reaches (the message names it)."""


def place_of(env: Any, fact: dict[str, Any]) -> Any:
    """The thing a placement fact puts its object in or on: a region or part by its site, an
    object by its container region or as a support."""
    if fact["kind"] == "on_object":
        return env.thing_of(fact["of"][1])
    site = fact["site"]
    found = env.thing_of(site)
    if found is not None:
        return found
    return next((t for t in env.things() if t.kind == "object" and env.container_site(t) == site), None)


def thing_for(env: Any, fact: dict[str, Any]) -> Any:
    """The part or knob a joint fact moves."""
    instance = fact["of"][0]
    found = env.thing_of(instance)
    if found is not None:
        return found
    # a fixture named whole (the microwave): its part with the same joints
    joints = {j["joint"] for j in fact["joints"]}
    return next((t for t in env.things() if t.kind in ("part", "knob") and set(t.joints) == joints), None)


def reference_plan(env: Any, goal: dict[str, Any]) -> list[Action]:
    """The motions that reach every fact of the goal not already holding, in :data:`ORDER`."""
    pending = [f for f in goals.facts(goal) if not goals.holds(f, env)]
    steps: list[Action] = []
    opened: set[str] = set()
    for fact in sorted(pending, key=lambda f: ORDER[f["kind"]]):
        if fact["kind"] in STEP:
            thing = thing_for(env, fact)
            if thing is None:
                raise PlanError(f"{fact['kind']} {fact['of'][0]}: no drawer, door or knob of the scene moves it")
            if fact["kind"] == "open":
                if thing.name in opened:
                    continue
                opened.add(thing.name)
            steps.append(Action(STEP[fact["kind"]], (thing.name,)))
            continue
        obj = env.thing_of(fact["of"][0])
        place = place_of(env, fact)
        if obj is None or place is None:
            missing = fact["of"][0] if obj is None else fact["of"][1]
            raise PlanError(f"{fact['kind']} {' '.join(fact['of'])}: {missing} has no name in the scene "
                            "(a patch of the table, or one of four alike)")
        if place.kind == "part" and not env.part_open(place) and place.name not in opened:
            steps.append(Action("Open", (place.name,)))
            opened.add(place.name)
        steps += [Action("MoveAbove", (obj.name,)), Action("Descend", (obj.name,)), Action("Grasp"),
                  Action("Lift"), Action("PlaceAt", (place.name,))]
    if not steps:
        raise PlanError("the goal already holds at the start")
    return steps


def cut_control(plan: list[Action]) -> list[Action]:
    """The reference without its last step (the final placement, close or turn)."""
    return plan[:-1]


def wrong_target_control(env: Any, plan: list[Action]) -> list[Action] | None:
    """The reference with its last placement's object swapped for another object of the scene
    (one the plan does not name), or its last part or knob for one of another fixture; None when
    there is none."""
    named = {a for step in plan for a in step.args}
    last = max(range(len(plan)), key=lambda i: (plan[i].name in ("MoveAbove", "Open", "Close", "TurnOn", "TurnOff"), i))
    step = plan[last]
    if step.name == "MoveAbove":
        others = [t for t in env.things() if t.kind == "object" and t.name not in named]
        if not others:
            return None
        wrong = others[0].name
        out = list(plan)
        for i in range(last, min(last + 2, len(plan))):
            out[i] = Action(plan[i].name, tuple(wrong if a == step.args[0] else a for a in plan[i].args))
        return out
    kinds = {"Open": ("part",), "Close": ("part",), "TurnOn": ("knob",), "TurnOff": ("knob",)}[step.name]
    aimed = env.thing(step.args[0])
    # a part of another fixture: the drawer above or below the asked one moves with the hand that
    # pushes its neighbour (closing the middle drawer pushes an open top drawer shut too)
    others = [t for t in env.things() if t.kind in kinds and t.name not in named
              and (aimed is None or t.owner != aimed.owner)]
    if not others:
        return None
    return plan[:last] + [Action(step.name, (others[0].name,))] + plan[last + 1:]
