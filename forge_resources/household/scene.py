"""A household scene: the initial AI2-THOR-schema object records and the rules it runs under."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from .catalog import scene_kind

ReceptacleRule = Literal["alfred", "recorded", "any"]
RepeatRule = Literal["invalid", "noop"]


@dataclass(frozen=True)
class Rules:
    """How strict the backend is.

    ``receptacles``: ``alfred`` accepts an object only where ALFRED's receptacle table allows it;
    ``recorded`` accepts what a recorded simulator accepted (an expert's replay: ALFRED's own
    experts put a knife in a fridge) and says in the step's message where the table would not;
    ``any`` lets every receptacle take every pickupable object. ``repeat``: whether asking for a
    state an object already has (opening an open drawer) is ``invalid``, as AI2-THOR answers,
    or a valid ``noop``.
    """

    receptacles: ReceptacleRule = "alfred"
    repeat: RepeatRule = "invalid"


@dataclass(frozen=True)
class Scene:
    """What ``reset`` starts from. ``objects`` are THOR metadata records; ``locations`` are named
    agent poses (ALFRED's ``loc|x|z|rotation|horizon``) that ``GotoLocation`` accepts; ``start``
    is agent 0's first pose (None: it has not moved, so nothing is in reach)."""

    floor_plan: str
    objects: tuple[dict[str, Any], ...]
    locations: tuple[str, ...] = ()
    agents: int = 1
    rules: Rules = field(default_factory=Rules)
    source: str = ""
    start: str | None = None

    @property
    def number(self) -> int:
        return int(re.sub(r"\D", "", self.floor_plan))

    @property
    def kind(self) -> str:
        return scene_kind(self.number)

    def to_dict(self) -> dict[str, Any]:
        return {"floor_plan": self.floor_plan, "objects": copy.deepcopy(list(self.objects)),
                "locations": list(self.locations), "agents": self.agents,
                "rules": {"receptacles": self.rules.receptacles, "repeat": self.rules.repeat},
                "source": self.source, "start": self.start}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scene:
        return cls(floor_plan=data["floor_plan"], objects=tuple(copy.deepcopy(data["objects"])),
                   locations=tuple(data.get("locations", ())), agents=int(data.get("agents", 1)),
                   rules=Rules(**data.get("rules", {})), source=data.get("source", ""), start=data.get("start"))


def _volume(record: dict[str, Any]) -> float | None:
    box = record.get("axisAlignedBoundingBox") or {}
    size = box.get("size")
    return size["x"] * size["y"] * size["z"] if size else None


def direct_parents(records: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> tuple[dict[str, str | None], list[str]]:
    """One direct parent per object, and what had to be repaired to get it.

    AI2-THOR lists contact, not containment: a Mug on a CoffeeMachine on a CounterTop names
    both, and a CounterTop touching a Plate can name the Plate as its parent. A parent must be a
    receptacle; fixed furniture never sits in a pickupable object; of two fixed objects naming
    each other the larger is the parent; of several admissible parents the one that itself sits
    in another is the direct one.
    """
    by_id = {r["objectId"]: r for r in records}
    candidates: dict[str, set[str]] = {oid: set(r.get("parentReceptacles") or ()) for oid, r in by_id.items()}
    for oid, record in by_id.items():
        for child in record.get("receptacleObjectIds") or ():
            if child in candidates:
                candidates[child].add(oid)
    repairs: list[str] = []

    def admissible(oid: str, cand: str) -> str | None:
        other, record = by_id.get(cand), by_id[oid]
        if other is None or cand == oid or not other.get("receptacle"):
            return "unknown or not a receptacle"
        if other.get("pickupable") and not record.get("pickupable"):
            return "fixed object inside a pickupable one"
        if oid in candidates.get(cand, ()) and not record.get("pickupable") and not other.get("pickupable"):
            mine, theirs = _volume(record), _volume(other)
            if mine is not None and theirs is not None and theirs < mine:
                return "each names the other; the larger holds the smaller"
        return None

    parents: dict[str, str | None] = {}
    for oid in by_id:
        kept = []
        for cand in sorted(candidates[oid]):
            reason = admissible(oid, cand)
            if reason:
                repairs.append(f"{oid}: dropped parent {cand} ({reason})")
            else:
                kept.append(cand)
        inner = [c for c in kept if any(d in candidates.get(c, ()) for d in kept if d != c)]
        parents[oid] = (inner or kept or [None])[0]
        if len(kept) > 1:
            repairs.append(f"{oid}: direct parent {parents[oid]} of {kept}")
    for oid, record in by_id.items():  # a pickupable object listed as holding fixed furniture sits on it
        for child in record.get("receptacleObjectIds") or ():
            furniture = by_id.get(child)
            if (record.get("pickupable") and furniture is not None and furniture.get("receptacle")
                    and not furniture.get("pickupable") and parents[oid] is None):
                parents[oid] = child
                repairs.append(f"{oid}: placed in {child} (the dump listed them the other way round)")
    for oid in by_id:  # without bounding boxes a cycle is possible: cut it where it closes
        seen, node = [oid], parents[oid]
        while node is not None:
            if node in seen:
                repairs.append(f"{seen[-1]}: dropped parent {node} (containment cycle)")
                parents[seen[-1]] = None
                break
            seen.append(node)
            node = parents[node]
    return parents, repairs
