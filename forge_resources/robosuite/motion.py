"""Closed-loop motions on robosuite's operational-space controller: the high-level actions.

Each motion steps the controller at 20 Hz with end-effector deltas proportional to the error
to its target (clipped to the controller's input range) until the grip site is within a
tolerance or a step cap is hit. Targets come from the scene: an object's grasp point, a place's
top, the held object's offset from the fingers (so a nut's hole, not its handle, goes over the
peg). The fingers turn to the object's nearest face (a quarter turn for a nut's handle).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from forge_resources.robosuite.things import COMPARTMENT_OF, Thing

GRIP_SITE = "gripper0_right_grip_site"
FINGERS = ("gripper0_right_leftfinger", "gripper0_right_rightfinger")
POS_SCALE = 0.05  # metres per unit of controller input (robosuite's OSC output limit)
YAW_SCALE = 0.5  # radians per unit of input
GAIN = 2.0
TOLERANCE = 0.008  # metres
YAW_TOLERANCE = 0.05  # radians
HOVER = 0.10  # height above a grasp point or a place's top
LIFT = 0.15
CLEARANCE = 0.015  # a placed object's bottom above the surface it is lowered onto
MAX_STEPS = 60  # control steps per motion
GRIP_STEPS = 12  # control steps to close or open the fingers
ABOVE_XY = 0.02
DESCEND_SLACK = 0.03  # how far above a grasp point the fingers may stop on what is under them
BIN_FLOOR = 0.02  # a bin's floor above its body's origin (half the floor plate)
FINGER_DEPTH = 0.03  # how far below an object's top the fingers grasp a tall one  # the gripper counts as above an object within this horizontal distance


class Motion:
    def __init__(self, env: Any, scene: Any) -> None:  # scene: the ManipulationEnv it moves in
        import mujoco

        self.env, self.scene = env, scene
        self.site = mujoco.mj_name2id(scene.model, mujoco.mjtObj.mjOBJ_SITE, GRIP_SITE)
        self.grip = -1.0
        self.steps = 0

    # -- the gripper's own state -------------------------------------------------------------------

    def _gripper_model(self) -> Any:
        robot = self.env.robots[0]
        return robot.gripper["right"] if isinstance(robot.gripper, dict) else robot.gripper

    def gripper_command(self) -> np.ndarray:
        return np.append(np.asarray(self._gripper_model().current_action, dtype=float), self.grip)

    def set_gripper_command(self, values: list[float]) -> None:
        model = self._gripper_model()
        model.current_action = np.asarray(values[:-1], dtype=float)
        self.grip = float(values[-1])

    def reset_gripper(self) -> None:
        self.grip = -1.0

    def eef(self) -> np.ndarray:
        return self.scene.data.site_xpos[self.site].copy()

    def yaw(self) -> float:
        r = self.scene.data.site_xmat[self.site].reshape(3, 3)
        return math.atan2(r[1, 0], r[0, 0])

    def closed(self) -> bool:
        return self.grip > 0

    def holding(self) -> "Thing | None":
        if not self.closed():
            return None
        for t in self.scene.things():
            if t.kind == "object" and all(self.scene.bodies_touching(t.body, f) for f in FINGERS):
                return t
        return None

    def above(self, thing: "Thing") -> bool:
        return bool(np.linalg.norm(self.eef()[:2] - self._grasp_point(thing)[:2]) < ABOVE_XY)

    # -- control steps -------------------------------------------------------------------------------

    def delta(self, values: list[float]) -> None:
        action = np.asarray(values, dtype=float)
        self.grip = float(np.sign(action[6])) if action[6] else self.grip
        self._step(action)

    def _step(self, action: np.ndarray) -> None:
        self.env.step(action)
        self.steps += 1

    def _go(self, target: np.ndarray | Callable[[], np.ndarray], yaw: float | None = None,
            tol: float = TOLERANCE) -> bool:
        """Step toward the target (re-aimed every step when it is a function of the state)."""
        for _ in range(MAX_STEPS):
            err = (target() if callable(target) else target) - self.eef()
            turn = 0.0 if yaw is None else (yaw - self.yaw() + math.pi) % (2 * math.pi) - math.pi
            if np.linalg.norm(err) < tol and abs(turn) < YAW_TOLERANCE:
                return True
            action = np.zeros(7)
            action[:3] = np.clip(err / POS_SCALE * GAIN, -1.0, 1.0)
            action[5] = np.clip(turn / YAW_SCALE * GAIN, -1.0, 1.0)
            action[6] = self.grip
            self._step(action)
        return False

    def _hold(self, n: int) -> None:
        for _ in range(n):
            action = np.zeros(7)
            action[6] = self.grip
            self._step(action)

    # -- targets ---------------------------------------------------------------------------------------

    def _grasp_point(self, thing: "Thing") -> np.ndarray:
        """A handle where the thing has one; else its centre, or just below its top when the
        fingers would not reach down to the centre of a tall object."""
        if thing.grasp_site:
            return self.scene.site_position(thing.grasp_site)
        point = self.scene.body_position(thing.body)
        point[2] = max(point[2], self._extent(thing.body)[1][2] - FINGER_DEPTH)
        return point

    def _grasp_yaw(self, thing: "Thing") -> float:
        """The finger yaw nearest the current one that closes across the object's faces (or,
        for a thing grasped at a handle, across the handle)."""
        import mujoco

        r = self.scene.data.xmat[self.scene._id(mujoco.mjtObj.mjOBJ_BODY, thing.body)].reshape(3, 3)
        base = math.atan2(r[1, 0], r[0, 0]) + (math.pi / 2 if thing.grasp_site else 0.0)
        now = self.yaw()
        options = [base + k * math.pi / 2 for k in range(-4, 5)]
        return min(options, key=lambda y: abs((y - now + math.pi) % (2 * math.pi) - math.pi))

    def _extent(self, body: str) -> tuple[np.ndarray, np.ndarray]:
        """World-axis box (low, high corners) over the body's geoms and its children's."""
        geoms = self.scene.geoms_under(body)
        model, data = self.scene.model, self.scene.data
        lows, highs = [], []
        for g in geoms:
            centre, half = model.geom_aabb[g][:3], model.geom_aabb[g][3:]
            rot = data.geom_xmat[g].reshape(3, 3)
            world_c = data.geom_xpos[g] + rot @ centre
            world_h = np.abs(rot) @ half
            lows.append(world_c - world_h)
            highs.append(world_c + world_h)
        return np.min(lows, axis=0), np.max(highs, axis=0)

    # -- the high-level actions -----------------------------------------------------------------------

    def move_above(self, thing: "Thing") -> str | None:
        if thing.kind == "object" and self.holding() is not thing:
            target = self._grasp_point(thing) + [0, 0, HOVER]
            target[2] = max(target[2], self._extent(thing.body)[1][2] + HOVER / 2)
            yaw = self._grasp_yaw(thing)
        else:
            target = self._place_target(thing, hover=True)
            yaw = None
        return None if self._go(target, yaw) else f"the gripper did not reach the {thing.name}"

    def descend(self, thing: "Thing") -> str | None:
        """Down to the grasp point, or until the fingers meet what is under them (a flat object
        in a bin): valid when the fingers stand over the point, whatever stopped them."""
        target = self._grasp_point(thing)
        self._go(target, self._grasp_yaw(thing), tol=TOLERANCE / 2)
        if np.linalg.norm(self.eef()[:2] - target[:2]) > TOLERANCE or self.eef()[2] > target[2] + DESCEND_SLACK:
            return f"the gripper did not reach the {thing.name}'s grasp point"
        return None

    def grasp(self) -> str | None:
        self.grip = 1.0
        self._hold(GRIP_STEPS)
        return None

    def release(self) -> str | None:
        self.grip = -1.0
        self._hold(GRIP_STEPS)
        return None

    def lift(self) -> str | None:
        ok = self._go(self.eef() + [0, 0, LIFT])
        return None if ok else "the gripper did not rise"

    def place_at(self, place: "Thing") -> str | None:
        if not self._go(lambda: self._place_target(place, hover=True)):
            return f"the gripper did not reach above the {place.name}"
        # down to just above the place, aimed anew every step (the held object sways), then
        # as far as it goes: a nut stops on a peg it misses, an object on what is below it
        self._go(lambda: self._place_target(place, hover=True, height=0.02))
        self._go(lambda: self._place_target(place, hover=False), tol=TOLERANCE * 1.5)
        self.release()
        self._go(self.eef() + [0, 0, HOVER])
        return None

    def _place_target(self, place: "Thing", hover: bool, height: float = HOVER) -> np.ndarray:
        """Where the grip site goes so the held object (if any) ends above or at the place: its
        centre over the place's centre, its bottom over the place's top (a bin's floor, a peg's
        base for a nut, an object's top)."""
        held = self.holding()
        eef = self.eef()
        low, high = self._extent(place.body)
        centre = self.scene.body_position(place.body)
        if held is None:
            offset, below = np.zeros(3), 0.0
        else:
            offset = eef - self.scene.body_position(held.body)
            below = eef[2] - self._extent(held.body)[0][2]  # grip site above the held object's bottom
        if place.kind == "bin":
            floor = centre[2] + BIN_FLOOR
            if place.compartments:  # the middle of the held object's quarter, clear of the walls
                centre = self._compartment(place, centre, held)
        elif place.kind == "peg":
            floor = self._table_top()
        else:
            floor = high[2]
        top = high[2] if place.kind != "bin" else centre[2] + 0.06
        target = np.array([centre[0] + offset[0], centre[1] + offset[1], 0.0])
        target[2] = (top + height + below) if hover else (floor + CLEARANCE + below)
        return target

    def _compartment(self, place: "Thing", centre: np.ndarray, held: "Thing | None") -> np.ndarray:
        quarter = COMPARTMENT_OF.get(held.body, 0) if held else 0
        half = self.scene.body_half_extent(place.body)
        return centre + np.array([(-0.5 if quarter in (0, 2) else 0.5) * half[0],
                                  (-0.5 if quarter < 2 else 0.5) * half[1], 0.0])

    def _table_top(self) -> float:
        try:
            return float(self.scene.site_position("table_top")[2])
        except Exception:  # an arena without a table (bins): the floor of the lowest place
            return 0.8
