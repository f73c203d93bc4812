"""Contracts run right after production; a failing blocking requirement blocks consumption."""

from __future__ import annotations

from forge.contracts import CheckResult, decide
from forge.keys import RequirementId
from forge.store import Store

from conftest import run_build, write_intent


def _result(verification: str, passed: bool, severity: str = "blocking") -> CheckResult:
    return CheckResult(RequirementId("R"), "a", passed, verification, severity)


def test_model_assisted_pass_never_overrides_hard_failure():
    assert decide([_result("deterministic", False), _result("model-assisted", True)]) == "rejected"
    assert decide([_result("execution", False), _result("model-assisted", True)]) == "rejected"
    assert decide([_result("deterministic", True), _result("model-assisted", False)]) == "rejected"
    assert decide([_result("deterministic", True), _result("model-assisted", True)]) == "verified"
    assert decide([_result("deterministic", False, "warning")]) == "verified"


def test_failing_contract_blocks_downstream(tmp_path):
    contracts = tmp_path / "strict"
    contracts.mkdir()
    (contracts / "few_objects.yaml").write_text(
        "artifact_type: SceneSpec\n"
        "requirements:\n"
        "  - id: LAB-1\n"
        "    description: the lab only has room for five objects per scene\n"
        "    verification: deterministic\n"
        "    severity: blocking\n"
        "    check: expr\n"
        "    args: {expression: 'len(c.objects) <= 5', message: more than five objects}\n")
    intent = write_intent(tmp_path, contracts=["strict"], seed=5)
    summary = run_build(intent, tmp_path / "store", tmp_path / "out")
    with Store(tmp_path / "store", read_only=True) as s:
        scenes = s.execute("SELECT id, status, json_array_length(json_extract(content, '$.objects')) "
                           "FROM artifacts WHERE type = 'SceneSpec'").fetchall()
        rejected = [sid for sid, status, _ in scenes if status == "rejected"]
        assert rejected, "the seed must give some scenes with more than five objects"
        assert all((n > 5) == (status == "rejected") for _, status, n in scenes)
        # Nothing was ever built from a rejected scene ...
        assert s.children(rejected) == []
        # ... and the failure is recorded with the requirement and its diagnostic.
        rows = s.execute("SELECT requirement_id, passed, diagnostics FROM verifications WHERE artifact_id = ? "
                         "AND requirement_id = 'LAB-1'", [rejected[0]]).fetchall()
        assert rows == [("LAB-1", False, "more than five objects")]
        released_scenes = {r[0] for r in s.execute(
            "SELECT DISTINCT json_extract_string(content, '$.scene_index') FROM artifacts WHERE type='EvidenceRecord'"
        ).fetchall()}
    assert summary["nodes"]["collect"]["executed"] == len(scenes) - len(rejected)
    assert len(released_scenes) == len(scenes) - len(rejected)


def test_every_artifact_has_verification_records(built):
    with Store(built["store"], read_only=True) as s:
        unchecked = s.execute(
            "SELECT a.type, count(*) FROM artifacts a LEFT JOIN verifications v ON a.id = v.artifact_id "
            "WHERE v.artifact_id IS NULL GROUP BY a.type").fetchall()
        kinds = dict(s.execute("SELECT verification, count(*) FROM verifications GROUP BY verification").fetchall())
    assert unchecked == []
    assert {"deterministic", "execution", "model-assisted"} <= set(kinds)


def test_contract_edit_reverifies_without_rebuilding(tmp_path):
    import json

    rules = tmp_path / "lab"
    rules.mkdir()
    contract = rules / "style.yaml"
    text = ("artifact_type: OEItem\nrequirements:\n  - id: LAB-2\n    description: house style\n"
            "    verification: deterministic\n    check: expr\n    args: {{expression: \"{expr}\"}}\n")
    contract.write_text(text.format(expr="len(c.question) > 0"))
    intent = write_intent(tmp_path, contracts=["lab"])
    first = run_build(intent, tmp_path / "store", tmp_path / "out")
    contract.write_text(text.format(expr="'cube' not in c.question"))
    second = run_build(intent, tmp_path / "store", tmp_path / "out")
    # The stored items the second build meets are checked again, not produced again (its gates
    # may take it along another path of refills, so it need not meet every one of them).
    assert 0.9 * first["nodes"]["realize"]["created"] <= second["artifacts_reverified"] <= \
        first["nodes"]["realize"]["created"]
    # Nothing stored is produced again: every stored binding is reused, and binding runs only on
    # units collected anew where the stricter contract left a capability short; every stored item is
    # reused, and only bindings not realized before are realized, to refill what it took out.
    assert second["nodes"]["bind"]["reused"] == first["nodes"]["bind"]["created"]
    new_units = second["units_collected"] - first["units_collected"]
    assert second["nodes"]["collect"]["executed"] == new_units
    assert second["nodes"]["bind"]["executed"] == new_units * len(second["templates"])
    # Stored items are reused (the refills may draw another path past a few of them), and no
    # binding is realized twice.
    assert 0.9 * first["nodes"]["realize"]["created"] <= second["nodes"]["realize"]["reused"] <= \
        first["nodes"]["realize"]["created"]
    with Store(tmp_path / "store", read_only=True) as s:
        twice = s.one("SELECT count(*) FROM (SELECT inputs FROM skill_runs WHERE skill = 'synthesize.realize_item' "
                      "AND status = 'ok' GROUP BY inputs HAVING count(*) > 1)")[0]
    assert twice == 0
    released = [json.loads(x) for x in open(second["package_path"] + "/items.jsonl")]
    assert released and not [r for r in released if "cube" in r["question"]]
    with Store(tmp_path / "store", read_only=True) as s:
        failed = s.one("SELECT count(*) FROM verifications WHERE requirement_id = 'LAB-2' AND NOT passed")[0]
        rejected = s.one("SELECT count(*) FROM artifacts WHERE type = 'OEItem' AND status = 'rejected'")[0]
    assert failed == rejected > 0
