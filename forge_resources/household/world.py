"""The backend's mutable state: dynamic fields over a scene's static AI2-THOR records.

Containment is one direct parent per object. Reach is geometric: an agent stands at a pose
(ALFRED's ``loc|x|z|rotation|horizon`` grid pose, or beside an object it walked to) and can act
on what lies within AI2-THOR's interaction distance of it, in front of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .scene import Scene, direct_parents

REACH = 1.5                 # metres: AI2-THOR's (and ALFRED's) visibilityDistance
HALF_FIELD_OF_VIEW = 60.0   # degrees either side of the heading (a 90 degree camera, with margin)
GRID = 0.25                 # ALFRED's grid step: loc|4|-3|... is x=1.0, z=-0.75
# Furniture whose centre can be far from its near edge: half a typical extent, for records without a box.
LARGE_EXTENT = {"CounterTop": 1.0, "DiningTable": 0.75, "Bed": 1.0, "Sofa": 0.9, "Desk": 0.6, "Dresser": 0.6,
                "Shelf": 0.5, "Bathtub": 0.8, "BathtubBasin": 0.6, "TVStand": 0.6, "Fridge": 0.4, "Floor": 100.0}
DYNAMIC = ("isOpen", "isToggled", "isSliced", "isDirty", "isCooked", "temperature", "fillLiquid", "isBroken")
# ALFRED's own bookkeeping (env/thor_env.py: cleaned_objects, heated_objects, cooled_objects), kept per object.
TRACKED = ("isCleaned", "isHeated", "isCooled")


@dataclass(frozen=True)
class Pose:
    """Where an agent stands; ``rotation`` None means it can turn to anything around it."""

    x: float
    z: float
    rotation: float | None = None
    horizon: float | None = None
    name: str = ""

    @classmethod
    def parse(cls, location: str) -> Pose:
        """``loc|x|z|r|h`` in ALFRED's grid units (x*0.25 m, r*90 degrees)."""
        parts = location.split("|")
        if len(parts) != 5 or parts[0] != "loc":
            raise ValueError(f"not a location: {location!r} (expected loc|x|z|rotation|horizon)")
        return cls(x=int(parts[1]) * GRID, z=int(parts[2]) * GRID, rotation=int(parts[3]) * 90.0,
                   horizon=float(parts[4]), name=location)

    def to_dict(self) -> dict[str, Any]:
        return {"x": self.x, "z": self.z, "rotation": self.rotation, "horizon": self.horizon, "name": self.name}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Pose | None:
        return None if data is None else cls(**data)


@dataclass
class Agent:
    location: Pose | None = None
    held: str | None = None


def _extent(record: dict[str, Any]) -> float:
    size = (record.get("axisAlignedBoundingBox") or {}).get("size")
    if size:
        return 0.5 * max(size["x"], size["z"])
    return LARGE_EXTENT.get(record["objectType"], 0.0)


class World:
    """Static records (shared, read-only) plus per-object dynamic fields (copied per state)."""

    def __init__(self, scene: Scene, dyn: dict[str, dict[str, Any]], order: list[str],
                 agents: list[Agent], spawned: dict[str, dict[str, Any]]) -> None:
        self.scene = scene
        self.static = {r["objectId"]: r for r in scene.objects}
        self.dyn = dyn
        self.order = order
        self.agents = agents
        self.spawned = spawned
        self._children: dict[str, list[str]] | None = None
        self.memo: dict[str, Any] = {}  # derived views a caller caches; cleared when containment changes
        self._queries: dict[tuple[Any, ...], Any] | None = None  # set only inside unchanged()

    @classmethod
    def from_scene(cls, scene: Scene, start: Pose | None = None) -> World:
        parents, _ = direct_parents(scene.objects)
        dyn = {}
        for record in scene.objects:
            pos = record["position"]
            entry = {key: record.get(key) for key in DYNAMIC}
            entry.update({key: bool(record.get(key, False)) for key in TRACKED})
            entry.update(parent=parents[record["objectId"]], position=(pos["x"], pos["y"], pos["z"]),
                         removed=False, moved=False)
            dyn[record["objectId"]] = entry
        agents = [Agent(location=start if i == 0 else None) for i in range(scene.agents)]
        return cls(scene, dyn, [r["objectId"] for r in scene.objects], agents, {})

    def copy(self) -> World:
        return World(self.scene, {k: dict(v) for k, v in self.dyn.items()}, list(self.order),
                     [Agent(a.location, a.held) for a in self.agents], dict(self.spawned))

    @contextmanager
    def unchanged(self) -> Iterator[World]:
        """Memoize holder, enclosure and reach queries for a block that only reads the world (a
        legality scan checks a few hundred candidate actions against one state)."""
        if self._queries is not None:
            yield self
            return
        self._queries = {}
        try:
            yield self
        finally:
            self._queries = None

    def _memoized(self, key: tuple[Any, ...], compute: Callable[..., Any], *args: Any) -> Any:
        memo = self._queries
        if memo is None:
            return compute(*args)
        if key not in memo:
            memo[key] = compute(*args)
        return memo[key]

    # ---- lookups
    def record(self, oid: str) -> dict[str, Any]:
        return self.static.get(oid) or self.spawned[oid]

    def exists(self, oid: str) -> bool:
        return oid in self.dyn and not self.dyn[oid]["removed"]

    def type_of(self, oid: str) -> str:
        return self.record(oid)["objectType"]

    def can(self, oid: str, flag: str) -> bool:
        return bool(self.record(oid).get(flag))

    def parent(self, oid: str) -> str | None:
        return self.dyn[oid]["parent"]

    def children(self, oid: str) -> list[str]:
        if self._children is None:
            index: dict[str, list[str]] = {}
            for o in self.order:
                p = self.dyn[o]["parent"]
                if p is not None:
                    index.setdefault(p, []).append(o)
            for p, kids in index.items():  # keep the order the scene listed them in, new arrivals after
                listed = {c: i for i, c in enumerate(self.record(p).get("receptacleObjectIds") or ())}
                kids.sort(key=lambda c: listed.get(c, len(listed)))
            self._children = index
        return self._children.get(oid, [])

    def ancestors(self, oid: str) -> list[str]:
        out, node = [], self.dyn[oid]["parent"]
        while node is not None:
            out.append(node)
            node = self.dyn[node]["parent"]
        return out

    def descendants(self, oid: str) -> list[str]:
        out, stack = [], list(self.children(oid))
        while stack:
            node = stack.pop(0)
            out.append(node)
            stack.extend(self.children(node))
        return out

    def closed_around(self, oid: str) -> str | None:
        """The nearest closed openable receptacle enclosing the object, if any."""
        return self._memoized(("closed", oid), self._closed_around, oid)

    def _closed_around(self, oid: str) -> str | None:
        for anc in self.ancestors(oid):
            if self.can(anc, "openable") and not self.dyn[anc]["isOpen"]:
                return anc
        return None

    def holder(self, oid: str) -> int | None:
        """Which agent carries the object (in hand, or inside what it holds)."""
        return self._memoized(("holder", oid), self._holder, oid)

    def _holder(self, oid: str) -> int | None:
        held = {a.held: i for i, a in enumerate(self.agents) if a.held is not None}  # one hand per object
        if not held:
            return None
        node: str | None = oid
        while node is not None:  # the object itself, then its ancestors
            if node in held:
                return held[node]
            node = self.dyn[node]["parent"]
        return None

    def in_reach(self, agent: int, oid: str) -> bool:
        return self._memoized(("reach", agent, oid), self._in_reach, agent, oid)

    def _in_reach(self, agent: int, oid: str) -> bool:
        if self.holder(oid) == agent:
            return True
        pose = self.agents[agent].location
        if pose is None or not self.exists(oid) or self.holder(oid) is not None:
            return False
        x, _, z = self.dyn[oid]["position"]
        dx, dz = x - pose.x, z - pose.z
        near = math.hypot(dx, dz) - _extent(self.record(oid))
        if near > REACH:
            return False
        if pose.rotation is None or near < 0.5:
            return True
        bearing = math.degrees(math.atan2(dx, dz))  # AI2-THOR: rotation 0 faces +z, 90 faces +x
        return abs((bearing - pose.rotation + 180.0) % 360.0 - 180.0) <= HALF_FIELD_OF_VIEW

    def visible(self, agent: int, oid: str) -> bool:
        return self.in_reach(agent, oid) and self.closed_around(oid) is None

    # ---- changes
    def set_parent(self, oid: str, parent: str | None, position: tuple[float, float, float]) -> None:
        """Move an object (and what it holds) under a new parent, to a new position."""
        old = self.dyn[oid]["position"]
        delta = tuple(n - o for n, o in zip(position, old))
        self.dyn[oid]["parent"] = parent
        for node in [oid, *self.descendants(oid)]:
            p = self.dyn[node]["position"]
            self.dyn[node]["position"] = tuple(a + d for a, d in zip(p, delta))
            self.dyn[node]["moved"] = True
        self._children = None
        self.memo = {}

    def add_object(self, record: dict[str, Any], parent: str | None) -> None:
        oid = record["objectId"]
        pos = record["position"]
        self.spawned[oid] = record
        entry = {key: record.get(key) for key in DYNAMIC}
        entry.update({key: False for key in TRACKED})
        entry.update(parent=parent, position=(pos["x"], pos["y"], pos["z"]), removed=False, moved=True)
        self.dyn[oid] = entry
        self.order.append(oid)
        self._children = None
        self.memo = {}

    def remove(self, oid: str) -> None:
        self.dyn[oid].update(removed=True, parent=None, moved=True)
        self._children = None
        self.memo = {}

    # ---- views
    def metadata(self, agent: int = 0, only: set[str] | None = None) -> list[dict[str, Any]]:
        """Every object (or those in ``only``) as AI2-THOR metadata, as seen by ``agent``; fields
        nothing changed stay as loaded."""
        with self.unchanged():
            return self._metadata(agent, only)

    def _metadata(self, agent: int, only: set[str] | None) -> list[dict[str, Any]]:
        pose = self.agents[agent].location if self.agents else None
        out = []
        for oid in self.order:
            if only is not None and oid not in only:
                continue
            static, d = self.record(oid), self.dyn[oid]
            rec = dict(static)
            for key in DYNAMIC:
                rec[key] = d[key]
            for key in TRACKED:
                rec[key] = d[key]
            if d["moved"]:
                x, y, z = d["position"]
                rec["position"] = {"x": x, "y": y, "z": z}
            parent = d["parent"]
            rec["parentReceptacles"] = [parent] if parent is not None else None
            kids = [k for k in self.children(oid)]
            rec["receptacleObjectIds"] = kids if static.get("receptacle") else None
            rec["isPickedUp"] = self.holder(oid) is not None
            rec["isFilledWithLiquid"] = d["fillLiquid"] is not None
            if d["isOpen"] != bool(static.get("isOpen")):
                rec["openness"] = 1.0 if d["isOpen"] else 0.0
            if pose is not None:
                rec["visible"] = rec["isInteractable"] = self.visible(agent, oid)
                x, _, z = d["position"]
                rec["distance"] = round(math.hypot(x - pose.x, z - pose.z), 4)
            if d["removed"]:
                rec["visible"] = rec["isInteractable"] = False
            out.append(rec)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"dyn": {k: {**v, "position": list(v["position"])} for k, v in self.dyn.items()},
                "order": list(self.order),
                "agents": [{"location": a.location.to_dict() if a.location else None, "held": a.held}
                           for a in self.agents],
                "spawned": dict(self.spawned)}

    @classmethod
    def from_dict(cls, scene: Scene, data: dict[str, Any]) -> World:
        dyn = {k: {**v, "position": tuple(v["position"])} for k, v in data["dyn"].items()}
        agents = [Agent(Pose.from_dict(a["location"]), a["held"]) for a in data["agents"]]
        return cls(scene, dyn, list(data["order"]), agents, dict(data["spawned"]))

    def key(self) -> tuple:
        """A hashable summary of everything that can change, for search."""
        return (tuple((k, tuple(v.values())) for k, v in self.dyn.items()),
                tuple((a.location, a.held) for a in self.agents))

