"""Where the real household data lives: ``../shared/data`` next to the repository."""

from __future__ import annotations

import json
from pathlib import Path

from .scene import Rules, Scene
from .thor import scene_from_thor  # ai2thor itself is imported only when a live controller starts

DUMP_FLOOR_PLANS = (6, 9, 207, 306, 404)


def shared_data() -> Path:
    """``<repo>/../shared/data`` (the files stay there; the repository holds none of them)."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"


def dump_path(floor_plan: int, root: Path | None = None) -> Path:
    return (root or shared_data()) / "ai2thor" / f"FloorPlan{floor_plan}_objects.json"


def load_dump(floor_plan: int, root: Path | None = None, rules: Rules | None = None, agents: int = 1) -> Scene:
    """The scene of a real AI2-THOR ``metadata['objects']`` dump, with ALFRED's interaction poses
    for that floor plan as its named locations when the layout file is there."""
    root = root or shared_data()
    objects = json.loads(dump_path(floor_plan, root).read_text())
    return scene_from_thor(objects, f"FloorPlan{floor_plan}", rules=rules or Rules(), agents=agents,
                           locations=layout_locations(f"FloorPlan{floor_plan}", root), source=f"ai2thor:{floor_plan}")


def layout_locations(floor_plan: str, root: Path | None = None) -> tuple[str, ...]:
    """ALFRED's interaction poses for a floor plan's receptacles, as ``loc|x|z|r|h`` names."""
    path = (root or shared_data()) / "alfred" / "gen_layouts" / f"{floor_plan}-openable.json"
    if not path.exists():
        return ()
    poses = json.loads(path.read_text())
    return tuple(sorted({pose_name(x, z, rotation, horizon) for x, z, rotation, horizon in poses.values()}))


def pose_name(x: float, z: float, rotation: float, horizon: float) -> str:
    """Metres and degrees to ALFRED's grid location name."""
    return f"loc|{round(x / 0.25)}|{round(z / 0.25)}|{round(rotation / 90) % 4}|{round(horizon)}"
