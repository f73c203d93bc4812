"""The released package: manifest, atomic layout, a scorer that runs without forge, no leakage."""

from __future__ import annotations

import json
import string
import subprocess
import sys

import numpy as np
from PIL import Image

from forge.keys import file_digest
from forge.export import verify_package


def _rows(path):
    return [json.loads(line) for line in open(path)]


def test_manifest_and_checksums(built):
    pkg = built["package"]
    manifest = json.loads((pkg / "manifest.json").read_text())
    assert next(iter(manifest)) == "format_version"
    assert manifest["counts"]["items"] == len(_rows(pkg / "items.jsonl")) == built["summary"]["items_released"]
    assert verify_package(pkg) == []
    on_disk = {str(p.relative_to(pkg)) for p in pkg.rglob("*") if p.is_file() and "__pycache__" not in str(p)}
    assert on_disk == set(manifest["files"]) | {"manifest.json"}
    assert all(file_digest(str(pkg / rel)) == h for rel, h in manifest["files"].items())
    assert not list(built["out"].glob(".tmp-*")), "no temporary folder may be left behind"


def test_composition_meets_targets(built):
    comp = json.loads((built["package"] / "composition.json").read_text())
    for cap, row in comp["capabilities"].items():
        assert row["achieved"] == row["target"], cap
    assert len(comp["question_types"]) >= 3


def test_visible_items_hide_answers_and_internals(built):
    pkg = built["package"]
    stated = 0
    for row in _rows(pkg / "items.jsonl"):
        # an instruction line only where the key relies on a stated convention
        assert set(row) - {"instruction"} == {"id", "question", "options", "media", "response_format",
                                              "question_type", "capability"}
        stated += "instruction" in row
        assert row.get("instruction", "x").strip()
        for m in row["media"]:
            img = Image.open(pkg / m["path"])
            assert img.mode == "RGB"
            a = np.asarray(img)
            assert not (np.array_equal(a[..., 0], a[..., 1]) and np.array_equal(a[..., 1], a[..., 2]))
        text = " ".join([row["question"], row.get("instruction", ""), *row["options"]]).lower()
        assert "urdf" not in text and "body" not in text
    assert stated, "no item states the conventions its key relies on"


def _score(pkg, preds, tmp_path):
    p = tmp_path / "preds.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in preds))
    mod = next(d.name for d in pkg.iterdir() if (d / "score.py").exists())
    # -S: no site-packages, so the scorer provably needs nothing but the standard library.
    proc = subprocess.run([sys.executable, "-S", "-m", f"{mod}.score", str(p), "--json"], cwd=pkg,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_scorer_runs_without_forge(built, tmp_path):
    pkg = built["package"]
    answers = _rows(pkg / "answers.jsonl")
    perfect = [{"id": a["id"], "response": string.ascii_uppercase[a["answer_index"]]} for a in answers]
    assert _score(pkg, perfect, tmp_path)["accuracy"] == 1.0
    as_text = [{"id": a["id"], "response": a["answer"]} for a in answers]
    assert _score(pkg, as_text, tmp_path)["accuracy"] == 1.0
    wrong = [{"id": a["id"], "response": a["options"][(a["answer_index"] + 1) % len(a["options"])]} for a in answers]
    assert _score(pkg, wrong, tmp_path)["accuracy"] == 0.0
    half = [{"id": a["id"], "response": "no idea"} for a in answers[: len(answers) // 2]]
    res = _score(pkg, half, tmp_path)
    assert res["accuracy"] == 0.0 and res["invalid"] == len(half) and res["items"] == len(answers)


def test_scorer_names_bad_input_without_a_traceback(built, tmp_path):
    pkg = built["package"]
    mod = next(d.name for d in pkg.iterdir() if (d / "score.py").exists())

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-S", "-m", f"{mod}.score", *args], cwd=pkg, capture_output=True, text=True)

    missing = run(str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "nope.jsonl: no such predictions file" in missing.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "response": "A"}\n{not json\n')
    out = run(str(bad))
    assert out.returncode == 2 and "bad.jsonl:2: not JSON" in out.stderr and "Traceback" not in out.stderr
    bad.write_text('["a", "A"]\n')
    assert 'bad.jsonl:1: expected an object with a string "id"' in run(str(bad)).stderr
    answers = _rows(pkg / "answers.jsonl")
    twice = tmp_path / "twice.jsonl"
    twice.write_text("".join(json.dumps({"id": answers[0]["id"], "response": "A"}) + "\n" for _ in range(2)))
    assert "answered twice" in run(str(twice)).stderr
    # Ids the key does not know are reported, not silently scored as nothing.
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "not-an-item", "response": "A"}) + "\n")
    res = run(str(other), "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["unknown_ids"] == 1
    assert "1 prediction(s) name ids that are not in" in res.stderr


def test_answer_positions_are_balanced(built):
    answers = _rows(built["package"] / "answers.jsonl")
    by_template: dict[str, list[int]] = {}
    for a in answers:
        by_template.setdefault(a["template"], []).append(a["answer_index"])
    for template, idx in by_template.items():
        if len(idx) < 12:
            continue
        counts = np.bincount(idx, minlength=max(idx) + 1)
        assert counts.max() / len(idx) < 0.75, (template, counts)


def test_reverify_finds_the_store_beside_the_intent(built, tmp_path):
    """`forge reverify` finds a store as `audit` and `status` do, and says what to pass when
    there is none, instead of requiring --store."""
    intent = tmp_path / "intent.yaml"
    intent.write_text(built["intent"].read_text())
    (tmp_path / ".forge").symlink_to(built["store"], target_is_directory=True)

    def forge(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "forge.cli", "reverify", str(built["package"]), *args],
                              capture_output=True, text=True, cwd=tmp_path / "elsewhere")

    (tmp_path / "elsewhere").mkdir()
    found = forge("--intent", str(intent))
    assert found.returncode == 0, found.stderr
    assert "0 invalid" in found.stdout and "re-verified" in found.stderr
    none = forge()
    assert none.returncode == 2 and "no forge store there; pass --store DIR" in none.stderr
    assert "Traceback" not in none.stderr
