"""What a MuJoCo state of a robosuite model shows: its movable objects and static bodies, each
object's pose, box, support and contacts, the gripper's opening, and renders from calibrated
free cameras (RGB, metric depth, per-body segmentation) with visual aids hidden.

Generated scenes (a live robosuite environment) and replayed demonstrations (a recorded model
set to a recorded state) are both a :class:`World`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

HIDDEN_GROUP = 5  # geoms moved here are not drawn (visual aids)
OBJECT_IDS = 100  # segmentation value of the first object; statics count from 1
# top-level bodies that are part of the scene's furniture or robot: name prefix -> category
STATIC_PREFIXES = (("robot0_", "robot"), ("mount0", "robot"), ("table", "table"), ("bin", "bin"), ("peg", "peg"))
GRIPPER_PREFIX = "gripper0"  # the gripper's bodies, inside the robot's tree, are a static of their own
OPEN_M, CLOSED_M = 0.07, 0.056  # finger opening (metres) read as open / closed (Panda: 0.08 fully open)
FINGER_REACH_M = 0.02  # how far below the fingers' body centres their pads reach


@dataclass
class RigCamera:
    """A free camera: where it looks, from how far, azimuth and elevation (degrees, MuJoCo's)."""

    lookat: list[float]
    distance: float
    azimuth: float
    elevation: float
    width: int
    height: int

    def eye(self) -> np.ndarray:
        az, el = math.radians(self.azimuth), math.radians(self.elevation)
        forward = np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
        return np.asarray(self.lookat, dtype=float) - self.distance * forward


def view_matrix(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """World-to-camera (OpenGL: the camera looks along -z, y up), as a 4x4 row-major array; a
    free camera keeps the world's z up."""
    f = target - eye
    f /= np.linalg.norm(f)
    s = np.cross(f, [0.0, 0.0, 1.0])
    s /= np.linalg.norm(s)
    u = np.cross(s, f)
    m = np.eye(4)
    m[0, :3], m[1, :3], m[2, :3] = s, u, -f
    m[:3, 3] = -m[:3, :3] @ eye
    return m



@dataclass
class SceneObject:
    name: str
    identity: str
    segment: int
    bodies: set[int]
    geoms: set[int]
    unnameable: str | None = None  # why no name singles it out (a mesh stretched out of its shape)


def root_of(model: Any) -> np.ndarray:
    """Each body's top-level ancestor (a child of the world body)."""
    roots = np.arange(model.nbody)
    for b in range(1, model.nbody):  # MuJoCo numbers bodies after their parents
        p = model.body_parentid[b]
        roots[b] = b if p == 0 else roots[p]
    return roots


def statics(model: Any) -> dict[str, tuple[int, str, set[int]]]:
    """Furniture and robot: name -> (segmentation value, category, its bodies). The robot's
    links and mount are one body named "arm"; its gripper is another, "gripper"."""
    import mujoco

    roots = root_of(model)
    out: dict[str, tuple[int, str, set[int]]] = {}
    for b in range(1, model.nbody):
        if roots[b] != b:
            continue
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or ""
        category = next((c for p, c in STATIC_PREFIXES if name.startswith(p)), None)
        if category is None:
            continue
        label = "arm" if category == "robot" else name.replace("bin", "bin ").replace("peg", "peg ").strip()
        seg, _, bodies = out.get(label, (len(out) + 1, category, set()))
        out[label] = (seg, category, bodies | {c for c in range(model.nbody) if roots[c] == b})
    gripper = {b for b in range(model.nbody)
               if (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or "").startswith(GRIPPER_PREFIX)}
    if gripper and "arm" in out:
        seg, cat, bodies = out["arm"]
        out["arm"] = (seg, cat, bodies - gripper)
        out["gripper"] = (len(out) + 1, "gripper", gripper)
    return out


@dataclass
class World:
    """A model at one state, with the objects questions may name."""

    model: Any
    data: Any
    objects: list[SceneObject]
    # segment -> pixels of the object's whole projection in the last render (see _whole_projections)
    whole: dict[int, int] = field(default_factory=dict, init=False, repr=False)

    def statics(self) -> dict[str, tuple[int, str, set[int]]]:
        """Furniture and robot of the scene: label -> (segmentation value, category, bodies)."""
        return statics(self.model)

    def object_state(self, obj: SceneObject, support_names: dict[int, str]) -> dict[str, Any]:
        """Pose, world box over its visual geoms, what it rests on, tilt of its up axis."""
        model, data = self.model, self.data
        root = min(obj.bodies)
        corners = []
        visual = [g for g in obj.geoms if model.geom_group[g] != 0] or list(obj.geoms)
        signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
        for g in visual:
            c, h = model.geom_aabb[g][:3], model.geom_aabb[g][3:]
            local = c + signs * h
            corners.append(data.geom_xpos[g] + local @ data.geom_xmat[g].reshape(3, 3).T)
        pts = np.concatenate(corners)
        w, x, y, z = data.xquat[root]
        up = data.xmat[root].reshape(3, 3)[:, 2]
        return {"position": [round(float(v), 6) for v in data.xpos[root]],
                "orientation": [round(float(v), 6) for v in (x, y, z, w)],
                "aabb_min": [round(float(v), 6) for v in pts.min(0)], "aabb_max": [round(float(v), 6) for v in pts.max(0)],
                "support": self.support(obj, support_names),
                "touching": self.touching(obj, support_names),
                "tilt_deg": round(math.degrees(math.acos(min(1.0, abs(float(up[2]))))), 3),
                "opening_deg": self.hinge_deg(obj)}

    def hinge_deg(self, obj: SceneObject) -> float | None:
        """The angle of the object's hinge (a door's), in degrees; None without one."""
        import mujoco

        hinges = [j for j in range(self.model.njnt) if self.model.jnt_bodyid[j] in obj.bodies
                  and self.model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE
                  and "hinge" in (mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_JOINT, j) or "")]
        if not hinges:
            return None
        return round(abs(math.degrees(float(self.data.qpos[self.model.jnt_qposadr[hinges[0]]]))), 3)

    def support(self, obj: SceneObject, names: dict[int, str]) -> str | None:
        """What the object rests on: the one other body (``names``: body id -> a static's or
        object's name) its geoms touch below its centre; "several" when more than one, None
        when nothing."""
        model, data = self.model, self.data
        below: set[str] = set()
        centre_z = data.xpos[min(obj.bodies)][2]
        for c in data.contact[: data.ncon]:
            g1, g2 = int(c.geom1), int(c.geom2)
            if (g1 in obj.geoms) == (g2 in obj.geoms):
                continue
            name = names.get(int(model.geom_bodyid[g2 if g1 in obj.geoms else g1]))
            if name is not None and c.pos[2] < centre_z:
                below.add(name)
        if not below:
            return None
        return below.pop() if len(below) == 1 else "several"

    def touching(self, obj: SceneObject, names: dict[int, str]) -> list[str]:
        """The other movable objects any of its geoms is in contact with."""
        model, data = self.model, self.data
        movable = {o.name for o in self.objects} - {obj.name}
        out: set[str] = set()
        for c in data.contact[: data.ncon]:
            g1, g2 = int(c.geom1), int(c.geom2)
            if (g1 in obj.geoms) == (g2 in obj.geoms):
                continue
            name = names.get(int(model.geom_bodyid[g2 if g1 in obj.geoms else g1]))
            if name in movable:
                out.add(name)
        return sorted(out)

    def render(self, r: Any, cam: RigCamera, seg_of_body: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """RGB (uint8), metric depth along the optical axis (float32, metres) and a per-body
        segmentation (int32: 0 background, statics from 1, objects from 100)."""
        import mujoco

        opt = mujoco.MjvOption()
        opt.geomgroup[0] = 0  # collision geoms
        opt.geomgroup[HIDDEN_GROUP] = 0
        opt.sitegroup[:] = 0
        free = mujoco.MjvCamera()
        free.type = mujoco.mjtCamera.mjCAMERA_FREE
        free.lookat[:] = cam.lookat
        free.distance, free.azimuth, free.elevation = cam.distance, cam.azimuth, cam.elevation
        r.update_scene(self.data, camera=free, scene_option=opt)
        rgb = r.render().copy()
        r.enable_depth_rendering()
        r.update_scene(self.data, camera=free, scene_option=opt)
        depth = r.render().astype(np.float32)
        r.disable_depth_rendering()
        r.enable_segmentation_rendering()
        r.update_scene(self.data, camera=free, scene_option=opt)
        raw = r.render()
        seg = self._segments(raw, seg_of_body)
        self.whole = self._whole_projections(r, seg, depth, seg_of_body)
        r.disable_segmentation_rendering()
        return rgb, depth, seg

    def _segments(self, raw: np.ndarray, seg_of_body: np.ndarray) -> np.ndarray:
        import mujoco

        ids, types = raw[..., 0], raw[..., 1]
        geom = (types == int(mujoco.mjtObj.mjOBJ_GEOM)) & (ids >= 0)
        seg = np.zeros(ids.shape, dtype=np.int32)
        seg[geom] = seg_of_body[self.model.geom_bodyid[ids[geom]]]
        return seg

    def _whole_projections(self, r: Any, seg: np.ndarray, depth: np.ndarray, seg_of_body: np.ndarray
                           ) -> dict[int, int]:
        """Segment -> pixels of the object's whole projection inside the image, as if nothing stood
        in front of it (the scene just rendered in segmentation mode is still on ``r``). An object
        no nearer pixel of anything else borders keeps its visible count; the others are drawn
        again with every other geom of the scene moved out of view."""
        import mujoco

        out: dict[int, int] = {}
        scene = r.scene
        geoms = [scene.geoms[i] for i in range(scene.ngeom)]
        body_of = [int(self.model.geom_bodyid[g.objid]) if g.objtype == int(mujoco.mjtObj.mjOBJ_GEOM) and g.objid >= 0
                   else -1 for g in geoms]
        for obj in self.objects:
            mask = seg == obj.segment
            if not mask.any():
                continue
            ys, xs = np.nonzero(mask)
            y0, y1 = max(0, ys.min() - 2), min(seg.shape[0], ys.max() + 3)
            x0, x1 = max(0, xs.min() - 2), min(seg.shape[1], xs.max() + 3)
            window, near = seg[y0:y1, x0:x1], depth[y0:y1, x0:x1]
            far = float(depth[mask].max())
            if not ((window != obj.segment) & (window != 0) & (near < far)).any():
                out[obj.segment] = int(mask.sum())
                continue
            saved = [g.pos.copy() for g in geoms]
            try:
                for g, body in zip(geoms, body_of):
                    if body not in obj.bodies:
                        g.pos[:] = (1e4, 1e4, 1e4)
                alone = self._segments(r.render(), seg_of_body) == obj.segment
            finally:
                for g, pos in zip(geoms, saved):
                    g.pos[:] = pos
            out[obj.segment] = max(int(mask.sum()), int(alone.sum()))
        return out

    def clip(self) -> tuple[float, float]:
        """Near and far clipping distances of the free camera (metres)."""
        extent = float(self.model.stat.extent)
        return float(self.model.vis.map.znear) * extent, float(self.model.vis.map.zfar) * extent

    def fovy(self) -> float:
        return float(self.model.vis.global_.fovy)

    def gripper(self, command: float | None = None) -> dict[str, Any] | None:
        """The gripper's finger opening (metres), its state and what it holds.

        "open" when the fingers are apart (and not commanded to close), "closed" when commanded
        to close and the fingers have come together or stopped on an object; in between (moving)
        the state is None. It holds an object both fingers touch."""
        import mujoco

        joints = [j for j in range(self.model.njnt)
                  if "finger_joint" in (mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_JOINT, j) or "")]
        if len(joints) != 2:
            return None
        q = sorted(float(self.data.qpos[self.model.jnt_qposadr[j]]) for j in joints)
        opening = q[1] - q[0]
        sides: dict[str, set[int]] = {"left": set(), "right": set()}
        for b in range(self.model.nbody):
            name = mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_BODY, b) or ""
            if name.startswith(GRIPPER_PREFIX):
                if "leftfinger" in name or "joint1_tip" in name:
                    sides["left"].add(b)
                elif "rightfinger" in name or "joint2_tip" in name:
                    sides["right"].add(b)
        touched: dict[str, set[str]] = {"left": set(), "right": set()}
        owner = {g: o.name for o in self.objects for g in o.geoms}
        for c in self.data.contact[: self.data.ncon]:
            g1, g2 = int(c.geom1), int(c.geom2)
            for g, other in ((g1, g2), (g2, g1)):
                body = int(self.model.geom_bodyid[g])
                for side, bodies in sides.items():
                    if body in bodies and other in owner:
                        touched[side].add(owner[other])
        both = touched["left"] & touched["right"]
        holding = sorted(both)[0] if len(both) == 1 else None
        between = self._between_fingers(sides) if holding is None else None
        closing = command is not None and command > 0
        if opening >= OPEN_M and not closing:
            state = "open"
        elif closing and (opening <= CLOSED_M or holding is not None):
            state = "closed"
        else:
            state = None
        return {"opening_m": round(opening, 5), "state": state, "holding": holding, "between": between,
                "command": None if command is None else round(float(command), 3)}

    def _between_fingers(self, sides: dict[str, set[int]]) -> str | None:
        """The object standing in the gap between the fingers without being gripped: seen from
        outside, open fingers around it look just like a grasp. An object is in the gap when the
        bounding sphere of one of its geoms crosses the line between the two fingers' centres
        (widened by FINGER_REACH_M: the centres lie above the tips)."""
        if not sides["left"] or not sides["right"]:
            return None
        left = np.mean([self.data.xpos[b] for b in sides["left"]], axis=0)
        right = np.mean([self.data.xpos[b] for b in sides["right"]], axis=0)
        span = right - left
        length2 = float(span @ span)
        if length2 <= 0.0:
            return None
        for obj in self.objects:
            for g in obj.geoms:
                c = np.asarray(self.data.geom_xpos[g])
                t = float((c - left) @ span) / length2
                if 0.0 < t < 1.0 and np.linalg.norm(c - (left + t * span)) < self.model.geom_rbound[g] + FINGER_REACH_M:
                    return obj.name
        return None
