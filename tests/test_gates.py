"""Gates A (grey batch), B1 (invalid items) and C1 (evidence-blind evaluation)."""

from __future__ import annotations

import json

from forge_skills.oe.types import OEItem
from forge_skills.oe.verify.blind_solvers import blind_report
from forge.gatelog import GateLog
from forge_skills.oe.verify.gates import blind_evaluation
from forge.store import Store

from conftest import copy_templates, run_build, write_intent

SETTINGS = {"blind_margin": 0.15, "blind_alpha": 0.01, "min_blind_items": 10}


def _items(built, template):
    with Store(built["store"], read_only=True) as s:
        rows = s.execute("SELECT id, content FROM artifacts WHERE type='OEItem' AND "
                         "json_extract_string(content, '$.template') = ?", [template]).fetchall()
    return {aid: OEItem.model_validate(json.loads(c)) for aid, c in rows}


def test_blind_solvers_stay_near_chance_on_real_items(built):
    for template, row in built["summary"]["templates"].items():
        blind = row["blind"]
        if blind["items"] and blind["items"] >= 30:
            # The best of the solvers on n items: within three standard errors of chance (on
            # 30 yes/no items, 0.27), and never flagged by the gate's own test.
            p, n = blind["chance"], blind["items"]
            assert blind["best_accuracy"] - p < max(0.2, 3 * (p * (1 - p) / n) ** 0.5), (template, blind)
            assert blind["flagged"] is False


def test_c1_flags_an_option_text_shortcut(built):
    items = _items(built, "closest_choice")
    assert len(items) >= 10
    log = GateLog("test")
    kept, reports = blind_evaluation(log, items, SETTINGS)
    assert not reports["closest_choice"]["flagged"] and len(kept) == len(items)
    # Plant a shortcut: the correct option always carries an explanatory phrase.
    planted = {}
    for iid, it in items.items():
        opts = [o + " (the nearest one)" if i == it.answer_index else o for i, o in enumerate(it.options)]
        planted[iid] = it.model_copy(update={"options": opts, "answer": opts[it.answer_index]})
    kept, reports = blind_evaluation(GateLog("test"), planted, SETTINGS)
    assert reports["closest_choice"]["flagged"] and kept == []
    assert reports["closest_choice"]["best_solver"] in ("longest_option", "question_overlap")


def test_c1_flags_an_answer_prior(built):
    items = {**_items(built, "left_of_yesno"), **_items(built, "closer_yesno")}
    assert len(items) >= 12
    skewed = {iid: it.model_copy(update={"answer": "yes", "answer_index": 0}) for iid, it in items.items()}
    report = blind_report(sorted(skewed.items()))
    assert report["best_accuracy"] == 1.0 and report["p_value"] < 0.01


def test_grey_batch_holds_back_a_broken_template(tmp_path):
    templates = copy_templates(tmp_path)
    broken = (templates / "left_of_yesno.yaml").read_text()
    broken = broken.replace("id: left_of_yesno", "id: left_of_statement")
    head, _, tail = broken.partition("realizations:\n")
    tail = "\n".join(line for line in tail.splitlines() if not line.startswith("  - "))
    broken = head + 'realizations:\n  - "the {a} left of the {b}"\n  - "{a} left {b}"\n  - "{a} {b} left"\n' \
        '  - "left: {a} {b}"\n' + tail + "\n"
    (templates / "left_of_statement.yaml").write_text(broken)
    intent = write_intent(tmp_path, templates_dirs=["my_templates"])
    summary = run_build(intent, tmp_path / "store", tmp_path / "out")
    assert summary["templates"]["left_of_statement"]["grey_batch"] == "fail"
    assert summary["templates"]["left_of_yesno"]["grey_batch"] == "pass"
    released = [json.loads(line) for line in open(summary["package_path"] + "/answers.jsonl")]
    assert not [r for r in released if r["template"] == "left_of_statement"]
    with Store(tmp_path / "store", read_only=True) as s:
        decisions = s.execute("SELECT subject_type, decision, count(*) FROM gate_decisions WHERE gate = 'A' "
                              "AND template = 'left_of_statement' GROUP BY ALL ORDER BY ALL").fetchall()
        failed = s.execute("SELECT DISTINCT v.requirement_id FROM verifications v JOIN artifacts a ON a.id = v.artifact_id "
                           "WHERE NOT v.passed AND json_extract_string(a.content, '$.template') = 'left_of_statement' "
                           "AND a.type = 'OEItem'").fetchall()
    assert ("Template", "fail", 1) in decisions
    assert [r[0] for r in failed] == ["OE-7"]
    assert summary["gates"]["B1"]["fail"] >= 1


def test_gate_decisions_recorded_per_item(built):
    with Store(built["store"], read_only=True) as s:
        rows = s.execute("SELECT gate, count(DISTINCT subject_id) FROM gate_decisions WHERE subject_type = 'OEItem' "
                         "GROUP BY gate").fetchall()
    counts = dict(rows)
    assert counts["B1"] == built["summary"]["items_candidates"]
    assert counts["C1"] == built["summary"]["items_accepted"]
    # The counters add up: every candidate ends rejected, held or accepted, and what is released
    # comes from the accepted ones.
    s = built["summary"]
    assert s["items_candidates"] == s["items_rejected"] + s["items_held"] + s["items_accepted"], s
    assert s["items_released"] + s["items_not_needed"] == s["items_accepted"]
    assert counts["A"] >= 4


def test_near_duplicates_are_removed(built):
    from forge_skills.oe.verify.dependence_gates import near_duplicates

    items = _items(built, "closest_choice")
    with Store(built["store"], read_only=True) as s:
        facts = s.fields([it.binding for it in items.values()], {"scene": "$.scene_index", "view": "$.view",
                                                                 "slots": "$.slots"})
        decided = dict(s.execute("SELECT subject_id, decision FROM gate_decisions WHERE gate = 'DUP'").fetchall())
    passed = {i for i, d in decided.items() if d == "pass"}
    # What the build let through the gate holds no near-duplicates; what it held back twins a kept item.
    held = {i: it for i, it in items.items() if decided.get(i) == "fail"}
    items = {i: it for i, it in items.items() if i in passed}
    log = GateLog("t")
    assert sorted(near_duplicates(log, items, facts)) == sorted(items), "the gate's passes hold no near-duplicates"
    for iid, it in held.items():
        assert iid not in near_duplicates(GateLog("t"), {**items, iid: it}, facts)
    first_id, first = sorted(items.items())[0]
    twin = first.model_copy(update={"question": first.question.replace("closest", "nearest")})
    with_twin = {**items, "f" * 32: twin}
    kept = near_duplicates(GateLog("t"), with_twin, facts)
    assert "f" * 32 not in kept and first_id in kept and len(kept) == len(items)
