"""Moments of the real demonstrations as worlds: the recorded model at one recorded state, its
objects named by robosuite's identities, PickPlace's ghost targets hidden, and the operator's
gripper command at that moment.

Moments are spread over each demonstration: its last state (the task done) first, then a van
der Corput order (the middle, the quarters, ...), so any number of them covers the whole demonstration and adding more never
changes the earlier ones; two moments of one demonstration are at least ``MIN_SPACING`` states
apart.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from forge_resources.robosuite.demos import Demo, DemoError, RecordedScene, find_demos
from forge_resources.robosuite.world import HIDDEN_GROUP, OBJECT_IDS, SceneObject, World, root_of

# recorded root body (digits dropped, lower case) -> the identity items name it by
DEMO_IDENTITIES = {"milk": "milk carton", "bread": "bread loaf", "cereal": "cereal box", "can": "can", "cube": "cube",
                   "cubea": "cube", "cubeb": "cube", "squarenut": "square nut", "roundnut": "round nut", "door": "door"}
# An object whose recorded mesh is stretched unevenly no longer looks like its identity (the
# PickPlace demos squash the cereal box 0.4 x 1.0 x 0.4 into a small block): it is counted, but
# no question names it ("the block" would fit the bread loaf beside it just as well).
RESHAPED = "reshaped object"
RESHAPED_WHY = "its recorded mesh is stretched out of its shape: no name singles it out"
MAX_STRETCH = 1.25  # largest over smallest scale factor of a mesh that still keeps its look
WITH_OBJECTS = ("Door", "Lift", "NutAssembly", "PickPlace", "Stack")  # Wipe has nothing to ask about
MIN_SPACING = 12  # states (0.6 s at robosuite's 20 Hz) between two moments of one demonstration


@lru_cache(maxsize=8)
def demos_under(root: str) -> tuple[Demo, ...]:
    """The demonstrations with objects under a folder laid out as robosuite ships them."""
    found = tuple(d for d in find_demos(root) if d.env_name in WITH_OBJECTS)
    if not found:
        raise DemoError(f"{root}: no robosuite demonstrations (<task>/<robot>/demo.hdf5) of {list(WITH_OBJECTS)}")
    return found


def van_der_corput(k: int) -> float:
    """The k-th point (k >= 1) of the base-2 van der Corput sequence in (0, 1)."""
    out, denom = 0.0, 1.0
    while k:
        denom *= 2
        k, bit = divmod(k, 2)
        out += bit / denom
    return out


def moments(demo: Demo) -> list[int]:
    """State indices of a demonstration in the order units take them, none closer than
    ``MIN_SPACING`` to an earlier one."""
    out: list[int] = [len(demo) - 1]  # the end first: where the task is done
    k = 1
    limit = len(demo) // MIN_SPACING
    while len(out) < limit and k < 64 * max(limit, 1):
        i = round(van_der_corput(k) * (len(demo) - 1))
        if all(abs(i - j) >= MIN_SPACING for j in out):
            out.append(i)
        k += 1
    return out


def unit_moment(root: str, unit: int) -> tuple[Demo, int]:
    """The (demonstration, state index) of a unit: demonstrations in turn, each's moments in order."""
    order = _unit_order(root)
    if unit >= len(order):
        raise DemoError(f"{root}: unit {unit} is past the {len(order)} moments its demonstrations offer")
    return order[unit]


@lru_cache(maxsize=8)
def _unit_order(root: str) -> tuple[tuple[Demo, int], ...]:
    demos = demos_under(root)
    per_demo = [moments(d) for d in demos]
    rounds = max(len(m) for m in per_demo)
    return tuple((d, m[r]) for r in range(rounds) for d, m in zip(demos, per_demo) if r < len(m))


def moment_count(root: str) -> int:
    return len(_unit_order(root))


class DemoWorld(World):
    """A recorded scene at one state, as a world."""

    @classmethod
    def of(cls, scene: RecordedScene) -> "DemoWorld":
        import mujoco

        model = scene.model
        roots = root_of(model)
        stretched = _stretched_meshes(scene.portable.xml)
        objects: list[SceneObject] = []
        for b in range(1, model.nbody):
            if roots[b] != b:
                continue
            name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or ""
            bodies = {c for c in range(model.nbody) if roots[c] == b}
            geoms = {g for g in range(model.ngeom) if model.geom_bodyid[g] in bodies}
            if name.startswith("Visual"):
                for g in geoms:
                    model.geom_group[g] = HIDDEN_GROUP
                continue
            identity = DEMO_IDENTITIES.get(re.sub(r"\d+$", "", name).lower())
            meshes = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_MESH, int(model.geom_dataid[g]))
                      for g in geoms if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH}
            unnameable = None
            if identity is not None and meshes & stretched:
                identity, unnameable = RESHAPED, RESHAPED_WHY
            if identity is not None:
                objects.append(SceneObject(name, identity, OBJECT_IDS + len(objects), bodies, geoms, unnameable))
        return cls(model, scene.data, objects)


def _stretched_meshes(xml: str) -> set[str]:
    """Names of the model's meshes scaled unevenly (largest factor over smallest above MAX_STRETCH)."""
    import xml.etree.ElementTree as ET

    out = set()
    for mesh in ET.fromstring(xml).iter("mesh"):
        factors = [abs(float(v)) for v in (mesh.get("scale") or "1 1 1").split()]
        if factors and min(factors) > 0 and max(factors) / min(factors) > MAX_STRETCH:
            out.add(mesh.get("name") or "")
    return out


@lru_cache(maxsize=8)
def recorded(path: str, key: str) -> tuple[RecordedScene, DemoWorld]:
    """One process's replay of a demonstration (its model loaded once)."""
    demo = next((d for d in find_demos(Path(path).parents[2]) if str(d.path) == path and d.key == key), None)
    if demo is None:
        raise DemoError(f"{path}: no demonstration {key}")
    scene = RecordedScene(demo)
    return scene, DemoWorld.of(scene)


# -- clips: a few moments in time order, seen from one camera -----------------------------------


def clip_windows(demo: Demo, frames: int, stride: int) -> list[list[int]]:
    """Runs of ``frames`` states ``stride`` apart, each starting half a run after the last."""
    span = stride * (frames - 1)
    step = max(1, span // 2)
    return [[s + k * stride for k in range(frames)] for s in range(0, len(demo) - span, step)]


@lru_cache(maxsize=8)
def _clip_order(root: str, frames: int, stride: int) -> tuple[tuple[Demo, tuple[int, ...]], ...]:
    demos = demos_under(root)
    per_demo = [clip_windows(d, frames, stride) for d in demos]
    rounds = max(len(w) for w in per_demo)
    return tuple((d, tuple(w[r])) for r in range(rounds) for d, w in zip(demos, per_demo) if r < len(w))


def unit_clip(root: str, unit: int, frames: int, stride: int) -> tuple[Demo, tuple[int, ...]]:
    """The (demonstration, state indices) of a clip unit: demonstrations in turn."""
    order = _clip_order(root, frames, stride)
    if unit >= len(order):
        raise DemoError(f"{root}: clip {unit} is past the {len(order)} clips its demonstrations offer")
    return order[unit]


def clip_count(root: str, frames: int, stride: int) -> int:
    return len(_clip_order(root, frames, stride))
