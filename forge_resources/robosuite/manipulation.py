"""Manipulation tasks on a live robosuite environment, behind the IE environment protocol.

A scene is ``{"env": <robosuite environment>, "seed": N}``: robosuite's own placement of its
objects for that seed, settled with the arm still (see :mod:`.scenes`). The state is MuJoCo's
full integration state (time, joints, velocities, actuators, warm start, controls) plus the
gripper's accumulated command, so a restore continues exactly as the original would.

Two action interfaces drive the same operational-space controller robosuite ships:

- low level: ``MoveDelta(dx, dy, dz, droll, dpitch, dyaw, gripper)``, one control step (robosuite's
  20 Hz) of end-effector deltas in [-1, 1] (scaled by the controller to 5 cm and 0.5 rad) and the
  gripper command (-1 opens, +1 closes);
- high level: ``MoveAbove(thing)``, ``Descend(object)``, ``Grasp()``, ``Lift()``, ``PlaceAt(thing)``,
  ``Release()``, each a closed loop of control steps toward a target computed from the scene.

Objects and places go by what a person calls them ("the can", "the bin on the right", "the square peg");
goals and verifiers use the model's body names and stay hidden from the agent.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forge_resources.household.protocol import Action, ActionSpec, Observation
from forge_resources.robosuite.arm_state import ArmSteps, arm_refusal, capture, controllers, restore
from forge_resources.robosuite.motion import Motion
from forge_resources.robosuite.naming import AGENT_CAMERA
from forge_resources.robosuite.things import THINGS, Thing
from forge_resources.robosuite.queries import SimQueries
from forge_resources.robosuite.scenes import RobosuiteScenes, SceneError
from forge_resources.robosuite.world import HIDDEN_GROUP

CONTROL_DT = 0.05  # seconds of simulated time per control step (robosuite's 20 Hz)


ACTIONS = (
    ActionSpec("MoveDelta", ("dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper"),
               ("each value in [-1, 1]",), ("one control step of the end-effector controller (0.05 s)",)),
    ActionSpec("MoveAbove", ("thing",), (), ("the open or holding gripper 10 cm above the thing, turned to grasp it",)),
    ActionSpec("Descend", ("object",), ("the gripper is above the object", "the gripper is open"),
               ("the fingers around the object's grasp point",)),
    ActionSpec("Grasp", (), ("the gripper is open",), ("the gripper closes on what is between the fingers",)),
    ActionSpec("Lift", (), (), ("the gripper rises 15 cm",)),
    ActionSpec("PlaceAt", ("place",), ("the gripper holds an object",),
               ("the held object lowered into, onto or around the place and let go; the gripper rises",)),
    ActionSpec("Release", (), (), ("the gripper opens",)),
)
HIGH_LEVEL = tuple(a.name for a in ACTIONS if a.name != "MoveDelta")


class ManipulationEnv(ArmSteps, SimQueries):
    """One robosuite environment at a time (made once per process per name, reused)."""

    def __init__(self, scenes: RobosuiteScenes | None = None, *, image: bool = False) -> None:
        self.scenes = scenes or _shared_scenes()
        self.image = image
        self.env_name: str | None = None
        self.env: Any = None
        self.motion: Motion | None = None
        self._last: tuple[str | None, bool | None, str] = (None, None, "")
        self.drift = 0.0

    # -- the protocol ---------------------------------------------------------------------------

    def reset(self, scene: dict[str, Any]) -> Observation:
        name = scene["env"]
        if name not in THINGS:
            raise SceneError(f"no manipulation tasks are defined on robosuite environment {name!r}; "
                             f"environments: {sorted(THINGS)}")
        state = self.scenes.reset(name, int(scene["seed"]))
        self.drift = state.drift  # how far objects still moved over the last settling steps (metres)
        self._attach(name, state.env)
        self.motion.reset_gripper()
        self._last = (None, None, "")
        return self.observation()

    def reset_to_demo(self, path: str, key: str) -> Observation:
        """The first recorded state of a real demonstration, its joints copied into the installed
        environment by their current names (the arm and objects at rest)."""
        from forge_resources.robosuite.demo_frames import recorded
        from forge_resources.robosuite.native import transfer

        scene, _ = recorded(path, key)
        self.reset({"env": scene.demo.env_name, "seed": 0})
        scene.set(0)
        transfer(scene, self.env)
        self.data.qvel[:] = 0.0
        import mujoco

        mujoco.mj_forward(self.model, self.data)
        for controller in self._controllers().values():
            controller.new_update = True
        self.drift = 0.0
        return self.observation()

    def get_state(self) -> dict[str, Any]:
        self._need()
        return {"env": self.env_name, **capture(self)}

    def set_state(self, state: dict[str, Any]) -> None:
        name = state.get("env")
        if name not in THINGS:
            raise SceneError(f"the state names environment {name!r}; manipulation environments: {sorted(THINGS)}")
        self._attach(name, self.scenes.env(name))
        restore(self, state, name, SceneError)
        self._last = (None, None, "")

    def action_space(self) -> list[ActionSpec]:
        return list(ACTIONS)

    def valid_actions(self, agent: int = 0) -> list[Action]:
        """Grounded high-level actions whose preconditions hold now (MoveDelta is always valid)."""
        out = [Action("MoveAbove", (t.name,)) for t in self.things()]
        out += [Action("Descend", (t.name,)) for t in self.things() if t.kind == "object"
                and self._why_not(Action("Descend", (t.name,))) is None]
        for name in ("Grasp", "Lift", "Release"):
            if self._why_not(Action(name)) is None:
                out.append(Action(name))
        if self.motion.holding() is not None:
            out += [Action("PlaceAt", (t.name,)) for t in self.things() if t.name != self.motion.holding().name]
        return out

    def objects(self) -> list[dict[str, Any]]:
        """The terminal-state view: every thing's pose, whether it is held and what it touches."""
        out = []
        holding = self.motion.holding()
        for t in self.things():
            pos = self.body_position(t.body)
            quat = self.data.xquat[self._body(t.body)]
            touching = sorted(o.name for o in self.things() if o is not t and self.bodies_touching(t.body, o.body))
            out.append({"name": t.name, "body": t.body, "kind": t.kind, "position": [round(float(v), 5) for v in pos],
                        "quaternion": [round(float(v), 6) for v in quat], "held": holding is t,
                        "touching": touching})
        return out

    def observation(self, agent: int = 0) -> Observation:
        self._need()
        grip = self.motion.eef()
        holding = self.motion.holding()
        lines = [f"The gripper is {'closed' if self.motion.closed() else 'open'} at "
                 f"{_where(grip)}" + (f", holding the {holding.name}." if holding else ".")]
        for t in self.things():
            kind = "object" if t.kind == "object" else "place"
            lines.append(f"The {t.name} ({kind}) is at {_where(self.body_position(t.body))}.")
        last, valid, message = self._last
        if last:
            lines.append(f"Last action {last}: {'done' if valid else 'refused: ' + message}.")
        image = self.render() if self.image else None
        return Observation("\n".join(lines), agent, None, holding.name if holding else None,
                           tuple(t.name for t in self.things()), last, valid, message, image)

    # -- what the scene offers ------------------------------------------------------------------

    def things(self) -> tuple[Thing, ...]:
        return THINGS[self.env_name]

    def thing(self, name: str) -> Thing | None:
        return next((t for t in self.things() if t.name == name), None)

    def control_steps(self) -> int:
        """Control steps run since the last reset or restore."""
        return self.motion.steps

    def render(self, camera: str = AGENT_CAMERA, width: int = 320, height: int = 240) -> np.ndarray:
        import mujoco

        renderer = self.scenes.renderer(self.env_name, width, height)
        shown = mujoco.MjvOption()
        shown.geomgroup[0] = 0  # collision geoms (robosuite draws visual geoms in group 1)
        shown.geomgroup[HIDDEN_GROUP] = 0  # target ghosts and mocap markers
        shown.sitegroup[:] = 0
        renderer.update_scene(self.data, camera=camera, scene_option=shown)
        return renderer.render().copy()

    @property
    def model_label(self) -> str:
        return f"robosuite {self.env_name}"

    # -- inside ------------------------------------------------------------------------------------

    def _attach(self, name: str, env: Any) -> None:
        if self.env is not env:
            self.env_name, self.env = name, env
            self.model, self.data = env.sim.model._model, env.sim.data._data
            self.__dict__.pop("_parents", None)
            self.motion = Motion(env, self)
        self.motion.steps = 0

    def _controllers(self) -> dict[str, Any]:
        return controllers(self.env)

    def _need(self) -> None:
        if self.env is None:
            raise SceneError("no scene: reset or set_state first")

    def _body(self, name: str) -> int:
        import mujoco

        return self._id(mujoco.mjtObj.mjOBJ_BODY, name)

    def _why_not(self, action: Action) -> str | None:
        """Why the action cannot run now, or None."""
        return arm_refusal(self, action, ACTIONS)

    def _run(self, action: Action) -> str | None:
        m = self.motion
        if action.name == "MoveDelta":
            m.delta([float(v) for v in action.args])
            return None
        target = self.thing(action.args[0]) if action.args else None
        return {"MoveAbove": lambda: m.move_above(target), "Descend": lambda: m.descend(target),
                "Grasp": m.grasp, "Lift": m.lift, "PlaceAt": lambda: m.place_at(target),
                "Release": m.release}[action.name]()


def _where(p: np.ndarray) -> str:
    return f"({p[0]:+.2f}, {p[1]:+.2f}, {p[2]:.2f}) m"


_SCENES: RobosuiteScenes | None = None


def _shared_scenes() -> RobosuiteScenes:
    """One set of environments per process: making one costs about a second."""
    global _SCENES
    if _SCENES is None:
        _SCENES = RobosuiteScenes()
    return _SCENES
