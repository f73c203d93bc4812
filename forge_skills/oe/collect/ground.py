"""S2: plan seeded ground layouts seen from a drone (top-down frames along a flight line) or
from a vehicle (forward frames along a drive, plus one top-down overview of the layout)."""

from __future__ import annotations

import math

from forge_skills.oe.types import Blueprint, BodySpec, SceneSpec
from forge.skills import SkillContext, skill
from forge_skills.oe.collect.layout import (SceneParams, catalogue_file, make_object, pick_objects, placements,
                                            start_plan)
from forge_skills.oe.collect.trajectory import Pose2D, drive, forward_camera, nadir_camera

AREA = (-4.5, 4.5)
OBJECT_SEPARATION = 1.9
OVERVIEW_ALTITUDE = 11.0



@skill("collect.plan_ground_scenes", stage="S2", params=SceneParams, reads=catalogue_file)
def plan_ground_scenes(ctx: SkillContext, blueprint: Blueprint) -> list[SceneSpec]:
    """One seeded ground layout and the embodiment's cameras over it."""
    plan = start_plan(ctx.params.scene_index, blueprint, "pybullet_ground", "ground", ctx.params.source_index)
    cat, src, index, categories, seed, rng = (plan.catalogue, plan.source, plan.index, plan.categories,
                                              plan.seed, plan.rng)
    mount = cat["embodiments"][src["embodiment"]]
    frames = int(src["frames"])
    w, h = src["image"]["width"], src["image"]["height"]
    heading = math.radians(float(rng.uniform(-15, 15)))
    turn = math.radians(float(rng.uniform(-1, 1) * src["max_turn_deg"])) / max(1, frames - 1)
    bodies: list[BodySpec] = []
    if src["embodiment"] == "uav":
        path = drive(Pose2D(-2.0, float(rng.uniform(-1.0, 1.0)), heading), frames, mount["step"], turn)
        corridor: list[tuple[float, float, float]] = []
    else:
        path = drive(Pose2D(-6.0, float(rng.uniform(-1.0, 1.0)), heading), frames, mount["step"], turn)
        corridor = [(p.x, p.y, 1.4) for p in path] + [(path[-1].x + 2 * math.cos(path[-1].heading),
                                                        path[-1].y + 2 * math.sin(path[-1].heading), 1.4)]
        bodies.append(BodySpec(name="vehicle", category="vehicle", urdf=mount["urdf"],
                               position=[round(path[0].x, 4), round(path[0].y, 4), 0.0], yaw=round(path[0].heading, 4),
                               scale=1.0))
    n = int(rng.integers(src["objects"]["min"], src["objects"]["max"] + 1))
    picks = pick_objects(rng, cat, categories, n, "ground")
    spots = placements(rng, len(picks), AREA, AREA, OBJECT_SEPARATION, corridor)
    objects = [make_object(cat, color, category, "ground", x, y, float(rng.uniform(0, 6.283)))
               for (x, y), (color, category) in zip(spots, picks)]
    dt = mount["step"] / (3.0 if src["embodiment"] == "uav" else 2.0)
    if src["embodiment"] == "uav":
        altitude = float(rng.uniform(*src["altitude_m"]))
        cameras = [nadir_camera(k, p.x, p.y, altitude, p.heading, mount["fov"], w, h, k * dt, far=altitude + 5,
                                role="top_down") for k, p in enumerate(path)]
    else:
        cameras = [forward_camera(k, p, mount, w, h, k * dt, far=30.0, role="forward") for k, p in enumerate(path)]
        # The overview turns by a seeded angle: with its up always the drive's direction, where an
        # object stands in it would tell whether the forward view sees it, without looking.
        up = float(rng.uniform(0.0, 2 * math.pi))
        cameras.append(nadir_camera(frames, 0.0, 0.0, OVERVIEW_ALTITUDE, up, 65.0, w, h, None,
                                    far=OVERVIEW_ALTITUDE + 5, role="overview"))
    return [SceneSpec(source_kind=src["kind"], scene_index=index, seed=seed, robot=src["embodiment"], objects=objects,
                      cameras=cameras, layout="ground", bodies=bodies, support_height=0.0)]
