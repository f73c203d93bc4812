"""Seeded camera trajectories of mobile embodiments: ordered frames with poses and times."""

from __future__ import annotations

import math
from dataclasses import dataclass

from forge_skills.oe.types import CameraSpec


@dataclass(frozen=True)
class Pose2D:
    x: float
    y: float
    heading: float  # radians, counter-clockwise from +x


def drive(start: Pose2D, steps: int, step_m: float, turn_per_step: float) -> list[Pose2D]:
    """Poses along a path of constant turn rate (a straight line when the rate is 0)."""
    poses = [start]
    for _ in range(steps - 1):
        p = poses[-1]
        h = p.heading + turn_per_step
        poses.append(Pose2D(p.x + step_m * math.cos(h), p.y + step_m * math.sin(h), h))
    return poses


def forward_camera(index: int, pose: Pose2D, mount: dict, width: int, height: int, time: float,
                   far: float, role: str = "frame") -> CameraSpec:
    """The embodiment's own forward camera at its mount height and pitch."""
    pitch = math.radians(mount["pitch"])
    eye = [pose.x + mount["camera_forward"] * math.cos(pose.heading),
           pose.y + mount["camera_forward"] * math.sin(pose.heading), mount["camera_height"]]
    look = [math.cos(pose.heading) * math.cos(pitch), math.sin(pose.heading) * math.cos(pitch), math.sin(pitch)]
    target = [e + d for e, d in zip(eye, look)]
    return CameraSpec(index=index, target=_r(target), eye=_r(eye), up=[0.0, 0.0, 1.0], fov=mount["fov"],
                      width=width, height=height, near=0.05, far=far, role=role, time=round(time, 3))


def nadir_camera(index: int, x: float, y: float, altitude: float, heading: float, fov: float, width: int,
                 height: int, time: float | None, far: float, role: str) -> CameraSpec:
    """A camera looking straight down; the image's up direction is the flight heading."""
    return CameraSpec(index=index, target=_r([x, y, 0.0]), eye=_r([x, y, altitude]),
                      up=_r([math.cos(heading), math.sin(heading), 0.0]), fov=fov, width=width, height=height,
                      near=0.1, far=far, role=role, time=None if time is None else round(time, 3))


def _r(v: list[float]) -> list[float]:
    return [round(float(x), 4) for x in v]
