"""S2: plan and render seeded scenes of robosuite's manipulation environments."""

from __future__ import annotations

import numpy as np

from typing import Any, Callable

from pydantic import Field

from forge.sources import own_section
from forge.artifact_types import ArtifactContent
from forge_skills.oe.types import Blueprint, CameraSpec, ObjectState, SourceRecord, ViewRecord
from forge.contracts import CheckContext, Outcome, check
from forge.skills import SkillContext, skill
from forge_skills.oe.collect.layout import SceneParams, scene_seed

# Where each environment's objects stand (world frame, metres): the rig looks about here.
WORKSPACE = {"PickPlace": (0.1, -0.25, 0.86), "NutAssembly": (0.05, 0.05, 0.86), "Stack": (0.0, 0.0, 0.84),
             "Lift": (0.0, 0.0, 0.84), "Door": (-0.1, -0.2, 1.0)}
# The arm stands at -x looking along +x; a MuJoCo azimuth of 180 puts the camera across the
# table from it, looking back.
FACING_AZIMUTH = 180.0


class RobosuiteScene(ArtifactContent):
    """A seeded scene of a robosuite environment: the environment places its own objects from
    the seed; the rig of free cameras is planned here."""

    source_kind: str
    scene_index: int
    env: str = Field(description="robosuite environment class (PickPlace, NutAssembly, Stack, Lift, Door)")
    seed: int = Field(description="seed of the environment's placement sampler and arm start noise")
    robot: str = "Panda"
    cameras: list[CameraSpec] = Field(description="free cameras: target, distance, yaw = azimuth, pitch = elevation "
                                                  "(degrees, MuJoCo's convention)")

    def summary(self) -> str:
        return f"{self.env} scene {self.scene_index} seed {self.seed}, {len(self.cameras)} cameras"


@check("robosuite_scene_well_formed")
def robosuite_scene_well_formed(scene: RobosuiteScene, ctx: CheckContext) -> Outcome:
    """A known environment, two or more cameras with distinct indices, each above the table
    looking down at the workspace."""
    problems = []
    if scene.env not in WORKSPACE:
        problems.append(f"unknown environment {scene.env!r}; known: {sorted(WORKSPACE)}")
    if len(scene.cameras) < 2:
        problems.append("fewer than two camera views")
    if len({c.index for c in scene.cameras}) != len(scene.cameras):
        problems.append("duplicate camera indices")
    problems += [f"camera {c.index} does not look down (elevation {c.pitch})" for c in scene.cameras if c.pitch >= 0]
    return Outcome(not problems, "; ".join(problems))


@skill("collect.plan_robosuite_scenes", stage="S2", params=SceneParams)
def plan_robosuite_scenes(ctx: SkillContext, blueprint: Blueprint) -> list[RobosuiteScene]:
    """One scene: which environment, its placement seed and a rig of free cameras. Scenes take
    the environments in turn, so every one is represented at any scene count."""
    index = ctx.params.scene_index
    src = own_section(blueprint.sources, "robosuite_scenes", ctx.params.source_index)
    env_name = src["envs"][index % len(src["envs"])]
    seed = scene_seed(blueprint.seed, blueprint.name, index, f"robosuite:{env_name}")
    rng = np.random.default_rng(seed)
    return [RobosuiteScene(source_kind=src["kind"], scene_index=index, env=env_name, seed=seed,
                           cameras=camera_rig(rng, env_name, src["views"], src["image"]["width"],
                                              src["image"]["height"]))]


def camera_rig(rng, env_name: str, views: int, width: int, height: int,
               centre: tuple[float, float, float] | None = None) -> list[CameraSpec]:
    """Cameras spread over an arc across the table from the arm (the arm stays in the back of
    every picture), at seeded distances and elevations; yaw and pitch are MuJoCo's azimuth and
    elevation."""
    centre = np.array(centre or WORKSPACE[env_name])
    spread = np.linspace(-65.0, 65.0, views) if views > 1 else np.zeros(1)
    cams = []
    for k in range(views):
        target = centre + np.array([rng.uniform(-0.06, 0.06), rng.uniform(-0.06, 0.06), 0.0])
        cams.append(CameraSpec(index=k, target=[round(float(v), 4) for v in target],
                               distance=round(float(rng.uniform(0.75, 1.15)), 4),
                               yaw=round(float(FACING_AZIMUTH + spread[k] + rng.uniform(-10, 10)), 3),
                               pitch=round(float(rng.uniform(-55, -28)), 3), fov=45.0, width=width, height=height,
                               near=0.05, far=5.0))
    return cams


@skill("collect.render_robosuite_scene", stage="S2", requires=("robosuite", "mujoco"), parallel=True)
def render_robosuite_scene(ctx: SkillContext, scene: RobosuiteScene) -> list[SourceRecord]:
    """Reset the environment with the scene's seed, let it settle, read object states and render
    RGB, depth and segmentation from every camera. The process keeps its environments between
    scenes; every scene starts from a seeded reset."""
    from forge_resources.robosuite.scenes import OPEN_COMMAND, RobosuiteScenes

    sims = ctx.held("robosuite.scenes", RobosuiteScenes)
    state = sims.reset(scene.env, scene.seed)
    return [record_world(ctx, state, scene.cameras, lambda w, h: sims.renderer(scene.env, w, h), scene.source_kind,
                         scene.scene_index, OPEN_COMMAND, f"{scene.env} seed {scene.seed}")]


class WorldRecorder:
    """Segmentation ids, names and statics of a world's model, and the view records of its renders."""

    def __init__(self, ctx: SkillContext, world: Any, renderer: Callable[[int, int], Any]) -> None:
        self.ctx, self.world, self.renderer = ctx, world, renderer
        model = world.model
        self.fixed = world.statics()
        self.seg_of_body = np.zeros(model.nbody, dtype=np.int32)
        self.names: dict[int, str] = {}
        for label, (seg, _cat, bodies) in self.fixed.items():
            self.seg_of_body[list(bodies)] = seg
            self.names.update({b: label for b in bodies})
        for obj in world.objects:
            self.seg_of_body[list(obj.bodies)] = obj.segment
            self.names.update({b: obj.name for b in obj.bodies})
        self.arrays: dict[str, np.ndarray] = {}

    def objects(self, where: str) -> list[ObjectState]:
        from forge_resources.robosuite.scenes import SceneError

        out = []
        for obj in self.world.objects:
            st = self.world.object_state(obj, self.names)
            if not all(np.isfinite(v) for key in ("position", "aabb_min", "aabb_max") for v in st[key]):
                raise SceneError(f"{where}: {obj.name} has a non-finite pose")
            out.append(ObjectState(name=obj.name, category=obj.identity, color="", body=obj.segment,
                                   unnameable=obj.unnameable, **st))
        return out

    def view(self, cam: CameraSpec, index: int, role: str = "view", time: float | None = None) -> ViewRecord:
        """Render the world's current state from ``cam`` as view ``index``."""
        from forge_resources.robosuite.world import RigCamera, view_matrix

        world = self.world
        rig = RigCamera(cam.target, cam.distance, cam.yaw, cam.pitch, cam.width, cam.height)
        rgb, depth, seg = world.render(self.renderer(cam.width, cam.height), rig, self.seg_of_body)
        eye = rig.eye()
        vm = view_matrix(eye, np.asarray(cam.target, dtype=float))
        near, far = world.clip()
        self.arrays[f"depth_{index}"] = depth
        self.arrays[f"seg_{index}"] = seg
        ids, counts = np.unique(seg, return_counts=True)
        seen = dict(zip(ids.tolist(), counts.tolist()))
        fy = cam.height / (2.0 * np.tan(np.radians(world.fovy()) / 2.0))
        return ViewRecord(index=index, rgb=self.ctx.put_png(rgb), width=cam.width, height=cam.height,
                          intrinsics={"fx": fy, "fy": fy, "cx": cam.width / 2.0, "cy": cam.height / 2.0,
                                      "width": float(cam.width), "height": float(cam.height)},
                          view_matrix=[round(float(v), 8) for v in vm.flatten(order="F")],
                          camera_position=[round(float(v), 6) for v in eye], near=round(near, 6), far=round(far, 6),
                          role=role, time=time, forward=[round(float(v), 6) for v in -vm[2, :3]],
                          body_pixels={label: int(seen.get(seg, 0)) for label, (seg, _c, _b) in self.fixed.items()},
                          whole_pixels={o.name: world.whole[o.segment] for o in world.objects
                                        if world.whole.get(o.segment)})

    def record(self, source_kind: str, index: int, views: list[ViewRecord], objects: list[ObjectState],
               gripper: dict[str, Any] | None, timeline: list[dict[str, Any]] | None = None) -> SourceRecord:
        base = self.world.data.xpos[min(self.fixed["arm"][2])] if "arm" in self.fixed else None
        return SourceRecord(source_kind=source_kind, simulator="mujoco", scene_index=index, views=views,
                            arrays=self.ctx.put_arrays(self.arrays), objects=objects,
                            bodies={label: cat for label, (_s, cat, _b) in self.fixed.items()}, naming="identity",
                            robot_base=None if base is None else [round(float(v), 6) for v in base],
                            gripper=gripper, timeline=timeline)


def record_world(ctx: SkillContext, world: Any, cameras: list[CameraSpec], renderer: Callable[[int, int], Any],
                 source_kind: str, index: int, command: float | None, where: str) -> SourceRecord:
    """A world's objects, statics and gripper, rendered from every camera, as a source record."""
    rec = WorldRecorder(ctx, world, renderer)
    objects = rec.objects(where)
    views = [rec.view(cam, cam.index, cam.role, cam.time) for cam in cameras]
    return rec.record(source_kind, index, views, objects, world.gripper(command))
