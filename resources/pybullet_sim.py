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
from typing import Any

import numpy as np
import yaml

from forge.artifact_types import CameraSpec, ObjectSpec, ObjectState, SceneSpec

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

    def read_state(self, spec: SceneSpec) -> list[ObjectState]:
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
            out.append(ObjectState(name=obj.name, category=obj.category, color=obj.color, body=body,
                                   position=[round(v, 6) for v in pos], orientation=[round(v, 6) for v in orn],
                                   aabb_min=[round(v, 6) for v in lo], aabb_max=[round(v, 6) for v in hi],
                                   support=self._inside_tray(self._support(body, (lo[2] + hi[2]) / 2, names),
                                                             lo, hi, spec),
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


def forward_vector(view_matrix: list[float]) -> list[float]:
    """The camera's viewing direction in world coordinates (OpenGL cameras look along -z)."""
    v = np.array(view_matrix, dtype=float).reshape(4, 4, order="F")
    return [round(float(x), 6) for x in -v[2, :3]]
