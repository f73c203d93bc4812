"""Gates E and F in a real build: the panel's response matrix, the IRT diagnosis, the report whose
every number `forge verify` recomputes (and a tampered one it catches), the report page in a
real browser, and the exports loaded by the real inspect_ai and datasets libraries."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from forge.evaluation.solvers import DEFAULT_PANEL
from forge.verify import verify_package
from forge_skills.evaluate.classical import spearman
from forge_skills.package import exports
from forge_skills.package.panel import matrix_problems, response_lines
from tests.browser import headless_chromium
from tests.conftest import SMALL_INTENT

RECORDS = ("evaluation/panel.json", "evaluation/responses.jsonl", "evaluation/build.json", "evaluation/irt.json",
           "report.json", "report.html", "task.py", "data/test.parquet", "openeqa.json")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# The module's tests read one module build: they run in one worker, which builds it once.
pytestmark = pytest.mark.xdist_group("assessment")


@pytest.fixture(scope="module")
def package(built, tmp_path_factory) -> Path:
    """A private copy of the shared small package (some tests damage it)."""
    dest = tmp_path_factory.mktemp("assessed") / built["package"].name
    shutil.copytree(built["package"], dest, ignore=shutil.ignore_patterns(".eval", "__pycache__"))
    return dest


def _copy(package: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(package, tmp_path / package.name))


def _rewrite(package: Path, rel: str, text: str) -> None:
    """Change a file and its manifest checksum, as a careful forger would."""
    (package / rel).write_text(text)
    manifest = json.loads((package / "manifest.json").read_text())
    manifest["files"][rel] = hashlib.sha256((package / rel).read_bytes()).hexdigest()
    (package / "manifest.json").write_text(json.dumps(manifest, indent=2))


# -- gate E -------------------------------------------------------------------------------------


def test_every_panel_member_answers_every_released_item(package: Path) -> None:
    manifest = json.loads((package / "manifest.json").read_text())
    for rel in RECORDS:
        assert rel in manifest["files"], rel
    panel = json.loads((package / "evaluation/panel.json").read_text())
    assert [m["model"] for m in panel["members"]] == list(DEFAULT_PANEL)
    assert all(m["simulated"] and "simulated" in m["label"] for m in panel["members"])
    items = [r["id"] for r in _rows(package / "items.jsonl")]
    rows = _rows(package / "evaluation/responses.jsonl")
    assert len(rows) == len(DEFAULT_PANEL) * len(items)
    assert matrix_problems(panel["members"], items, rows) == []
    assert {r["model_reported"] for r in rows} == {m.replace("builtin:", "builtin:", 1) for m in DEFAULT_PANEL}
    # The evidence readers are ordered by their error rates; the random guess is near chance.
    acc = {m["model"]: m["accuracy"] for m in json.loads((package / "report.json").read_text())["models"]}
    readers = [acc[m] for m in DEFAULT_PANEL if "oracle" in m]
    assert readers == sorted(readers, reverse=True) and readers[0] > 0.9 and readers[-1] < 0.5
    assert acc["builtin:random"] < 0.6
    readme = (package / "README.md").read_text()
    assert readme.startswith("---\n") and "11 simulated" in readme


def test_the_response_matrix_contract_names_each_breach() -> None:
    members = [{"model": "m1"}, {"model": "m2"}]
    good = [{"model": m, "item_id": i, "model_reported": m, "valid": True, "score": 1.0}
            for m in ("m1", "m2") for i in ("a", "b")]
    assert matrix_problems(members, ["a", "b"], good) == []
    missing = matrix_problems(members, ["a", "b"], good[:3])
    assert missing == ["1 (model, item) pairs have no scored response"]
    twice = matrix_problems(members, ["a", "b"], good + good[:1])
    assert any("answered twice" in p for p in twice)
    invalid = [dict(good[0], valid=False), *good[1:]]
    assert any("an invalid response scored 1.0" in p for p in matrix_problems(members, ["a", "b"], invalid))
    anonymous = [dict(good[0], model_reported=""), *good[1:]]
    assert any("no model id" in p for p in matrix_problems(members, ["a", "b"], anonymous))
    stranger = [*good, {"model": "m3", "item_id": "a", "model_reported": "m3", "valid": True, "score": 0.0}]
    assert any("not a panel member" in p for p in matrix_problems(members, ["a", "b"], stranger))


def test_the_item_memo_changes_no_record(package: Path, tmp_path: Path) -> None:
    """Replies and readings read back from an earlier assessment's memo are those computed
    afresh, whichever items the memo covers; a damaged memo is no memo."""
    from forge.evaluation import item_memo, load_package
    from forge.blobs import BlobStore
    from forge_skills.package.panel import solver_responses

    cold = load_package(package)
    _, fresh = solver_responses(cold, DEFAULT_PANEL)
    ids = [it["id"] for it in cold.items]
    for covered in (ids, ids[::3]):  # all the items, or a third of them (the rest changed)
        store = BlobStore(tmp_path / f"store-{len(covered)}")
        store.put_memo(item_memo.memo_key(cold), item_memo.dump(cold, covered))
        warm = load_package(package)
        assert item_memo.load(warm, store.get_memo(item_memo.memo_key(warm))) > len(covered)
        assert solver_responses(warm, DEFAULT_PANEL)[1] == fresh
    path = store.memo_path(item_memo.memo_key(cold))
    path.write_bytes(path.read_bytes().replace(b'"', b"'", 7))  # parseable no longer
    assert store.get_memo(item_memo.memo_key(cold)) is None
    assert item_memo.load(load_package(package), b"{not json") == 0


def test_response_lines_are_what_the_json_encoder_writes(package: Path) -> None:
    shipped = _rows(package / "evaluation/responses.jsonl")
    base = {"model": "m", "model_reported": "m", "simulated": False, "item_id": "a", "response": "B",
            "answer": "B", "valid": True, "score": 1.0}
    odd = [dict(base, response='la ta\u00e7a "vermella"\n\\ \u2014 \U0001f600', answer=None),
           dict(base, score=0.5), dict(base, score=1),  # an int score: the encoder writes 1, not 1.0
           dict(base, valid=False, score=0.0, answer=None), dict(base, extra=[1, 2]),  # not the released layout
           dict(base, response=None), dict(base, score=float("nan"))]
    for rows in (shipped, odd):
        expected = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows).encode()
        assert response_lines(rows) == expected
    assert (package / "evaluation/responses.jsonl").read_bytes() == response_lines(shipped)


def test_the_contract_holds_on_the_stored_package(built) -> None:
    from forge.store import Store

    manifest = json.loads((built["package"] / "manifest.json").read_text())
    with Store(built["store"], read_only=True) as store:
        rows = store.execute("SELECT v.requirement_id, v.passed FROM verifications v JOIN artifacts a "
                             "ON v.artifact_id = a.id WHERE a.type = 'Package'").fetchall()
    verdicts: dict[str, set[bool]] = {}
    for req, passed in rows:
        verdicts.setdefault(req, set()).add(passed)
    assert verdicts.get("PKG-3") == {True}, verdicts
    assert manifest["evaluation"]["simulated"] == list(DEFAULT_PANEL)


# -- gate F -------------------------------------------------------------------------------------


def test_irt_flags_items_and_never_removes_them(built, package: Path) -> None:
    report = json.loads((package / "report.json").read_text())
    irt = report["irt"]
    items = [r["id"] for r in _rows(package / "items.jsonl")]
    assert sum(irt["band_counts"].values()) == len(items) == built["summary"]["items_released"]
    assert irt["converged"] and set(irt["theta"]) == set(DEFAULT_PANEL)
    # Accuracy follows the readers' error rates exactly, and abilities as a whole: a 2PL ability
    # weighs each item by its slope, so two readers a few items apart (5% and 10% of 120) may swap.
    readers = [m for m in DEFAULT_PANEL if "oracle" in m]
    accuracy = {m["model"]: m["accuracy"] for m in report["models"]}
    assert [accuracy[m] for m in readers] == sorted((accuracy[m] for m in readers), reverse=True)
    assert spearman([irt["theta"][m] for m in readers], range(len(readers), 0, -1)) > 0.97  # one swap at most
    flagged = {f["item"] for f in irt["flagged"]}
    assert flagged and flagged <= set(items)
    diagnosis = json.loads((package / "evaluation/irt.json").read_text())
    for f in irt["flagged"]:
        i = diagnosis["item_ids"].index(f["item"])
        assert abs(diagnosis["a"][i]) < 0.05 or diagnosis["band"][i] == "reversed" or diagnosis["reverse_risk"][i]
        # Each reason given is true of the item.
        rest = diagnosis["item_rest"][i]
        assert ("item-rest correlation below zero" in f["why"]) == (rest is not None and rest < 0)
        assert ("reversed:" in f["why"]) == (diagnosis["band"][i] == "reversed" and abs(diagnosis["a"][i]) >= 0.05)
    # An item every member answers alike separates no one: slope 0, low band, no reverse risk
    # (whether this release holds one depends on its items; test_fit builds a flat item itself).
    scores: dict[str, set[bool]] = {}
    for r in _rows(package / "evaluation/responses.jsonl"):
        scores.setdefault(r["item_id"], set()).add(float(r["score"]) >= 0.5)
    alike = [diagnosis["item_ids"].index(i) for i, s in scores.items() if len(s) == 1]
    for i in alike:
        assert diagnosis["band"][i] == "low" and not diagnosis["reverse_risk"][i] and diagnosis["item_rest"][i] is None
    boot = irt["bootstrap"]
    assert boot["replicates"] == SMALL_INTENT["gates"]["irt_bootstrap"] and boot["seed"] == 20260731
    assert len(boot["intervals"]) == len(items)
    assert len(irt["information"]["grid"]) == 161 and max(irt["information"]["normalized"]) == 1.0


# -- the report and forge verify ------------------------------------------------------------------


def test_verify_recomputes_every_reported_number(package: Path) -> None:
    report = verify_package(package, None)
    assert report["ok"] and report["metric_problems"] == [] and report["file_problems"] == []


@pytest.mark.parametrize("damage", ["accuracy", "score", "irt", "html", "funnel"])
def test_a_tampered_package_fails_verify(package: Path, tmp_path: Path, damage: str) -> None:
    pkg = _copy(package, tmp_path)
    if damage == "accuracy":
        report = json.loads((pkg / "report.json").read_text())
        report["models"][0]["accuracy"] = 0.99
        _rewrite(pkg, "report.json", json.dumps(report, indent=2, sort_keys=True) + "\n")
        expected = "report.json: models[0].accuracy: recorded 0.99"
    elif damage == "score":
        rows = _rows(pkg / "evaluation/responses.jsonl")
        wrong = next(r for r in rows if r["score"] == 0.0 and r["valid"])
        wrong["score"] = 1.0
        _rewrite(pkg, "evaluation/responses.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
        expected = "the package's scorer reads"
    elif damage == "irt":
        diagnosis = json.loads((pkg / "evaluation/irt.json").read_text())
        diagnosis["a"][0] += 0.5
        _rewrite(pkg, "evaluation/irt.json", json.dumps(diagnosis, indent=1) + "\n")
        expected = "evaluation/irt.json: a[0]"
    elif damage == "html":
        page = (pkg / "report.html").read_text().replace("Gate funnel", "Gate funnel (all passed)")
        _rewrite(pkg, "report.html", page)
        expected = "report.html: differs"
    else:
        build = json.loads((pkg / "evaluation/build.json").read_text())
        build["funnel"][0]["items"] += 100
        _rewrite(pkg, "evaluation/build.json", json.dumps(build, indent=2, sort_keys=True) + "\n")
        expected = "report.json: funnel[0].items"
    result = subprocess.run([sys.executable, "-m", "forge.cli", "verify", str(pkg)], capture_output=True, text=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert expected in result.stdout, result.stdout
    assert "Traceback" not in result.stderr


def test_an_unlisted_change_is_caught_by_its_checksum(package: Path, tmp_path: Path) -> None:
    pkg = _copy(package, tmp_path)
    (pkg / "report.json").write_text((pkg / "report.json").read_text().replace('"converged": true', '"converged": false'))
    report = verify_package(pkg, None)
    assert not report["ok"] and any(p.startswith("report.json: checksum") for p in report["file_problems"])


def test_forge_report_writes_the_page_with_later_runs(package: Path, tmp_path: Path) -> None:
    pkg = _copy(package, tmp_path)
    run = subprocess.run([sys.executable, "-m", "forge.cli", "eval", str(pkg), "--model", "builtin:text"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    out = tmp_path / "page.html"
    result = subprocess.run([sys.executable, "-m", "forge.cli", "report", str(pkg), "--out", str(out), "--json"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    numbers = json.loads(result.stdout)["numbers"]
    assert numbers["models"] == json.loads((pkg / "report.json").read_text())["models"]
    assert [r["model"] for r in numbers["later_runs"]] == ["builtin:text"]
    page = out.read_text()
    assert "Later evaluations (forge eval)" in page and page.count("<svg") >= 8
    assert verify_package(pkg, None)["ok"]  # .eval beside the package is not part of it
    bad = subprocess.run([sys.executable, "-m", "forge.cli", "report", str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode == 2 and "not a package" in bad.stderr and "Traceback" not in bad.stderr


# -- exports -----------------------------------------------------------------------------------


def test_openeqa_records_hold_the_free_form_items(package: Path) -> None:
    records = json.loads((package / "openeqa.json").read_text())
    keys = {r["id"]: r for r in _rows(package / "answers.jsonl")}
    free = [i for i, k in keys.items() if k["scoring"]["protocol"] in ("exact_choice", "yes_no", "interval", "numeric")]
    assert sorted(r["question_id"] for r in records) == sorted(free) and records
    for r in records:
        assert set(r) >= {"question_id", "category", "question", "answer", "episode_history"}
        key = keys[r["question_id"]]
        assert r["answer"] == str(key["answer"]) and r["category"] == key["capability"]
        assert all((package / f).is_file() for f in r["frames"])


def test_openeqa_file_is_a_json_array_a_record_per_line() -> None:
    records = [{"question_id": "q1", "question": "Où est la tasse?\u2028 \"quoted\"", "frames": ["a/b.png"]},
               {"question_id": "q2", "question": "line\nbreak", "frames": []}]
    data = exports.openeqa(records)
    assert json.loads(data) == records and data.decode().count("\n") == len(records) + 2
    assert json.loads(exports.openeqa([])) == []


def test_datasets_loads_the_parquet_split(package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    datasets = pytest.importorskip("datasets", reason="the interop extra (datasets) is not installed")
    # A cache of its own: datasets may reuse an earlier cache of a same-named folder.
    loaded = datasets.load_dataset(str(package), cache_dir=str(tmp_path / "cache"))
    split = loaded["test"]
    items = _rows(package / "items.jsonl")
    assert split.num_rows == len(items) and split["id"] == [it["id"] for it in items]
    keys = {r["id"]: r for r in _rows(package / "answers.jsonl")}
    for row in split.select(range(10)):
        assert row["answer"] == str(keys[row["id"]]["answer"]) and row["options"] == keys[row["id"]]["options"]
        assert all((package / p).is_file() for p in row["images"])


def test_the_report_page_in_a_real_browser(package: Path) -> None:
    driver = headless_chromium(console_log=True)
    from selenium.webdriver.common.by import By

    try:
        driver.get((package / "report.html").as_uri())
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        plots = driver.execute_script(
            "return [...document.querySelectorAll('svg.plot')].map(s => {const b = s.getBoundingClientRect();"
            " return [s.dataset.plot, b.width, b.height, s.querySelectorAll('rect,polyline,circle').length];});")
        tables = driver.execute_script(
            "return [...document.querySelectorAll('table')].map(t => [t.dataset.table, t.tBodies[0].rows.length,"
            " t.tBodies[0].rows[0].cells.length]);")
        headings = [h.text for h in driver.find_elements(By.TAG_NAME, "h2")]
    finally:
        driver.quit()
    assert errors == []
    names = {p[0] for p in plots}
    assert {"composition", "funnel", "model-accuracy", "model-capability", "discrimination-histogram",
            "discrimination-intervals", "information-absolute", "information-normalized", "blind-margins"} <= names
    assert all(w > 100 and h > 20 and marks > 0 for _, w, h, marks in plots), plots
    assert tables and all(rows >= 1 and cells >= 1 for _, rows, cells in tables), tables
    assert headings[:4] == ["Composition", "Gate funnel", "Repairs", "Skill reuse"]


def test_inspect_eval_reports_what_forge_eval_reports(package: Path, tmp_path: Path) -> None:
    """`inspect eval task.py` against a loopback OpenAI-compatible server gives the accuracy
    `forge eval` gives against the same server."""
    pytest.importorskip("inspect_ai", reason="the interop extra (inspect_ai) is not installed")
    from inspect_ai.log import read_eval_log

    from forge.evaluation import EvalOptions, evaluate
    from forge.models.loopback import LoopbackServer, Reply

    pkg = _copy(package, tmp_path)
    keys = {r["id"]: r for r in _rows(pkg / "answers.jsonl")}
    letters = "ABCDEFGH"

    def reply(request: dict[str, Any]) -> Reply:
        user = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
        text = user if isinstance(user, str) else " ".join(p.get("text", "") for p in user if p.get("type") == "text")
        key = keys[text.splitlines()[0].split()[1]]
        right = int(hashlib.sha256(key["id"].encode()).hexdigest(), 16) % 3 != 0  # two in three right
        k = key["answer_index"] if right else (key["answer_index"] + 1) % len(key["options"])
        return Reply(content=key["options"][k] if key["scoring"]["protocol"] == "yes_no" else f"Answer: {letters[k]}")

    with LoopbackServer(reply) as server:
        forge_report = evaluate(pkg, f"{server.base_url}@loop-model", EvalOptions())
        env = {"LOOP_BASE_URL": server.base_url, "LOOP_API_KEY": "unused", "INSPECT_LOG_DIR": str(tmp_path / "logs"),
               "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", "HOME": str(tmp_path)}
        run = subprocess.run([str(Path(sys.executable).parent / "inspect"), "eval", "task.py",
                              "--model", "openai-api/loop/loop-model", "--display", "plain", "--max-connections", "4"],
                             capture_output=True, text=True, env=env, timeout=600, cwd=pkg)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    log = read_eval_log(str(next((tmp_path / "logs").glob("*.eval"))))
    assert log.status == "success" and log.eval.dataset.samples == len(keys)
    inspect_accuracy = next(m.value for s in log.results.scores for name, m in s.metrics.items() if name == "accuracy")
    assert 0.5 < forge_report["accuracy"] < 0.8
    assert inspect_accuracy == pytest.approx(forge_report["accuracy"], abs=1e-6)  # forge rounds to 6 places
    assert verify_package(pkg, None)["ok"]  # running it changed nothing the package lists


@pytest.mark.slow
def test_forge_report_cross_checks_with_py_irt(package: Path, tmp_path: Path) -> None:
    pytest.importorskip("py_irt", reason="py-irt (the 'irt-bayes' extra) is not installed")
    out = tmp_path / "page.html"
    result = subprocess.run([sys.executable, "-m", "forge.cli", "report", str(package), "--out", str(out),
                             "--irt-backend", "py-irt", "--json"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    check = json.loads(result.stdout)["numbers"]["irt_cross_check"]
    assert check["backend"] == "py-irt" and check["models"] == len(DEFAULT_PANEL)
    # The abilities agree on the panel's order; both fits come from the same response matrix.
    assert check["spearman_theta"] > 0.8 and -1.0 <= check["spearman_a"] <= 1.0
    assert "Bayesian cross-check (py-irt)" in out.read_text()
