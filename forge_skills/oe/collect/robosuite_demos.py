"""S2: moments of the real robosuite demonstrations, replayed and rendered from a camera rig."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import Field

from forge.sources import own_section
from forge.artifact_types import ArtifactContent
from forge_skills.oe.types import Blueprint, CameraSpec, SourceRecord
from forge.contracts import CheckContext, Outcome, check
from forge.skills import SkillContext, skill
from forge_skills.oe.collect.layout import SceneParams, scene_seed
from forge_skills.oe.collect.robosuite_scenes import camera_rig, record_world

# Where each demonstration's objects stand in its recorded model (the 1.0 Door is set back).
DEMO_WORKSPACE = {"PickPlace": (0.1, -0.25, 0.86), "NutAssembly": (0.05, 0.0, 0.86), "Stack": (0.0, 0.0, 0.84),
                  "Lift": (0.0, 0.0, 0.84), "Door": (-0.15, -0.3, 1.0)}


class DemoFrame(ArtifactContent):
    """One moment of a real demonstration and the cameras it is seen from."""

    source_kind: str
    scene_index: int
    root: str = Field(description="folder of the demonstrations (robosuite's <task>/<robot>/demo.hdf5 layout)")
    file: str = Field(description="the demonstration's HDF5 file, relative to the root")
    demo: str = Field(description="the demonstration's key in the file (demo_N)")
    env: str = Field(description="robosuite environment the demonstration was recorded in")
    state: int = Field(ge=0, description="index of the recorded state")
    states: int = Field(ge=1, description="how many states the demonstration has")
    cameras: list[CameraSpec]

    def summary(self) -> str:
        return f"{self.env} {self.demo} state {self.state}/{self.states}, {len(self.cameras)} cameras"


@check("demo_frame_well_formed")
def demo_frame_well_formed(frame: DemoFrame, ctx: CheckContext) -> Outcome:
    """The state lies inside the demonstration, two or more distinct cameras look down."""
    problems = []
    if frame.state >= frame.states:
        problems.append(f"state {frame.state} is past the demonstration's {frame.states} states")
    if len({c.index for c in frame.cameras}) < 2:
        problems.append("fewer than two distinct camera views")
    problems += [f"camera {c.index} does not look down (elevation {c.pitch})" for c in frame.cameras if c.pitch >= 0]
    return Outcome(not problems, "; ".join(problems))


@skill("collect.plan_demo_frames", stage="S2", params=SceneParams)
def plan_demo_frames(ctx: SkillContext, blueprint: Blueprint) -> list[DemoFrame]:
    """One moment: which demonstration, which state, and a rig of free cameras around its
    workspace. Units take the demonstrations in turn and spread over each."""
    from forge_resources.robosuite.demo_frames import unit_moment

    index = ctx.params.scene_index
    src = own_section(blueprint.sources, "robosuite_demos", ctx.params.source_index)
    demo, state = unit_moment(src["root"], index)
    rng = np.random.default_rng(scene_seed(blueprint.seed, blueprint.name, index, f"demo:{demo.name}:{state}"))
    cameras = camera_rig(rng, demo.env_name, src["views"], src["image"]["width"], src["image"]["height"],
                         DEMO_WORKSPACE[demo.env_name])
    return [DemoFrame(source_kind=src["kind"], scene_index=index, root=src["root"],
                      file=str(demo.path.relative_to(src["root"])), demo=demo.key, env=demo.env_name, state=state,
                      states=len(demo), cameras=cameras)]


@skill("collect.render_demo_frame", stage="S2", requires=("mujoco", "h5py"), parallel=True)
def render_demo_frame(ctx: SkillContext, frame: DemoFrame) -> list[SourceRecord]:
    """Set the demonstration's recorded model to the moment's state and render it from every
    camera; the gripper's state reads the operator's command at that moment."""
    from forge_resources.robosuite.demo_frames import recorded

    scene, world = recorded(str(Path(frame.root) / frame.file), frame.demo)
    scene.set(frame.state)
    command = float(scene.demo.actions[frame.state][-1]) if scene.demo.actions.size else None
    return [record_world(ctx, world, frame.cameras, lambda w, h: scene.renderer(w, h), frame.source_kind,
                         frame.scene_index, command, f"{frame.env} {frame.demo} state {frame.state}")]


class DemoClip(ArtifactContent):
    """A few moments of a real demonstration in time order, seen from one camera."""

    source_kind: str
    scene_index: int
    root: str = Field(description="folder of the demonstrations")
    file: str = Field(description="the demonstration's HDF5 file, relative to the root")
    demo: str
    env: str
    states: list[int] = Field(description="indices of the recorded states, in time order")
    camera: CameraSpec

    def summary(self) -> str:
        return f"{self.env} {self.demo} states {self.states}"


@check("demo_clip_well_formed")
def demo_clip_well_formed(clip: DemoClip, ctx: CheckContext) -> Outcome:
    """Two or more distinct moments in increasing order, and a camera that looks down."""
    problems = []
    if len(clip.states) < 2 or any(b <= a for a, b in zip(clip.states, clip.states[1:])):
        problems.append(f"states {clip.states} are not two or more moments in time order")
    if clip.camera.pitch >= 0:
        problems.append(f"the camera does not look down (elevation {clip.camera.pitch})")
    return Outcome(not problems, "; ".join(problems))


@skill("collect.plan_demo_clips", stage="S2", params=SceneParams)
def plan_demo_clips(ctx: SkillContext, blueprint: Blueprint) -> list[DemoClip]:
    """One clip: which demonstration, which moments, and one seeded camera of the rig."""
    from forge_resources.robosuite.demo_frames import unit_clip

    index = ctx.params.scene_index
    src = own_section(blueprint.sources, "robosuite_demo_clips", ctx.params.source_index)
    demo, states = unit_clip(src["root"], index, src["frames"], src["stride"])
    rng = np.random.default_rng(scene_seed(blueprint.seed, blueprint.name, index, f"clip:{demo.name}:{states[0]}"))
    cam = camera_rig(rng, demo.env_name, 2, src["image"]["width"], src["image"]["height"],
                     DEMO_WORKSPACE[demo.env_name])[int(rng.integers(0, 2))]
    return [DemoClip(source_kind=src["kind"], scene_index=index, root=src["root"],
                     file=str(demo.path.relative_to(src["root"])), demo=demo.key, env=demo.env_name,
                     states=list(states), camera=cam.model_copy(update={"index": 0}))]


@skill("collect.render_demo_clip", stage="S2", requires=("mujoco", "h5py"), parallel=True)
def render_demo_clip(ctx: SkillContext, clip: DemoClip) -> list[SourceRecord]:
    """Replay the clip's moments and render each from the clip's camera; objects are recorded at
    the last moment, and every moment's gripper and object heights go into the timeline."""
    from forge_resources.robosuite.demo_frames import recorded
    from forge_skills.oe.collect.robosuite_scenes import WorldRecorder

    scene, world = recorded(str(Path(clip.root) / clip.file), clip.demo)
    rec = WorldRecorder(ctx, world, lambda w, h: scene.renderer(w, h))
    views, timeline = [], []
    for k, state in enumerate(clip.states):
        scene.set(state)
        command = float(scene.demo.actions[state][-1]) if scene.demo.actions.size else None
        views.append(rec.view(clip.camera, k, "frame", round(float(scene.data.time - scene.demo.states[0][0]), 4)))
        timeline.append({"state": state, "gripper": world.gripper(command),
                         "heights": {o.name: round(float(scene.data.xpos[min(o.bodies)][2]), 5) for o in world.objects}})
    objects = rec.objects(f"{clip.env} {clip.demo} state {clip.states[-1]}")
    return [rec.record(clip.source_kind, clip.scene_index, views, objects, timeline[-1]["gripper"], timeline)]
