"""S1 of the IE track: the intent as targets per scene type and difficulty, and the scene pool."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from forge.errors import IntentError
from forge.intent import intent_model
from forge.keys import digest
from forge.registry import lookup, register
from forge.skills import SkillContext, skill
from forge_skills.ie.scenes import SCENE_TYPES, scene_pool
from forge_skills.ie.types import IEBlueprint

TASKS_PER_UNIT = 6  # tasks one scene unit yields across the library (measured), to size the units


class IEBlueprintParams(BaseModel):
    intent: dict[str, Any]
    folder_listing: str | None = None


@skill("ie.blueprint", stage="S1", params=IEBlueprintParams)
def ie_blueprint(ctx: SkillContext) -> list[IEBlueprint]:
    """Task targets per scene type (even shares) and difficulty (half simple, half hard), the
    household scene pool of the data root, the unit count."""
    intent = intent_model().model_validate(ctx.params.intent)
    ie = intent.ie
    sources, offered = [], []
    for src in intent.sources:
        entry = src.model_dump(mode="json")
        types, per_unit = lookup("ie_source_setup", src.kind)(entry, src)
        offered += [t for t in types if t not in offered]
        wanted = [t for t in (ie.scene_types or types) if t in types]
        entry["scenes_given"] = entry.get("scenes") is not None
        if entry.get("scenes") is None:
            entry["scenes"] = max(len(wanted), math.ceil(ie.tasks * 1.3 / per_unit))
        sources.append(entry)
    missing = [t for t in ie.scene_types or [] if t not in offered]
    if missing:
        raise IntentError(f"ie.scene_types asks for {missing}; the sources offer scenes of {offered}")
    targets = split_targets(ie.tasks, [t for t in offered if t in (ie.scene_types or offered)], ie.hard_share)
    return [IEBlueprint(name=intent.name, version=intent.version, seed=intent.seed, track=intent.track,
                        tasks_target=ie.tasks, targets=targets, task_kinds=list(ie.task_kinds or []), sources=sources,
                        gates=intent.gates.model_dump(mode="json"), intent_hash=digest(ctx.params.intent),
                        composition_tolerance=ie.tolerance)]


def household_setup(entry: dict[str, Any], src: Any) -> tuple[list[str], int]:
    """The household scene pool of the data root; the scene types it holds."""
    root = Path(src.data_root).resolve()  # resolved from the intent's folder by the planner
    entry["data_root"] = str(root)
    entry["pool"] = scene_pool(root, src.floor_plans)
    if not entry["pool"]:
        raise IntentError(f"sources: {root} holds no household scene (ai2thor/FloorPlan*_objects.json or "
                          "alfred/*/*.traj_data.json)")
    types = {p["scene_type"] for p in entry["pool"]}
    return [t for t in SCENE_TYPES if t in types], TASKS_PER_UNIT


register("ie_source_setup", "household", household_setup)


def split_targets(total: int, scene_types: list[str], hard_share: float) -> dict[str, dict[str, int]]:
    """``total`` over the scene types evenly (largest remainders), each part over simple and hard;
    the odd task of a type goes to simple and hard in turn, so the totals come out even."""
    per = [total // len(scene_types) + (1 if i < total % len(scene_types) else 0) for i in range(len(scene_types))]
    out: dict[str, dict[str, int]] = {}
    lean_hard = True
    for kind, n in zip(scene_types, per):
        exact = n * hard_share
        hard = math.floor(exact)
        if exact - hard > 1e-9 or (hard_share == 0.5 and n % 2):
            hard += 1 if lean_hard else 0
            lean_hard = not lean_hard
        out[kind] = {"simple": n - hard, "hard": hard}
    return out
