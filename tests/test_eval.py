"""`forge eval`: models and built-in solvers on a real built package, scored by the package's own
scorer, stored, resumable, reported. A real loopback OpenAI-compatible server plays the model."""

from __future__ import annotations

import json
import shutil
import string
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from forge.evaluation import EvalOptions, evaluate, load_package
from forge.models import ModelUnavailableError
from forge.models.loopback import LoopbackServer, Reply, _Handler
from forge.store import Store

# Both files read the session build `wide`: one worker builds it once for both.
pytestmark = pytest.mark.xdist_group("wide")

LETTERS = string.ascii_uppercase
CHOICE = ("exact_choice", "yes_no", "interval")


# -- fixtures and helpers ---------------------------------------------------------------------


def _copy(source: Path, dest: Path) -> Path:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".eval", "__pycache__"))
    return dest


@pytest.fixture(scope="module")
def package(built, tmp_path_factory) -> Path:
    """A private copy of the shared small package (evaluation writes PACKAGE/.eval beside it)."""
    return _copy(built["package"], tmp_path_factory.mktemp("eval") / built["package"].name)


def _keys(package: Path) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in map(json.loads, (package / "answers.jsonl").read_text().splitlines())}


def _items(package: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (package / "items.jsonl").read_text().splitlines()]


def _gold(key: dict[str, Any]) -> str:
    """A correct response, written here independently of forge's solvers."""
    protocol = key["scoring"]["protocol"]
    if protocol == "numeric":
        return f"{key['answer_value']:g}"
    if protocol in ("set_match", "ordered_list"):
        return ", ".join(LETTERS[i] for i in key["answer_indices"])
    if protocol == "matching":
        return ", ".join(f"{LETTERS[i]}={j + 1}" for i, j in enumerate(key["answer_indices"]))
    if protocol in CHOICE:
        return key["options"][key["answer_index"]] if protocol == "yes_no" else LETTERS[key["answer_index"]]
    return key["answer"]


def _user_text(request: dict[str, Any]) -> str:
    content = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content
                                                               if p.get("type") == "text")


def _item_id(request: dict[str, Any]) -> str:
    first = _user_text(request).splitlines()[0]
    assert first.startswith("Item "), first
    return first.split()[1]


def _asked(server: LoopbackServer) -> list[str]:
    return [_item_id(r) for r in server.chat_requests()]


def _role_file(folder: Path, server: LoopbackServer | str, **settings: Any) -> str:
    base_url = server if isinstance(server, str) else server.base_url
    role = {"base_url": base_url, "model": "scripted", "timeout_s": 5.0, "backoff_s": 0.01, "max_retries": 0,
            **settings}
    path = folder / f"role-{abs(hash(json.dumps(role, sort_keys=True)))}.yaml"
    path.write_text(yaml.safe_dump(role))
    return f"@{path}"


def _rows(store: Path) -> list[dict[str, Any]]:
    with Store(store) as s:  # writable: a killed run's log is replayed
        cur = s.execute("SELECT * FROM eval_responses ORDER BY item_id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]


def _forge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forge.cli", *args], capture_output=True, text=True, timeout=300)


class Scripted:
    """A scripted model: correct answers from the key, in a few reply styles; a set of items
    answered with junk; a switch that makes the server fail or hang after some requests."""

    def __init__(self, keys: dict[str, dict[str, Any]], junk: dict[str, str] | None = None) -> None:
        self.keys = keys
        self.junk = junk or {}
        self.fail_after: int | None = None
        self.hang_after: int | None = None
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        with self.lock:
            self.count += 1
            n = self.count
        if self.fail_after is not None and n > self.fail_after:
            return Reply.failure(500, "scripted outage")
        if self.hang_after is not None and n > self.hang_after:
            return Reply(content="too late", delay_s=120)
        iid = _item_id(request)
        if iid in self.junk:
            return Reply(content=self.junk[iid], model="scripted-v1")
        gold = _gold(self.keys[iid])
        style = int(iid[:2], 16) % 3
        text = gold if style == 0 else (f"Looking at the image carefully.\nAnswer: {gold}" if style == 1 else
                                        f"The answer is **{gold}**.")
        return Reply(content=text, model="scripted-v1")


# -- built-in solvers -------------------------------------------------------------------------


def _chance(key: dict[str, Any]) -> float:
    return 1.0 / len(key["options"]) if key["scoring"]["protocol"] in CHOICE else 0.0


def test_random_scores_near_chance_and_is_labelled_simulated(package, tmp_path):
    report = evaluate(package, "builtin:random", EvalOptions(store_dir=tmp_path / "s"))
    keys = _keys(package)
    rows = _rows(tmp_path / "s")
    assert len(rows) == report["items"] == len(keys)
    choice = [r for r in rows if keys[r["item_id"]]["scoring"]["protocol"] in CHOICE]
    assert len(choice) >= 0.9 * len(rows)
    chance = sum(_chance(keys[r["item_id"]]) for r in choice) / len(choice)
    accuracy = sum(r["score"] for r in choice) / len(choice)
    assert abs(accuracy - chance) < 0.12, (accuracy, chance)
    assert report["invalid"] == 0
    assert report["simulated"] is True and report["label"].startswith("simulated")
    assert all(r["simulated"] and r["model_reported"] == "builtin:random" and r["source"] == "builtin" for r in rows)
    written = json.loads(Path(report["report_path"]).read_text())
    assert written["simulated"] is True and written["accuracy"] == report["accuracy"]
    assert Path(report["report_path"]).parent == tmp_path / "s" / "reports" / f"{written['package']['name']}-" \
        f"{written['package']['version']}"


@pytest.mark.parametrize("rate", [0.0, 0.25, 0.5])
def test_noisy_oracle_scores_one_minus_its_rate_per_capability(package, tmp_path, rate):
    report = evaluate(package, f"builtin:oracle-noisy:{rate}", EvalOptions(store_dir=tmp_path / "s"))
    assert report["invalid"] == 0 and report["simulated"] and "reads the answer key" in report["label"]
    assert report["accuracy"] == pytest.approx(1 - rate, abs=0.03)
    for cap, row in report["by_capability"].items():
        assert abs(row["accuracy"] - (1 - rate)) <= 0.5 / row["items"] + 1e-5, (cap, row)


def test_noisy_oracle_takes_per_capability_rates(package, tmp_path):
    caps = sorted({k["capability"] for k in _keys(package).values()})
    report = evaluate(package, f"builtin:oracle-noisy:0,{caps[0]}=0.5", EvalOptions(store_dir=tmp_path / "s"))
    by = report["by_capability"]
    assert abs(by[caps[0]]["accuracy"] - 0.5) <= 0.5 / by[caps[0]]["items"] + 1e-5
    assert all(by[c]["accuracy"] == 1.0 for c in caps[1:])
    assert report["model"] == f"builtin:oracle-noisy:0,{caps[0]}=0.5"


@pytest.mark.parametrize("name", ["prior", "text", "random:7"])
def test_key_free_solvers_answer_every_item_in_its_format(package, tmp_path, name):
    report = evaluate(package, f"builtin:{name}", EvalOptions(store_dir=tmp_path / "s"))
    assert report["items"] == len(_keys(package)) and report["invalid"] == 0
    assert 0.0 <= report["accuracy"] < 0.9 and report["simulated"]


def test_built_in_solvers_answer_every_question_type_in_its_format(wide, tmp_path):
    """Every answer form (options, sets, orders, matchings, intervals, numbers): the simulated
    evidence reader with no errors scores 1 everywhere; the others give parseable responses."""
    pkg = _copy(wide["package"], tmp_path / wide["package"].name)
    perfect = evaluate(pkg, "builtin:oracle-noisy:0", EvalOptions(store_dir=tmp_path / "s"))
    assert perfect["accuracy"] == 1.0 and perfect["invalid"] == 0
    assert all(row["accuracy"] == 1.0 for row in perfect["by_question_type"].values())
    assert len(perfect["by_question_type"]) >= 6
    for name in ("random", "prior", "text"):
        report = evaluate(pkg, f"builtin:{name}", EvalOptions(store_dir=tmp_path / "s"))
        assert report["invalid"] == 0, (name, report["by_question_type"])


def test_gate_e_records_of_every_question_type_recompute_in_verify(wide):
    """Gate E's responses over every answer form are read and scored again by the package's own
    scorer, and every reported number follows from them."""
    from forge.verify import verify_package

    report = verify_package(wide["package"], None)
    assert report["ok"] and report["metric_problems"] == []
    numbers = json.loads((wide["package"] / "report.json").read_text())
    assert len(numbers["composition"]["question_types"]) >= 6
    assert {m["model"] for m in numbers["models"]} >= {"builtin:random", "builtin:oracle-noisy:0.05"}


# -- a scripted model on the loopback server ----------------------------------------------------


def test_a_model_answering_from_the_key_scores_one_and_sees_the_images(package, tmp_path):
    keys, items = _keys(package), {it["id"]: it for it in _items(package)}
    with LoopbackServer(Scripted(keys)) as server:
        report = evaluate(package, f"{server.base_url}@scripted", EvalOptions(store_dir=tmp_path / "s"))
        requests = server.chat_requests()
    assert report["accuracy"] == 1.0 and report["invalid"] == 0 and not report["simulated"]
    assert all(row["accuracy"] == 1.0 for row in report["by_capability"].values())
    assert all(row["accuracy"] == 1.0 for row in report["by_question_type"].values())
    assert report["models_reported"] == ["scripted-v1"] and report["label"] == "model"
    assert report["tokens"]["in"] > 0 and report["tokens"]["out"] > 0
    assert sorted(_item_id(r) for r in requests) == sorted(keys)
    for request in requests:
        item = items[_item_id(request)]
        user = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
        urls = [p["image_url"]["url"] for p in user if p.get("type") == "image_url"]
        assert len(urls) == len(item["media"]) >= 1
        assert all(u.startswith("data:image/png;base64,") for u in urls)
        text = _user_text(request)
        assert item["question"] in text and item["response_format"] in text
        assert all(f"{LETTERS[i]}. {o}" in text for i, o in enumerate(item["options"]))
    rows = _rows(tmp_path / "s")
    assert len(rows) == len(keys) and {r["source"] for r in rows} == {"model"}
    assert all(r["valid"] and r["score"] == 1.0 and r["tokens_in"] > 0 and r["seconds"] >= 0 for r in rows)
    assert {r["model"] for r in rows} == {f"{report['model']}"} and {r["package_digest"] for r in rows} == \
        {report["package"]["digest"]}


def test_malformed_responses_are_invalid_score_zero_and_stay_in_the_denominator(package, tmp_path):
    keys = _keys(package)
    first = [it["id"] for it in _items(package)][:24]
    styles = ["", "I cannot tell from these images.", '{"answer": ', "Z", "A or B", "maybe"]
    junk = {iid: styles[i % len(styles)] for i, iid in enumerate(first[::2])}
    with LoopbackServer(Scripted(keys, junk)) as server:
        report = evaluate(package, f"{server.base_url}@scripted", EvalOptions(store_dir=tmp_path / "s", limit=24))
    assert report["items"] == 24 and report["invalid"] == len(junk) == 12
    assert report["invalid_rate"] == 0.5 and report["accuracy"] == 0.5
    rows = {r["item_id"]: r for r in _rows(tmp_path / "s")}
    for iid in junk:
        assert rows[iid]["valid"] is False and rows[iid]["score"] == 0.0 and rows[iid]["parsed"] is None
        assert rows[iid]["response"] == junk[iid]
    assert sum(row["invalid"] for row in report["by_capability"].values()) == 12


def test_a_server_that_fails_midway_resumes_with_only_the_rest(package, tmp_path):
    keys = _keys(package)
    ids = [it["id"] for it in _items(package)][:30]
    script = Scripted(keys)
    script.fail_after = 10
    with LoopbackServer(script) as server:
        role = _role_file(tmp_path, server, concurrency=1)
        with pytest.raises(ModelUnavailableError) as failed:
            evaluate(package, role, EvalOptions(store_dir=tmp_path / "s", limit=30))
        assert server.base_url in str(failed.value) and "10 of 30 items" in str(failed.value)
        assert _asked(server)[:10] == ids[:10]
        assert sorted(r["item_id"] for r in _rows(tmp_path / "s")) == sorted(ids[:10])
        script.fail_after = None
        server.clear_log()
        report = evaluate(package, role, EvalOptions(store_dir=tmp_path / "s", limit=30))
        assert sorted(_asked(server)) == sorted(ids[10:])  # the answered ten are not asked again
    assert report["accuracy"] == 1.0 and report["items"] == 30
    assert report["run"] == {**report["run"], "from_store": 10, "answered_now": 20}


def test_a_killed_run_resumes_without_asking_answered_items(package, tmp_path):
    keys = _keys(package)
    ids = [it["id"] for it in _items(package)][:20]
    script = Scripted(keys)
    script.hang_after = 8  # two batches of four answered and stored, then the server stalls
    with LoopbackServer(script) as server:
        role = _role_file(tmp_path, server, concurrency=1, timeout_s=120)
        proc = subprocess.Popen([sys.executable, "-m", "forge.cli", "eval", str(package), "--model", role,
                                 "--store", str(tmp_path / "s"), "--limit", "20"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while len(server.chat_requests()) < 9 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(server.chat_requests()) == 9, proc.communicate(timeout=5)
        proc.kill()
        proc.wait(timeout=30)
        first = _asked(server)
        stored = sorted(r["item_id"] for r in _rows(tmp_path / "s"))
        assert stored == sorted(first[:8])
        script.hang_after = None
        server.clear_log()
        done = _forge("eval", str(package), "--model", role, "--store", str(tmp_path / "s"), "--limit", "20",
                      "--json")
        assert done.returncode == 0, done.stderr
        again = _asked(server)
    assert sorted(again) == sorted(set(ids) - set(stored))
    assert not set(again) & set(stored) and first[8] in again
    report = json.loads(done.stdout)["reports"][0]
    assert report["accuracy"] == 1.0 and report["run"]["from_store"] == 8


# -- the command line -------------------------------------------------------------------------


def test_cli_json_reports_every_model_and_leaves_the_release_unchanged(package, tmp_path):
    pkg = _copy(package, tmp_path / package.name)
    manifest = (pkg / "manifest.json").read_bytes()
    done = _forge("eval", str(pkg), "--model", "builtin:random", "--model", "builtin:oracle-noisy:0.1",
                  "--limit", "40", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["errors"] == [] and [r["model"] for r in out["reports"]] == ["builtin:random",
                                                                            "builtin:oracle-noisy:0.1"]
    for r in out["reports"]:
        assert r["items"] == 40 and r["simulated"] is True and r["label"].startswith("simulated")
        assert set(r["by_capability"]) and set(r["by_question_type"]) and "tokens" in r
        assert Path(r["report_path"]).parent == pkg / ".eval"
        assert json.loads(Path(r["report_path"]).read_text())["accuracy"] == r["accuracy"]
    assert (pkg / ".eval" / "builtin-random.json").is_file()
    assert (pkg / "manifest.json").read_bytes() == manifest
    assert not list(pkg.rglob("__pycache__"))
    text = _forge("eval", str(pkg), "--model", "builtin:random", "--limit", "40")
    assert text.returncode == 0 and "simulated" in text.stdout and "accuracy" in text.stdout
    assert "40 from the store" in text.stdout


def test_cli_missing_package_and_bad_specs_exit_2_without_a_traceback(package, tmp_path):
    missing = _forge("eval", str(tmp_path / "nope"), "--model", "builtin:random")
    assert missing.returncode == 2 and "no such package" in missing.stderr and "Traceback" not in missing.stderr
    for spec in ("builtin:nope", "gpt-4o", "@" + str(tmp_path / "absent.yaml"), "builtin:oracle-noisy:2"):
        bad = _forge("eval", str(package), "--model", spec, "--store", str(tmp_path / "s"))
        assert bad.returncode == 2 and "Traceback" not in bad.stderr, (spec, bad.stderr)


class _PinnedLoopback(LoopbackServer):
    """The loopback server on a chosen port, so that an endpoint can come back where it was."""

    def __init__(self, script: Any, port: int) -> None:
        super().__init__(script)
        self.pinned = port

    def start(self) -> "_PinnedLoopback":
        from http.server import ThreadingHTTPServer

        httpd = ThreadingHTTPServer(("127.0.0.1", self.pinned), _Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        httpd.loopback = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self


def test_cli_unreachable_endpoint_names_it_exits_1_and_resumes_later(package, tmp_path):
    keys = _keys(package)
    with LoopbackServer(Scripted(keys)) as first:
        port = first.port
        role = _role_file(tmp_path, first, max_retries=1)
        ok = _forge("eval", str(package), "--model", role, "--store", str(tmp_path / "s"), "--limit", "6")
        assert ok.returncode == 0, ok.stderr
    down = _forge("eval", str(package), "--model", role, "--store", str(tmp_path / "s"), "--limit", "16")
    assert down.returncode == 1 and "Traceback" not in down.stderr
    assert f"http://127.0.0.1:{port}/v1" in down.stderr and "connection failed" in down.stderr
    assert "6 of 16 items" in down.stderr and "again" in down.stderr
    with _PinnedLoopback(Scripted(keys), port) as back:
        done = _forge("eval", str(package), "--model", role, "--store", str(tmp_path / "s"), "--limit", "16",
                      "--json")
        assert done.returncode == 0, done.stderr
        asked = _asked(back)
    ids = [it["id"] for it in _items(package)]
    assert sorted(asked) == sorted(ids[6:16])
    assert json.loads(done.stdout)["reports"][0]["accuracy"] == 1.0


def test_load_package_refuses_what_is_not_a_package(tmp_path):
    from forge.errors import UsageError

    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "empty", tmp_path / "missing"):
        with pytest.raises(UsageError):
            load_package(path)
