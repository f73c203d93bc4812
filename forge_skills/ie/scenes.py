"""S2/S3 of a household source: which floor plan and variation each unit is, its restorable
initial state, and what binding reads of it.

Scenes come from the real data: AI2-THOR metadata dumps (``ai2thor/FloorPlanN_objects.json``)
and ALFRED trials (``scene.object_poses`` with ALFRED's layouts), one scene per floor plan (a
dump where there is one). A variation moves a few pickupable objects among receptacles ALFRED's
table lets hold them, as ALFRED varies its initial states, so one floor plan yields many tasks.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from forge.sources import own_section
from forge.keys import canonical_json, digest, file_digest
from forge.skills import SkillContext, skill
from forge_resources.household import HouseholdEnv
from forge_resources.household.catalog import ALFRED_RECEPTACLES, scene_kind
from forge_skills.ie.types import HouseholdState, HouseholdStructure, HouseholdUnit, IEBlueprint

SCENE_TYPES = ("kitchen", "living_room", "bedroom", "bathroom")
FLAGS = ("pickupable", "receptacle", "openable", "toggleable", "sliceable", "cookable", "dirtyable", "isHeatSource",
         "isColdSource", "canFillWithLiquid")
STATE_FIELDS = ("isOpen", "isToggled", "isDirty", "isSliced", "isCooked", "temperature")


def scene_pool(data_root: Path, floor_plans: list[int] | None = None) -> list[dict[str, str]]:
    """Every floor plan the data describes whole: a THOR dump, else an ALFRED trial that poses its
    objects. Sorted by scene type, then floor plan."""
    found: dict[int, dict[str, str]] = {}
    for path in sorted((data_root / "ai2thor").glob("FloorPlan*_objects.json")):
        n = int(path.name[len("FloorPlan"):].split("_")[0])
        found[n] = {"floor_plan": f"FloorPlan{n}", "origin": f"ai2thor:{n}", "file": str(path.relative_to(data_root))}
    for split in ("valid_seen", "tests_seen"):
        for path in sorted((data_root / "alfred" / split).glob("*.traj_data.json")):
            trial = json.loads(path.read_text())
            n = int(trial["scene"]["floor_plan"][len("FloorPlan"):])
            if n not in found and trial["scene"].get("object_poses"):
                found[n] = {"floor_plan": f"FloorPlan{n}", "origin": f"alfred:{trial.get('task_id', path.stem)}",
                            "file": str(path.relative_to(data_root))}
    pool = [{**v, "scene_type": scene_kind(n)} for n, v in found.items()
            if floor_plans is None or n in floor_plans]
    return sorted(pool, key=lambda r: (SCENE_TYPES.index(r["scene_type"]), int(r["floor_plan"][9:])))


def unit_of(pool: list[dict[str, str]], index: int, scene_types: list[str]) -> tuple[dict[str, str], int]:
    """The floor plan and variation of unit ``index``: scene types in turn, each type's floor plans
    in turn, then the next variation of each."""
    types = [t for t in scene_types if any(p["scene_type"] == t for p in pool)]
    kind = types[index % len(types)]
    mine = [p for p in pool if p["scene_type"] == kind]
    turn = index // len(types)
    return mine[turn % len(mine)], turn // len(mine)


class UnitParams(BaseModel):
    unit_index: int
    source_index: int | None = None  # which of the intent's sources it plans for (the runner says)


@skill("ie.plan_household_units", stage="S2", params=UnitParams)
def plan_household_units(ctx: SkillContext, blueprint: IEBlueprint) -> list[HouseholdUnit]:
    """Which floor plan and variation this unit is."""
    src = own_section(blueprint.sources, "household", ctx.params.source_index)
    pool = src["pool"]
    types = [t for t in SCENE_TYPES if t in blueprint.targets]
    entry, variation = unit_of(pool, ctx.params.unit_index, types)
    seed = int(digest(blueprint.seed, blueprint.name, entry["floor_plan"], variation, length=12), 16)
    return [HouseholdUnit(source_kind="household", unit_index=ctx.params.unit_index, floor_plan=entry["floor_plan"],
                          scene_type=entry["scene_type"], origin=entry["origin"], origin_file=entry["file"],
                          variation=variation, seed=seed, data_root=src["data_root"], moves=int(src.get("moves", 4)))]


@skill("ie.collect_household_state", stage="S2", parallel=True)
def collect_household_state(ctx: SkillContext, unit: HouseholdUnit) -> list[HouseholdState]:
    """The unit's initial state: the recorded scene, with ``moves`` objects moved for a variation."""
    root = Path(unit.data_root)
    scene = load_scene(root, unit.origin, unit.origin_file)
    env = HouseholdEnv(scene)
    moved = vary(env, unit.seed, unit.moves) if unit.variation else []
    state = env.get_state()
    return [HouseholdState(source_kind="household", unit_index=unit.unit_index, floor_plan=unit.floor_plan,
                           scene_type=unit.scene_type, origin=unit.origin, origin_file=unit.origin_file,
                           origin_sha256=file_digest(str(root / unit.origin_file)), variation=unit.variation,
                           state=ctx.put_blob(canonical_json(state).encode()), moved=moved,
                           objects=len(state["world"]["order"]))]


def load_scene(root: Path, origin: str, origin_file: str):
    from forge_resources.household.alfred import alfred_scene, load_trial
    from forge_resources.household.data import load_dump

    kind, _, ref = origin.partition(":")
    if kind == "ai2thor":
        return load_dump(int(ref), root)
    return alfred_scene(load_trial(root / origin_file), root)


def vary(env: HouseholdEnv, seed: int, moves: int) -> list[dict[str, str]]:
    """Move up to ``moves`` pickupable objects, each into another receptacle of the scene that
    ALFRED's table lets hold it (seeded; an object already inside a closed receptacle may move
    too, as ALFRED's initial states do)."""
    world = env.world
    rng = np.random.default_rng(seed)
    movable = [o for o in world.order if world.exists(o) and world.can(o, "pickupable") and not world.children(o)]
    rng.shuffle(movable)
    out = []
    for oid in movable:
        if len(out) >= moves:
            break
        kind = world.type_of(oid)
        homes = [r for r in world.order if world.exists(r) and world.can(r, "receptacle") and r != world.parent(oid)
                 and not world.can(r, "pickupable") and kind in ALFRED_RECEPTACLES.get(world.type_of(r), ())]
        if not homes:
            continue
        home = homes[int(rng.integers(len(homes)))]
        x, y, z = world.dyn[home]["position"]
        before = world.parent(oid)
        world.set_parent(oid, home, (x, y, z))
        out.append({"object": oid, "from": before or "", "to": home})
    return out


@skill("ie.structure_household_state", stage="S3")
def structure_household_state(ctx: SkillContext, state: HouseholdState) -> list[HouseholdStructure]:
    """Per object its type, affordances, parent and state; which receptacle types here take
    each pickupable type."""
    env = HouseholdEnv()
    env.set_state(json.loads(ctx.get_blob(state.state)))
    objects = []
    for rec in env.objects():
        objects.append({"objectId": rec["objectId"], "objectType": rec["objectType"],
                        **{f: bool(rec.get(f)) for f in FLAGS},
                        **{f: rec.get(f) for f in STATE_FIELDS},
                        "parent": (rec.get("parentReceptacles") or [None])[0]})
    receptacle_types = sorted({o["objectType"] for o in objects if o["receptacle"] and not o["pickupable"]})
    pickup_types = sorted({o["objectType"] for o in objects if o["pickupable"]})
    fits = {t: [r for r in receptacle_types if t in ALFRED_RECEPTACLES.get(r, ())] for t in pickup_types}
    return [HouseholdStructure(state=ctx.input_ids["state"], state_blob=state.state, floor_plan=state.floor_plan,
                               scene_type=state.scene_type, objects=objects, receptacles_for=fits)]
