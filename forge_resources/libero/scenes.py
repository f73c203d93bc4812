"""LIBERO's task scenes at their recorded initial states, settled, as a :class:`World` of robosuite
queries: the task's objects named as a person names them, its fixtures (cabinets, stove, shelf,
the table) as statics with the state of their drawers and doors.

An environment is built once per task and process (LIBERO builds a scene in 2-7 s and holds 2-3 GB,
so a process keeps the last two). LIBERO places fixtures with numpy's global generator when it
builds a scene and the initial states do not record where: the generator is seeded from the task's
name around the build, so a task's fixtures stand in the same place in every process.
"""

from __future__ import annotations

import math
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forge.errors import ForgeError
from forge_resources.libero import runtime
from forge_resources.robosuite.world import HIDDEN_GROUP, OBJECT_IDS, SceneObject, World, root_of, statics

# LIBERO category -> what a person looking at the scene calls the object (the tasks' own wording
# where they use one: "the black bowl", "the yellow and white mug", "the alphabet soup").
OBJECT_NAMES: dict[str, str] = {
    "akita_black_bowl": "black bowl", "white_bowl": "white bowl", "plate": "plate",
    "glazed_rim_porcelain_ramekin": "ramekin", "basket": "basket", "wooden_tray": "wooden tray",
    "cookies": "cookie box", "alphabet_soup": "alphabet soup can", "tomato_sauce": "tomato sauce can",
    "salad_dressing": "salad dressing bottle", "new_salad_dressing": "salad dressing bottle",
    "bbq_sauce": "bbq sauce bottle", "ketchup": "ketchup bottle", "cream_cheese": "cream cheese box",
    "butter": "butter box", "chocolate_pudding": "chocolate pudding box", "milk": "milk carton",
    "orange_juice": "orange juice carton", "wine_bottle": "wine bottle", "chefmate_8_frypan": "frying pan",
    "moka_pot": "moka pot", "porcelain_mug": "white mug", "white_yellow_mug": "yellow and white mug",
    "red_coffee_mug": "red mug", "black_book": "black book", "yellow_book": "yellow book",
}
FIXTURE_NAMES: dict[str, str] = {
    "wooden_cabinet": "wooden cabinet", "white_cabinet": "white cabinet", "flat_stove": "stove",
    "wine_rack": "wine rack", "microwave": "microwave", "desk_caddy": "desk caddy",
    "wooden_two_layer_shelf": "wooden shelf",
}
# Top-level bodies of LIBERO's arenas that objects rest on: body name -> category.
SURFACES = {"table": "table", "kitchen_table": "table", "living_room_table": "table", "study_table": "table",
            "floor": "floor"}
# Drawer and door joints by the part a person names: the joint name's ending -> the part.
PARTS = {"top_level": "top drawer", "middle_level": "middle drawer", "bottom_level": "bottom drawer",
         "microjoint": "door"}
SETTLE_STEPS = 12  # control steps (20 Hz) with the arm still: LIBERO's objects start about 7 cm up
DRIFT_STEPS = 4  # the last steps over which settling is measured
CLOSED_SHARE = 0.05  # a drawer or door within this share of its travel from shut reads as closed
KEPT_ENVS = 2


class LiberoSceneError(ForgeError):
    """A LIBERO task scene that cannot be built, set to its initial state or settled."""


def object_name(category: str) -> str:
    return OBJECT_NAMES.get(category, category.replace("_", " "))


def category_of(instance: str) -> str:
    """``akita_black_bowl_2`` -> ``akita_black_bowl`` (LIBERO numbers the instances of a category)."""
    head, _, tail = instance.rpartition("_")
    return head if tail.isdigit() else instance


def task_seed(suite: str, task: str) -> int:
    return zlib.crc32(f"{suite}/{task}".encode())


@dataclass
class LiberoWorld(World):
    """A LIBERO task at one settled initial state."""

    suite: str = ""
    task: str = ""
    init_index: int = 0
    drift: float = 0.0
    env: Any = None
    fixture_states: dict[str, dict[str, str]] = field(default_factory=dict)

    def statics(self) -> dict[str, tuple[int, str, set[int]]]:
        """The arm and gripper (as robosuite's statics), the surface objects stand on, each fixture
        under its person's name and each drawer or door of a fixture on its own ("top drawer of the
        wooden cabinet"), so that a view tells how much of the part it shows."""
        import mujoco

        found = [(k, cat, bodies) for k, (_s, cat, bodies) in statics(self.model).items() if k in ("arm", "gripper")]
        roots = root_of(self.model)
        for b in range(1, self.model.nbody):
            name = mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_BODY, b) or ""
            if roots[b] == b and name in SURFACES:
                found.append((SURFACES[name], SURFACES[name], {c for c in range(self.model.nbody) if roots[c] == b}))
        parts = self._part_joints()
        for label, noun, bodies in fixture_bodies(self.env, roots):
            for part in (p for p in parts.values() if p.fixture == label):
                found.append((part.label, part.kind, part.bodies))
                bodies = bodies - part.bodies
            found.append((label, noun, bodies))
        return {label: (k + 1, category, bodies) for k, (label, category, bodies) in enumerate(found)}

    def parts(self) -> dict[str, dict[str, Any]]:
        """Each drawer and door: its fixture, state (open, closed, partly open; from LIBERO's own
        ranges), the horizontal direction it opens toward (a camera on that side sees its front),
        its position and its segmentation value."""
        segments = {label: seg for label, (seg, _c, _b) in self.statics().items()}
        out = {}
        for state_of, part in self._part_joints().items():
            out[part.label] = {"fixture": part.fixture, "part": part.part, "kind": part.kind,
                               "state": self.fixture_states.get(part.fixture, {}).get(part.part),
                               "opens_toward": part.opens_toward, "position": part.position,
                               "segment": segments[part.label]}
        return out

    def _part_joints(self) -> dict[str, "Part"]:
        """Joint name -> the drawer or door it moves."""
        import mujoco

        model, data = self.model, self.data
        labels = fixture_labels(self.env)
        out = {}
        for instance, fixture in self.env.fixtures_dict.items():
            ranges = (getattr(fixture, "object_properties", {}) or {}).get("articulation") or {}
            opened = ranges.get("default_open_ranges") or []
            for joint in fixture.joints:
                part = next((p for end, p in PARTS.items() if joint.endswith(end)), None)
                j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
                if part is None or j < 0 or not opened:
                    continue
                body = int(model.jnt_bodyid[j])
                bodies = {b for b in range(model.nbody) if _descends(model, b, body)}
                axis = data.xmat[body].reshape(3, 3) @ model.jnt_axis[j]
                root = self.env.sim.model.body_name2id(fixture.root_body)
                if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_SLIDE:
                    toward = axis * (1.0 if max(opened, key=abs) > 0 else -1.0)
                else:  # a door faces away from its fixture's centre
                    toward = data.xpos[body] - data.xpos[root]
                toward = np.array([toward[0], toward[1], 0.0])
                toward /= max(float(np.linalg.norm(toward)), 1e-9)
                kind = "drawer" if "drawer" in part else "door"
                label = f"{part} of the {labels[instance]}"
                out[joint] = Part(label, labels[instance], part, kind, bodies,
                                  [round(float(v), 4) for v in toward], [round(float(v), 4) for v in data.xpos[body]])
        return out


@dataclass(frozen=True)
class Part:
    """A drawer or door of a fixture."""

    label: str
    fixture: str
    part: str
    kind: str
    bodies: set[int]
    opens_toward: list[float]
    position: list[float]


def _descends(model: Any, body: int, ancestor: int) -> bool:
    while body > 0:
        if body == ancestor:
            return True
        body = int(model.body_parentid[body])
    return False


def fixture_bodies(env: Any, roots: np.ndarray) -> list[tuple[str, str, set[int]]]:
    """(label, noun, bodies) of each fixture the task declares."""
    model = env.sim.model._model
    out = []
    for instance, label in fixture_labels(env).items():
        try:
            root = env.sim.model.body_name2id(env.fixtures_dict[instance].root_body)
        except ValueError:
            continue  # a fixture that is part of the arena (the floor, the table) has no body of its own
        out.append((label, label.rstrip(" 0123456789"), {c for c in range(model.nbody) if roots[c] == root}))
    return out


def part_states(env: Any) -> dict[str, dict[str, str]]:
    """Fixture label -> part -> "open", "closed" or "partly open", by LIBERO's own ranges of each
    articulated fixture (a drawer is shut at 0 and open past its open range)."""
    out: dict[str, dict[str, str]] = {}
    labels = fixture_labels(env)
    for instance, fixture in env.fixtures_dict.items():
        ranges = (getattr(fixture, "object_properties", {}) or {}).get("articulation") or {}
        opened, shut = ranges.get("default_open_ranges") or [], ranges.get("default_close_ranges") or []
        if not opened or not shut:
            continue
        for joint in fixture.joints:
            part = next((p for end, p in PARTS.items() if joint.endswith(end)), None)
            if part is None:
                continue
            q = float(env.sim.data.qpos[env.sim.model.get_joint_qpos_addr(joint)])
            shut_at = min(shut, key=abs)  # LIBERO's drawers and doors are shut at 0
            full = max(opened, key=lambda v: abs(v - shut_at))
            travel = abs(full - shut_at)
            share = abs(q - shut_at) / travel if travel else 0.0
            state = ("closed" if share <= CLOSED_SHARE else "open" if fixture.is_open(q) else "partly open")
            out.setdefault(labels[instance], {})[part] = state
    return out


def fixture_labels(env: Any) -> dict[str, str]:
    """Fixture instance -> what a person calls it (two of one kind: numbered in the task's order)."""
    seen: dict[str, int] = {}
    out = {}
    for instance in env.fixtures_dict:
        category = category_of(instance)
        noun = FIXTURE_NAMES.get(category, category.replace("_", " "))
        seen[noun] = seen.get(noun, 0) + 1
        out[instance] = noun if seen[noun] == 1 else f"{noun} {seen[noun]}"
    return out


def scene_objects(env: Any) -> list[SceneObject]:
    """The task's movable objects (BDDL's objects, not its fixtures), named by what they are."""
    model = env.sim.model._model
    roots = root_of(model)
    out = []
    for instance, obj in env.objects_dict.items():
        root = env.sim.model.body_name2id(obj.root_body)
        bodies = {b for b in range(model.nbody) if roots[b] == root}
        geoms = {g for g in range(model.ngeom) if model.geom_bodyid[g] in bodies}
        out.append(SceneObject(instance, object_name(category_of(instance)), OBJECT_IDS + len(out), bodies, geoms))
    return out


class LiberoScenes:
    """One process's LIBERO environments (the last few tasks) and their renderers."""

    def __init__(self) -> None:
        self._envs: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._renderers: dict[tuple[str, str, int, int], Any] = {}
        self._exit_hook = False

    def env(self, suite: str, task: str) -> Any:
        key = (suite, task)
        if key in self._envs:
            self._envs.move_to_end(key)
            return self._envs[key]
        while len(self._envs) >= KEPT_ENVS:
            self._drop(next(iter(self._envs)))
        saved = np.random.get_state()
        np.random.seed(task_seed(suite, task))  # LIBERO places fixtures with the global generator
        try:
            env = runtime.make_env(suite, task)
        except ForgeError:
            raise
        except Exception as exc:  # LIBERO raises what its parts raise
            raise LiberoSceneError(f"LIBERO cannot build {suite}/{task}: {type(exc).__name__}: {exc}") from None
        finally:
            np.random.set_state(saved)
        _hide_visual_aids(env.env)
        # The first steps after a build move a still arm otherwise than any later ones do (its
        # controller starts from the build's reset): one settled state first makes a state's
        # outcome the same whatever was shown before it.
        env.set_init_state(runtime.init_states(suite, task)[0])
        for _ in range(SETTLE_STEPS):
            env.step(runtime.HOLD)
        self._envs[key] = env
        return env

    def state(self, suite: str, task: str, init_index: int) -> LiberoWorld:
        """The task at its initial state ``init_index``, settled with the arm still."""
        env = self.env(suite, task)
        states = runtime.init_states(suite, task)
        if not 0 <= init_index < len(states):
            raise LiberoSceneError(f"{suite}/{task} has {len(states)} initial states, not {init_index + 1}")
        env.set_init_state(states[init_index])
        inner = env.env
        objects = scene_objects(inner)
        data = inner.sim.data._data
        tracked = [min(o.bodies) for o in objects]
        before = data.xpos[tracked].copy()
        for step in range(SETTLE_STEPS):
            if step == SETTLE_STEPS - DRIFT_STEPS:
                before = data.xpos[tracked].copy()
            env.step(runtime.HOLD)
        drift = float(np.linalg.norm(data.xpos[tracked] - before, axis=1).max()) if tracked else 0.0
        return LiberoWorld(inner.sim.model._model, data, objects, suite=suite, task=task, init_index=init_index,
                           drift=drift, env=inner, fixture_states=part_states(inner))

    def renderer(self, suite: str, task: str, width: int, height: int) -> Any:
        key = (suite, task, width, height)
        if key not in self._renderers:
            self._renderers[key] = runtime.renderer(self.env(suite, task), width, height)
            if not self._exit_hook:
                # MuJoCo ends the EGL display at exit with a handler its first context registered;
                # handlers run in reverse order, so this one frees the renderers before.
                import atexit

                atexit.register(self.close)
                self._exit_hook = True
        return self._renderers[key]

    def _drop(self, key: tuple[str, str]) -> None:
        for rkey in [k for k in self._renderers if k[:2] == key]:
            self._renderers.pop(rkey).close()
        self._envs.pop(key).close()

    def close(self) -> None:
        for key in list(self._envs):
            self._drop(key)


def _hide_visual_aids(env: Any) -> None:
    """The mocap targets of the end effector move to a hidden group (sites are never drawn)."""
    import mujoco

    model = env.sim.model._model
    roots = root_of(model)
    for g in range(model.ngeom):
        root = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, int(roots[model.geom_bodyid[g]]))
        if root in ("left_eef_target", "right_eef_target"):
            model.geom_group[g] = HIDDEN_GROUP


def named_camera(world: World, camera: str) -> tuple[list[float], float, float, float]:
    """A named camera of the model as a free camera: where it looks (the point on its axis level
    with the objects' mean height), distance, azimuth and elevation (degrees)."""
    import mujoco

    cam = mujoco.mj_name2id(world.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    if cam < 0:
        raise LiberoSceneError(f"the scene has no camera {camera!r}")
    eye = np.array(world.data.cam_xpos[cam])
    forward = -world.data.cam_xmat[cam].reshape(3, 3)[:, 2]
    height = float(np.mean([world.data.xpos[min(o.bodies)][2] for o in world.objects])) if world.objects else 0.0
    t = (height - eye[2]) / forward[2] if forward[2] < -1e-6 else 1.0
    lookat = eye + t * forward
    return ([round(float(v), 5) for v in lookat], round(float(t), 5),
            round(math.degrees(math.atan2(forward[1], forward[0])), 4),
            round(math.degrees(math.asin(max(-1.0, min(1.0, float(forward[2]))))), 4))
