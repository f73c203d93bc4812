"""docs/plugins.md, run: its files written out as a plugin, an intent built with it, the package
scored by its own scorer and re-verified. The plugin is made importable the way an install
makes it (an entry point in a dist-info folder on the path), without installing it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "plugins.md"
FENCE = re.compile(r"```(?:python|yaml|toml)\n# file: (\S+)\n(.*?)```", re.S)


def _written(folder: Path) -> dict[str, Path]:
    files = {}
    for rel, body in FENCE.findall(GUIDE.read_text()):
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        files[rel] = path
    # What `pip install -e .` would add: the distribution's entry point, found on the path.
    info = folder / "forge_marks-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: forge-marks\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[forge.skills]\nmarks = forge_marks\n")
    return files


@pytest.fixture(scope="module")
def guide_build(tmp_path_factory):
    folder = tmp_path_factory.mktemp("guide")
    files = _written(folder)
    assert {"pyproject.toml", "forge_marks/__init__.py", "forge_marks/pointing.py", "forge_marks/inside_box.py",
            "forge_marks/templates/tabletop/arrow_point.yaml", "pointing.yaml"} <= set(files)
    env = {**os.environ, "PYTHONPATH": str(folder)}
    done = subprocess.run([sys.executable, "-m", "forge.cli", "build", "pointing.yaml", "--out", "out", "--json"],
                          capture_output=True, text=True, cwd=folder, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    return {"folder": folder, "env": env, "summary": summary, "package": folder / summary["package_path"]}


def test_the_guides_plugin_builds_a_package_with_drawn_arrows_and_hidden_boxes(guide_build):
    pkg = guide_build["package"]
    composition = json.loads((pkg / "composition.json").read_text())
    assert composition["composition_met"] and composition["question_types"] == {"point_in_box": 12}
    keys = [json.loads(line) for line in (pkg / "answers.jsonl").read_text().splitlines()]
    items = [json.loads(line) for line in (pkg / "items.jsonl").read_text().splitlines()]
    assert all(len(k["payload"]["box"]) == 4 for k in keys) and not any("payload" in i for i in items)
    assert all(i["media"][0]["label"] == "image with marked objects" for i in items)  # the arrow is drawn
    assert (pkg / "tabletop_pointing" / "protocols" / "inside_box.py").is_file()


def test_the_guides_package_scores_points_against_the_hidden_box_and_reports_its_metric(guide_build):
    pkg = guide_build["package"]
    keys = [json.loads(line) for line in (pkg / "answers.jsonl").read_text().splitlines()]
    rows = []
    for k, key in enumerate(keys):
        x0, y0, x1, y1 = key["payload"]["box"]
        # a corner of the box (right), far outside it (wrong), junk (invalid)
        rows.append({"id": key["id"], "response": [f"{x0 + 0.1:.2f}, {y1 - 0.1:.2f}",
                                                    "0, 0" if x0 > 5 else "100, 100", "here"][k % 3]})
    preds = guide_build["folder"] / "preds.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = subprocess.run([sys.executable, "-m", "tabletop_pointing.score", str(preds), "--json"],
                          capture_output=True, text=True, cwd=pkg, env={"PYTHONPATH": "", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["accuracy"] == pytest.approx(4 / 12) and result["invalid"] == 4
    assert result["metric_items"] == {"distance_to_box": 8} and result["mean_distance_to_box"] > 1.0


def test_the_guides_package_reverifies_from_the_raw_segmentation(guide_build):
    pkg = guide_build["package"]
    done = subprocess.run([sys.executable, "-m", "forge.cli", "reverify", str(pkg), "--intent", "pointing.yaml", "--json"],
                          capture_output=True, text=True, cwd=guide_build["folder"], env=guide_build["env"])
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(done.stdout)["valid_rate"] == 1.0
