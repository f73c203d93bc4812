"""What every arm task environment on robosuite's controller shares: its restorable state and the
preconditions of the high-level actions common to all of them.

The state is MuJoCo's full integration state (time, joints, velocities, actuators, warm start,
controls), the gripper's accumulated command and what each controller took from the state it was
reset in (``initial_joint``, ``initial_ref_pos``, ...: its nullspace posture), so that a restore
continues exactly as the original would. An environment here has ``model``, ``data``, ``env`` (the
robosuite environment), ``motion`` (its :class:`~forge_resources.robosuite.motion.Motion`) and
``thing``/``things``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from forge_resources.household.protocol import Action, ActionSpec, StepResult


class ArmSteps:
    """The step of the IE protocol for an arm environment: its own ``_why_not`` refuses an action or
    ``_run`` runs it (a refusal or failure is an invalid step, with the reason as its message)."""

    _last: tuple[str | None, bool | None, str]

    def step(self, action: Action) -> StepResult:
        self._need()
        why = self._why_not(action)
        if why is None:
            why = self._run(action)
        valid = why is None
        message = "done" if valid else why
        self._last = (str(action), valid, message)
        return StepResult(self.observation(), valid, message)


def controllers(env: Any) -> dict[str, Any]:
    """Every part controller of every robot, by ``robot index:part``."""
    return {f"{i}:{name}": c for i, robot in enumerate(env.robots)
            for name, c in robot.composite_controller.part_controllers.items()}


def references(controller: Any) -> dict[str, np.ndarray]:
    """What a controller took from the state it was reset in: part of the state a restore must
    bring back."""
    return {k: v for k, v in vars(controller).items() if k.startswith("initial_") and isinstance(v, np.ndarray)}


def capture(arm: Any) -> dict[str, Any]:
    import mujoco

    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    flat = np.empty(mujoco.mj_stateSize(arm.model, spec))
    mujoco.mj_getState(arm.model, arm.data, flat, spec)
    return {"mujoco_state": [float(v) for v in flat],
            "gripper_command": [float(v) for v in arm.motion.gripper_command()],
            "controllers": {name: {k: [float(x) for x in np.ravel(v)] for k, v in references(c).items()}
                            for name, c in controllers(arm.env).items()}}


def restore(arm: Any, state: dict[str, Any], label: str, error: Callable[[str], Exception]) -> None:
    """Put ``state`` (from :func:`capture`) back into the arm's model; ``error`` makes the exception
    for a state of another size (``label`` names the model)."""
    import mujoco

    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    flat = np.asarray(state["mujoco_state"], dtype=float)
    if flat.shape != (mujoco.mj_stateSize(arm.model, spec),):
        raise error(f"the state holds {flat.size} values; {label}'s model needs {mujoco.mj_stateSize(arm.model, spec)}")
    mujoco.mj_setState(arm.model, arm.data, flat, spec)
    mujoco.mj_forward(arm.model, arm.data)
    arm.motion.set_gripper_command(state["gripper_command"])
    # controllers keep the joint posture they were reset in (the nullspace target) and cache the
    # arm's pose, Jacobian and mass matrix until told the state moved
    saved = state.get("controllers") or {}
    for name, controller in controllers(arm.env).items():
        for key, value in references(controller).items():
            if key in saved.get(name, {}):
                setattr(controller, key, np.asarray(saved[name][key], dtype=float).reshape(np.shape(value)))
        controller.new_update = True


def arm_refusal(arm: Any, action: Action, actions: tuple[ActionSpec, ...]) -> str | None:
    """Why an action cannot run now by the rules every arm environment shares (an unknown action or
    thing, wrong arguments, MoveDelta's range, Descend, Grasp and PlaceAt's preconditions), or None."""
    spec = next((a for a in actions if a.name == action.name), None)
    if spec is None:
        return f"unknown action {action.name!r}; actions: {[a.name for a in actions]}"
    if len(action.args) != len(spec.arg_kinds):
        return f"{action.name} takes {len(spec.arg_kinds)} arguments ({', '.join(spec.arg_kinds)})"
    if action.name == "MoveDelta":
        try:
            values = [float(v) for v in action.args]
        except ValueError:
            return "MoveDelta takes seven numbers"
        return None if all(np.isfinite(v) and -1.0 <= v <= 1.0 for v in values) else "values must lie in [-1, 1]"
    things = [arm.thing(a) for a in action.args]
    if any(t is None for t in things):
        return f"no {action.args[things.index(None)]!r} here; things: {[t.name for t in arm.things()]}"
    holding = arm.motion.holding()
    if action.name == "Descend":
        if things[0].kind != "object":
            return f"the {things[0].name} is not an object to grasp"
        if arm.motion.closed():
            return "the gripper is closed"
        if not arm.motion.above(things[0]):
            return f"the gripper is not above the {things[0].name}"
    if action.name == "Grasp" and arm.motion.closed():
        return "the gripper is closed"
    if action.name == "PlaceAt":
        if holding is None:
            return "the gripper holds nothing"
        if things[0] is holding:
            return f"the gripper holds the {holding.name} itself"
    return None
