"""The installed robosuite's own environment at a replayed state, for its own success check.

robosuite renamed joints since the demos were recorded (``gripper0_finger_joint1`` is now
``gripper0_right_finger_joint1``, ``cube_jnt0`` is ``cube_joint0``, ...); positions of joints
matched by their current names are copied from the recorded scene into a freshly made
environment, which then answers ``_check_success`` as robosuite itself decides it.
"""

from __future__ import annotations

import re
from typing import Any

from forge_resources.robosuite.demos import DemoError, RecordedScene

RENAMED = (
    (re.compile(r"^gripper0_finger_joint(\d)$"), r"gripper0_right_finger_joint\1"),
    (re.compile(r"^(\w+?)0?_jnt0$"), r"\1_joint0"),  # cube_jnt0, SquareNut0_jnt0
    (re.compile(r"^door_hinge$"), "Door_hinge"),
    (re.compile(r"^latch_joint$"), "Door_latch_joint"),
)
QPOS_WIDTH = {0: 7, 1: 4, 2: 1, 3: 1}  # free, ball, slide, hinge
ENV_OPTIONS = {"PickPlace": {"single_object_mode": 0}, "NutAssembly": {"single_object_mode": 0}}


def current_name(recorded: str) -> str:
    for pattern, replacement in RENAMED:
        if pattern.match(recorded):
            return pattern.sub(replacement, recorded)
    return recorded


def make_env(env_name: str) -> Any:
    from forge_resources.robosuite import quiet_robosuite

    robosuite = quiet_robosuite()

    try:
        env = robosuite.make(env_name, robots="Panda", has_renderer=False, has_offscreen_renderer=False,
                             use_camera_obs=False, ignore_done=True, **ENV_OPTIONS.get(env_name, {}))
    except Exception as exc:  # robosuite raises bare Exceptions for unknown names
        raise DemoError(f"robosuite cannot make environment {env_name!r}: {exc}") from None
    env.reset()
    return env


def transfer(scene: RecordedScene, env: Any) -> list[str]:
    """Copy the scene's joint positions into ``env``; returns recorded joints it has no match for."""
    import mujoco

    model, data = env.sim.model._model, env.sim.data._data
    unmatched = []
    for j, name in enumerate(scene.names["joints"]):
        target = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, current_name(name))
        if target < 0:
            unmatched.append(name)
            continue
        a, b = scene.model.jnt_qposadr[j], model.jnt_qposadr[target]
        width = QPOS_WIDTH[int(scene.model.jnt_type[j])]
        data.qpos[b:b + width] = scene.data.qpos[a:a + width]
    env.sim.forward()
    return unmatched


def robosuite_success(scene: RecordedScene, env: Any) -> bool:
    """robosuite's own verdict on the scene's current state."""
    transfer(scene, env)
    return bool(env._check_success())
