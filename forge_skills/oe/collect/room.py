"""S2: plan seeded room-scale household scenes seen by a mobile robot or a quadruped.

Tables and trays stand on the floor; objects rest on the floor, on tables or in trays (some
lying on their side); the embodiment drives a seeded path and its own camera records one
frame per step, from its own height.
"""

from __future__ import annotations

import math

from forge_skills.oe.types import Blueprint, BodySpec, SceneSpec
from forge.skills import SkillContext, skill
from forge_skills.oe.collect.layout import (SceneParams, catalogue_file, has_states, make_object, pick_objects, placements,
                                      start_plan)
from forge_skills.oe.collect.trajectory import Pose2D, drive, forward_camera

AREA_X = (-1.2, 2.8)
AREA_Y = (-3.2, 3.2)
FURNITURE_SEPARATION = 1.0
OBJECT_SEPARATION = 0.5
SPEED_M_PER_S = 0.5



@skill("collect.plan_room_scenes", stage="S2", params=SceneParams, reads=catalogue_file)
def plan_room_scenes(ctx: SkillContext, blueprint: Blueprint) -> list[SceneSpec]:
    """One seeded room: furniture, objects on and in it, and the embodiment's camera path."""
    plan = start_plan(ctx.params.scene_index, blueprint, "pybullet_room", "room", ctx.params.source_index)
    cat, src, index, categories, seed, rng = (plan.catalogue, plan.source, plan.index, plan.categories,
                                              plan.seed, plan.rng)
    mount = cat["embodiments"][src["embodiment"]]
    frames = int(src["frames"])
    start = Pose2D(-1.7, float(rng.uniform(-0.6, 0.6)), math.radians(float(rng.uniform(-12, 12))))
    # The path sweeps through a turn of a random side: new things come into view as it goes.
    magnitude = float(rng.uniform(min(40.0, src["max_turn_deg"]), src["max_turn_deg"]))
    turn = math.radians(magnitude * (1 if rng.random() < 0.5 else -1)) / max(1, frames - 1)
    path = drive(start, frames, mount["step"], turn)
    corridor = [(p.x + mount["camera_forward"] * math.cos(p.heading), p.y + mount["camera_forward"] * math.sin(p.heading),
                 0.75) for p in path]

    n_tables = int(rng.integers(src["tables"]["min"], src["tables"]["max"] + 1))
    n_trays = int(rng.integers(src["trays"]["min"], src["trays"]["max"] + 1))
    spots = placements(rng, n_tables + n_trays, AREA_X, AREA_Y, FURNITURE_SEPARATION, corridor)
    bodies, holders = [], []
    for k, (x, y) in enumerate(spots):
        kind = "table" if k < n_tables else "tray"
        entry = cat["furniture"][kind]
        name = f"{kind} {k + 1 if kind == 'table' else k - n_tables + 1}"
        top = 0.64 * entry["scale"] if kind == "table" else 0.02
        bodies.append(BodySpec(name=name, category=kind, urdf=entry["urdf"], position=[round(x, 4), round(y, 4), 0.0],
                               yaw=round(float(rng.uniform(0, math.pi / 2)), 4), scale=entry["scale"]))
        holders.append((x, y, top, kind))

    n = int(rng.integers(src["objects"]["min"], src["objects"]["max"] + 1))
    picks = pick_objects(rng, cat, categories, n, "room")
    # One object per table top and up to two per tray; the rest on the floor.
    slots: list[tuple[float, float, float | None]] = []
    for x, y, top, kind in holders:
        for j in range(1 if kind == "table" else int(rng.integers(1, 3))):
            dx = 0.0 if kind == "table" else (-0.13 if j == 0 else 0.13)
            slots.append((x + dx, y, top))
    rng.shuffle(slots)
    on_holders = slots[: max(0, min(len(slots), len(picks) - 2))]
    floor = placements(rng, len(picks) - len(on_holders), AREA_X, AREA_Y, OBJECT_SEPARATION,
                       corridor + [(x, y, 0.65) for x, y, _, _ in holders])
    positions = [(x, y, z) for x, y, z in on_holders] + [(x, y, None) for x, y in floor]
    objects = []
    for (x, y, z), (color, category) in zip(positions, picks):
        lying = has_states(cat, category) and rng.random() < src["lying_fraction"]
        objects.append(make_object(cat, color, category, "room", x, y, float(rng.uniform(0, 6.283)), z=z,
                                   state="lying" if lying else "upright"))
    w, h = src["image"]["width"], src["image"]["height"]
    dt = mount["step"] / SPEED_M_PER_S
    cameras = [forward_camera(k, pose, mount, w, h, k * dt, far=10.0) for k, pose in enumerate(path)]
    return [SceneSpec(source_kind=src["kind"], scene_index=index, seed=seed, robot=src["embodiment"], objects=objects,
                      cameras=cameras, layout="room", bodies=bodies, support_height=0.0)]
