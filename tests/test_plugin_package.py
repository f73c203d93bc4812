"""A plugin package found through entry points (tests/plugins/forge_shapes, installed with pip by
the README's test command) adds a source kind with its own intent schema, a capability, a
question type whose answer is a vector scored by relative error with its own blind solver, a
template and a contract requirement; an intent using them builds, packages and re-verifies,
and the engine names none of them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest
import yaml

from forge.errors import DefinitionError, IntentError
from forge.intent import load_intent

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_NAMES = ("forge_shapes", "shape_canvas", "planar_position", "coordinate_pair", "relative_error",
                "image_position", "mean_position", "centre_position", "CanvasSpec", "CANVAS-1",
                "canvas_shapes_apart")


def _plugin_installed() -> None:
    if "shapes" not in {ep.name for ep in entry_points(group="forge.skills")}:
        pytest.fail("the test plugin is not installed: pip install -e tests/plugins/forge_shapes")


def _intent(folder: Path, **source) -> Path:
    path = folder / "shapes.yaml"
    path.write_text(yaml.safe_dump({
        "name": "shapes-positions", "seed": 3,
        "oe": {"items": 60, "capabilities": ["planar_position"], "question_types": ["coordinate_pair"]},
        "sources": [{"kind": "shape_canvas", "scenes": 30, **source}]}, sort_keys=False))
    return path


# The module's tests read one module build: they run in one worker, which builds it once.
pytestmark = pytest.mark.xdist_group("plugin_package")


@pytest.fixture(scope="module")
def shapes_build(tmp_path_factory):
    _plugin_installed()
    root = tmp_path_factory.mktemp("shapes")
    intent = _intent(root)
    done = subprocess.run([sys.executable, "-m", "forge.cli", "build", str(intent), "--store", str(root / "store"),
                           "--out", str(root / "out"), "--json"], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    return {"root": root, "intent": intent, "summary": summary, "package": Path(summary["package_path"])}


def test_an_intent_of_the_plugin_builds_packages_and_reverifies(shapes_build):
    pkg, root = shapes_build["package"], shapes_build["root"]
    composition = json.loads((pkg / "composition.json").read_text())
    assert composition["composition_met"] and composition["question_types"] == {"coordinate_pair": 60}
    answers = [json.loads(line) for line in (pkg / "answers.jsonl").read_text().splitlines()]
    assert all(re.fullmatch(r"\d+, \d+", a["answer"]) for a in answers)
    # The package carries the plugin's protocol beside its scorer and scores without forge.
    module = pkg / "shapes_positions"
    assert (module / "protocols" / "relative_error.py").is_file()
    preds = root / "preds.jsonl"
    rows = []
    for k, a in enumerate(answers):
        x, y = (int(v) for v in a["answer"].split(", "))
        # exact; within 10% relative error; far off; a single number (invalid)
        response = [a["answer"], f"{x * 1.05:.1f}, {y * 0.96:.1f}", f"{x + 40}, {y + 40}", f"{x}"][k % 4]
        rows.append(json.dumps({"id": a["id"], "response": response}))
    preds.write_text("\n".join(rows) + "\n")
    scored = subprocess.run([sys.executable, "-m", "shapes_positions.score", str(preds), "--json"],
                            capture_output=True, text=True, cwd=pkg, env={"PYTHONPATH": "", "PATH": "/usr/bin:/bin"})
    assert scored.returncode == 0, scored.stderr
    result = json.loads(scored.stdout)
    assert result["accuracy"] == pytest.approx(30 / 60) and result["invalid"] == 15
    # The protocol's own metric, over the 45 readable replies: 0, about 5% and a large error.
    assert result["metric_items"] == {"relative_error": 45}
    assert 0.05 < result["mean_relative_error"] < 1.0
    assert "the scorer reports the mean of relative_error (coordinate_pair)" in (pkg / "README.md").read_text()
    done = subprocess.run([sys.executable, "-m", "forge.cli", "reverify", str(pkg), "--store", str(root / "store"),
                           "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["valid_rate"] == 1.0 and report["items"] == 60


def test_the_plugin_question_type_has_its_own_blind_solver_and_chance(shapes_build):
    import duckdb

    con = duckdb.connect(str(shapes_build["root"] / "store" / "forge.duckdb"), read_only=True)
    details = [json.loads(d) for (d,) in con.execute("SELECT details FROM gate_decisions WHERE gate = 'C1'").fetchall()]
    con.close()
    report = details[0]
    assert "coordinate_pair.mean_position" in report["accuracies"]
    assert 0.0 < report["chance"] < 0.2 and not report["flagged"]


def test_the_plugin_contract_requirement_is_in_force(shapes_build):
    import duckdb

    con = duckdb.connect(str(shapes_build["root"] / "store" / "forge.duckdb"), read_only=True)
    checked = con.execute("SELECT count(*), bool_and(passed) FROM verifications WHERE requirement_id = 'CANVAS-1'").fetchone()
    con.close()
    assert checked == (30, True)
    from forge_shapes.canvas import CanvasSpec, Shape
    from forge_shapes.checks import canvas_shapes_apart

    touching = CanvasSpec(scene_index=0, seed=0, width=320, height=240, focal=133.3,
                          shapes=[Shape(name="a", category="disc", colour="red", x=0.0, y=0.0, size=0.1),
                                  Shape(name="b", category="disc", colour="blue", x=0.12, y=0.0, size=0.1)])
    outcome = canvas_shapes_apart(touching, None)
    assert not outcome.passed and "a and b touch" in outcome.diagnostics


def test_the_plugin_source_section_is_validated_by_its_own_schema(tmp_path):
    _plugin_installed()
    path = _intent(tmp_path, shapes={"min": 5, "max": 2}, colour_count=3)
    with pytest.raises(IntentError) as err:
        load_intent(path)
    text = str(err.value)
    assert "sources.0.shapes" in text and "min (5) is larger than max (2)" in text
    line = next(n for n, t in enumerate(path.read_text().splitlines(), 1) if "colour_count" in t)
    assert f"{path}:{line}: sources.0.colour_count: unknown field" in text
    schema = subprocess.run([sys.executable, "-m", "forge.cli", "intent-schema"], capture_output=True, text=True)
    assert schema.returncode == 0
    assert "shape_canvas" in json.loads(schema.stdout)["$defs"]["ShapeCanvasSource"]["properties"]["kind"]["const"]


def test_no_engine_file_names_the_plugin():
    hits = [f"{path.relative_to(ROOT)}: {name}" for path in sorted((ROOT / "forge").rglob("*.py"))
            for name in PLUGIN_NAMES if name in path.read_text()]
    assert not hits, hits


def test_a_name_registered_twice_names_both_origins():
    from forge.registry import register

    with pytest.raises(DefinitionError, match=r"capability:planar_position is registered twice: by forge_shapes.* and by "
                                              r"lab_plugin"):
        register("capability", "planar_position", object(), origin="lab_plugin")


def _forge(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "forge.cli", *args], capture_output=True, text=True, env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_editing_a_plugins_scoring_protocol_and_answer_rule_is_stale_and_rebuilt(tmp_path):
    """Code the engine finds through the registry (a plugin's answer rule and scoring protocol) is
    part of the code version: ``forge status`` names it, and the rebuild ships the new scorer."""
    import os
    import shutil

    _plugin_installed()
    copy = tmp_path / "plugin"
    shutil.copytree(ROOT / "tests" / "plugins" / "forge_shapes" / "forge_shapes", copy / "forge_shapes",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(copy)}  # the copy shadows the installed plugin
    found = subprocess.run([sys.executable, "-c", "import forge_shapes; print(forge_shapes.__file__)"],
                           capture_output=True, text=True, env=env)
    assert found.stdout.strip() == str(copy / "forge_shapes" / "__init__.py")
    intent = _intent(tmp_path)
    build = ("build", str(intent), "--store", str(tmp_path / "store"), "--out", str(tmp_path / "out"), "--json")
    package = Path(json.loads(_forge(*build, env=env, cwd=tmp_path).stdout)["package_path"])
    shipped = package / "shapes_positions" / "protocols" / "relative_error.py"
    protocol, rule = copy / "forge_shapes" / "protocols" / "relative_error.py", copy / "forge_shapes" / "position.py"
    assert shipped.read_bytes() == protocol.read_bytes()

    protocol.write_text(protocol.read_text().replace("+ 1e-9", "+ 1e-6"))
    rule.write_text(rule.read_text() + "\n# margins reviewed\n")
    status = json.loads(_forge("status", str(intent), "--store", str(tmp_path / "store"), "--json",
                               env=env, cwd=tmp_path).stdout)
    roots = {c["root"]: c for c in status["causes"] if c["cause"] == "code"}
    assert roots.keys() == {"code of scoring_protocol:relative_error forge_shapes.protocols.relative_error changed",
                            "code of answer_rule:image_position forge_shapes.position changed"}, status["causes"]
    stale_types = {t for c in status["causes"] for t in c["types"]}
    assert stale_types == {"Template", "Binding", "OEItem", "Package"}  # scenes and evidence are kept

    rebuilt = Path(json.loads(_forge(*build, env=env, cwd=tmp_path).stdout)["package_path"])
    assert (rebuilt / "shapes_positions" / "protocols" / "relative_error.py").read_bytes() == protocol.read_bytes()
    status = json.loads(_forge("status", str(intent), "--store", str(tmp_path / "store"), "--json",
                               env=env, cwd=tmp_path).stdout)
    assert status["stale_artifacts"] == 0


def test_a_missed_composition_target_exits_4_naming_the_shortfall(tmp_path):
    _plugin_installed()
    intent = tmp_path / "short.yaml"
    for tolerance, code in ((0.0, 4), (1.0, 0)):
        intent.write_text(yaml.safe_dump({
            "name": "shapes-short", "seed": 3,
            "oe": {"items": 60, "capabilities": ["planar_position"], "question_types": ["coordinate_pair"],
                   "tolerance": tolerance},
            "sources": [{"kind": "shape_canvas", "scenes": 3}]}, sort_keys=False))
        done = subprocess.run([sys.executable, "-m", "forge.cli", "build", str(intent), "--store", str(tmp_path / "store"),
                               "--out", str(tmp_path / "out"), "--json"], capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == code, done.stderr[-2000:]
        summary = json.loads(done.stdout)
        assert summary["composition_met"] is (code == 0)
        achieved = json.loads((Path(summary["package_path"]) / "composition.json").read_text())["items"]
        assert 0 < achieved < 60  # three canvases hold a few items: the package is written either way
        if code:
            assert (f"forge: composition not met: planar_position items: {achieved} of 60 (tolerance 0%)"
                    in done.stderr)
            assert "raise oe.tolerance to accept it" in done.stderr
        else:
            assert "composition not met" not in done.stderr


def test_a_package_named_like_a_plugin_or_a_standard_module_is_refused(tmp_path):
    _plugin_installed()
    for name, what in (("forge-shapes", "the import name of the plugin 'shapes'"),
                       ("json", "the name of Python's standard module 'json'")):
        path = _intent(tmp_path)
        path.write_text(path.read_text().replace("name: shapes-positions", f"name: {name}"))
        with pytest.raises(IntentError, match=re.escape(what)):
            load_intent(path)


def test_a_module_shadowing_a_plugin_is_an_error_naming_both(tmp_path):
    """A folder named like the plugin's module in the working folder loads in its place: the
    plugin's skills would vanish without a word."""
    _plugin_installed()
    (tmp_path / "forge_shapes").mkdir()
    (tmp_path / "forge_shapes" / "__init__.py").write_text("")
    done = subprocess.run([sys.executable, "-m", "forge.cli", "skills"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2, done.stdout[-500:]
    assert "plugin 'shapes' (forge_shapes) registered nothing" in done.stderr
    assert f"was loaded from {tmp_path / 'forge_shapes' / '__init__.py'}" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_built_in_panel_answers_the_plugin_type_or_abstains_and_says_so(shapes_build):
    """Random and prior answer a free-valued type through its own ``guess`` (every reply valid);
    the text heuristic has no way to give a coordinate pair and abstains, counted apart."""
    pkg = shapes_build["package"]
    counts: dict[str, dict[str, int]] = {}
    for line in (pkg / "evaluation" / "responses.jsonl").read_text().splitlines():
        r = json.loads(line)
        state = "abstained" if r["response"] is None else "valid" if r["valid"] else "invalid"
        counts.setdefault(r["model"], {}).setdefault(state, 0)
        counts[r["model"]][state] += 1
    assert counts["builtin:random"] == {"valid": 60} and counts["builtin:prior"] == {"valid": 60}
    assert counts["builtin:text"] == {"abstained": 60}
    assert all(c == {"valid": 60} for m, c in counts.items() if m.startswith("builtin:oracle-noisy"))
    models = {m["model"]: m for m in json.loads((pkg / "report.json").read_text())["models"]}
    assert (models["builtin:text"]["invalid"], models["builtin:text"]["abstained"]) == (0, 60)
    assert "abstained" in (pkg / "report.html").read_text()


def test_a_free_valued_type_without_a_guess_is_abstained_on_not_answered_invalid():
    from forge.evaluation.solvers import SolverContext, solver

    items = [{"id": "a", "form": "value", "question_type": "no_such_type", "question": "Where? 3 or 4."},
             {"id": "b", "form": "option", "question_type": "single_choice", "question": "Which?",
              "options": ["red", "blue"]}]
    for name in ("random", "prior", "text"):
        replies = solver(name).answer(items, SolverContext())
        assert "a" not in replies and replies["b"] in ("A", "B"), (name, replies)


def test_chance_of_a_free_value_is_drawn_from_the_items_own_answer_space(shapes_build):
    """Answers of different lengths are not guesses of each other: two answer lengths, each
    always the same value, give a chance of 1 (a reply of another length is not counted as a
    miss), where pairing across lengths gave 0.5."""
    import duckdb

    from forge_skills.oe.types import OEItem
    from forge.registry import lookup
    from forge_skills.oe.verify.blind_solvers import blind_report
    from forge_skills.oe.verify.blind_chance import _sampled_chance

    con = duckdb.connect(str(shapes_build["root"] / "store" / "forge.duckdb"), read_only=True)
    rows = con.execute("SELECT id, content FROM artifacts WHERE type = 'OEItem' ORDER BY id LIMIT 20").fetchall()
    con.close()
    items = [(iid, OEItem.model_validate_json(c)) for iid, c in rows]
    mixed = [(iid, it.model_copy(update={"answer": "50, 50" if k % 2 else "10, 20, 30"}))
             for k, (iid, it) in enumerate(items)]
    assert _sampled_chance(mixed, lookup("scorer", "oe")) == {"coordinate_pair": 1.0}
    assert blind_report(mixed)["chance"] == 1.0


@pytest.fixture(scope="module")
def points_build(tmp_path_factory):
    """The plugin's points on shapes: a reply scored against a hidden region, and numbered points
    the rule draws on the image."""
    _plugin_installed()
    root = tmp_path_factory.mktemp("points")
    intent = root / "points.yaml"
    intent.write_text(yaml.safe_dump({
        "name": "shapes-points", "seed": 3,
        "oe": {"items": 60, "capabilities": ["planar_position"],
               "question_types": ["point_on_object", "marked_point_choice"]},
        "sources": [{"kind": "shape_canvas", "scenes": 40}]}, sort_keys=False))
    done = subprocess.run([sys.executable, "-m", "forge.cli", "build", str(intent), "--store", str(root / "store"),
                           "--out", str(root / "out"), "--json"], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    package = Path(json.loads(done.stdout)["package_path"])
    keys = [json.loads(line) for line in (package / "answers.jsonl").read_text().splitlines()]
    items = {r["id"]: r for r in map(json.loads, (package / "items.jsonl").read_text().splitlines())}
    return {"root": root, "package": package, "keys": keys, "items": items}


def test_a_hidden_payload_scores_the_reply_and_stays_out_of_sight(points_build):
    pkg, keys, items = points_build["package"], points_build["keys"], points_build["items"]
    region = [k for k in keys if k["question_type"] == "point_on_object"]
    assert len(region) >= 20 and all(len(k["payload"]["polygon"]) >= 8 for k in region)
    assert not any("payload" in row or "polygon" in json.dumps(row) for row in items.values())
    review = subprocess.run([sys.executable, "-m", "forge.cli", "review", str(pkg), "--out",
                             str(points_build["root"] / "review.html")], capture_output=True, text=True)
    assert review.returncode == 0, review.stderr
    assert "polygon" not in (points_build["root"] / "review.html").read_text()
    # Any point inside the region is right, not only the key's centre; a point outside is wrong
    # and its distance to the region is reported.
    rows = []
    for k in region:
        poly = list(zip(k["payload"]["polygon"][0::2], k["payload"]["polygon"][1::2]))
        x, y = (float(v) for v in k["answer"].split(","))
        vx, vy = poly[0]
        inner = (x + 0.6 * (vx - x), y + 0.6 * (vy - y))  # most of the way to the rim
        rows.append({"id": k["id"], "response": f"{inner[0]:.2f}, {inner[1]:.2f}"})
    preds = points_build["root"] / "preds.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    scored = subprocess.run([sys.executable, "-m", "shapes_points.score", str(preds), "--json"], capture_output=True,
                            text=True, cwd=pkg, env={"PYTHONPATH": "", "PATH": "/usr/bin:/bin"})
    assert scored.returncode == 0, scored.stderr
    result = json.loads(scored.stdout)
    assert sum(result["per_item"][k["id"]] for k in region) == len(region)
    assert result["mean_distance_to_region"] == 0.0
    from forge_shapes.protocols import inside_region
    assert inside_region.score(region[0], "0, 0") == 0.0 and inside_region.secondary(region[0], "0, 0")[
        "distance_to_region"] > 1.0


def test_forge_reverify_rederives_the_payload_and_catches_a_moved_region(points_build, tmp_path):
    import shutil

    store = str(points_build["root"] / "store")
    done = subprocess.run([sys.executable, "-m", "forge.cli", "reverify", str(points_build["package"]), "--store",
                           store, "--json"], capture_output=True, text=True)
    assert done.returncode == 0 and json.loads(done.stdout)["valid_rate"] == 1.0, done.stdout[-2000:]
    moved = tmp_path / "moved"
    shutil.copytree(points_build["package"], moved)
    rows = [json.loads(line) for line in (moved / "answers.jsonl").read_text().splitlines()]
    target = next(r for r in rows if r.get("payload"))
    target["payload"]["polygon"] = [c + 30 for c in target["payload"]["polygon"]]
    (moved / "answers.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    done = subprocess.run([sys.executable, "-m", "forge.cli", "reverify", str(moved), "--store", store, "--json"],
                          capture_output=True, text=True)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["invalid"] == 1
    assert report["reasons"][target["id"]].startswith("the hidden payload disagrees with the raw arrays")


def test_numbered_points_a_rule_draws_are_on_the_image(points_build):
    from PIL import Image

    from forge_skills.oe.synthesize.media import MARKER_COLOR

    pkg, items = points_build["package"], points_build["items"]
    chosen = [k for k in points_build["keys"] if k["question_type"] == "marked_point_choice"]
    assert len(chosen) >= 10 and {k["answer"] for k in chosen} == {"1", "2", "3"}
    for k in chosen[:5]:
        row = items[k["id"]]
        assert row["options"] == ["1", "2", "3"] and row["response_format"] == "Answer with the number of the point."
        rgb = np.asarray(Image.open(pkg / row["media"][0]["path"]).convert("RGB"))
        assert (np.abs(rgb.astype(int) - MARKER_COLOR).sum(axis=2) < 30).sum() >= 3 * 20  # three filled dots
