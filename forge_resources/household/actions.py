"""AI2-THOR's high-level actions over a World: typed specs, preconditions and effects.

State effects follow AI2-THOR and ALFRED's environment bookkeeping: a toggled-on heat source
heats what it holds (a Microwave also marks it heated, as ALFRED tracks), a Fridge chills what
is put in it (closing it marks the contents cooled), a Faucet turned on cleans what lies in the
nearest SinkBasin (ALFRED's clean), slicing with a held knife replaces the object by pieces.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from .catalog import (ALFRED_RECEPTACLES, CUTTERS, DEFAULT_PIECES, LIQUIDS, PIECES_PER_SLICE, SLICED_TYPE,
                      default_record)
from .protocol import Action, ActionSpec
from .scene import Rules
from .world import Pose, World

Status = Literal["ok", "noop", "invalid"]
_IN_REACH = "the object is within reach of the agent"
_NOT_ENCLOSED = "the object is not inside a closed receptacle"

SPECS: tuple[ActionSpec, ...] = (
    ActionSpec("GotoLocation", ("location",), ("the location is a pose loc|x|z|rotation|horizon",),
               ("the agent stands at the pose; what is within reach of it can be acted on",)),
    ActionSpec("GotoObject", ("object",), ("the object exists and nobody carries it",),
               ("the agent stands beside the object",)),
    ActionSpec("PickupObject", ("object",),
               ("the agent's hand is empty", "the object is pickupable", _IN_REACH, _NOT_ENCLOSED),
               ("the agent holds the object and whatever is inside it",)),
    ActionSpec("PutObject", ("object", "receptacle"),
               ("the agent holds the object", "the receptacle is within reach", "the receptacle is open if openable",
                "the receptacle accepts the object's type (scene rules)", "the receptacle is not inside the object"),
               ("the object is inside the receptacle; a Fridge chills it, a running heat source heats it",)),
    ActionSpec("DropObject", ("object",), ("the agent holds the object",), ("the object falls to the floor",)),
    ActionSpec("OpenObject", ("object",), ("the object is openable and closed", _IN_REACH, _NOT_ENCLOSED),
               ("the object is open",)),
    ActionSpec("CloseObject", ("object",), ("the object is openable and open", _IN_REACH, _NOT_ENCLOSED),
               ("the object is closed; closing a Fridge marks its contents cooled",)),
    ActionSpec("ToggleObjectOn", ("object",), ("the object is toggleable and off", _IN_REACH, _NOT_ENCLOSED),
               ("the object is on; heat sources heat their contents (a Microwave marks them heated), a Faucet "
                "cleans and fills what lies in the nearest SinkBasin, a CoffeeMachine fills a mug with coffee",)),
    ActionSpec("ToggleObjectOff", ("object",), ("the object is toggleable and on", _IN_REACH, _NOT_ENCLOSED),
               ("the object is off",)),
    ActionSpec("SliceObject", ("object",),
               ("the object is sliceable and whole", _IN_REACH, "the agent holds a Knife or ButterKnife",
                "the object is not held"),
               ("the object is replaced by <Type>Sliced pieces in its place",)),
    ActionSpec("CleanObject", ("object",), ("the object is dirtyable and dirty", _IN_REACH, _NOT_ENCLOSED),
               ("it is clean",)),
    ActionSpec("DirtyObject", ("object",), ("the object is dirtyable and clean", _IN_REACH, _NOT_ENCLOSED),
               ("it is dirty",)),
    ActionSpec("FillObjectWithLiquid", ("object", "liquid"),
               ("the object can hold liquid and is empty", _IN_REACH, _NOT_ENCLOSED,
                f"the liquid is one of {', '.join(LIQUIDS)}"),
               ("it is filled with the liquid",)),
    ActionSpec("EmptyLiquidFromObject", ("object",), ("the object holds liquid", _IN_REACH, _NOT_ENCLOSED),
               ("it is empty",)),
    ActionSpec("BreakObject", ("object",), ("the object is breakable and whole", _IN_REACH, _NOT_ENCLOSED),
               ("it is broken",)),
)
SPEC_BY_NAME = {spec.name: spec for spec in SPECS}
NAVIGATION = frozenset({"GotoLocation", "GotoObject"})

Check = Callable[[World, Action, Rules], tuple[Status, str]]
Effect = Callable[[World, Action], str]


def _object(world: World, action: Action, reach: bool = True) -> str | None:
    oid = action.args[0]
    if oid not in world.dyn:
        return f"there is no object {oid}"
    if world.dyn[oid]["removed"]:
        return f"{oid} was sliced into pieces"
    if reach and not world.in_reach(action.agent, oid):
        return f"{oid} is not within reach"
    return None


def _enclosed(world: World, oid: str) -> str | None:
    closed = world.closed_around(oid)
    return f"{oid} is inside {closed}, which is closed" if closed else None


def _flag(world: World, oid: str, flag: str, word: str) -> str | None:
    return None if world.can(oid, flag) else f"{oid} is not {word}"


def _repeat(rules: Rules, message: str) -> tuple[Status, str]:
    return ("noop", message) if rules.repeat == "noop" else ("invalid", message)


def _first(*reasons: str | None) -> tuple[Status, str] | None:
    for reason in reasons:
        if reason:
            return "invalid", reason
    return None


# ---- navigation
def _check_goto_location(world: World, action: Action, rules: Rules) -> tuple[Status, str]:
    try:
        Pose.parse(action.args[0])
    except ValueError as err:
        return "invalid", str(err)
    return "ok", ""


def _goto_location(world: World, action: Action) -> str:
    world.agents[action.agent].location = Pose.parse(action.args[0])
    return f"arrived at {action.args[0]}"


def _check_goto_object(world: World, action: Action, rules: Rules) -> tuple[Status, str]:
    oid = action.args[0]
    bad = _first(_object(world, action, reach=False))
    if bad:
        return bad
    if world.holder(oid) is not None:
        return "invalid", f"{oid} is carried by an agent"
    return "ok", ""


def _goto_object(world: World, action: Action) -> str:
    x, _, z = world.dyn[action.args[0]]["position"]
    world.agents[action.agent].location = Pose(x=x, z=z, name=f"beside {action.args[0]}")
    return f"arrived beside {action.args[0]}"


# ---- hand
def _check_pickup(world: World, action: Action, rules: Rules) -> tuple[Status, str]:
    oid, agent = action.args[0], world.agents[action.agent]
    bad = _first(_object(world, action, reach=False), _flag(world, oid, "pickupable", "pickupable"))
    if bad:
        return bad
    if agent.held is not None:
        return "invalid", f"the hand already holds {agent.held}"
    if world.holder(oid) is not None:
        return "invalid", f"{oid} is carried by agent {world.holder(oid)}"
    return _first(_object(world, action), _enclosed(world, oid)) or ("ok", "")


def _pickup(world: World, action: Action) -> str:
    oid, agent = action.args[0], world.agents[action.agent]
    pose = agent.location
    y = world.dyn[oid]["position"][1]
    world.set_parent(oid, None, (pose.x, y, pose.z) if pose else world.dyn[oid]["position"])
    agent.held = oid
    return f"picked up {oid}"


def _check_put(world: World, action: Action, rules: Rules) -> tuple[Status, str]:
    oid, rid = action.args
    if world.agents[action.agent].held != oid:
        return "invalid", f"the agent does not hold {oid}"
    if rid not in world.dyn or world.dyn[rid]["removed"]:
        return "invalid", f"there is no receptacle {rid}"
    if not world.can(rid, "receptacle"):
        return "invalid", f"{rid} is not a receptacle"
    if rid == oid or world.holder(rid) is not None:
        return "invalid", f"{rid} is in the agent's hand"
    if not world.in_reach(action.agent, rid):
        return "invalid", f"{rid} is not within reach"
    if world.can(rid, "openable") and not world.dyn[rid]["isOpen"]:
        return "invalid", f"{rid} is closed"
    bad = _first(_enclosed(world, rid))
    if bad:
        return bad
    if rules.receptacles != "any":
        kind, rtype = world.type_of(oid), world.type_of(rid)
        if kind not in ALFRED_RECEPTACLES.get(rtype, ()):
            if rules.receptacles == "recorded":
                return "ok", f"ALFRED's receptacle table has no {kind} in a {rtype}; the recording did this"
            return "invalid", f"a {rtype} does not take a {kind} (ALFRED's receptacle constraints)"
    return "ok", ""


def _put(world: World, action: Action) -> str:
    oid, rid = action.args
    world.set_parent(oid, rid, world.dyn[rid]["position"])
    world.agents[action.agent].held = None
    for holder in [rid, *world.ancestors(rid)]:
        if world.can(holder, "isColdSource"):
            _chill(world, [oid, *world.descendants(oid)])
        if world.can(holder, "isHeatSource") and world.dyn[holder]["isToggled"]:
            _warm(world, [oid, *world.descendants(oid)])
    return f"put {oid} in {rid}"


def _check_drop(world: World, action: Action, rules: Rules) -> tuple[Status, str]:
    if world.agents[action.agent].held != action.args[0]:
        return "invalid", f"the agent does not hold {action.args[0]}"
    return "ok", ""


def _drop(world: World, action: Action) -> str:
    oid, agent = action.args[0], world.agents[action.agent]
    floor = next((o for o in world.order if world.type_of(o) == "Floor" and world.exists(o)), None)
    pose = agent.location
    x, _, z = (pose.x, 0.0, pose.z) if pose else world.dyn[oid]["position"]
    world.set_parent(oid, floor, (x, 0.0, z))
    agent.held = None
    return f"dropped {oid}" + (f" on {floor}" if floor else "")


# ---- state changes
def _state_check(flag: str, word: str, field: str, want: object, done: str) -> Check:
    def check(world: World, action: Action, rules: Rules) -> tuple[Status, str]:
        oid = action.args[0]
        bad = _first(_object(world, action, reach=False), _flag(world, oid, flag, word),
                     _object(world, action), _enclosed(world, oid))
        if bad:
            return bad
        current = world.dyn[oid][field]
        if (current is None) if want is None else (bool(current) == want):
            return _repeat(rules, f"{oid} is already {done}")
        return "ok", ""
    return check


def _chill(world: World, oids: list[str]) -> None:
    for o in oids:
        world.dyn[o]["temperature"] = "Cold"


def _warm(world: World, oids: list[str]) -> None:
    for o in oids:
        world.dyn[o]["temperature"] = "Hot"
        if world.can(o, "cookable"):
            world.dyn[o]["isCooked"] = True


def _open(world: World, action: Action) -> str:
    world.dyn[action.args[0]]["isOpen"] = True
    return f"opened {action.args[0]}"


def _close(world: World, action: Action) -> str:
    oid = action.args[0]
    world.dyn[oid]["isOpen"] = False
    if world.type_of(oid) == "Fridge":
        for inner in world.descendants(oid):
            world.dyn[inner]["isCooled"] = True
    return f"closed {oid}"


def _nearest(world: World, oid: str, object_type: str) -> str | None:
    here = world.dyn[oid]["position"]
    found = [o for o in world.order if world.type_of(o) == object_type and world.exists(o)]
    return min(found, key=lambda o: (math.dist(here, world.dyn[o]["position"]), o), default=None)


def _toggle_on(world: World, action: Action) -> str:
    oid = action.args[0]
    switched = [oid, *[c for c in world.record(oid).get("controlledObjects") or () if c in world.dyn]]
    for device in switched:
        world.dyn[device]["isToggled"] = True
        kind, inside = world.type_of(device), world.descendants(device)
        if world.can(device, "isHeatSource"):
            _warm(world, inside)
            if kind == "Microwave":
                for inner in inside:
                    world.dyn[inner]["isHeated"] = True
        if kind == "CoffeeMachine":
            for inner in inside:
                if world.can(inner, "canFillWithLiquid"):
                    world.dyn[inner]["fillLiquid"] = "coffee"
        if kind == "Faucet":
            basin = _nearest(world, device, "SinkBasin")
            for inner in world.descendants(basin) if basin else ():
                world.dyn[inner]["isCleaned"] = True
                world.dyn[inner]["isDirty"] = False
                if world.can(inner, "canFillWithLiquid"):
                    world.dyn[inner]["fillLiquid"] = "water"
    return f"turned on {oid}"


def _toggle_off(world: World, action: Action) -> str:
    oid = action.args[0]
    for device in [oid, *[c for c in world.record(oid).get("controlledObjects") or () if c in world.dyn]]:
        world.dyn[device]["isToggled"] = False
    return f"turned off {oid}"


def _check_slice(world: World, action: Action, rules: Rules) -> tuple[Status, str]:
    status, message = _state_check("sliceable", "sliceable", "isSliced", True, "sliced")(world, action, rules)
    if status != "ok":
        return status, message
    oid, held = action.args[0], world.agents[action.agent].held
    if world.holder(oid) is not None:
        return "invalid", f"{oid} is held; put it down to slice it"
    if held is None or world.type_of(held) not in CUTTERS:
        return "invalid", "the agent must hold a Knife or ButterKnife to slice"
    return "ok", ""


def _slice(world: World, action: Action) -> str:
    oid = action.args[0]
    record, state = world.record(oid), world.dyn[oid]
    kind = record["objectType"]
    piece = SLICED_TYPE.get(kind, kind + "Sliced")
    parent, (x, y, z) = state["parent"], state["position"]
    state["isSliced"] = True
    world.remove(oid)
    for i in range(PIECES_PER_SLICE.get(kind, DEFAULT_PIECES)):
        pid = f"{oid}|{piece}_{i}"
        new = default_record(piece, pid, f"{record.get('name', kind)}_{piece}_{i}", {"x": x, "y": y, "z": z})
        new["temperature"] = state["temperature"]
        world.add_object(new, parent)
    return f"sliced {oid}"


def _check_fill(world: World, action: Action, rules: Rules) -> tuple[Status, str]:
    if len(action.args) < 2 or action.args[1] not in LIQUIDS:
        return "invalid", f"the liquid must be one of {', '.join(LIQUIDS)}"
    oid = action.args[0]
    bad = _first(_object(world, action, reach=False), _flag(world, oid, "canFillWithLiquid", "fillable"),
                 _object(world, action), _enclosed(world, oid))
    if bad:
        return bad
    if world.dyn[oid]["fillLiquid"] is not None:
        return _repeat(rules, f"{oid} is already filled with {world.dyn[oid]['fillLiquid']}")
    return "ok", ""


def _set(field: str, value: object, verb: str) -> Effect:
    def effect(world: World, action: Action) -> str:
        world.dyn[action.args[0]][field] = value
        return f"{verb} {action.args[0]}"
    return effect


def _fill(world: World, action: Action) -> str:
    world.dyn[action.args[0]]["fillLiquid"] = action.args[1]
    return f"filled {action.args[0]} with {action.args[1]}"


HANDLERS: dict[str, tuple[Check, Effect]] = {
    "GotoLocation": (_check_goto_location, _goto_location),
    "GotoObject": (_check_goto_object, _goto_object),
    "PickupObject": (_check_pickup, _pickup),
    "PutObject": (_check_put, _put),
    "DropObject": (_check_drop, _drop),
    "OpenObject": (_state_check("openable", "openable", "isOpen", True, "open"), _open),
    "CloseObject": (_state_check("openable", "openable", "isOpen", False, "closed"), _close),
    "ToggleObjectOn": (_state_check("toggleable", "toggleable", "isToggled", True, "on"), _toggle_on),
    "ToggleObjectOff": (_state_check("toggleable", "toggleable", "isToggled", False, "off"), _toggle_off),
    "SliceObject": (_check_slice, _slice),
    "CleanObject": (_state_check("dirtyable", "dirtyable", "isDirty", False, "clean"),
                    _set("isDirty", False, "cleaned")),
    "DirtyObject": (_state_check("dirtyable", "dirtyable", "isDirty", True, "dirty"), _set("isDirty", True, "dirtied")),
    "FillObjectWithLiquid": (_check_fill, _fill),
    "EmptyLiquidFromObject": (_state_check("canFillWithLiquid", "fillable", "fillLiquid", None, "empty"),
                              _set("fillLiquid", None, "emptied")),
    "BreakObject": (_state_check("breakable", "breakable", "isBroken", True, "broken"), _set("isBroken", True, "broke")),
}


def check(world: World, action: Action, rules: Rules) -> tuple[Status, str]:
    """Whether the action can run now: ``ok``, a valid ``noop``, or ``invalid`` with the reason."""
    spec = SPEC_BY_NAME.get(action.name)
    if spec is None:
        return "invalid", f"unknown action {action.name}; known: {', '.join(SPEC_BY_NAME)}"
    if len(action.args) != len(spec.arg_kinds):
        return "invalid", f"{action.name} takes {len(spec.arg_kinds)} argument(s): {', '.join(spec.arg_kinds)}"
    if not 0 <= action.agent < len(world.agents):
        return "invalid", f"there is no agent {action.agent}"
    for kind, arg in zip(spec.arg_kinds, action.args):
        if kind in ("object", "receptacle") and arg not in world.dyn:
            return "invalid", f"there is no object {arg}"
    return check_grounded(world, action, rules)


def check_grounded(world: World, action: Action, rules: Rules) -> tuple[Status, str]:
    """:func:`check` for an action built from this world's own names (a known action, its
    arguments' count, an existing agent and objects): the legality scan's thousands of
    candidates skip the form checks."""
    return HANDLERS[action.name][0](world, action, rules)


def execute(world: World, action: Action, rules: Rules) -> tuple[bool, str]:
    """Run the action on ``world`` in place; an invalid action changes nothing."""
    status, message = check(world, action, rules)
    if status == "invalid":
        return False, message
    if status == "noop":
        return True, message
    done = HANDLERS[action.name][1](world, action)
    return True, f"{done} ({message})" if message else done
