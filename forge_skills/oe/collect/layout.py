"""Seeded layout helpers shared by the scene planners: object picks and non-overlapping placements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from forge_skills.oe.types import ObjectSpec
from forge.keys import digest
from forge.sources import own_section
from forge_resources.pybullet_sim import catalogue, catalogue_path


class SceneParams(BaseModel):
    """A plan skill runs once per scene index, so adding scenes never changes existing ones."""

    scene_index: int
    source_index: int | None = None  # which of the intent's sources it plans for (the runner says)


def catalogue_file(params: dict) -> dict[str, str]:
    """The object catalogue every scene plan reads (part of the plan's code version)."""
    return {"catalogue": catalogue_path()}


@dataclass
class PlanStart:
    """What every scene plan begins from: the catalogue, its source entry, the scene index,
    the usable categories, and the scene's own seed and random generator."""

    catalogue: dict[str, Any]
    source: dict[str, Any]
    index: int
    categories: list[str]
    seed: int
    rng: Any


def start_plan(scene_index: int, blueprint: Any, kind: str, layout: str, source_index: int | None = None) -> PlanStart:
    import numpy as np

    cat = catalogue()
    src = own_section(blueprint.sources, kind, source_index)
    # A plugin's kind planning with this skill draws its own layouts, not those of the built-in kind.
    seed = scene_seed(blueprint.seed, blueprint.name, scene_index,
                      layout if src.get("kind") == kind else f"{layout}:{src.get('kind')}")
    return PlanStart(cat, src, scene_index, check_categories(src.get("categories"), cat, layout), seed,
                     np.random.default_rng(seed))


def scene_seed(blueprint_seed: int, name: str, index: int, kind: str) -> int:
    return int(digest(blueprint_seed, name, kind, index, length=12), 16)


def check_categories(requested: list[str] | None, catalogue: dict[str, Any], layout: str) -> list[str]:
    usable = sorted(c for c, e in catalogue["categories"].items() if layout in e["scale"])
    categories = requested or usable
    unknown = sorted(set(categories) - set(usable))
    if unknown:
        raise ValueError(f"object categories {unknown} are not available for {layout} scenes; known: {usable}")
    return categories


def pick_objects(rng, catalogue: dict[str, Any], categories: list[str], n: int, layout: str) -> list[tuple[str, str]]:
    """(colour, category) pairs: a few categories per scene, several colours each, so counting
    and same-kind comparisons have material."""
    kinds = [categories[int(i)] for i in rng.permutation(len(categories))[: max(2, min(len(categories), (n + 1) // 2))]]
    combos = [(c, k) for k in kinds for c in tints(catalogue, k)]
    picks = rng.choice(len(combos), size=min(n, len(combos)), replace=False)
    return [combos[int(p)] for p in picks]


def tints(catalogue: dict[str, Any], category: str) -> list[str]:
    """The colours a category may be tinted with: those that render as their own name."""
    allowed = catalogue["categories"][category].get("colors")
    return sorted(allowed if allowed is not None else catalogue["colors"])


AXES = {"x": [1.0, 0.0, 0.0], "y": [0.0, 1.0, 0.0], "z": [0.0, 0.0, 1.0]}


def has_states(catalogue: dict[str, Any], category: str) -> bool:
    return bool(catalogue["categories"][category].get("states"))


def make_object(catalogue: dict[str, Any], color: str, category: str, layout: str, x: float, y: float, yaw: float,
                z: float | None = None, state: str = "upright") -> ObjectSpec:
    entry = catalogue["categories"][category]
    rpy = (entry.get("states") or {}).get(state, [0.0, 0.0, 0.0])
    return ObjectSpec(name=f"{color} {category}", category=category, color=color, rgba=catalogue["colors"][color],
                      urdf=entry["urdf"], scale=entry["scale"][layout], xy=[round(x, 4), round(y, 4)],
                      yaw=round(yaw, 4), z=None if z is None else round(z, 4), base_rpy=[round(float(a), 4) for a in rpy],
                      up_axis=AXES[entry.get("up_axis", "z")], texture=bool(entry.get("texture", False)))


def placements(rng, n: int, area_x: tuple[float, float], area_y: tuple[float, float], separation: float,
               taken: list[tuple[float, float, float]] | None = None) -> list[tuple[float, float]]:
    """``n`` points in the area at least ``separation`` apart and clear of ``taken`` discs (x, y, radius)."""
    points: list[tuple[float, float]] = []
    blocked = list(taken or [])
    attempts = 0
    while len(points) < n and attempts < 5000:
        attempts += 1
        x, y = float(rng.uniform(*area_x)), float(rng.uniform(*area_y))
        if all((x - a) ** 2 + (y - b) ** 2 >= separation ** 2 for a, b in points) and \
                all((x - a) ** 2 + (y - b) ** 2 >= r ** 2 for a, b, r in blocked):
            points.append((x, y))
    if len(points) < n:
        raise ValueError(f"could not place {n} objects {separation} m apart")
    return points
