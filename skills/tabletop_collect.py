"""S2: plan seeded tabletop scenes (an arm beside a table, objects on it, an orbit of cameras)."""

from __future__ import annotations

from pydantic import BaseModel

from forge.artifact_types import Blueprint, BodySpec, CameraSpec, SceneSpec
from forge.skills import SkillContext, skill
from forge_resources.pybullet_sim import catalogue, catalogue_path
from forge_skills.scene_layout import check_categories, make_object, pick_objects, placements, scene_seed

TABLE_TOP_Z = 0.626
TABLE_TARGET = (0.1, 0.0, 0.68)
ARM_BASE = (-0.62, 0.0, TABLE_TOP_Z)
# Where objects may stand on the table (metres, world frame); the arm stands at x = -0.62.
AREA_X = (-0.30, 0.45)
AREA_Y = (-0.36, 0.36)
MIN_SEPARATION = 0.13


class SceneParams(BaseModel):
    scene_index: int


def _catalogue_file(params: dict) -> dict[str, str]:
    return {"catalogue": catalogue_path()}


@skill("collect.plan_tabletop_scenes", stage="S2", params=SceneParams, reads=_catalogue_file)
def plan_tabletop_scenes(ctx: SkillContext, blueprint: Blueprint) -> list[SceneSpec]:
    """One seeded scene specification: objects, placements and a camera rig.

    One invocation per scene index, so adding scenes later never changes existing ones.
    """
    import numpy as np

    cat = catalogue()
    src = next(s for s in blueprint.sources if s["kind"] == "pybullet_tabletop")
    index = ctx.params.scene_index
    categories = check_categories(src.get("categories"), cat, "tabletop")
    seed = scene_seed(blueprint.seed, blueprint.name, index, "tabletop")
    rng = np.random.default_rng(seed)
    n = int(rng.integers(src["objects"]["min"], src["objects"]["max"] + 1))
    picks = pick_objects(rng, cat, categories, n, "tabletop")
    objects = [make_object(cat, color, category, "tabletop", x, y, float(rng.uniform(0, 6.283)))
               for (x, y), (color, category) in zip(placements(rng, len(picks), AREA_X, AREA_Y, MIN_SEPARATION), picks)]
    robot = cat["robots"][src["robot"]]
    bodies = [BodySpec(name="table", category="table", urdf="table/table.urdf", position=[0, 0, 0]),
              BodySpec(name="arm", category="robot", urdf=robot["urdf"], position=list(ARM_BASE), joints=robot["home"])]
    cameras = _camera_rig(rng, src["views"], src["image"]["width"], src["image"]["height"])
    return [SceneSpec(source_kind=src["kind"], scene_index=index, seed=seed, robot=src["robot"], objects=objects,
                      cameras=cameras, layout="tabletop", bodies=bodies, support_height=TABLE_TOP_Z)]


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
