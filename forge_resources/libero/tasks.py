"""LIBERO's tasks behind the IE environment protocol: reset to a task at one of its recorded
initial states (settled), save and restore the state exactly, step high-level motions or
end-effector deltas on robosuite's operational-space controller, and read the task's things.

A scene is ``{"suite": ..., "task": ..., "init": N}``. The state is MuJoCo's full integration
state with the gripper's command and the controllers' references (as for robosuite's own tasks),
plus the task and the names its things had in the initial state, so a restore continues exactly
and the agent's names stay those the instruction used.

The things are the task's objects by what a person calls them (two alike by where LIBERO's agent
camera shows them: "the black bowl on the left"), the regions of its fixtures things go in or on
("the stove", "the top of the wooden cabinet", "the wine rack", "the front compartment of the desk
caddy"), the drawers and doors that open and close ("the top drawer of the wooden cabinet", "the
microwave") and the stove's knob ("the stove"). LIBERO's own success check (``success``) is the
oracle forge's compiled verifier (:mod:`.goals`) is checked against.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forge_resources.household.protocol import Action, ActionSpec, Observation
from forge_resources.libero import goals
from forge_resources.libero.motion import LiberoMotion, LiberoThing
from forge_resources.libero.naming import things_of
from forge_resources.robosuite.arm_state import ArmSteps, arm_refusal, capture, restore
from forge_resources.robosuite.manipulation import ACTIONS as ARM_ACTIONS
from forge_resources.robosuite.queries import QueryError, SimQueries

AGENT_CAMERA = "agentview"
ACTIONS = ARM_ACTIONS + (
    ActionSpec("Open", ("part",), ("the gripper is open",), ("the drawer pulled out by its handle",)),
    ActionSpec("Close", ("part",), ("the gripper holds nothing",), ("the drawer or door pushed shut",)),
    ActionSpec("TurnOn", ("knob",), ("the gripper is open",), ("the stove's knob turned on",)),
    ActionSpec("TurnOff", ("knob",), ("the gripper is open",), ("the stove's knob turned off",)),
)
HIGH_LEVEL = tuple(a.name for a in ACTIONS if a.name != "MoveDelta")
KINDS_FOR = {"Open": ("part",), "Close": ("part",), "TurnOn": ("knob",), "TurnOff": ("knob",)}


class LiberoTaskError(QueryError):
    """A LIBERO scene or state that cannot be set up (the message names the task)."""


class LiberoTaskEnv(ArmSteps, SimQueries):
    """One LIBERO task at a time, on the process's shared LIBERO environments."""

    def __init__(self, scenes: Any = None, *, image: bool = False) -> None:
        from forge_resources.libero.scenes import LiberoScenes

        self.scenes = scenes if scenes is not None else _shared_scenes(LiberoScenes)
        self.image = image
        self.key: tuple[str, str] | None = None
        self.env: Any = None
        self.motion: LiberoMotion | None = None
        self._things: tuple[LiberoThing, ...] = ()
        self._names: dict[str, str] = {}
        self._last: tuple[str | None, bool | None, str] = (None, None, "")
        self._geoms: dict[str, set[int]] = {}
        self.drift = 0.0
        self.init = 0

    # -- the protocol --------------------------------------------------------------------------------

    def reset(self, scene: dict[str, Any]) -> Observation:
        world = self.scenes.state(scene["suite"], scene["task"], int(scene["init"]))
        self._attach(scene["suite"], scene["task"], world.env)
        self.init = int(scene["init"])
        self.drift = world.drift
        self._things = things_of(world.env, self, camera=AGENT_CAMERA)
        self._names = {t.instance: t.name for t in self._things}
        self.motion.reset_gripper()
        self._last = (None, None, "")
        return self.observation()

    def get_state(self) -> dict[str, Any]:
        self._need()
        return {"env": "libero", "suite": self.key[0], "task": self.key[1], "init": self.init, **capture(self),
                "names": dict(self._names)}

    def set_state(self, state: dict[str, Any]) -> None:
        if state.get("env") != "libero" or not state.get("suite") or not state.get("task"):
            raise LiberoTaskError(f"the state is not a LIBERO task's (env {state.get('env')!r})")
        env = self.scenes.env(state["suite"], state["task"]).env
        self._attach(state["suite"], state["task"], env)
        restore(self, state, state["task"], LiberoTaskError)
        self.init = int(state.get("init", 0))
        self._names = dict(state.get("names") or {})
        self._things = things_of(env, self, camera=AGENT_CAMERA, names=self._names)
        self._last = (None, None, "")

    def action_space(self) -> list[ActionSpec]:
        return list(ACTIONS)

    def valid_actions(self, agent: int = 0) -> list[Action]:
        """Grounded high-level actions whose preconditions hold now (MoveDelta is always valid)."""
        out = [Action("MoveAbove", (t.name,)) for t in self._things if t.kind in ("object", "region", "part")]
        out += [Action("Descend", (t.name,)) for t in self._things if t.kind == "object"
                and self._why_not(Action("Descend", (t.name,))) is None]
        for name in ("Grasp", "Lift", "Release"):
            if self._why_not(Action(name)) is None:
                out.append(Action(name))
        held = self.motion.holding()
        if held is not None:
            out += [Action("PlaceAt", (t.name,)) for t in self._things if self.is_place(t) and t.name != held.name]
        for name, kinds in KINDS_FOR.items():
            out += [Action(name, (t.name,)) for t in self._things if t.kind in kinds
                    and self._why_not(Action(name, (t.name,))) is None]
        return out

    def success(self) -> bool:
        """LIBERO's own check of the task's goal on the current state."""
        return bool(self.env._check_success())

    def objects(self) -> list[dict[str, Any]]:
        """The terminal-state view: every object's pose, whether it is held and what it touches."""
        out = []
        holding = self.motion.holding()
        movable = [t for t in self._things if t.kind == "object"]
        for t in movable:
            pos = self.body_position(t.body)
            touching = sorted(o.name for o in movable if o is not t and self.bodies_touching(t.body, o.body))
            out.append({"name": t.name, "body": t.body, "kind": "object", "position": [round(float(v), 5) for v in pos],
                        "held": holding is t, "touching": touching})
        return out

    def observation(self, agent: int = 0) -> Observation:
        self._need()
        holding = self.motion.holding()
        lines = [f"The gripper is {'closed' if self.motion.closed() else 'open'} at {_where(self.motion.eef())}"
                 + (f", holding the {holding.name}." if holding else ".")]
        for t in self._things:
            if t.kind == "object":
                lines.append(f"The {t.name} (object) is at {_where(self.body_position(t.body))}.")
            elif t.kind == "part":
                lines.append(f"The {t.name} is {'open' if self.part_open(t) else 'closed' if self.part_closed(t) else 'partly open'}.")
            elif t.kind == "knob":
                lines.append(f"The {t.name} is {'on' if self.knob_on(t) else 'off'}.")
            else:
                lines.append(f"The {t.name} (place) is at {_where(self.site_position(t.site))}.")
        last, valid, message = self._last
        if last:
            lines.append(f"Last action {last}: {'done' if valid else 'refused: ' + message}.")
        image = self.render() if self.image else None
        return Observation("\n".join(lines), agent, None, holding.name if holding else None,
                           tuple(t.name for t in self._things), last, valid, message, image)

    def things(self) -> tuple[LiberoThing, ...]:
        return self._things

    def thing(self, name: str) -> LiberoThing | None:
        return next((t for t in self._things if t.name == name), None)

    def thing_of(self, instance: str) -> LiberoThing | None:
        """The thing a BDDL instance or region names (an object, a region, a part, a knob)."""
        return next((t for t in self._things if t.instance == instance), None)

    def control_steps(self) -> int:
        return self.motion.steps

    def render(self, camera: str = AGENT_CAMERA, width: int = 320, height: int = 240) -> np.ndarray:
        from forge_resources.libero import runtime

        r = self.scenes.renderer(*self.key, width, height)
        rgb, _depth, _geoms = runtime.render(self.scenes.env(*self.key), r, camera)
        return rgb

    @property
    def model_label(self) -> str:
        return f"LIBERO {self.key[1] if self.key else '(no task)'}"

    # -- queries the motions and the verifier use ------------------------------------------------------

    def site_matrix(self, name: str) -> np.ndarray:
        import mujoco

        return self.data.site_xmat[self._id(mujoco.mjtObj.mjOBJ_SITE, name)].reshape(3, 3).copy()

    def site_half(self, name: str) -> np.ndarray:
        return np.asarray(self.env.object_sites_dict[name].size, dtype=float)

    def geoms_under(self, body: str) -> set[int]:
        if body not in self._geoms:  # a body's geoms do not change within a model
            self._geoms[body] = super().geoms_under(body)
        return self._geoms[body]

    def is_place(self, thing: LiberoThing) -> bool:
        return thing.site is not None or thing.kind == "object"

    def container_site(self, thing: LiberoThing) -> str | None:
        site = f"{thing.instance}_contain_region"
        return site if site in self.env.object_sites_dict else None

    def part_fact(self, part: LiberoThing, kind: str) -> dict[str, Any]:
        """The open, closed, on or off fact of a part or knob, on the joints that move it."""
        return goals.compile_fact(self.env, (kind, part.instance if part.own_joints else part.owner))

    def part_open(self, part: LiberoThing) -> bool:
        return goals.holds(self.part_fact(part, "open"), self)

    def part_closed(self, part: LiberoThing) -> bool:
        return goals.holds(self.part_fact(part, "close"), self)

    def knob_on(self, knob: LiberoThing) -> bool:
        return goals.holds(self.part_fact(knob, "turnon"), self)

    def knob_off(self, knob: LiberoThing) -> bool:
        return goals.holds(self.part_fact(knob, "turnoff"), self)

    def part_handle(self, part: LiberoThing) -> tuple[np.ndarray, np.ndarray, float] | None:
        """A drawer's handle: (the bar's centre, the direction that pulls it open, how far to pull)."""
        import mujoco

        if not part.joints or not part.own_joints:
            return None  # a door: forge pulls drawers only
        joint = self._id(mujoco.mjtObj.mjOBJ_JOINT, part.joints[0])
        body = int(self.model.jnt_bodyid[joint])
        axis = self.data.xmat[body].reshape(3, 3) @ self.model.jnt_axis[joint]
        fact = self.part_fact(part, "open")["joints"][0]
        pull = (-axis if fact["side"] == "below" else axis) / np.linalg.norm(axis)
        bar = _handle_geom(self.model, self.data, body, pull)
        if bar is None:
            return None
        return bar[0], pull, abs(fact["threshold"] - self.joint_position(part.joints[0]))

    def part_front(self, part: LiberoThing) -> tuple[np.ndarray, np.ndarray, float] | None:
        """Where to push a part shut: (a point on its front, the pushing direction, the travel)."""
        import mujoco

        if not part.joints:
            return None
        joint = self._id(mujoco.mjtObj.mjOBJ_JOINT, part.joints[0])
        body = int(self.model.jnt_bodyid[joint])
        if self.model.jnt_type[joint] == mujoco.mjtJoint.mjJNT_SLIDE:
            axis = self.data.xmat[body].reshape(3, 3) @ self.model.jnt_axis[joint]
            fact = self.part_fact(part, "close")["joints"][0]
            push = axis if fact["side"] == "above" else -axis  # toward the closed end
            push = push / np.linalg.norm(push)
            handle = _handle_geom(self.model, self.data, body, -push)
            if handle is None:
                return None
            q = self.joint_position(part.joints[0])
            return handle[0], push, abs(q - fact["threshold"]) + handle[2]
        return _door_front(self, body, joint)

    def knob_point(self, knob: LiberoThing) -> np.ndarray | None:
        import mujoco

        if not knob.joints:
            return None
        body = int(self.model.jnt_bodyid[self._id(mujoco.mjtObj.mjOBJ_JOINT, knob.joints[0])])
        geoms = [g for g in range(self.model.ngeom) if self.model.geom_bodyid[g] == body and self.model.geom_contype[g]]
        if not geoms:
            return None
        tops = [self.data.geom_xpos[g][2] + self.model.geom_rbound[g] * 0.5 for g in geoms]
        point = self.data.xpos[body].copy()
        point[2] = max(tops)
        return point

    def knob_angle(self, knob: LiberoThing) -> float:
        return self.joint_position(knob.joints[0])

    def knob_yaw(self, knob: LiberoThing) -> float:
        import math

        import mujoco

        body = int(self.model.jnt_bodyid[self._id(mujoco.mjtObj.mjOBJ_JOINT, knob.joints[0])])
        r = self.data.xmat[body].reshape(3, 3)
        return math.atan2(r[1, 0], r[0, 0])  # the fingers close along the knob's x axis, across its fin

    # -- inside ------------------------------------------------------------------------------------------

    def _attach(self, suite: str, task: str, env: Any) -> None:
        if self.env is not env:
            self.key, self.env = (suite, task), env
            self.model, self.data = env.sim.model._model, env.sim.data._data
            self.__dict__.pop("_parents", None)
            self._geoms = {}
            self.motion = LiberoMotion(env, self)
        self.motion.steps = 0

    def _need(self) -> None:
        if self.env is None:
            raise LiberoTaskError("no task: reset or set_state first")

    def _why_not(self, action: Action) -> str | None:
        why = arm_refusal(self, action, ACTIONS)
        if why is not None or action.name == "MoveDelta":
            return why
        things = [self.thing(a) for a in action.args]
        holding = self.motion.holding()
        target = things[0] if things else None
        if action.name == "MoveAbove" and target.kind == "knob":
            return f"the {target.name} is turned, not moved above (TurnOn, TurnOff)"
        if action.name == "PlaceAt":
            if not self.is_place(target):
                return f"the {target.name} is not a place to put things"
        if action.name in KINDS_FOR:
            if target.kind not in KINDS_FOR[action.name]:
                return f"the {target.name} cannot be {'opened' if action.name == 'Open' else 'closed' if action.name == 'Close' else 'turned'}"
            if holding is not None:
                return f"the gripper holds the {holding.name}"
            if action.name == "Open" and self.part_open(target):
                return f"the {target.name} is already open"
            if action.name == "Close" and self.part_closed(target):
                return f"the {target.name} is already closed"
            if action.name == "TurnOn" and self.knob_on(target):
                return f"the {target.name} is already on"
            if action.name == "TurnOff" and self.knob_off(target):
                return f"the {target.name} is already off"
        return None

    def _run(self, action: Action) -> str | None:
        m = self.motion
        if action.name == "MoveDelta":
            m.delta([float(v) for v in action.args])
            return None
        target = self.thing(action.args[0]) if action.args else None
        return {"MoveAbove": lambda: m.move_above(target), "Descend": lambda: m.descend(target),
                "Grasp": m.grasp, "Lift": m.lift, "PlaceAt": lambda: m.place_at(target), "Release": m.release,
                "Open": lambda: m.open_part(target), "Close": lambda: m.close_part(target),
                "TurnOn": lambda: m.turn_knob(target, True), "TurnOff": lambda: m.turn_knob(target, False),
                }[action.name]()


def _handle_geom(model: Any, data: Any, body: int, outward: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The collision geom of a drawer body that stands furthest out along ``outward`` (its handle's
    bar): (its centre, the centre of its back face, its half depth along ``outward``)."""
    geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == body and model.geom_contype[g]]
    if not geoms:
        return None
    g = max(geoms, key=lambda g: float(np.dot(data.geom_xpos[g], outward)))
    half = float(np.abs(data.geom_xmat[g].reshape(3, 3) @ model.geom_size[g]) @ np.abs(outward))
    centre = data.geom_xpos[g].copy()
    return centre, centre - outward * half, half


def _door_front(env: LiberoTaskEnv, body: int, joint: int) -> tuple[np.ndarray, np.ndarray, float] | None:
    """A hinged door's free edge and the direction that swings it shut (tangent to its arc)."""
    import mujoco

    model, data = env.model, env.data
    hinge = data.xanchor[joint].copy()
    axis = data.xaxis[joint].copy()
    geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == body and model.geom_contype[g]]
    if not geoms:
        return None
    edge = max((data.geom_xpos[g] for g in geoms), key=lambda p: float(np.linalg.norm((p - hinge)[:2])))
    radius = edge - hinge
    radius[2] = 0.0
    tangent = np.cross(axis, radius)
    tangent[2] = 0.0
    tangent /= max(float(np.linalg.norm(tangent)), 1e-9)
    fact = [j for j in env.env.fixtures_dict.values() if any(
        mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) == joint for n in j.joints)]
    q = float(data.qpos[model.jnt_qposadr[joint]])
    ranges = (getattr(fact[0], "object_properties", {}) or {}).get("articulation") or {} if fact else {}
    shut = min(ranges.get("default_close_ranges") or [0.0], key=abs)
    sign = 1.0 if shut > q else -1.0  # turning toward the closed angle
    push = tangent * sign
    return edge, push, abs(shut - q) * float(np.linalg.norm(radius[:2]))


def _where(p: np.ndarray) -> str:
    return f"({p[0]:+.2f}, {p[1]:+.2f}, {p[2]:.2f}) m"


def _shared_scenes(factory: Any) -> Any:
    """The process's LIBERO environments, shared with the OE source (one build costs 2-7 s and 2-3 GB)."""
    from forge.skills import held

    return held("libero.scenes", factory)
