"""Physical outcomes of manipulation tasks, checked on simulator state with tolerances.

A goal is data (a kind and the names it refers to); :func:`holds` evaluates it on a
:class:`~forge_resources.robosuite.demos.RecordedScene` (or anything with the same queries).
Thresholds follow robosuite's task definitions: lifted means 4 cm above the table top, a door is
open past 0.3 rad, a nut is on its peg within 3 cm horizontally and below 5 cm over the table.
"""

from __future__ import annotations

from typing import Any

import numpy as np

LIFT_MARGIN = 0.04
DOOR_OPEN_RAD = 0.3
PEG_XY = 0.03
PEG_Z = 0.05
# finger bodies as the recorded demos and as the installed robosuite name them
FINGERS = ("gripper0_leftfinger", "gripper0_rightfinger", "gripper0_right_leftfinger", "gripper0_right_rightfinger")


def holds(goal: dict[str, Any], scene: Any) -> bool:
    kind = goal["kind"]
    if kind == "lifted":
        return _lifted(scene, goal["object"])
    if kind == "stacked":  # top rests on bottom, lifted off the table, not held
        top, bottom = goal["top"], goal["bottom"]
        return _lifted(scene, top) and scene.bodies_touching(top, bottom) and not held(scene, top)
    if kind == "door_open":
        return scene.joint_position(goal["joint"]) > goal.get("angle", DOOR_OPEN_RAD)
    if kind == "on_peg":
        nut, peg = scene.body_position(goal["object"]), scene.body_position(goal["peg"])
        return bool(np.all(np.abs(nut[:2] - peg[:2]) < PEG_XY) and nut[2] < _table(scene) + PEG_Z)
    if kind == "in_bin_quadrant":  # robosuite's PickPlace: each object in its own quarter of the bin
        return _in_quadrant(scene, goal["object"], goal["bin"], int(goal["quadrant"]))
    if kind == "in_bin":  # anywhere in the bin, let go of
        return in_bin(scene, goal["object"], goal["bin"]) and not held(scene, goal["object"])
    if kind == "all":
        return all(holds(g, scene) for g in goal["goals"])
    raise ValueError(f"unknown goal kind {kind!r}")


def _table(scene: Any) -> float:
    return float(scene.site_position("table_top")[2])


def _lifted(scene: Any, body: str) -> bool:
    return float(scene.body_position(body)[2]) > _table(scene) + LIFT_MARGIN


def _in_quadrant(scene: Any, body: str, bin_body: str, quadrant: int) -> bool:
    """Quadrants 0-3 as robosuite numbers them: 0 and 2 on the bin's -x half, 0 and 1 on its -y
    half; the object inside the bin up to 10 cm above its floor."""
    pos, centre = scene.body_position(body), scene.body_position(bin_body)
    half = scene.body_half_extent(bin_body)
    x_low = centre[0] - (half[0] if quadrant in (0, 2) else 0.0)
    y_low = centre[1] - (half[1] if quadrant < 2 else 0.0)
    return bool(x_low < pos[0] < x_low + half[0] and y_low < pos[1] < y_low + half[1]
                and centre[2] < pos[2] < centre[2] + 0.1)


def held(scene: Any, body: str) -> bool:
    """Both fingers on it, as robosuite's grasp check has it."""
    fingers = _fingers(scene)
    return bool(fingers) and all(scene.bodies_touching(body, f) for f in fingers)


def in_bin(scene: Any, body: str, bin_body: str) -> bool:
    """Within the bin's floor (x, y) and up to 10 cm above it."""
    pos, centre = scene.body_position(body), scene.body_position(bin_body)
    half = scene.body_half_extent(bin_body)
    return bool(np.all(np.abs(pos[:2] - centre[:2]) < half) and centre[2] < pos[2] < centre[2] + 0.1)


def _fingers(scene: Any) -> list[str]:
    bodies = set(scene.names["bodies"])
    return [f for f in FINGERS if f in bodies]


# The goal each robosuite task's demonstrations pursue, in the recorded models' names.
DEMO_GOALS: dict[str, dict[str, Any]] = {
    "Lift": {"kind": "lifted", "object": "cube"},
    "Stack": {"kind": "stacked", "top": "cubeA", "bottom": "cubeB"},
    "Door": {"kind": "door_open", "joint": "door_hinge"},
    "NutAssembly": {"kind": "all", "goals": [{"kind": "on_peg", "object": "SquareNut0", "peg": "peg1"},
                                             {"kind": "on_peg", "object": "RoundNut0", "peg": "peg2"}]},
    "PickPlace": {"kind": "all", "goals": [{"kind": "in_bin_quadrant", "object": f"{name}0", "bin": "bin2",
                                            "quadrant": i} for i, name in enumerate(("Milk", "Bread", "Cereal", "Can"))]},
}
