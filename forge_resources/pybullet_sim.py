"""pybullet scene adapter shared by the tabletop, room and ground resources: load a seeded
scene, let it settle, read object states (pose, box, support from contacts, tilt) and render
calibrated views.

Everything runs in DIRECT mode with the CPU tiny renderer, so it works on any machine.
Depth is converted from the OpenGL buffer to metric distance along the optical axis.
"""

from __future__ import annotations

import math
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

if TYPE_CHECKING:  # the scene description the OE skills hand the simulator
    from forge_skills.oe.types import CameraSpec, ObjectSpec, SceneSpec


SETTLE_STEPS = 150
TRAY_RIM = 0.15  # the outer share of a tray's width, per side, where an object sits on the rim
DROP_GAP = 0.01  # metres between an object's lowest point and its support when it is set down
FLOOR = "floor"


@lru_cache(maxsize=1)
def catalogue() -> dict[str, Any]:
    return yaml.safe_load((Path(__file__).parent / "scene_objects.yaml").read_text())


def catalogue_path() -> str:
    return str(Path(__file__).parent / "scene_objects.yaml")


def import_pybullet():
    """Import pybullet without its build banner (which would corrupt --json output)."""
    if "pybullet" not in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in saved:
            os.dup2(devnull, fd)
        try:
            import pybullet  # noqa: F401
        finally:
            _flush_c_stdio()  # the banner sits in C's stdio buffer until flushed
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            os.close(devnull)
    return sys.modules["pybullet"]


def _flush_c_stdio() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


def intrinsics(cam: CameraSpec) -> dict[str, float]:
    """Pinhole intrinsics; pybullet's fov is vertical."""
    fy = cam.height / (2.0 * math.tan(math.radians(cam.fov) / 2.0))
    return {"fx": fy, "fy": fy, "cx": cam.width / 2.0, "cy": cam.height / 2.0,
            "width": float(cam.width), "height": float(cam.height)}


class SceneSimulator:
    """One pybullet physics client holding one scene."""

    def __init__(self) -> None:
        import pybullet_data

        p = import_pybullet()
        self.p = p
        self.client = p.connect(p.DIRECT)
        p.setAdditionalSearchPath(pybullet_data.getDataPath(), physicsClientId=self.client)
        self.bodies: dict[str, int] = {}
        self.statics: dict[int, str] = {}
        self.footprints: dict[str, tuple[list[float], list[float], float]] = {}  # body name -> offset, half extents, yaw
        self._visuals: dict[tuple[int, int], tuple[float, ...]] | None = None  # (body, link) -> its colour
        self._shown: dict[tuple[int, int], bool] = {}

    def close(self) -> None:
        try:
            self.p.disconnect(physicsClientId=self.client)
        except Exception:
            pass

    def __enter__(self) -> "SceneSimulator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- operations named in the descriptors ---------------------------------------------

    def reset_to_scene(self, spec: SceneSpec) -> None:
        p, c = self.p, self.client
        p.resetSimulation(physicsClientId=c)
        self._visuals, self._shown = None, {}
        p.setGravity(0, 0, -9.81, physicsClientId=c)
        plane = p.loadURDF("plane.urdf", physicsClientId=c)
        self.statics = {plane: FLOOR}
        self.footprints = {}
        for body in spec.bodies:
            orn = p.getQuaternionFromEuler([0, 0, body.yaw])
            uid = p.loadURDF(body.urdf, body.position, useFixedBase=body.fixed, globalScaling=body.scale,
                             physicsClientId=c)
            # The footprint in the body's own frame (centre offset and half extents), read before it turns.
            lo, hi = p.getAABB(uid, physicsClientId=c)
            self.footprints[body.name] = ([(lo[i] + hi[i]) / 2 - body.position[i] for i in (0, 1)],
                                          [(hi[i] - lo[i]) / 2 for i in (0, 1)], body.yaw)
            p.resetBasePositionAndOrientation(uid, body.position, orn, physicsClientId=c)
            movable = [j for j in range(p.getNumJoints(uid, physicsClientId=c))
                       if p.getJointInfo(uid, j, physicsClientId=c)[2] in (p.JOINT_REVOLUTE, p.JOINT_PRISMATIC)]
            for j, q in zip(movable, body.joints):
                p.resetJointState(uid, j, q, physicsClientId=c)
            if body.rgba is not None:
                for link in range(-1, p.getNumJoints(uid, physicsClientId=c)):
                    p.changeVisualShape(uid, link, rgbaColor=body.rgba, physicsClientId=c)
            self.statics[uid] = body.name
        self.bodies = {}
        for obj in spec.objects:
            self.bodies[obj.name] = self._drop(obj, spec.support_height)
        for _ in range(SETTLE_STEPS):
            p.stepSimulation(physicsClientId=c)

    def _drop(self, obj: ObjectSpec, support_height: float) -> int:
        """Load the object in its resting pose and set its lowest point just above its support,
        so it settles without a fall that could tip it over."""
        p, c = self.p, self.client
        roll, pitch, _ = obj.base_rpy
        orn = p.getQuaternionFromEuler([roll, pitch, obj.yaw])
        surface = obj.z if obj.z is not None else support_height
        body = p.loadURDF(obj.urdf, [obj.xy[0], obj.xy[1], surface + 1.0], orn, globalScaling=obj.scale,
                          physicsClientId=c)
        lo, _ = p.getAABB(body, physicsClientId=c)
        pos, _ = p.getBasePositionAndOrientation(body, physicsClientId=c)
        p.resetBasePositionAndOrientation(body, [pos[0], pos[1], pos[2] - lo[2] + surface + DROP_GAP], orn,
                                          physicsClientId=c)
        # textureUniqueId=-1 drops the mesh texture, so the tint alone gives the colour.
        texture = {} if obj.texture else {"textureUniqueId": -1}
        for link in range(-1, p.getNumJoints(body, physicsClientId=c)):
            p.changeVisualShape(body, link, rgbaColor=obj.rgba, physicsClientId=c, **texture)
        return body

    def read_state(self, spec: SceneSpec) -> list[dict[str, Any]]:
        """Each object's settled state, as the fields of an ``ObjectState``."""
        p, c = self.p, self.client
        names = {uid: name for name, uid in self.bodies.items()} | self.statics
        out = []
        for obj in spec.objects:
            body = self.bodies[obj.name]
            pos, orn = p.getBasePositionAndOrientation(body, physicsClientId=c)
            lo, hi = p.getAABB(body, physicsClientId=c)
            # The angle between the up axis's line and the vertical: a block on either end stands.
            up = np.array(p.getMatrixFromQuaternion(orn)).reshape(3, 3) @ np.array(obj.up_axis, dtype=float)
            tilt = math.degrees(math.acos(min(1.0, abs(float(up[2])))))
            out.append(dict(name=obj.name, category=obj.category, color=obj.color, body=body,
                            position=[round(v, 6) for v in pos], orientation=[round(v, 6) for v in orn],
                            aabb_min=[round(v, 6) for v in lo], aabb_max=[round(v, 6) for v in hi],
                            support=self._inside_tray(self._support(body, (lo[2] + hi[2]) / 2, names), lo, hi, spec),
                            tilt_deg=round(tilt, 3), up_axis=list(obj.up_axis)))
        return out

    def _inside_tray(self, support: str | None, lo, hi, spec: SceneSpec) -> str | None:
        """A tray supports an object only when it lies within the tray: one propped on the rim,
        its centre over the edge, is neither plainly in the tray nor out of it ("unclear")."""
        body = next((b for b in spec.bodies if b.name == support), None)
        if body is None or body.category != "tray":
            return support
        offset, half, yaw = self.footprints[support]
        # The object's centre in the tray's frame.
        dx, dy = (lo[0] + hi[0]) / 2 - body.position[0], (lo[1] + hi[1]) / 2 - body.position[1]
        local = [math.cos(yaw) * dx + math.sin(yaw) * dy - offset[0], -math.sin(yaw) * dx + math.cos(yaw) * dy - offset[1]]
        inside = all(abs(v) <= h * (1 - 2 * TRAY_RIM) for v, h in zip(local, half))
        return support if inside else "unclear"

    def _support(self, body: int, mid_z: float, names: dict[int, str]) -> str | None:
        """The body this one rests on: the one its lower contacts push against."""
        below: dict[int, int] = {}
        for contact in self.p.getContactPoints(bodyA=body, physicsClientId=self.client):
            other, on_a = contact[2], contact[5]
            if other != body and on_a[2] < mid_z:
                below[other] = below.get(other, 0) + 1
        if not below:
            return None
        if len(below) > 1:
            return "several"
        return names.get(next(iter(below)), "unknown")

    def camera_matrices(self, cam: CameraSpec) -> tuple[list[float], list[float], list[float]]:
        p = self.p
        if cam.eye is not None:
            view = p.computeViewMatrix(cam.eye, cam.target, cam.up or [0, 0, 1])
        else:
            view = p.computeViewMatrixFromYawPitchRoll(cam.target, cam.distance, cam.yaw, cam.pitch, 0, 2)
        proj = p.computeProjectionMatrixFOV(cam.fov, cam.width / cam.height, cam.near, cam.far)
        # Camera position: invert the view matrix (column-major, world->camera).
        v = np.array(view, dtype=float).reshape(4, 4, order="F")
        pos = (-v[:3, :3].T @ v[:3, 3]).tolist()
        return list(view), list(proj), pos

    def render_view(self, cam: CameraSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """RGB (uint8 HxWx3), metric depth (float32 HxW), segmentation (int32 HxW body ids)."""
        p = self.p
        view, proj, _ = self.camera_matrices(cam)
        _, _, rgba, zbuf, seg = p.getCameraImage(cam.width, cam.height, view, proj,
                                                 renderer=p.ER_TINY_RENDERER, physicsClientId=self.client)
        rgb = np.reshape(np.asarray(rgba, dtype=np.uint8), (cam.height, cam.width, 4))[:, :, :3].copy()
        z = np.reshape(np.asarray(zbuf, dtype=np.float64), (cam.height, cam.width))
        depth = (cam.far * cam.near / (cam.far - (cam.far - cam.near) * z)).astype(np.float32)
        seg = np.reshape(np.asarray(seg, dtype=np.int32), (cam.height, cam.width))
        # The low bits hold the body id when link indices are encoded; we render without them.
        return rgb, depth, seg


    def whole_projection_pixels(self, cam: CameraSpec, seg: np.ndarray, depth: np.ndarray
                                ) -> dict[int, tuple[int, int]]:
        """Body id -> (pixels of its whole projection inside the image, pixels of it outside the
        image), as if nothing stood in front of it, for every object seen in this view (``seg``
        and ``depth`` are the view's own render). An object nothing nearer overlaps and the image
        border does not cut keeps its visible count; the others are rendered alone, other bodies
        hidden, through a frustum cropped to the object's projected box, which may reach past the
        image (the crop's pixels sample exactly the full image's)."""
        view, proj, _ = self.camera_matrices(cam)
        vm = np.array(view, dtype=float).reshape(4, 4, order="F")
        pm = np.array(proj, dtype=float).reshape(4, 4, order="F")
        seen = {int(u): int(c) for u, c in zip(*np.unique(seg, return_counts=True))}
        out: dict[int, tuple[int, int]] = {}
        alone: list[tuple[int, tuple[int, int, int, int]]] = []
        for uid in self.bodies.values():
            if seen.get(uid, 0) == 0:
                continue
            rect, far = self._projected_box(uid, vm, pm, cam.width, cam.height)
            u0, v0, u1, v1 = (max(0, rect[0]), max(0, rect[1]), min(cam.width, rect[2]), min(cam.height, rect[3]))
            window_seg, window_depth = seg[v0:v1, u0:u1], depth[v0:v1, u0:u1]
            covers = (window_seg != uid) & (window_seg != self._floor_id()) & (window_depth < far)
            if self._support_id(uid) is not None:
                covers &= window_seg != self._support_id(uid)
            cut = rect != (u0, v0, u1, v1)
            if not covers.any() and not cut:
                out[uid] = (seen[uid], 0)
            else:
                alone.append((uid, rect))
        if alone:
            self._show_only(None)
            try:
                for uid, rect in alone:
                    self._show_only(uid)
                    inside, outside = self._render_window(uid, rect, vm, pm, cam)
                    out[uid] = (max(seen[uid], inside), outside)
            finally:
                self._show_only(-1)
        return out

    def _show_only(self, uid: int | None) -> None:
        """Hide every body but ``uid`` (None: hide all; -1: show all again) by its colour's alpha,
        which the tiny renderer skips: far cheaper than rendering bodies moved out of view."""
        p, c = self.p, self.client
        if self._visuals is None:
            self._visuals = {(b, d[1]): tuple(d[7]) for b in list(self.bodies.values()) + list(self.statics)
                             for d in p.getVisualShapeData(b, physicsClientId=c)}
        for (b, link), rgba in self._visuals.items():
            shown = uid == -1 or b == uid
            if shown != self._shown.get((b, link), True):
                p.changeVisualShape(b, link, rgbaColor=list(rgba[:3]) + [rgba[3] if shown else 0.0],
                                    physicsClientId=c)
                self._shown[(b, link)] = shown

    def _floor_id(self) -> int:
        return next((u for u, name in self.statics.items() if name == FLOOR), -1)

    def _support_id(self, uid: int) -> int | None:
        """The static body (a table top) an object stands on: its surface cannot hide the object."""
        below = {c[2] for c in self.p.getContactPoints(bodyA=uid, physicsClientId=self.client)}
        statics = [b for b in below if b in self.statics]
        return statics[0] if len(statics) == 1 and len(below) == 1 else None

    def _projected_box(self, uid: int, vm: np.ndarray, pm: np.ndarray, width: int, height: int
                       ) -> tuple[tuple[int, int, int, int], float]:
        """The object's projected 3D box in pixels, reaching past the image where the object does
        (at most one image size beyond each side; the image itself when a corner is behind the
        camera), and its farthest depth along the optical axis."""
        lo, hi = self.p.getAABB(uid, physicsClientId=self.client)
        corners = np.array([[x, y, z, 1.0] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
        cam = corners @ vm.T
        far = float((-cam[:, 2]).max())
        clip = cam @ pm.T
        if (clip[:, 3] <= 1e-6).any():
            return (0, 0, width, height), far
        ndc = clip[:, :2] / clip[:, 3:4]
        us, vs = (ndc[:, 0] + 1) * 0.5 * width, (1 - ndc[:, 1]) * 0.5 * height
        u0, u1 = max(-width, int(math.floor(us.min())) - 1), min(2 * width, int(math.ceil(us.max())) + 1)
        v0, v1 = max(-height, int(math.floor(vs.min())) - 1), min(2 * height, int(math.ceil(vs.max())) + 1)
        return (u0, v0, max(u1, u0 + 1), max(v1, v0 + 1)), far

    def _render_window(self, uid: int, rect: tuple[int, int, int, int], vm: np.ndarray, pm: np.ndarray,
                       cam: CameraSpec) -> tuple[int, int]:
        """(pixels inside the image, pixels outside it) of the object in a render of the window
        ``rect`` only: the projection is cropped so the window's pixels sample the full image's."""
        u0, v0, u1, v1 = rect
        w, h = cam.width, cam.height
        x0, x1 = 2 * u0 / w - 1, 2 * u1 / w - 1
        y_top, y_bottom = 1 - 2 * v0 / h, 1 - 2 * v1 / h
        crop = np.eye(4)
        crop[0, 0], crop[0, 3] = 2 / (x1 - x0), -(x1 + x0) / (x1 - x0)
        crop[1, 1], crop[1, 3] = 2 / (y_top - y_bottom), -(y_top + y_bottom) / (y_top - y_bottom)
        _, _, _, _, seg = self.p.getCameraImage(u1 - u0, v1 - v0, vm.flatten(order="F").tolist(),
                                                (crop @ pm).flatten(order="F").tolist(),
                                                renderer=self.p.ER_TINY_RENDERER, physicsClientId=self.client)
        mask = np.reshape(np.asarray(seg, dtype=np.int32), (v1 - v0, u1 - u0)) == uid
        inside = mask[max(0, -v0): h - v0, max(0, -u0): w - u0]
        total = int(mask.sum())
        return int(inside.sum()), total - int(inside.sum())


def forward_vector(view_matrix: list[float]) -> list[float]:
    """The camera's viewing direction in world coordinates (OpenGL cameras look along -z)."""
    v = np.array(view_matrix, dtype=float).reshape(4, 4, order="F")
    return [round(float(x), 6) for x in -v[2, :3]]
