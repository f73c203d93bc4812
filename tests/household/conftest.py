"""Household fixtures: the real data folder (tests skip without it) and a small hand-built kitchen."""

from __future__ import annotations

import pytest

from forge_resources.household.catalog import default_record
from forge_resources.household.data import shared_data
from forge_resources.household.scene import Rules, Scene

DATA = shared_data()
needs_data = pytest.mark.skipif(not (DATA / "ai2thor").is_dir() or not (DATA / "alfred").is_dir(),
                                reason=f"the real data folder {DATA} (ai2thor/, alfred/) is absent")


def _put(records: dict, child: str, parent: str) -> None:
    records[child]["parentReceptacles"] = [parent]
    records[parent]["receptacleObjectIds"].append(child)


def tiny_kitchen(rules: Rules | None = None, agents: int = 1) -> Scene:
    """Counter, fridge, microwave, sink with faucet, cabinet with a cup, apple, knife, mug, bread, toaster."""
    spots = {
        "CounterTop|+00.00|+00.90|+00.00": (0.0, 0.9, 0.0), "Fridge|+01.00|+00.00|+00.00": (1.0, 0.0, 0.0),
        "Microwave|-01.00|+00.90|+00.00": (-1.0, 0.9, 0.0), "Sink|+00.00|+00.85|+01.00|SinkBasin": (0.0, 0.85, 1.0),
        "Faucet|+00.00|+00.95|+01.20": (0.0, 0.95, 1.2), "Cabinet|+00.50|+01.80|+00.00": (0.5, 1.8, 0.0),
        "Toaster|-00.50|+00.90|+00.00": (-0.5, 0.9, 0.0), "Apple|+00.10|+00.95|+00.00": (0.1, 0.95, 0.0),
        "Knife|-00.10|+00.91|+00.00": (-0.1, 0.91, 0.0), "Mug|+00.20|+00.91|+00.10": (0.2, 0.91, 0.1),
        "Cup|+00.50|+01.75|+00.00": (0.5, 1.75, 0.0), "Bread|+00.30|+00.95|-00.10": (0.3, 0.95, -0.1),
    }
    records = {}
    for oid, (x, y, z) in spots.items():
        kind = oid.split("|")[4] if oid.count("|") == 4 else oid.split("|")[0]
        records[oid] = default_record(kind, oid, f"{kind}_tiny", {"x": x, "y": y, "z": z})
    for child in ("Apple|+00.10|+00.95|+00.00", "Knife|-00.10|+00.91|+00.00", "Mug|+00.20|+00.91|+00.10",
                  "Bread|+00.30|+00.95|-00.10", "Microwave|-01.00|+00.90|+00.00", "Toaster|-00.50|+00.90|+00.00"):
        _put(records, child, "CounterTop|+00.00|+00.90|+00.00")
    _put(records, "Cup|+00.50|+01.75|+00.00", "Cabinet|+00.50|+01.80|+00.00")
    return Scene(floor_plan="FloorPlan1", objects=tuple(records.values()), locations=("loc|0|-2|0|30", "loc|0|20|0|30"),
                 agents=agents, rules=rules or Rules(), source="tiny")
