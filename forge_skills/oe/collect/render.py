"""S2: collect calibrated views of a planned pybullet scene (tabletop, room or ground)."""

from __future__ import annotations

import numpy as np

from forge_skills.oe.types import ObjectState, SceneSpec, SourceRecord, ViewRecord
from forge.skills import SkillContext, skill
from forge_resources.pybullet_sim import FLOOR, SceneSimulator, forward_vector, intrinsics


@skill("collect.render_scene", stage="S2", requires=("pybullet",), parallel=True)
def render_scene(ctx: SkillContext, scene: SceneSpec) -> list[SourceRecord]:
    """Load the scene, settle it, read object states and render RGB, depth and segmentation per camera.
    The process keeps its simulator client between scenes; every scene starts from a reset."""
    views, arrays = [], {}
    sim = ctx.held("pybullet.scene_simulator", SceneSimulator)
    sim.reset_to_scene(scene)
    objects = [ObjectState(**o) for o in sim.read_state(scene)]
    statics = {uid: name for uid, name in sim.statics.items() if name != FLOOR}
    names = {uid: name for name, uid in sim.bodies.items()}
    for cam in scene.cameras:
        rgb, depth, seg = sim.render_view(cam)
        whole = sim.whole_projection_pixels(cam, seg, depth)
        view, _proj, cam_pos = sim.camera_matrices(cam)
        arrays[f"depth_{cam.index}"] = depth
        arrays[f"seg_{cam.index}"] = seg
        ids, counts = np.unique(seg, return_counts=True)
        seen = dict(zip(ids.tolist(), counts.tolist()))
        views.append(ViewRecord(index=cam.index, rgb=ctx.put_png(rgb), width=cam.width, height=cam.height,
                                intrinsics=intrinsics(cam), view_matrix=[round(v, 8) for v in view],
                                camera_position=[round(v, 6) for v in cam_pos], near=cam.near, far=cam.far,
                                role=cam.role, time=cam.time, forward=forward_vector(view),
                                body_pixels={name: int(seen.get(uid, 0)) for uid, name in statics.items()},
                                whole_pixels={names[uid]: n for uid, (n, _) in sorted(whole.items())},
                                outside_pixels={names[uid]: n for uid, (_, n) in sorted(whole.items()) if n}))
    return [SourceRecord(source_kind=scene.source_kind, simulator="pybullet", scene_index=scene.scene_index,
                         views=views, arrays=ctx.put_arrays(arrays), objects=objects,
                         bodies={FLOOR: FLOOR, **{b.name: b.category for b in scene.bodies}})]
