"""Projection of world points into a calibrated view's picture, shared by the answer rules and
the convention statements (a scale body's corners in view)."""

from __future__ import annotations

from typing import Any

import numpy as np

Camera = tuple[np.ndarray, dict[str, float]]


def camera_of(view: Any) -> Camera | None:
    """(4x4 view matrix, intrinsics) of a view; None when it has no camera geometry. The stored
    matrix is column-major, OpenGL style (the camera looks down -z)."""
    if view.intrinsics is None or view.view_matrix is None:
        return None
    return np.array(view.view_matrix, dtype=float).reshape(4, 4, order="F"), view.intrinsics


def project(camera: Camera, point: Any) -> tuple[float, float] | None:
    """Pixel (u, v) of a world point; None when it is behind the camera."""
    matrix, k = camera
    cam = matrix @ np.array([point[0], point[1], point[2], 1.0])
    z = -float(cam[2])
    if z <= 1e-6:
        return None
    return k["cx"] + k["fx"] * float(cam[0]) / z, k["cy"] - k["fy"] * float(cam[1]) / z
