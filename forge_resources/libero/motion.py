"""Closed-loop motions in LIBERO's scenes: robosuite's motions (:mod:`forge_resources.robosuite.motion`)
with LIBERO's things.

- Bowls, mugs, ramekins, plates and baskets are grasped at the rim nearest the robot, the fingers
  closing across the wall; everything else at its centre (or below the top of a tall object).
- A place is an object (on its top, or into its container region when it has one) or a fixture's
  region (a stove's burner, a cabinet's top, a drawer, the microwave's inside): the held object's
  origin is lowered to the region's floor or top, which is what LIBERO's ``In`` and ``On`` judge.
- A drawer opens by grasping its handle and pulling it along its slide; it closes by pushing its
  front; a door closes by pushing its free edge around its hinge; a stove turns on by grasping
  its knob and turning the wrist, and off by turning it back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from forge_resources.robosuite.motion import CLEARANCE, GAIN, GRIP_STEPS, HOVER, MAX_STEPS, POS_SCALE, YAW_SCALE, Motion

RIM_WORDS = ("bowl", "ramekin", "mug", "plate", "basket", "tray")
HANDLE_WORDS = ("frypan", "moka_pot")  # grasped by their handle, the part furthest out from their middle
RIM_INSET = 0.012  # the rim grasp's point inside the object's outline
RIM_DEPTH = 0.03  # and below its top
HANDLE_INSET = 0.1  # a handle's grasp point this share of its reach in from its end
RIM_ROOM = 0.06  # clearance beyond which every side of a rim is as good
PULL_MARGIN = 0.02  # pull a drawer this much past its open threshold
STAGING = 0.12  # where the hand turns toward a drawer: this far out in front of its handle
RETREAT = 0.06  # how far the hand backs off a drawer it let go of
ROT_TOLERANCE = 0.06  # radians
DRAWER_MARGIN = 0.03  # an object put in a drawer has its origin this far inside the region's outer edge
HALF_OPEN_STEPS = 5  # closing steps from open to about half open
PUSH_PAST = 0.03  # push a part this much further than it has to go (it stops at its joint's limit)
PUSH_STANDOFF = 0.06  # where the closed fingers start in front of a drawer's face
KNOB_TURN = 1.0  # radians the wrist turns a stove's knob on (at least)
KNOB_ON = 0.5  # LIBERO's stove is on from this angle
KNOB_PAST = 0.3  # turn this much past the threshold
KNOB_GRIP_DEPTH = 0.012  # the fingers' point below the top of the knob


@dataclass(frozen=True)
class LiberoThing:
    """Something of a LIBERO task the agent can name.

    ``kind`` is ``object`` (it can be picked up; it may also be a place), ``region`` (a fixture's
    region things go in or on), ``part`` (a drawer or door: opened and closed) or ``knob`` (a
    stove: turned on and off). ``site`` is the region's site; ``inside`` whether things go into it
    (LIBERO's ``In``) rather than onto it; ``joints`` a part's or knob's joints with their travel."""

    name: str
    instance: str
    body: str
    kind: str
    site: str | None = None
    inside: bool = False
    joints: tuple[str, ...] = ()
    grasp_site: str | None = None
    compartments: bool = False
    rim: bool = False
    handle: bool = False
    owner: str | None = None  # the fixture a region, part or knob belongs to
    own_joints: bool = False  # the joints are the region's own (a drawer), not its owner's (a door, a knob)


class LiberoMotion(Motion):
    """Motions on a :class:`~forge_resources.libero.tasks.LiberoTaskEnv`."""

    # -- grasping ------------------------------------------------------------------------------

    def _grasp_point(self, thing: LiberoThing) -> np.ndarray:
        if getattr(thing, "handle", False):
            return self._handle_point(thing)
        if not getattr(thing, "rim", False):
            return super()._grasp_point(thing)
        return max(self._rim_points(thing), key=lambda p: self._clearance(p, thing))

    def _handle_point(self, thing: LiberoThing) -> np.ndarray:
        """The collision geom furthest out horizontally from the object's origin (a pan's handle), at
        its own height."""
        model, data = self.scene.model, self.scene.data
        origin = self.scene.body_position(thing.body)
        geoms = [g for g in self.scene.geoms_under(thing.body) if model.geom_contype[g] or model.geom_conaffinity[g]]
        far = max(geoms, key=lambda g: float(np.linalg.norm(data.geom_xpos[g][:2] - origin[:2])))
        point = data.geom_xpos[far].copy()
        # a little in from the handle's end, toward the middle
        point[:2] -= (point[:2] - origin[:2]) * HANDLE_INSET
        return point

    def _rim_points(self, thing: LiberoThing) -> list[np.ndarray]:
        """A point on the rim on each side of the object (along the world axes), the side facing
        the robot first."""
        low, high = self._extent(thing.body)
        centre, half = (low + high) / 2, (high - low) / 2
        away = self._toward_robot(centre)
        out = []
        for axis, sign in sorted(((a, s) for a in (0, 1) for s in (1.0, -1.0)), key=lambda a: -a[1] * away[a[0]]):
            point = centre.copy()
            point[axis] += sign * (half[axis] - RIM_INSET)
            point[2] = high[2] - RIM_DEPTH
            out.append(point)
        return out

    def _clearance(self, point: np.ndarray, thing: LiberoThing) -> float:
        """Horizontal room around a grasp point: the distance to the nearest other object's
        outline, capped (beyond 6 cm every side is as good; the first listed wins a tie)."""
        room = RIM_ROOM
        for other in self.scene.things():
            if other.kind != "object" or other.body == thing.body:
                continue
            low, high = self._extent(other.body)
            if low[2] > point[2] + 0.05 or high[2] < point[2] - 0.05:
                continue  # above or below the fingers
            gap = np.maximum(np.maximum(low[:2] - point[:2], point[:2] - high[:2]), 0.0)
            room = min(room, float(np.linalg.norm(gap)))
        return round(room, 3)

    def _grasp_yaw(self, thing: LiberoThing) -> float:
        if getattr(thing, "handle", False):  # the fingers close across the handle
            radial = self._handle_point(thing)[:2] - self.scene.body_position(thing.body)[:2]
            return self._nearest_yaw(math.atan2(radial[1], radial[0]) + math.pi / 2, math.pi)
        if not getattr(thing, "rim", False):
            return super()._grasp_yaw(thing)
        low, high = self._extent(thing.body)
        radial = self._grasp_point(thing)[:2] - ((low + high) / 2)[:2]
        return self._nearest_yaw(math.atan2(radial[1], radial[0]), math.pi)  # the fingers close along the radius

    def _nearest_yaw(self, base: float, period: float) -> float:
        now = self.yaw()
        options = [base + k * period for k in range(-4, 5)]
        return min(options, key=lambda y: abs((y - now + math.pi) % (2 * math.pi) - math.pi))

    def _toward_robot(self, point: np.ndarray) -> np.ndarray:
        base = self.scene.body_position("robot0_base")
        d = base[:2] - point[:2]
        return d / max(float(np.linalg.norm(d)), 1e-9)

    def _extent(self, body: str) -> tuple[np.ndarray, np.ndarray]:
        """World-axis box over the body tree's collision geoms, exact for boxes (LIBERO's scanned
        objects collide as many small boxes: their turned bounding boxes would overstate a rim)."""
        import mujoco

        model, data = self.scene.model, self.scene.data
        geoms = [g for g in self.scene.geoms_under(body) if model.geom_contype[g] or model.geom_conaffinity[g]]
        if not geoms:
            return super()._extent(body)
        lows, highs = [], []
        for g in geoms:
            rot = data.geom_xmat[g].reshape(3, 3)
            if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX:
                centre, half = data.geom_xpos[g], np.abs(rot) @ model.geom_size[g]
            else:
                centre = data.geom_xpos[g] + rot @ model.geom_aabb[g][:3]
                half = np.abs(rot) @ model.geom_aabb[g][3:]
            lows.append(centre - half)
            highs.append(centre + half)
        return np.min(lows, axis=0), np.max(highs, axis=0)

    # -- placing -------------------------------------------------------------------------------

    def _place_target(self, place: LiberoThing, hover: bool, height: float = HOVER) -> np.ndarray:
        site = place.site or self.scene.container_site(place)
        if site is None:
            return super()._place_target(place, hover, height)
        held = self.holding()
        eef = self.eef()
        centre = self.scene.site_position(site)
        half = np.abs(self.scene.site_matrix(site) @ self.scene.site_half(site))
        if held is None:
            offset, below = np.zeros(3), 0.0
        else:
            offset = eef - self.scene.body_position(held.body)
            below = eef[2] - self._extent(held.body)[0][2]
        inside = place.inside or place.kind == "object"
        if place.kind == "part" and place.own_joints and held is not None:
            centre = self._drawer_spot(place, centre, half, held)
        floor = centre[2] - half[2] if inside else centre[2] + half[2]
        owner_top = self._extent(place.body)[1][2] if place.body else floor
        top = max(floor + 0.02, owner_top)
        target = np.array([centre[0] + offset[0], centre[1] + offset[1], 0.0])
        # the held object's origin (its bottom, for LIBERO's objects) on the floor or the top
        origin_below = eef[2] - self.scene.body_position(held.body)[2] if held is not None else 0.0
        target[2] = (top + height + below) if hover else (floor + CLEARANCE + origin_below)
        return target

    def _drawer_spot(self, part: LiberoThing, centre: np.ndarray, half: np.ndarray, held: LiberoThing) -> np.ndarray:
        """Where in an open drawer the held object goes: its origin near the region's outer edge along
        the drawer's pull (the rest of the drawer lies under the fixture's top)."""
        handle = self.scene.part_handle(part)
        if handle is None:
            return centre
        pull = handle[1]
        room = float(half @ np.abs(pull)) - DRAWER_MARGIN
        return centre + pull * max(room, 0.0)

    # -- drawers, doors and knobs ------------------------------------------------------------------

    def open_part(self, part: LiberoThing) -> str | None:
        """Turn the hand to point at the drawer, the fingers closing up and down around its handle's
        bar, grasp the bar, pull the drawer out along its slide past its open threshold, let go and
        turn back to pointing down."""
        handle = self.scene.part_handle(part)
        if handle is None:
            return f"the {part.name} has no handle to pull"
        bar, pull, travel = handle
        level = self._hand_at(-pull)
        down = self.orientation()
        self._half_open()  # the fingers spread less than the handles of the drawers above and below
        staging = bar + pull * STAGING
        if not self._go(staging + [0, 0, HOVER / 2]) or not self._turn_to(level, staging + [0, 0, HOVER / 2]):
            return f"the gripper could not turn toward the {part.name}"
        if not self._go_pose(staging, level) or not self._go_pose(bar, level, tol=0.006):
            return f"the gripper did not reach the {part.name}'s handle"
        self.grasp()
        start = self.eef()
        self._go_pose(lambda: start + pull * (travel + PULL_MARGIN), level)
        self.release()
        self._go_pose(self.eef() + pull * RETREAT, level)
        self._go_pose(self.eef() + [0, 0, HOVER / 2], level)
        self._turn_to(down, self.eef())
        return None if self.scene.part_open(part) else f"the {part.name} did not open"

    def _half_open(self) -> None:
        """Fingers about half open: the gripper's command moves a fifth of its range per step."""
        self.grip = 1.0
        self._hold(HALF_OPEN_STEPS)
        self.grip = 0.0
        self._hold(GRIP_STEPS // 2)

    def orientation(self) -> np.ndarray:
        return self.scene.data.site_xmat[self.site].reshape(3, 3).copy()

    def _hand_at(self, approach: np.ndarray) -> np.ndarray:
        """The grip site's rotation pointing the hand along ``approach`` (horizontal) with the fingers
        closing vertically: of the two such, the nearer to the hand's rotation now."""
        from scipy.spatial.transform import Rotation

        z = np.array([approach[0], approach[1], 0.0])
        z /= max(float(np.linalg.norm(z)), 1e-9)
        now = self.orientation()
        options = []
        for up in (1.0, -1.0):
            x = np.array([0.0, 0.0, up])
            options.append(np.column_stack([x, np.cross(z, x), z]))
        return min(options, key=lambda r: Rotation.from_matrix(r @ now.T).magnitude())

    def _turn_to(self, rotation: np.ndarray, where: np.ndarray) -> bool:
        return self._go_pose(where, rotation, tol=0.02)

    def _go_pose(self, target: Any, rotation: np.ndarray, tol: float = 0.008) -> bool:
        """Step toward a position and a full rotation of the grip site (robosuite's controller takes
        rotation deltas as axis-angle in the base frame, applied to the current rotation)."""
        from scipy.spatial.transform import Rotation

        for _ in range(MAX_STEPS * 2):
            err = (target() if callable(target) else target) - self.eef()
            turn = Rotation.from_matrix(rotation @ self.orientation().T).as_rotvec()
            if np.linalg.norm(err) < tol and np.linalg.norm(turn) < ROT_TOLERANCE:
                return True
            action = np.zeros(7)
            action[:3] = np.clip(err / POS_SCALE * GAIN, -1.0, 1.0)
            action[3:6] = np.clip(turn / YAW_SCALE * GAIN, -1.0, 1.0)
            action[6] = self.grip
            self._step(action)
        return False

    def close_part(self, part: LiberoThing) -> str | None:
        """Push the drawer's front (or the door's free edge) shut with the closed fingers."""
        front = self.scene.part_front(part)
        if front is None:
            return f"the {part.name} cannot be pushed shut"
        point, push, travel = front
        # the hand's long side (along which the fingers close) across the push, so that only the
        # fingers' thickness, not the hand's width, reaches toward the fixture
        yaw = self._nearest_yaw(math.atan2(push[1], push[0]) + math.pi / 2, math.pi)
        self.grip = 1.0
        self._hold(4)
        start = point - push * PUSH_STANDOFF
        if not self._go(start + [0, 0, HOVER / 2], yaw) or not self._go(start, yaw):
            return f"the gripper did not reach the {part.name}"
        self._go(lambda: start + push * (PUSH_STANDOFF + travel + PUSH_PAST), yaw)
        self._go(self.eef() - push * 0.05)
        self._go(self.eef() + [0, 0, HOVER / 2])
        self.grip = -1.0
        self._hold(4)
        return None if self.scene.part_closed(part) else f"the {part.name} did not close"

    def turn_knob(self, knob: LiberoThing, on: bool) -> str | None:
        """Grasp the stove's knob from above and turn the wrist (counter-clockwise to turn it on)."""
        point = self.scene.knob_point(knob)
        if point is None:
            return f"the {knob.name} has no knob"
        self.grip = -1.0
        yaw = self._nearest_yaw(self.scene.knob_yaw(knob), math.pi)
        if not self._go(point + [0, 0, HOVER / 2], yaw):
            return f"the gripper did not reach the {knob.name}'s knob"
        self._go(point + [0, 0, -KNOB_GRIP_DEPTH], yaw, tol=0.006)
        self.grasp()
        # on: at least KNOB_TURN past where it stands; off: back past zero (its off threshold)
        angle = self.scene.knob_angle(knob)
        turn = max(KNOB_TURN, KNOB_ON - angle + KNOB_PAST) if on else -(angle + KNOB_PAST)
        start = self.yaw()
        self._go(lambda: point + [0, 0, -KNOB_GRIP_DEPTH], start + turn)
        self.release()
        self._go(self.eef() + [0, 0, HOVER / 2])
        done = self.scene.knob_on(knob) if on else self.scene.knob_off(knob)
        return None if done else f"the {knob.name} did not turn {'on' if on else 'off'}"


