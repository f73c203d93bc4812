"""ALFRED trials in the backend: the initial scene, the goal and the expert plan.

A trial records where each pickupable object stands (``scene.object_poses``), which types are
toggled, whether dirtyable things start dirty, and the plan. Receptacles come from ALFRED's
layout files (``gen_layouts/FloorPlanN-openable.json``: receptacle ids, which encode their
positions, and the pose to use each) plus the fixed objects the plan itself acts on (a Faucet, a
DeskLamp, a StoveBurner the layout does not list). What holds each object is not recorded, so it
is inferred from the positions: the nearest receptacle that ALFRED's table lets hold the type,
within the height its kind of receptacle spans, a movable receptacle (Cup, Plate...) only for what
stands right on or in it.

ALFRED's high-level planner actions are macros over AI2-THOR actions, expanded the way ALFRED's
expert executes them (``gen/game_states``): a PutObject into a closed receptacle opens and
closes it, CleanObject washes under the basin's Faucet, HeatObject runs the Microwave, CoolObject
shuts the object in the Fridge.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .catalog import (ALFRED_RECEPTACLES, BASE_TYPE, default_record, flags, format_object_id, position_from_id,
                      type_from_id)
from .data import pose_name, shared_data
from .goals import Goal, Verifier, compile_goal
from .protocol import Action
from .scene import Rules, Scene
from .world import World

# How far above (+) or below (-) a receptacle's id position an object it holds can stand: ids
# name the top of counters and tables, the floor under beds and fridges, the middle of drawers.
VERTICAL = {"SinkBasin": (-0.3, 0.08), "BathtubBasin": (-0.4, 0.08), "Drawer": (-0.2, 0.12),
            "Cabinet": (-0.45, 0.4), "Microwave": (-0.3, 0.3), "Safe": (-0.3, 0.4), "Fridge": (-0.05, 2.0),
            "GarbageCan": (-0.05, 0.7), "Toilet": (-0.05, 0.9), "LaundryHamper": (-0.05, 0.8), "Cart": (-0.05, 1.2),
            "Bed": (-0.05, 1.0), "Sofa": (-0.05, 1.0), "ArmChair": (-0.05, 1.0), "Ottoman": (-0.05, 0.8),
            "StoveBurner": (-0.1, 0.3), "CoffeeMachine": (-0.2, 0.3), "Toaster": (-0.2, 0.3),
            "HandTowelHolder": (-0.4, 0.2), "TowelHolder": (-0.4, 0.2), "ToiletPaperHanger": (-0.3, 0.2)}
SURFACE = (-0.12, 0.6)  # counters, tables, desks, dressers, shelves: the id is the top
ON_MOVABLE = 0.15       # horizontal distance at which a small receptacle (Cup, Plate) holds an object
MAX_GAP = 1.5


def load_trial(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def trial_paths(root: Path | None = None) -> list[Path]:
    """The stored ALFRED trials, valid_seen then tests_seen."""
    base = (root or shared_data()) / "alfred"
    return sorted((base / "valid_seen").glob("*.traj_data.json")) + sorted((base / "tests_seen").glob("*.traj_data.json"))


def _referenced(trial: dict[str, Any]) -> list[str]:
    ids: list[str] = []
    plan = trial.get("plan", {})
    for step in plan.get("high_pddl", []):
        ids += [v for k, v in step["planner_action"].items() if k.endswith("bjectId") and isinstance(v, str)]
    for step in plan.get("low_actions", []):
        ids += [v for k, v in step["api_action"].items() if k.endswith("bjectId") and isinstance(v, str)]
    return list(dict.fromkeys(ids))


def _plan_locations(trial: dict[str, Any]) -> list[str]:
    return [s["planner_action"]["location"] for s in trial.get("plan", {}).get("high_pddl", [])
            if s["planner_action"]["action"] == "GotoLocation"]


def _admissible(obj: dict[str, Any], rec: dict[str, Any]) -> bool:
    if obj["objectType"] not in ALFRED_RECEPTACLES.get(rec["objectType"], ()):
        return False
    low, high = VERTICAL.get(rec["objectType"], SURFACE)
    return low <= obj["position"]["y"] - rec["position"]["y"] <= high


def _dist(a: dict[str, float], b: dict[str, float]) -> float:
    return math.dist((a["x"], a["y"], a["z"]), (b["x"], b["y"], b["z"]))


def infer_containment(records: list[dict[str, Any]]) -> dict[str, str | None]:
    """Each pickupable object's receptacle, from positions (see the module docstring)."""
    fixed = [r for r in records if r["receptacle"] and not r["pickupable"]]
    movable = [r for r in records if r["receptacle"] and r["pickupable"]]
    parents: dict[str, str | None] = {}
    for obj in records:
        if not obj["pickupable"]:
            continue
        p = obj["position"]
        on = [m for m in movable if m is not obj and obj["objectType"] in ALFRED_RECEPTACLES.get(m["objectType"], ())
              and math.hypot(p["x"] - m["position"]["x"], p["z"] - m["position"]["z"]) <= ON_MOVABLE
              and -0.05 <= p["y"] - m["position"]["y"] <= 0.3]
        if on:
            parents[obj["objectId"]] = min(on, key=lambda m: (_dist(p, m["position"]), m["objectId"]))["objectId"]
            continue
        fits = [r for r in fixed if _admissible(obj, r) and _dist(p, r["position"]) <= MAX_GAP]
        best = min(fits, key=lambda r: (_dist(p, r["position"]), r["objectId"]), default=None)
        parents[obj["objectId"]] = best["objectId"] if best else None
    return parents


# An expert's replay accepts the placements the recorded simulator accepted, saying where
# ALFRED's receptacle table would refuse them; task synthesis keeps the table.
REPLAY_RULES = Rules("recorded", "invalid")


def alfred_scene(trial: dict[str, Any], root: Path | None = None, *, rules: Rules | None = None) -> Scene:
    """The trial's initial state as a backend scene with one agent, under ALFRED's receptacle
    table unless ``rules`` say otherwise (:data:`REPLAY_RULES` for an expert's replay)."""
    root = root or shared_data()
    info = trial["scene"]
    floor_plan = info["floor_plan"]
    layout = json.loads((root / "alfred" / "gen_layouts" / f"{floor_plan}-openable.json").read_text())
    records: dict[str, dict[str, Any]] = {}
    for pose in info["object_poses"]:
        kind = pose["objectName"].split("_")[0]
        oid = format_object_id(kind, pose["position"])
        if oid not in records:
            records[oid] = default_record(kind, oid, pose["objectName"], pose["position"])
            records[oid]["rotation"] = dict(pose["rotation"])
    for oid in [*layout, *_referenced(trial)]:
        kind = type_from_id(oid)
        if oid in records or kind in BASE_TYPE or "pickupable" in flags(kind):
            continue  # slices appear when cut; a pickupable object not posed is not in the scene
        records[oid] = default_record(kind, oid, oid, position_from_id(oid))
    for toggle in info.get("object_toggles") or ():
        for rec in records.values():
            if rec["objectType"] == toggle["objectType"] and rec["toggleable"]:
                rec["isToggled"] = bool(toggle["isOn"])
    if info.get("dirty_and_empty"):
        for rec in records.values():
            if rec["dirtyable"] and rec["pickupable"]:
                rec["isDirty"] = True
    ordered = sorted(records.values(), key=lambda r: (r["pickupable"], r["objectId"]))
    parents = infer_containment(ordered)
    for rec in ordered:
        parent = parents.get(rec["objectId"])
        rec["parentReceptacles"] = [parent] if parent else None
        if parent:
            records[parent]["receptacleObjectIds"].append(rec["objectId"])
    locations = sorted({pose_name(*pose) for pose in layout.values()} | set(_plan_locations(trial)))
    start = info.get("init_action") or {}
    start_name = pose_name(start["x"], start["z"], start["rotation"], start["horizon"]) if start else None
    return Scene(floor_plan=floor_plan, objects=tuple(ordered), locations=tuple(locations), agents=1,
                 rules=rules or Rules("alfred", "invalid"), source=f"alfred:{trial.get('task_id', '')}", start=start_name)


def trial_verifier(trial: dict[str, Any]) -> Verifier:
    return compile_goal(Goal.from_trial(trial))


def high_level_plan(trial: dict[str, Any]) -> list[dict[str, Any]]:
    """The expert's ``planner_action`` dicts, without the closing End."""
    return [s["planner_action"] for s in trial.get("plan", {}).get("high_pddl", [])
            if s["planner_action"]["action"] not in ("End", "NoOp")]


def _nearest(world: World, oid: str, object_type: str) -> str | None:
    here = world.dyn[oid]["position"]
    found = [o for o in world.order if world.type_of(o) == object_type and world.exists(o)]
    return min(found, key=lambda o: (math.dist(here, world.dyn[o]["position"]), o), default=None)


def expand(step: dict[str, Any], world: World, agent: int = 0) -> list[Action]:
    """One ALFRED planner action as the AI2-THOR actions its expert runs, given the state now."""
    name = step["action"]

    def a(verb: str, *args: str) -> Action:
        return Action(verb, tuple(args), agent)

    def around(oid: str, inner: list[Action]) -> list[Action]:
        closed = world.can(oid, "openable") and not world.dyn[oid]["isOpen"]
        return [a("OpenObject", oid), *inner, a("CloseObject", oid)] if closed else inner

    held = world.agents[agent].held or ""
    if name == "GotoLocation":
        return [a("GotoLocation", step["location"])]
    if name == "PickupObject":
        oid = step["objectId"]
        box = world.closed_around(oid) if oid in world.dyn else None
        return around(box, [a("PickupObject", oid)]) if box else [a("PickupObject", oid)]
    if name == "PutObject":
        rid = step["receptacleObjectId"]
        return around(rid, [a("PutObject", held or step["objectId"], rid)])
    if name == "CleanObject":
        basin, oid = step["objectId"], step["cleanObjectId"]
        faucet = _nearest(world, basin, "Faucet")
        if faucet is None:
            raise ValueError(f"no Faucet known near {basin} to wash {oid} under")
        return [a("PutObject", oid, basin), a("ToggleObjectOn", faucet), a("ToggleObjectOff", faucet),
                a("PickupObject", oid)]
    if name == "HeatObject":
        oven = step["objectId"]
        return [a("OpenObject", oven), a("PutObject", held, oven), a("CloseObject", oven), a("ToggleObjectOn", oven),
                a("ToggleObjectOff", oven), a("OpenObject", oven), a("PickupObject", held), a("CloseObject", oven)]
    if name == "CoolObject":
        fridge = step["objectId"]
        return [a("OpenObject", fridge), a("PutObject", held, fridge), a("CloseObject", fridge),
                a("OpenObject", fridge), a("PickupObject", held), a("CloseObject", fridge)]
    if name == "ToggleObject":
        oid = step["objectId"]
        return [a("ToggleObjectOff" if world.dyn[oid]["isToggled"] else "ToggleObjectOn", oid)]
    if name == "SliceObject":
        return [a("SliceObject", step["objectId"])]
    raise ValueError(f"unknown ALFRED planner action {name!r}")
