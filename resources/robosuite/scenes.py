"""Seeded scenes of robosuite's manipulation environments, rendered from a calibrated camera rig.

An environment is made once per process and reset per scene with the scene's seed (robosuite
draws object placements and the arm's start noise from ``env.rng``), then settled by holding
the arm still for a few control steps. Objects keep robosuite's identities ("milk carton",
"square nut"); what they rest on comes from contacts. Cameras are MuJoCo free cameras placed
by the rig, so their intrinsics and extrinsics are known exactly; RGB, metric depth and a
per-body segmentation are rendered with visual aids (sites, collision geoms, PickPlace's
ghost targets, mocap targets) hidden.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from forge.errors import ForgeError

# robosuite object class -> the identity items name it by
IDENTITIES = {
    "MilkObject": "milk carton", "BreadObject": "bread loaf", "CerealObject": "cereal box", "CanObject": "can",
    "BoxObject": "cube", "SquareNutObject": "square nut", "RoundNutObject": "round nut", "DoorObject": "door",
    "LemonObject": "lemon", "BottleObject": "bottle",
}
# top-level bodies that are part of the scene's furniture or robot: name prefix -> category
STATIC_PREFIXES = (("robot0_", "robot"), ("mount0", "robot"), ("table", "table"), ("bin", "bin"), ("peg", "peg"))
ENV_OPTIONS = {"PickPlace": {"single_object_mode": 0}, "NutAssembly": {"single_object_mode": 0}}
HIDDEN_GROUP = 5  # geoms moved here are not drawn (visual aids)
OBJECT_IDS = 100  # segmentation value of the first object; statics count from 1
SETTLE_STEPS = 12  # control steps (robosuite's 20 Hz) the arm holds still while objects settle
DRIFT_STEPS = 4  # the last steps over which settling is measured


class SceneError(ForgeError):
    """A robosuite scene that cannot be made, reset or rendered."""


@dataclass
class RigCamera:
    """A free camera: where it looks, from how far, azimuth and elevation (degrees, MuJoCo's)."""

    lookat: list[float]
    distance: float
    azimuth: float
    elevation: float
    width: int
    height: int

    def eye(self) -> np.ndarray:
        az, el = math.radians(self.azimuth), math.radians(self.elevation)
        forward = np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
        return np.asarray(self.lookat, dtype=float) - self.distance * forward


def view_matrix(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """World-to-camera (OpenGL: the camera looks along -z, y up), as a 4x4 row-major array; a
    free camera keeps the world's z up."""
    f = target - eye
    f /= np.linalg.norm(f)
    s = np.cross(f, [0.0, 0.0, 1.0])
    s /= np.linalg.norm(s)
    u = np.cross(s, f)
    m = np.eye(4)
    m[0, :3], m[1, :3], m[2, :3] = s, u, -f
    m[:3, 3] = -m[:3, :3] @ eye
    return m


@dataclass
class SceneObject:
    name: str
    identity: str
    segment: int
    bodies: set[int]
    geoms: set[int]


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
        tracked = [min(o.bodies) for o in objects]
        before = None
        for step in range(SETTLE_STEPS):
            if step == SETTLE_STEPS - DRIFT_STEPS:
                before = data.xpos[tracked].copy()
            env.step(hold)
        drift = float(np.linalg.norm(data.xpos[tracked] - before, axis=1).max()) if tracked else 0.0
        return SceneState(env_name, env, objects, drift)

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
    roots = _root_of(model)
    for g in range(model.ngeom):
        root = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, int(roots[model.geom_bodyid[g]]))
        if root in hide:
            model.geom_group[g] = HIDDEN_GROUP


def _root_of(model: Any) -> np.ndarray:
    """Each body's top-level ancestor (a child of the world body)."""
    roots = np.arange(model.nbody)
    for b in range(1, model.nbody):  # MuJoCo numbers bodies after their parents
        p = model.body_parentid[b]
        roots[b] = b if p == 0 else roots[p]
    return roots


def scene_objects(env: Any) -> list[SceneObject]:
    """The environment's movable objects (robosuite's own list, ghosts left out), by identity."""
    import mujoco

    model = env.sim.model._model
    roots = _root_of(model)
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


def statics(model: Any) -> dict[str, tuple[int, str, set[int]]]:
    """Furniture and robot: name -> (segmentation value, category, its bodies). The robot's
    base, mount and gripper are one body named "arm"."""
    import mujoco

    roots = _root_of(model)
    out: dict[str, tuple[int, str, set[int]]] = {}
    for b in range(1, model.nbody):
        if roots[b] != b:
            continue
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or ""
        category = next((c for p, c in STATIC_PREFIXES if name.startswith(p)), None)
        if category is None:
            continue
        label = "arm" if category == "robot" else name.replace("bin", "bin ").replace("peg", "peg ").strip()
        seg, _, bodies = out.get(label, (len(out) + 1, category, set()))
        out[label] = (seg, category, bodies | {c for c in range(model.nbody) if roots[c] == b})
    return out


@dataclass
class SceneState:
    env_name: str
    env: Any
    objects: list[SceneObject]
    drift: float

    @property
    def model(self) -> Any:
        return self.env.sim.model._model

    @property
    def data(self) -> Any:
        return self.env.sim.data._data

    def object_state(self, obj: SceneObject, support_names: dict[int, str]) -> dict[str, Any]:
        """Pose, world box over its visual geoms, what it rests on, tilt of its up axis."""
        model, data = self.model, self.data
        root = min(obj.bodies)
        corners = []
        visual = [g for g in obj.geoms if model.geom_group[g] != 0] or list(obj.geoms)
        signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
        for g in visual:
            c, h = model.geom_aabb[g][:3], model.geom_aabb[g][3:]
            local = c + signs * h
            corners.append(data.geom_xpos[g] + local @ data.geom_xmat[g].reshape(3, 3).T)
        pts = np.concatenate(corners)
        w, x, y, z = data.xquat[root]
        up = data.xmat[root].reshape(3, 3)[:, 2]
        return {"position": [round(float(v), 6) for v in data.xpos[root]],
                "orientation": [round(float(v), 6) for v in (x, y, z, w)],
                "aabb_min": [round(float(v), 6) for v in pts.min(0)], "aabb_max": [round(float(v), 6) for v in pts.max(0)],
                "support": self.support(obj, support_names),
                "touching": self.touching(obj, support_names),
                "tilt_deg": round(math.degrees(math.acos(min(1.0, abs(float(up[2]))))), 3)}

    def support(self, obj: SceneObject, names: dict[int, str]) -> str | None:
        """What the object rests on: the one other body (``names``: body id -> a static's or
        object's name) its geoms touch below its centre; "several" when more than one, None
        when nothing."""
        model, data = self.model, self.data
        below: set[str] = set()
        centre_z = data.xpos[min(obj.bodies)][2]
        for c in data.contact[: data.ncon]:
            g1, g2 = int(c.geom1), int(c.geom2)
            if (g1 in obj.geoms) == (g2 in obj.geoms):
                continue
            name = names.get(int(model.geom_bodyid[g2 if g1 in obj.geoms else g1]))
            if name is not None and c.pos[2] < centre_z:
                below.add(name)
        if not below:
            return None
        return below.pop() if len(below) == 1 else "several"

    def touching(self, obj: SceneObject, names: dict[int, str]) -> list[str]:
        """The other movable objects any of its geoms is in contact with."""
        model, data = self.model, self.data
        movable = {o.name for o in self.objects} - {obj.name}
        out: set[str] = set()
        for c in data.contact[: data.ncon]:
            g1, g2 = int(c.geom1), int(c.geom2)
            if (g1 in obj.geoms) == (g2 in obj.geoms):
                continue
            name = names.get(int(model.geom_bodyid[g2 if g1 in obj.geoms else g1]))
            if name in movable:
                out.add(name)
        return sorted(out)

    def render(self, scenes: RobosuiteScenes, cam: RigCamera, seg_of_body: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """RGB (uint8), metric depth along the optical axis (float32, metres) and a per-body
        segmentation (int32: 0 background, statics from 1, objects from 100)."""
        import mujoco

        r = scenes.renderer(self.env_name, cam.width, cam.height)
        opt = mujoco.MjvOption()
        opt.geomgroup[0] = 0  # collision geoms
        opt.geomgroup[HIDDEN_GROUP] = 0
        opt.sitegroup[:] = 0
        free = mujoco.MjvCamera()
        free.type = mujoco.mjtCamera.mjCAMERA_FREE
        free.lookat[:] = cam.lookat
        free.distance, free.azimuth, free.elevation = cam.distance, cam.azimuth, cam.elevation
        r.update_scene(self.data, camera=free, scene_option=opt)
        rgb = r.render().copy()
        r.enable_depth_rendering()
        r.update_scene(self.data, camera=free, scene_option=opt)
        depth = r.render().astype(np.float32)
        r.disable_depth_rendering()
        r.enable_segmentation_rendering()
        r.update_scene(self.data, camera=free, scene_option=opt)
        raw = r.render()
        r.disable_segmentation_rendering()
        ids, types = raw[..., 0], raw[..., 1]
        geom = (types == int(mujoco.mjtObj.mjOBJ_GEOM)) & (ids >= 0)
        seg = np.zeros(ids.shape, dtype=np.int32)
        seg[geom] = seg_of_body[self.model.geom_bodyid[ids[geom]]]
        return rgb, depth, seg

    def clip(self) -> tuple[float, float]:
        """Near and far clipping distances of the free camera (metres)."""
        extent = float(self.model.stat.extent)
        return float(self.model.vis.map.znear) * extent, float(self.model.vis.map.zfar) * extent

    def fovy(self) -> float:
        return float(self.model.vis.global_.fovy)
