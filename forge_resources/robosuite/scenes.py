"""Seeded scenes of robosuite's manipulation environments, rendered from a calibrated camera rig.

An environment is made once per process and reset per scene with the scene's seed (robosuite
draws object placements and the arm's start noise from ``env.rng``), then settled by holding
the arm still for a few control steps. Objects keep robosuite's identities ("milk carton",
"square nut"); what they rest on comes from contacts. Cameras are MuJoCo free cameras placed
by the rig (see :mod:`.world`), with PickPlace's ghost targets and the mocap targets hidden.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from forge.errors import ForgeError
from forge_resources.robosuite.world import HIDDEN_GROUP, OBJECT_IDS, SceneObject, World, root_of

# robosuite object class -> the identity items name it by
IDENTITIES = {
    "MilkObject": "milk carton", "BreadObject": "bread loaf", "CerealObject": "cereal box", "CanObject": "can",
    "BoxObject": "cube", "SquareNutObject": "square nut", "RoundNutObject": "round nut", "DoorObject": "door",
    "LemonObject": "lemon", "BottleObject": "bottle",
}
ENV_OPTIONS = {"PickPlace": {"single_object_mode": 0}, "NutAssembly": {"single_object_mode": 0}}
SETTLE_STEPS = 12  # control steps (robosuite's 20 Hz) the arm holds still while objects settle
DRIFT_STEPS = 4  # the last steps over which settling is measured
OPEN_COMMAND = -1.0  # robosuite's gripper action: -1 opens, +1 closes


class SceneError(ForgeError):
    """A robosuite scene that cannot be made, reset or rendered."""


class RobosuiteScenes:
    """One process's environments (one per name) and their renderers."""

    def __init__(self) -> None:
        self._envs: dict[str, Any] = {}
        self._renderers: dict[tuple[str, int, int], Any] = {}
        self._exit_hook = False

    def env(self, env_name: str) -> Any:
        if env_name not in self._envs:
            from forge_resources.robosuite import quiet_robosuite

            robosuite = quiet_robosuite()
            try:
                env = robosuite.make(env_name, robots="Panda", has_renderer=False, has_offscreen_renderer=False,
                                     use_camera_obs=False, ignore_done=True, hard_reset=False,
                                     **ENV_OPTIONS.get(env_name, {}))
            except Exception as exc:  # robosuite raises bare Exceptions for unknown names
                raise SceneError(f"robosuite cannot make environment {env_name!r}: {exc}") from None
            env.reset()
            _hide_visual_aids(env)
            self._envs[env_name] = env
        return self._envs[env_name]

    def reset(self, env_name: str, seed: int) -> "SceneState":
        """The environment at the seed's placement, settled; ``drift`` is how far objects still
        moved (metres) over the last settling steps."""
        env = self.env(env_name)
        _reseed(env, seed)
        env.reset()
        objects = scene_objects(env)
        data = env.sim.data._data
        hold = np.zeros(env.action_dim)
        hold[-1] = OPEN_COMMAND  # the arm holds still with its gripper open
        tracked = [min(o.bodies) for o in objects]
        before = None
        for step in range(SETTLE_STEPS):
            if step == SETTLE_STEPS - DRIFT_STEPS:
                before = data.xpos[tracked].copy()
            env.step(hold)
        drift = float(np.linalg.norm(data.xpos[tracked] - before, axis=1).max()) if tracked else 0.0
        return SceneState(env.sim.model._model, data, objects, env_name, env, drift)

    def renderer(self, env_name: str, width: int, height: int) -> Any:
        import mujoco

        key = (env_name, width, height)
        if key not in self._renderers:
            model = self.env(env_name).sim.model._model
            model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
            model.vis.global_.offheight = max(model.vis.global_.offheight, height)
            self._renderers[key] = mujoco.Renderer(model, height=height, width=width)
            if not self._exit_hook:
                # MuJoCo terminates the EGL display at exit with a handler registered by the first
                # context; handlers run in reverse order, so this one frees the renderers before.
                import atexit

                atexit.register(self.close)
                self._exit_hook = True
        return self._renderers[key]

    def close(self) -> None:
        for r in self._renderers.values():
            r.close()
        for env in self._envs.values():
            env.close()
        self._renderers, self._envs = {}, {}


def _reseed(env: Any, seed: int) -> None:
    """Point the environment and every placement sampler at one generator seeded for the scene."""
    env.rng = np.random.default_rng(seed)

    def walk(sampler: Any) -> None:
        if sampler is None:
            return
        sampler.rng = env.rng
        for sub in getattr(sampler, "samplers", {}).values():
            walk(sub)

    walk(getattr(env, "placement_initializer", None))


def _hide_visual_aids(env: Any) -> None:
    """Collision geoms stay in their group (not drawn); PickPlace's ghost targets and the mocap
    end-effector targets move to a hidden group."""
    import mujoco

    model = env.sim.model._model
    hide = {o.root_body for o in getattr(env, "visual_objects", [])} | {"left_eef_target", "right_eef_target"}
    roots = root_of(model)
    for g in range(model.ngeom):
        root = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, int(roots[model.geom_bodyid[g]]))
        if root in hide:
            model.geom_group[g] = HIDDEN_GROUP


def scene_objects(env: Any) -> list[SceneObject]:
    """The environment's movable objects (robosuite's own list, ghosts left out), by identity."""
    import mujoco

    model = env.sim.model._model
    roots = root_of(model)
    ghosts = {o.name for o in getattr(env, "visual_objects", [])}
    out = []
    for obj in env.model.mujoco_objects:
        if obj.name in ghosts:
            continue
        root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, obj.root_body)
        bodies = {b for b in range(model.nbody) if roots[b] == root}
        geoms = {g for g in range(model.ngeom) if model.geom_bodyid[g] in bodies}
        identity = IDENTITIES.get(type(obj).__name__, type(obj).__name__.removesuffix("Object").lower())
        out.append(SceneObject(obj.name, identity, OBJECT_IDS + len(out), bodies, geoms))
    return out


@dataclass
class SceneState(World):
    """A generated scene: the environment's world after a seeded reset and settling."""

    env_name: str = ""
    env: Any = None
    drift: float = 0.0
