"""S2: plan and render seeded scenes of robosuite's manipulation environments."""

from __future__ import annotations

import numpy as np

from pydantic import Field

from forge.artifact_types import ArtifactContent, Blueprint, CameraSpec, ObjectState, SourceRecord, ViewRecord
from forge.contracts import CheckContext, Outcome, check
from forge.skills import SkillContext, skill
from forge_skills.collect.layout import SceneParams, scene_seed

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
    src = next(s for s in blueprint.sources if s["kind"] == "robosuite_scenes")
    env_name = src["envs"][index % len(src["envs"])]
    seed = scene_seed(blueprint.seed, blueprint.name, index, f"robosuite:{env_name}")
    rng = np.random.default_rng(seed)
    return [RobosuiteScene(source_kind=src["kind"], scene_index=index, env=env_name, seed=seed,
                           cameras=camera_rig(rng, env_name, src["views"], src["image"]["width"],
                                              src["image"]["height"]))]


def camera_rig(rng, env_name: str, views: int, width: int, height: int) -> list[CameraSpec]:
    """Cameras spread over an arc across the table from the arm (the arm stays in the back of
    every picture), at seeded distances and elevations; yaw and pitch are MuJoCo's azimuth and
    elevation."""
    centre = np.array(WORKSPACE[env_name])
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
    from forge_resources.robosuite.scenes import RigCamera, RobosuiteScenes, SceneError, statics, view_matrix

    sims = ctx.held("robosuite.scenes", RobosuiteScenes)
    state = sims.reset(scene.env, scene.seed)
    model = state.model
    fixed = statics(model)
    seg_of_body = np.zeros(model.nbody, dtype=np.int32)
    names: dict[int, str] = {}
    for label, (seg, _cat, bodies) in fixed.items():
        seg_of_body[list(bodies)] = seg
        names.update({b: label for b in bodies})
    for obj in state.objects:
        seg_of_body[list(obj.bodies)] = obj.segment
        names.update({b: obj.name for b in obj.bodies})
    objects = []
    for obj in state.objects:
        st = state.object_state(obj, names)
        if not all(np.isfinite(v) for key in ("position", "aabb_min", "aabb_max") for v in st[key]):
            raise SceneError(f"{scene.env} seed {scene.seed}: {obj.name} has a non-finite pose after settling")
        objects.append(ObjectState(name=obj.name, category=obj.identity, color="", body=obj.segment, **st))
    fovy = state.fovy()
    views, arrays = [], {}
    for cam in scene.cameras:
        rig = RigCamera(cam.target, cam.distance, cam.yaw, cam.pitch, cam.width, cam.height)
        rgb, depth, seg = state.render(sims, rig, seg_of_body)
        eye = rig.eye()
        vm = view_matrix(eye, np.asarray(cam.target, dtype=float))
        near, far = state.clip()
        arrays[f"depth_{cam.index}"] = depth
        arrays[f"seg_{cam.index}"] = seg
        ids, counts = np.unique(seg, return_counts=True)
        seen = dict(zip(ids.tolist(), counts.tolist()))
        fy = cam.height / (2.0 * np.tan(np.radians(fovy) / 2.0))
        views.append(ViewRecord(index=cam.index, rgb=ctx.put_png(rgb), width=cam.width, height=cam.height,
                                intrinsics={"fx": fy, "fy": fy, "cx": cam.width / 2.0, "cy": cam.height / 2.0,
                                            "width": float(cam.width), "height": float(cam.height)},
                                view_matrix=[round(float(v), 8) for v in vm.flatten(order="F")],
                                camera_position=[round(float(v), 6) for v in eye], near=round(near, 6),
                                far=round(far, 6), role=cam.role,
                                forward=[round(float(v), 6) for v in -vm[2, :3]],
                                body_pixels={label: int(seen.get(seg, 0)) for label, (seg, _c, _b) in fixed.items()}))
    base = state.data.xpos[min(fixed["arm"][2])] if "arm" in fixed else None
    return [SourceRecord(source_kind=scene.source_kind, simulator="mujoco", scene_index=scene.scene_index, views=views,
                         arrays=ctx.put_arrays(arrays), objects=objects,
                         bodies={label: cat for label, (_s, cat, _b) in fixed.items()}, naming="identity",
                         robot_base=None if base is None else [round(float(v), 6) for v in base])]
