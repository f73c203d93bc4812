"""S2: plan seeded tabletop scenes and collect calibrated views of them in pybullet."""

from __future__ import annotations

from pydantic import BaseModel

from forge.artifact_types import Blueprint, CameraSpec, ObjectSpec, SceneSpec, SourceRecord, ViewRecord
from forge.keys import digest
from forge.skills import SkillContext, skill
from forge_resources.pybullet_tabletop import TABLE_TARGET, TabletopSimulator, catalogue, intrinsics

# Where objects may stand on the table (metres, world frame); the arm stands at x = -0.62.
AREA_X = (-0.30, 0.45)
AREA_Y = (-0.36, 0.36)
MIN_SEPARATION = 0.13


class SceneParams(BaseModel):
    scene_index: int


@skill("collect.plan_tabletop_scenes", stage="S2", params=SceneParams)
def plan_tabletop_scenes(ctx: SkillContext, blueprint: Blueprint) -> list[SceneSpec]:
    """One seeded scene specification: objects, placements and a camera rig.

    One invocation per scene index, so adding scenes later never changes existing ones.
    """
    import numpy as np

    cat = catalogue()
    src = next(s for s in blueprint.sources if s["kind"] == "pybullet_tabletop")
    index = ctx.params.scene_index
    categories = src.get("categories") or sorted(cat["categories"])
    unknown = sorted(set(categories) - set(cat["categories"]))
    if unknown:
        raise ValueError(f"unknown object categories {unknown}; known: {sorted(cat['categories'])}")
    colors = sorted(cat["colors"])
    seed = int(digest(blueprint.seed, blueprint.name, index, length=12), 16)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(src["objects"]["min"], src["objects"]["max"] + 1))
    # A few categories per scene, several colours each: repeated categories make counting
    # and same-kind comparisons possible.
    kinds = [categories[int(i)] for i in rng.permutation(len(categories))[: max(2, min(len(categories), (n + 1) // 2))]]
    combos = [(c, k) for k in kinds for c in colors]
    picks = rng.choice(len(combos), size=min(n, len(combos)), replace=False)
    objects = []
    for (x, y), pick in zip(_placements(rng, len(picks)), picks):
        color, category = combos[int(pick)]
        entry = cat["categories"][category]
        objects.append(ObjectSpec(name=f"{color} {category}", category=category, color=color,
                                  rgba=cat["colors"][color], urdf=entry["urdf"], scale=entry["scale"],
                                  xy=[round(x, 4), round(y, 4)], yaw=round(float(rng.uniform(0, 6.283)), 4)))
    cameras = _camera_rig(rng, src["views"], src["image"]["width"], src["image"]["height"])
    return [SceneSpec(source_kind=src["kind"], scene_index=index, seed=seed, robot=src["robot"],
                      objects=objects, cameras=cameras)]


def _placements(rng, n: int) -> list[tuple[float, float]]:
    points: list[tuple[float, float]] = []
    attempts = 0
    while len(points) < n and attempts < 5000:
        attempts += 1
        x, y = float(rng.uniform(*AREA_X)), float(rng.uniform(*AREA_Y))
        if all((x - a) ** 2 + (y - b) ** 2 >= MIN_SEPARATION ** 2 for a, b in points):
            points.append((x, y))
    if len(points) < n:
        raise ValueError(f"could not place {n} objects {MIN_SEPARATION} m apart on the table")
    return points


def _camera_rig(rng, views: int, width: int, height: int) -> list[CameraSpec]:
    offset = float(rng.uniform(0, 360))
    cams = []
    for k in range(views):
        yaw = (offset + k * 360.0 / views + float(rng.uniform(-20, 20))) % 360
        target = [TABLE_TARGET[0] + float(rng.uniform(-0.25, 0.25)), TABLE_TARGET[1] + float(rng.uniform(-0.25, 0.25)),
                  TABLE_TARGET[2]]
        cams.append(CameraSpec(index=k, target=[round(v, 4) for v in target],
                               distance=round(float(rng.uniform(0.45, 0.8)), 4), yaw=round(yaw, 3),
                               pitch=round(float(rng.uniform(-52, -28)), 3), fov=45.0, width=width, height=height))
    return cams


@skill("collect.render_tabletop", stage="S2", requires=("pybullet",), parallel=True)
def render_tabletop(ctx: SkillContext, scene: SceneSpec) -> list[SourceRecord]:
    """Load the scene in pybullet, settle it, and render RGB, depth and segmentation per view."""
    views, arrays = [], {}
    with TabletopSimulator() as sim:
        sim.reset_to_scene(scene)
        objects = sim.read_state(scene)
        for cam in scene.cameras:
            rgb, depth, seg = sim.render_view(cam)
            view, _proj, cam_pos = sim.camera_matrices(cam)
            arrays[f"depth_{cam.index}"] = depth
            arrays[f"seg_{cam.index}"] = seg
            views.append(ViewRecord(index=cam.index, rgb=ctx.put_png(rgb), width=cam.width, height=cam.height,
                                    intrinsics=intrinsics(cam), view_matrix=[round(v, 8) for v in view],
                                    camera_position=[round(v, 6) for v in cam_pos], near=cam.near, far=cam.far))
    return [SourceRecord(source_kind=scene.source_kind, simulator="pybullet", scene_index=scene.scene_index,
                         views=views, arrays=ctx.put_arrays(arrays), objects=objects)]
