"""Every example intent builds end to end offline and its package passes independent
re-verification (scaled down in item count to keep the suite quick)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from forge.store import Store
from forge_skills.oe.verify.reverify import reverify_package
from tests.conftest import run_build

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EMBODIMENTS = {"tabletop_spatial": "arm", "household_robot": "household robot", "mobile_robot": "mobile robot",
               "quadruped": "quadruped", "vehicle": "vehicle", "uav_aerial": "UAV (real aerial images)",
               "uav_mixed": "UAV (simulated flights and real aerial images)"}


def test_an_example_for_every_embodiment():
    assert {p.stem for p in EXAMPLES.glob("*.yaml")} >= set(EMBODIMENTS)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EMBODIMENTS))
def test_example_builds_and_reverifies(name, tmp_path):
    data = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    data["oe"]["items"] = min(data["oe"]["items"], 120)
    for src in data["sources"]:
        if "root" in src:  # folders are relative to the example's own location
            src["root"] = str((EXAMPLES / src["root"]).resolve())
            if not Path(src["root"]).is_dir():
                pytest.skip(f"{src['root']} is not beside the project")
    intent = tmp_path / f"{name}.yaml"
    intent.write_text(yaml.safe_dump(data, sort_keys=False))
    summary = run_build(intent, tmp_path / "store", tmp_path / "out")
    package = Path(summary["package_path"])
    with Store(tmp_path / "store", read_only=True) as s:
        report = reverify_package(s, package)
    assert report["invalid"] == 0, report["reasons"]
    assert summary["items_released"] >= 0.9 * data["oe"]["items"]
    composition = json.loads((package / "composition.json").read_text())
    assert set(composition["sources"]) == {s["kind"] for s in data["sources"]}
    assert sum(s["items"] for s in composition["sources"].values()) == composition["items"]
    if len(data["sources"]) > 1:  # every source contributes, and each is collected by its own skills
        assert all(s["items"] > 0 for s in composition["sources"].values())
        assert {"collect", "collect@1"} <= set(summary["nodes"])
