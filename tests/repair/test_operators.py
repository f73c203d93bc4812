"""One planted defect per test: the diagnosis, the operator, the exact re-executed scope,
and whether the lineage was released or rejected."""

from __future__ import annotations

import pytest

from forge.faults import Fault

from .conftest import FaultedBuild, faulted_build, kept_check

# Each operator is exercised in the default run at least once; the other defects it repairs are
# behind the slow marker (a faulted build each, about 15 s; CI runs them).


def _accepted_binding(built, template: str) -> str:
    """The binding of an item of ``template`` that the clean build accepted and no other item
    twins (the same binding, by identity, in a faulted build of the same intent): a defect
    planted in its item is repaired into an item the gates accept."""
    import json

    from forge.store import Store

    with Store(built["store"], read_only=True) as s:
        rows = s.execute("SELECT a.id, a.content FROM artifacts a JOIN gate_decisions g ON g.subject_id = a.id "
                         "WHERE g.gate = 'C1' AND g.decision = 'pass' AND a.type = 'OEItem' "
                         "AND json_extract_string(a.content, '$.template') = ? ORDER BY a.id", [template]).fetchall()
        # Not one that another item was held back for (a near duplicate, a dependent answer): the
        # gates keep the lower id of such a pair, and a repaired item's id is new.
        details = " ".join(d or "" for (d,) in s.execute("SELECT details FROM gate_decisions WHERE decision = 'fail'")
                           .fetchall())
    return next(json.loads(c)["binding"] for aid, c in rows if aid not in details)


@pytest.fixture(scope="module")
def wrong_key(built, tmp_path_factory) -> FaultedBuild:
    """One build with a wrong answer key planted in an accepted item (two tests read it)."""
    return faulted_build(tmp_path_factory.mktemp("wrong_key"),
                         Fault("wrong_answer_key", "synthesize.realize_item",
                               where={"template": "closest_choice", "binding": _accepted_binding(built, "closest_choice")},
                               limit=1))


@pytest.mark.xdist_group("wrong_key")  # one worker builds `wrong_key` for both
def test_wrong_answer_key_gets_local_field_repair(wrong_key, built):
    fb = wrong_key
    [bad] = fb.injected
    [d] = fb.diagnoses()
    assert (d["artifact"], d["requirement"], d["category"], d["operator"]) == (bad, "OE-3", "answer_mismatch",
                                                                               "local_field_repair")
    assert d["cause"] == bad
    scope = fb.store.one("SELECT scope FROM diagnoses WHERE artifact_id = ?", [bad])[0]
    assert scope.startswith("the OEItem alone")
    [r] = fb.repairs()
    assert r["status"] == "rebuilt" and r["priors"] == [bad]
    [new] = r["new"]
    assert r["rebuilt"] == [new], "a local field repair rebuilds the item alone"
    meta = fb.metadata(new)["repair"]
    assert meta == {"operator": "local_field_repair", "violated": "OE-3", "prior": bad, "attempt": 1, "root": bad}
    assert (bad, new, "repairs") in fb.store.parents([new])
    assert new in fb.accepted() and bad not in fb.accepted() and bad not in fb.released()
    # The repaired item is the clean item: same answer, same everything.
    assert fb.store.one("SELECT content FROM artifacts WHERE id = ?", [new])[0] == \
        __import__("forge.store", fromlist=["Store"]).Store(built["store"], read_only=True).one(
            "SELECT content FROM artifacts WHERE id = ?", [fb.clean_counterpart(bad)])[0]
    assert kept_check(built, fb, {fb.clean_counterpart(bad)}) > 500


def test_position_shortcut_is_flagged_by_blind_eval_and_resynthesized(faulted, built):
    # Every item is valid on its own; only the template's answer positions give the answer away.
    fb = faulted(Fault("answer_first", "synthesize.realize_item", where={"template": "closest_choice"}))
    injected = set(fb.injected)
    assert len(injected) >= 10
    diags = fb.diagnoses()
    # Duplicates, dependent items and over-represented answers leave before the blind test:
    # the planted items the blind gate judged are diagnosed, and nothing else.
    assert {d["artifact"] for d in diags} <= injected and len(diags) >= 10
    assert {(d["requirement"], d["category"], d["operator"]) for d in diags} == \
        {("C1", "non_target_shortcut", "candidate_resynthesis")}
    reps = fb.repairs()
    assert {r["operator"] for r in reps} == {"candidate_resynthesis"}
    new = {a for r in reps for a in r["new"]}
    assert {a for r in reps for a in r["rebuilt"]} == new and len(new) == len(diags)
    released = fb.released()
    assert not injected & released
    assert fb.summary["templates"]["closest_choice"]["blind"]["flagged"] is False
    assert kept_check(built, fb, {fb.clean_counterpart(i) for i in injected}) > 400


@pytest.mark.slow
def test_shortcut_phrase_on_an_option_fails_its_contract(faulted, built):
    fb = faulted(Fault("shortcut_phrase", "synthesize.realize_item", where={"template": "closest_choice"}, limit=1))
    [bad] = fb.injected
    [d] = fb.diagnoses()
    assert (d["requirement"], d["category"], d["operator"]) == ("OE-9", "non_target_shortcut", "candidate_resynthesis")
    assert bad not in fb.released()
    answers = [__import__("json").loads(x) for x in open(fb.summary["package_path"] + "/items.jsonl")]
    assert not [a for a in answers if any("correct one" in o for o in a["options"])]


@pytest.mark.slow
def test_answer_not_in_visible_media_is_resynthesized(faulted, built):
    fb = faulted(Fault("hidden_view_media", "synthesize.realize_item", where={"template": "best_view_choice"}, limit=1))
    [bad] = fb.injected
    [d] = fb.diagnoses()
    assert (d["requirement"], d["category"], d["operator"]) == ("OE-8", "answer_not_visible", "candidate_resynthesis")
    [r] = fb.repairs()
    [new] = r["new"]
    assert r["rebuilt"] == [new]
    binding = fb.store.one("SELECT json_extract_string(content, '$.binding') FROM artifacts WHERE id = ?", [bad])[0]
    assert (binding, new, "binding") in fb.store.parents([new]), "re-synthesized from the same binding"
    assert len(fb.store.one("SELECT json_extract(content, '$.media_sources') FROM artifacts WHERE id = ?", [new])[0]
               .strip("[]").split(",")) == 3
    # The new item passes every contract; the later gates then treat it like any other item.
    assert fb.store.one("SELECT status FROM artifacts WHERE id = ?", [new])[0] == "verified"
    assert fb.store.one("SELECT decision FROM gate_decisions WHERE gate = 'B1' AND subject_id = ?", [new])[0] == "pass"
    kept_check(built, fb, {fb.clean_counterpart(bad)})


@pytest.mark.slow
def test_raw_segmentation_media_reexecutes_the_media_skill(faulted, built):
    fb = faulted(Fault("raw_segmentation_media", "synthesize.realize_item", where={"template": "leftmost_choice"},
                       limit=1))
    [bad] = fb.injected
    [d] = fb.diagnoses()
    assert (d["requirement"], d["category"], d["operator"]) == ("OE-6", "invalid_media", "skill_reexecution")
    [r] = fb.repairs()
    [new] = r["new"]
    assert r["rebuilt"] == [new]
    run = fb.store.runs_for_artifacts([new])[new]
    assert run["skill"] == "synthesize.realize_item", "the media-producing skill itself ran again"
    assert new in fb.accepted()
    kept_check(built, fb, {fb.clean_counterpart(bad)})


@pytest.mark.xdist_group("frame_join")
def test_wrong_frame_join_rolls_back_to_evidence_structuring(frame_join, built):
    fb = frame_join
    [bad] = fb.injected
    [d] = fb.diagnoses()
    assert (d["type"], d["requirement"], d["category"], d["operator"]) == \
        ("EvidenceRecord", "EV-3", "invalid_evidence", "upstream_rollback")
    assert "only its descendants" in fb.store.one("SELECT scope FROM diagnoses WHERE artifact_id = ?", [bad])[0]
    [r] = fb.repairs()
    [new_evidence] = r["new"]
    assert fb.store.runs_for_artifacts([new_evidence])[new_evidence]["skill"] == "structure.rendered_evidence"
    # Exactly the rebuilt evidence and its descendants (bindings, items) were re-created.
    descendants = fb.store.descendants([new_evidence])
    types = dict(fb.store.execute("SELECT id, type FROM artifacts").fetchall())
    expected = {new_evidence} | {a for a in descendants if types[a] in ("Binding", "OEItem")}
    assert set(r["rebuilt"]) == expected
    assert any(types[a] == "OEItem" for a in expected)
    # Nothing was built from the faulty record; every other evidence record is the clean one.
    assert fb.store.children([bad]) == [(bad, new_evidence, "repairs")] or \
        {c for _, c, role in fb.store.children([bad])} == {new_evidence}
    assert kept_check(built, fb, {fb.clean_counterpart(bad)}) > 400


def test_evidence_below_admission_is_finally_rejected(faulted, built):
    fb = faulted(Fault("below_admission", "synthesize.bind_template", where={"template": "closest_choice"}, limit=1))
    [bad] = fb.injected
    [d] = fb.diagnoses()
    assert (d["requirement"], d["category"], d["operator"]) == ("BIND-2", "inadmissible_evidence", "final_rejection")
    [r] = fb.repairs()
    assert r["status"] == "rejected" and r["new"] == [] and r["rebuilt"] == []
    assert "below admission" in r["error"]
    assert fb.store.children([bad]) == [], "no item was built on inadmissible evidence"
    assert fb.store.one("SELECT status FROM artifacts WHERE id = ?", [bad])[0] == "rejected"  # kept for audit
    assert kept_check(built, fb, {fb.clean_counterpart(bad)}) > 500


def test_systematic_wrong_answers_escalate_to_one_reexecution(faulted, built):
    fb = faulted(Fault("systematic_wrong_answer", "synthesize.bind_template", where={"template": "left_of_yesno"}))
    injected = set(fb.injected)
    assert len(injected) >= 10
    diags = fb.diagnoses()
    assert {d["artifact"] for d in diags} == injected
    assert {(d["requirement"], d["operator"]) for d in diags} == {("BIND-3", "skill_reexecution")}
    assert len({d["group"] for d in diags}) == 1, "one escalated group, not N local repairs"
    reps = fb.repairs()
    assert len(reps) == 1 and reps[0]["operator"] == "skill_reexecution"
    assert not [r for r in reps if r["operator"] == "local_field_repair"]
    new = set(reps[0]["new"])
    assert len(new) == len(injected)
    runs = fb.store.runs_for_artifacts(list(new))
    assert {run["skill"] for run in runs.values()} == {"synthesize.bind_template"}
    # The repaired bindings are the clean ones, and their items are rebuilt from them.
    clean = {fb.clean_counterpart(b) for b in injected}
    from forge.store import Store

    with Store(built["store"], read_only=True) as ref:
        clean_contents = set(ref.artifact_column(clean, "content").values())
    new_contents = set(fb.store.artifact_column(new, "content").values())
    assert new_contents == clean_contents
    types = dict(fb.store.execute("SELECT id, type FROM artifacts").fetchall())
    items = {a for a in reps[0]["rebuilt"] if types[a] == "OEItem"}
    assert set(reps[0]["rebuilt"]) == new | items
    assert all(fb.store.parents([i])[0][0] in new for i in items)
    assert kept_check(built, fb, clean) > 400


@pytest.mark.slow
def test_repair_budget_rejects_a_lineage_that_keeps_failing(faulted, built, tmp_path):
    # With budget 0 even a repairable defect is rejected at once, with its records kept.
    import yaml

    from conftest import run_build
    from forge.faults import FaultPlan

    intent = tmp_path / "budget.yaml"
    base = yaml.safe_load(open(built["intent"]))
    base["repair"] = {"budget": 0}
    intent.write_text(yaml.safe_dump(base))
    plan = FaultPlan([Fault("wrong_answer_key", "synthesize.realize_item", where={"template": "closest_choice"}, limit=1)])
    summary = run_build(intent, tmp_path / "s2", tmp_path / "o2", faults=plan)
    [bad] = [f["artifact"] for f in plan.injected]
    from forge.store import Store

    with Store(tmp_path / "s2", read_only=True) as s:
        ops = s.execute("SELECT operator, status FROM repairs").fetchall()
        diag = s.execute("SELECT operator, detail FROM diagnoses").fetchall()
    assert ops == [("final_rejection", "rejected")]
    assert "budget" in diag[0][1]
    assert summary["repair"]["operators"]["final_rejection"]["repairs"] == 1


def test_wrong_slot_is_rebound_on_the_same_evidence(faulted, built):
    fb = faulted(Fault("misassigned_slot", "synthesize.bind_template", where={"template": "leftmost_choice"}, limit=1))
    [bad] = fb.injected
    [d] = fb.diagnoses()
    assert (d["requirement"], d["category"], d["operator"]) == ("BIND-1", "wrong_slot", "template_rebinding")
    [r] = fb.repairs()
    [new] = r["new"]
    types = dict(fb.store.execute("SELECT id, type FROM artifacts").fetchall())
    items = {c for _, c, role in fb.store.children([new]) if types[c] == "OEItem"}
    assert len(items) == 1 and set(r["rebuilt"]) == {new} | items
    old = fb.store.one("SELECT content FROM artifacts WHERE id = ?", [bad])[0]
    fresh = fb.store.one("SELECT content FROM artifacts WHERE id = ?", [new])[0]
    import json

    assert json.loads(old)["evidence"] == json.loads(fresh)["evidence"], "same evidence, new slots"
    assert json.loads(old)["slots"] != json.loads(fresh)["slots"]
    assert items <= fb.accepted()
    kept_check(built, fb, {fb.clean_counterpart(bad)})


def test_many_wrong_slots_of_one_template_are_rejected_never_realized_again(faulted, built):
    """The same slot fault in many bindings of one template escalates; a new realization of a
    binding that failed its own contract would carry its wrong slot into a released item."""
    fb = faulted(Fault("misassigned_slot", "synthesize.bind_template", where={"template": "left_of_yesno"}))
    injected = set(fb.injected)
    assert len(injected) >= 3
    escalated = [d for d in fb.diagnoses() if d["artifact"] in injected and d["operator"] == "candidate_resynthesis"]
    assert escalated, "the repeated symptom escalates"
    reps = [r for r in fb.repairs() if r["operator"] == "candidate_resynthesis" and set(r["priors"]) & injected]
    assert reps and all(r["status"] == "rejected" and not r["new"] for r in reps)
    types = dict(fb.store.execute("SELECT id, type FROM artifacts").fetchall())
    from_injected = {c for _, c, _role in fb.store.children(list(injected)) if types.get(c) == "OEItem"}
    assert not from_injected & (fb.accepted() | fb.released())


@pytest.mark.xdist_group("wrong_key")  # one worker builds `wrong_key` for both
def test_audit_shows_the_repair_history(wrong_key):
    from forge.audit import audit

    fb = wrong_key
    [bad] = fb.injected
    [r] = fb.repairs()
    report = audit(fb.store, r["new"][0])
    [rep] = report["repairs"]
    assert rep["operator"] == "local_field_repair" and rep["prior"] == bad and rep["violated"] == "OE-3"
    assert set(rep["changed"]) == {"answer", "answer_index"}
    assert rep["changed"]["answer_index"]["before"] != rep["changed"]["answer_index"]["after"]
    assert rep["rebuilt"] == r["new"]
    summary = fb.summary["repair"]["operators"]["local_field_repair"]
    assert summary == {**summary, "repairs": 1, "artifacts": 1, "succeeded": 1, "rebuilt": 1}


@pytest.mark.slow
def test_wrong_interval_key_is_caught_and_repaired(faulted):
    from conftest import WIDE_OE

    fb = faulted(Fault("wrong_answer_key", "synthesize.realize_item", where={"template": "count_visible_interval"},
                       limit=1), name="tabletop-wide", oe=WIDE_OE)
    [bad] = fb.injected
    # The wide build's own statistics may flag an unrelated template too; follow the planted item.
    [d] = [d for d in fb.diagnoses() if d["artifact"] == bad]
    assert (d["requirement"], d["operator"]) == ("OE-2", "local_field_repair")
    [r] = [r for r in fb.repairs() if bad in r["priors"]]
    [new] = r["new"]
    import json

    item = json.loads(fb.store.one("SELECT content FROM artifacts WHERE id = ?", [new])[0])
    lo, hi = item["scoring"]["intervals"][item["answer_index"]]
    assert lo <= item["answer_value"] <= hi and item["options"][item["answer_index"]] == item["answer"]
    assert fb.store.one("SELECT status FROM artifacts WHERE id = ?", [new])[0] == "verified"
    assert fb.store.one("SELECT decision FROM gate_decisions WHERE gate = 'B1' AND subject_id = ?", [new])[0] == "pass"
