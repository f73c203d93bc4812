"""S2: plan seeded tabletop scenes (an arm beside a table, objects on it, an orbit of cameras)."""

from __future__ import annotations

import math

from forge_skills.oe.types import Blueprint, BodySpec, CameraSpec, SceneSpec
from forge.skills import SkillContext, skill
from forge_skills.oe.collect.layout import (SceneParams, catalogue_file, has_states, make_object, pick_objects, placements,
                                      start_plan)

TABLE_TOP_Z = 0.626
TABLE_TARGET = (0.1, 0.0, 0.68)
ARM_BASE = (-0.62, 0.0, TABLE_TOP_Z)
# Where objects may stand on the table (metres, world frame); the arm stands at x = -0.62.
AREA_X = (-0.30, 0.45)
AREA_Y = (-0.36, 0.36)
MIN_SEPARATION = 0.13
TRAY_SCALE = 0.5  # a 30 cm tray on the table
PAIR_OFFSET = 0.07  # two objects in one tray stand this far either side of its centre
TOO_BIG_TO_SHARE = {"soccer ball", "teddy bear"}  # fills a tray on its own
ARM_FACING_YAW = 90.0  # pybullet orbit yaw that puts the camera on the +x side, facing the arm



@skill("collect.plan_tabletop_scenes", stage="S2", params=SceneParams, reads=catalogue_file)
def plan_tabletop_scenes(ctx: SkillContext, blueprint: Blueprint) -> list[SceneSpec]:
    """One seeded scene specification: objects, placements and a camera rig.

    One invocation per scene index, so adding scenes later never changes existing ones.
    """
    plan = start_plan(ctx.params.scene_index, blueprint, "pybullet_tabletop", "tabletop", ctx.params.source_index)
    cat, src, index, categories, seed, rng = (plan.catalogue, plan.source, plan.index, plan.categories,
                                              plan.seed, plan.rng)
    n = int(rng.integers(src["objects"]["min"], src["objects"]["max"] + 1))
    picks = pick_objects(rng, cat, categories, n, "tabletop")
    robot = cat["robots"][src["robot"]]
    bodies = [BodySpec(name="table", category="table", urdf="table/table.urdf", position=[0, 0, 0]),
              BodySpec(name="arm", category="robot", urdf=robot["urdf"], position=list(ARM_BASE), joints=robot["home"])]
    trays = src.get("trays") or {"min": 0, "max": 0}
    n_trays = int(rng.integers(trays["min"], trays["max"] + 1)) if trays["max"] else 0
    spots: list[tuple[float, float, float | None]] = []
    taken: list[tuple[float, float, float]] = []
    for k, (x, y) in enumerate(placements(rng, n_trays, AREA_X, AREA_Y, 0.4)):
        yaw = float(rng.uniform(0, 1.57))
        bodies.append(BodySpec(name=f"tray {k + 1}", category="tray", urdf=cat["furniture"]["tray"]["urdf"],
                               position=[round(x, 4), round(y, 4), TABLE_TOP_Z], yaw=round(yaw, 4), scale=TRAY_SCALE))
        spots += _tray_slots(rng, x, y, yaw, picks, len(spots))
        taken.append((x, y, 0.22))
    free = placements(rng, len(picks) - len(spots), AREA_X, AREA_Y, MIN_SEPARATION, taken)
    spots += [(x, y, None) for x, y in free]
    objects = []
    for (x, y, z), (color, category) in zip(spots, picks):
        lying = has_states(cat, category) and rng.random() < src.get("lying_fraction", 0.0)
        objects.append(make_object(cat, color, category, "tabletop", x, y, float(rng.uniform(0, 6.283)), z=z,
                                   state="lying" if lying else "upright"))
    cameras = _camera_rig(rng, src["views"], src["image"]["width"], src["image"]["height"])
    return [SceneSpec(source_kind=src["kind"], scene_index=index, seed=seed, robot=src["robot"], objects=objects,
                      cameras=cameras, layout="tabletop", bodies=bodies, support_height=TABLE_TOP_Z)]


def _tray_slots(rng, x: float, y: float, yaw: float, picks: list[tuple[str, str]], used: int
                ) -> list[tuple[float, float, float | None]]:
    """Where objects go into one tray: one at its centre, or (half the time, when the next two
    picks are small enough to share it) two side by side along the tray's axis. Trays holding
    two give "which of these are in a tray" answers of more than one object, and a tray check
    where another object shares the tray."""
    z = TABLE_TOP_Z + 0.01
    pair = picks[used:used + 2]
    if len(picks) - used >= 3 and len(pair) == 2 and not {k for _, k in pair} & TOO_BIG_TO_SHARE and rng.random() < 0.5:
        dx, dy = PAIR_OFFSET * math.cos(yaw), PAIR_OFFSET * math.sin(yaw)
        return [(x - dx, y - dy, z), (x + dx, y + dy, z)]
    return [(x, y, z)]


def _camera_rig(rng, views: int, width: int, height: int) -> list[CameraSpec]:
    """An orbit of cameras around the table. The first two (of three or more) stand across the
    table from the arm, to either side, looking back towards it from further away, so their
    views show the arm's base beside the objects (reach can be judged from them); the others
    are spread around the orbit."""
    facing = 2 if views >= 3 else 1
    cams = []
    for k in range(views):
        if k < facing:
            side = 0.0 if facing == 1 else (-32.0 if k == 0 else 32.0)
            yaw = ARM_FACING_YAW + side + float(rng.uniform(-12, 12))
            target = [float(rng.uniform(-0.2, 0.05)), float(rng.uniform(-0.15, 0.15)), TABLE_TARGET[2]]
            distance, pitch = float(rng.uniform(0.85, 1.1)), float(rng.uniform(-42, -28))
        else:
            yaw = (ARM_FACING_YAW + 180.0 + (k - facing) * 360.0 / views + float(rng.uniform(-25, 25))) % 360
            target = [TABLE_TARGET[0] + float(rng.uniform(-0.25, 0.25)), TABLE_TARGET[1] + float(rng.uniform(-0.25, 0.25)),
                      TABLE_TARGET[2]]
            distance, pitch = float(rng.uniform(0.45, 0.8)), float(rng.uniform(-52, -28))
        cams.append(CameraSpec(index=k, target=[round(v, 4) for v in target], distance=round(distance, 4),
                               yaw=round(yaw % 360, 3), pitch=round(pitch, 3), fov=45.0, width=width, height=height))
    return cams
