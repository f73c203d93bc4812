"""Items a researcher would publish: one regression test per class of defect reviewers found in
released items that passed every earlier check. Each reproduces the defect on a real store (by
planting what the earlier code produced, or asking the earlier question of real evidence) and
shows the current checks catch it: a contract failure, an inadmissible binding or a C1 flag."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from forge_skills.oe.types import Blueprint, EvidenceRecord, OEItem, Template
from forge.contracts import CheckContext
from forge.keys import digest
from forge.store import Store
from forge_skills.oe.synthesize.admission import admission_problem, marker_problem
from forge_skills.oe.synthesize.answer_rules import confusers, rule_for
from forge_skills.oe.synthesize.rule_margins import depth_cue
from forge_skills.oe.synthesize.fact_table import Candidate, FactTable
from forge_skills.oe.package.oe_package import select_composition
from forge_skills.oe.synthesize.difficulty import band_quotas, by_count, by_field, by_grounding, template_quotas
from forge_skills.oe.synthesize.synthesis import _marker_place
from forge_skills.oe.synthesize.templates import builtin_root, read_template
from forge_skills.oe.verify.blind_solvers import blind_report
from forge_skills.oe.verify.checks import template_declares
from forge_skills.oe.verify.item_checks import item_states_assumptions

from conftest import run_build, write_intent

pytestmark = pytest.mark.xdist_group("publishable")

ROOT = Path(__file__).resolve().parents[1]
LEAKY = ROOT / "tests" / "fixtures" / "leaky_templates"
DOTA = ROOT.parent / "shared" / "data" / "aerial_dota"


def _template(tid: str) -> dict:
    return read_template(next(builtin_root().glob(f"*/{tid}.yaml"))).model_dump()


def _evidence(store_dir: Path) -> list[EvidenceRecord]:
    with Store(store_dir, read_only=True) as s:
        rows = s.execute("SELECT content FROM artifacts WHERE type = 'EvidenceRecord' AND status = 'verified' "
                         "ORDER BY id").fetchall()
    return [EvidenceRecord.model_validate_json(c) for (c,) in rows]


def _items(store_dir: Path, template: str | None = None) -> list[tuple[str, OEItem]]:
    with Store(store_dir, read_only=True) as s:
        rows = s.execute("SELECT id, content FROM artifacts WHERE type = 'OEItem' AND status = 'verified' ORDER BY id"
                         ).fetchall()
    items = [(aid, OEItem.model_validate_json(c)) for aid, c in rows]
    return [(aid, it) for aid, it in items if template is None or it.template == template]


def _admitted(ev: EvidenceRecord, tid: str, limit: int = 50) -> list[tuple[int, dict]]:
    """(view, slots) of candidates the current admission lets through on this evidence."""
    tpl, ft = _template(tid), FactTable(ev)
    out = []
    for view in ft.views:
        for cand in rule_for(tpl).candidates(ft, view, tpl):
            if admission_problem(ft, tpl, view, cand.slots) is None:
                out.append((view, cand.slots))
                if len(out) >= limit:
                    return out
    return out


def _with_fact(ev: EvidenceRecord, name: str, view: int, **changes) -> EvidenceRecord:
    """The evidence with one object's fact in one view changed; an object moved (a new centre)
    without a box of its own gets a 16 px box around its new centre (a small object there)."""
    if "center_2d" in changes and "bbox_2d" not in changes:
        x, y = changes["center_2d"]
        changes["bbox_2d"] = [x - 8.0, y - 8.0, x + 8.0, y + 8.0]
    facts = [f.model_copy(update=changes) if (f.object, f.view) == (name, view) else f for f in ev.facts]
    return ev.model_copy(update={"facts": facts})


# -- 1. rules the model is never told -------------------------------------------------------------


def test_a_reach_template_that_does_not_state_the_reach_fails_its_contract(built):
    tpl = _template("reach_yesno")
    told = Template(**tpl, file="builtin:tabletop/reach_yesno.yaml", file_hash="x")
    assert template_declares(told, None).passed
    untold = Template(**{**tpl, "assumptions": {}}, file="builtin:tabletop/reach_yesno.yaml", file_hash="x")
    outcome = template_declares(untold, None)
    assert not outcome.passed and "'reach' convention" in outcome.diagnostics and "'scale'" in outcome.diagnostics


def test_counts_and_distances_state_what_counts_and_the_scale(wide):
    with Store(wide["store"], read_only=True) as store:
        from forge.artifact_types import content_type

        def load(aid: str):
            kind, content = store.one("SELECT type, content FROM artifacts WHERE id = ?", [aid])
            return content_type(kind).model_validate_json(content)

        for tid in ("count_visible_numeric", "distance_numeric", "reach_yesno"):
            items = _items(wide["store"], tid)
            assert items, tid
            for aid, it in items[:5]:
                ctx = CheckContext(aid, load, store)
                assert item_states_assumptions(it, ctx).passed
                # the earlier item: the same question without the instruction line
                assert not item_states_assumptions(it.model_copy(update={"instruction": ""}), ctx).passed
        stated = [it.instruction for _, it in _items(wide["store"], "count_visible_numeric")]
        assert all("the table, the trays and the robot arm are not counted" in s for s in stated)
        assert all("table top is 150 cm long" in it.instruction for _, it in _items(wide["store"], "distance_numeric"))


def test_a_metric_question_needs_its_scale_reference_in_view(wide):
    """The scale the tabletop states is the table's size: where the table is not clearly in view,
    a distance cannot be asked."""
    tpl = _template("distance_numeric")
    checked = 0
    for ev in _evidence(wide["store"])[:20]:
        for view, slots in _admitted(ev, "distance_numeric", limit=2):
            views = [v.model_copy(update={"body_pixels": {**v.body_pixels, "table": 500}}) if v.index == view else v
                     for v in ev.views]
            problem = admission_problem(FactTable(ev.model_copy(update={"views": views})), tpl, view, slots)
            assert problem is not None and "the table that sets the scale" in problem
            checked += 1
    assert checked >= 5


def test_a_scale_body_must_show_two_corners_to_measure_by(wide):
    """A table seen as one corner with both edges running out of the picture gives no length to
    measure by, however many of its pixels show: such views ask no distance."""
    tpl = _template("distance_numeric")
    caught = 0
    for ev in _evidence(wide["store"]):
        scale = ev.conventions["scale"]
        assert scale.get("corners") and scale.get("min_corners") == 2
        plain = ev.model_copy(update={"conventions": {**ev.conventions,
                                                      "scale": {k: v for k, v in scale.items() if k != "corners"}}})
        for view, slots in _admitted(plain, "distance_numeric", limit=2):
            problem = admission_problem(FactTable(ev), tpl, view, slots)
            if problem is not None:
                assert "of the table's corners, too few to measure the scale by" in problem
                caught += 1
        if caught >= 3:
            break
    assert caught >= 3


# -- 2. referents a person cannot make out ---------------------------------------------------------


@pytest.mark.parametrize("defect", ["hidden", "low_contrast", "too_small", "cut_by_border"])
def test_a_referent_a_person_cannot_make_out_is_not_admitted(built, defect):
    """Admitted candidates made unreadable the way reviewers saw them: mostly hidden behind
    another object, black on a black table top, a few pixels for a teddy bear, cut off at the
    image corner."""
    planted = 0
    for ev in _evidence(built["store"])[:20]:
        for view, slots in _admitted(ev, "closest_choice", limit=3):
            name = slots["objects"][0]
            fact = FactTable(ev).fact(name, view)
            change = {"hidden": {"visible_share": 0.35}, "low_contrast": {"contrast": 4.0},
                      "too_small": {"visible_pixels": 40}, "cut_by_border": {"border_share": 0.4}}[defect]
            bad = FactTable(_with_fact(ev, name, view, **change))
            problem = admission_problem(bad, _template("closest_choice"), view, slots)
            assert problem is not None, (defect, name, fact)
            planted += 1
    assert planted >= 5


@pytest.mark.parametrize("defect", ["cut_by_border", "hidden"])
def test_an_object_seen_but_not_made_out_is_not_asked_about_as_visible(built, defect):
    """"Is the soccer ball visible?" keyed yes on a sliver at the image edge: a person cannot
    tell what the sliver is. A yes needs the object made out by the source's referent rules."""
    tpl, planted = _template("visibility_yesno"), 0
    change = {"cut_by_border": {"border_share": 0.6}, "hidden": {"visible_share": 0.2}}[defect]
    for ev in _evidence(built["store"])[:20]:
        for view, slots in _admitted(ev, "visibility_yesno", limit=10):
            ft = FactTable(ev)
            answer, _ = rule_for(tpl).derive(ft, view, slots, tpl)
            if answer != "yes":
                continue
            bad = FactTable(_with_fact(ev, slots["object"], view, **change))
            answer, why = rule_for(tpl).derive(bad, view, slots, tpl)
            assert answer is None and "not made out" in why["reason"], (defect, slots, why)
            planted += 1
    assert planted >= 5


def test_an_object_whose_edge_reaches_past_the_answer_makes_leftmost_no_question(built):
    """"Which object appears leftmost?" keyed by centres, where a large ball's left edge reaches
    past the small cube whose centre is leftmost: either is a fair answer. Both edges of the
    answer must lie beyond the other options' edges."""
    tpl, planted = _template("leftmost_choice"), 0
    for ev in _evidence(built["store"])[:20]:
        for view, slots in _admitted(ev, "leftmost_choice", limit=3):
            ft = FactTable(ev)
            answer, _ = rule_for(tpl).derive(ft, view, slots, tpl)
            other = next(n for n in slots["objects"] if n != answer)
            x0, y0, x1, y1 = ft.fact(other, view).bbox_2d
            reach = ft.fact(answer, view).bbox_2d[0] - 6  # its left edge now further left than the answer's
            bad = FactTable(_with_fact(ev, other, view, bbox_2d=[reach, y0, x1, y1]))
            got, why = rule_for(tpl).derive(bad, view, slots, tpl)
            assert got is None and "by their edges" in why["reason"], (slots, why)
            planted += 1
    assert planted >= 5


def test_a_faint_object_blocks_a_count_beside_only_on_the_counted_side(built):
    """How many objects are left of the anchor: a half-hidden object on the left could be one
    more, so the count is not asked; one on the right cannot change it, so it is."""
    tpl = _template("count_left_numeric")
    left = right = 0
    for ev in _evidence(built["store"]):
        ft = FactTable(ev)
        for view, slots in _admitted(ev, "count_left_numeric", limit=4):
            at = ft.value(slots["anchor"], view, "center_x")
            for name in ft.visible(view, 1):
                x = ft.value(name, view, "center_x")
                if name == slots["anchor"] or abs(x - at) < 40:
                    continue
                faint = _with_fact(ev, name, view, visible_share=0.2)
                answer, why = rule_for(tpl).derive(FactTable(faint), view, slots, tpl)
                if x < at:
                    assert answer is None and "counted side" in why["reason"]
                    left += 1
                else:
                    kept, _ = rule_for(tpl).derive(ft, view, slots, tpl)
                    if answer is None:  # it was one of the few others the template asks for
                        assert "too few other objects" in why["reason"]
                        continue
                    assert answer == kept, (answer, kept)
                    right += 1
        if left >= 3 and right >= 3:
            break
    assert left >= 3 and right >= 3


def test_a_sliver_of_a_look_alike_makes_an_absence_unanswerable(built):
    """Asked whether the yellow car is in a frame that holds only a sliver of a yellow cube: the
    sliver could be the car. An absent object's look-alikes must be made out clearly."""
    tpl, planted = _template("visibility_yesno"), 0
    for ev in _evidence(built["store"])[:30]:
        ft = FactTable(ev)
        for view, slots in _admitted(ev, "visibility_yesno", limit=20):
            name = slots["object"]
            if ft.fact(name, view).visible_pixels or planted >= 5:
                continue
            twin = next((o for o in ft.objects if o != name and ft.object(o).color == ft.object(name).color), None)
            if twin is None:
                continue
            bad = FactTable(_with_fact(ev, twin, view, visible_pixels=25, visible_share=0.15))
            problem = admission_problem(bad, tpl, view, slots)
            assert problem is not None and "could be taken for" in problem
            planted += 1
    assert planted > 0


def test_visible_share_and_contrast_are_measured_on_rendered_scenes(built):
    facts = [f for ev in _evidence(built["store"]) for f in ev.facts if f.visible_pixels > 0]
    shares = [f.visible_share for f in facts if f.visible_share is not None]
    assert len(shares) == len(facts) and all(0 < s <= 1 for s in shares)
    assert any(s < 0.7 for s in shares), "some objects are partly hidden by others"
    assert all(f.contrast is not None for f in facts) and max(f.contrast for f in facts) > 30
    assert any(f.border_share for f in facts), "the image border cuts some objects"


# -- 3. near ties in the image ---------------------------------------------------------------------


def test_a_name_a_look_alike_in_view_could_answer_to_is_not_asked(wide):
    """"Which label marks the green domino?" with a green jenga block marked beside it (1970b76b):
    two plain green bars, told apart only by their proportions. The source lists kinds a person
    cannot tell apart, and no item names an object where one of its colour and a look-alike kind
    is in view, whether it is asked about as present, absent or marked."""
    from forge_skills.oe.synthesize.admission import kind_lookalike_problem
    planted = 0
    for tid in ("grounding_choice", "visibility_yesno"):
        tpl = _template(tid)
        for ev in _evidence(wide["store"])[:15]:
            assert ["domino", "jenga block"] in ev.referent_rules["look_alike"]
            for view, slots in _admitted(ev, tid, limit=2):
                named = slots["target"] if "target" in slots else slots["object"]
                other = next((o.name for o in ev.objects if o.name != named
                              and FactTable(ev).fact(o.name, view).visible_pixels > 0), None)
                if other is None:
                    continue
                colour = FactTable(ev).object(named).color
                alone = [o.model_copy(update={"category": "domino"}) if o.name == named else o for o in ev.objects]
                if kind_lookalike_problem(FactTable(ev.model_copy(update={"objects": alone})), tpl, view, slots):
                    continue  # a real look-alike already in view
                objects = [o.model_copy(update={"category": "jenga block", "color": colour}) if o.name == other else o
                           for o in alone]
                bad = FactTable(ev.model_copy(update={"objects": objects}))
                why = admission_problem(bad, tpl, view, slots)
                # (Admission may meet another problem of the planted object first: seen only in part.)
                assert why is not None and "look-alikes" in (kind_lookalike_problem(bad, tpl, view, slots) or ""), \
                    (tid, slots, why)
                # The same pair in other colours is told apart by colour.
                apart = [o.model_copy(update={"color": "purple" if colour != "purple" else "orange"})
                         if o.name == other else o for o in objects]
                assert kind_lookalike_problem(FactTable(ev.model_copy(update={"objects": apart})), tpl, view,
                                              slots) is None
                planted += 1
    assert planted >= 10, planted


def test_reach_is_asked_only_of_objects_clearly_inside_or_outside_it(wide):
    """A block 73-80 cm from the arm's base against a stated reach of about 80 cm, keyed yes with
    an 8 cm margin (58852e5d, 47295f94): reviewers reading the table's scale could not tell. An
    object asked about stands at least 10 cm inside or outside the reach."""
    tpl = _template("reach_yesno")
    assert tpl["admission"]["min_margin"] >= 0.10
    checked = 0
    for ev in _evidence(wide["store"]):
        ft = FactTable(ev)
        for view in ft.views:
            for cand in rule_for(tpl).candidates(ft, view, tpl):
                answer, why = rule_for(tpl).derive(ft, view, cand.slots, tpl)
                assert answer is not None and abs(why["distance_m"] - why["reach_m"]) >= 0.10
                checked += 1
            near = {**tpl, "admission": {**tpl["admission"], "min_margin": 0.0}}
            for cand in rule_for(near).candidates(ft, view, near):
                d = abs(cand.values["distance_m"] - cand.values["reach_m"])
                if d < 0.10:
                    assert rule_for(tpl).derive(ft, view, cand.slots, tpl)[0] is None
    assert checked


def test_a_depth_comparison_needs_a_gap_a_person_sees(built):
    tpl = _template("closest_choice")
    tight = dict(tpl, admission={**tpl["admission"], "min_depth_cue": 0.0})
    caught = 0
    for ev in _evidence(built["store"]):
        ft = FactTable(ev)
        for view in ft.views:
            for cand in rule_for(tight).candidates(ft, view, tight):
                answer, why = rule_for(tight).derive(ft, view, cand.slots, tight)
                values = why["values"]
                near, far = sorted(values, key=values.get)[:2]
                cue = depth_cue(ft, view, near, far)
                if cue is not None and cue < 0.04:  # metric margin met, a couple of pixels in the image
                    caught += 1
                    assert admission_problem(ft, tpl, view, cand.slots) is not None or \
                        rule_for(tpl).derive(ft, view, cand.slots, tpl)[0] is None
    assert caught > 0


def test_an_object_held_up_in_the_gripper_is_never_compared_by_distance(wide):
    """a268df40: "is the can nearer than the milk carton?" with the can lifted in the gripper: off
    the table it has no resting place to read its distance by, and its size and height mislead.
    Depth comparisons leave out whatever the gripper holds; the same pair is asked when it rests."""
    ev = _evidence(wide["store"])[0]
    ft = FactTable(ev)
    tpl = _template("closer_yesno")
    rule = rule_for(tpl)
    for view in ft.views:
        asked = [c for c in rule.candidates(ft, view, tpl)]
        if asked:
            break
    assert asked
    a, b = asked[0].slots["a"], asked[0].slots["b"]
    held = FactTable(ev.model_copy(update={"gripper": {"state": "closed", "holding": a, "opening_m": 0.05}}))
    answer, why = rule.derive(held, view, {"a": a, "b": b}, tpl)
    assert answer is None and "held up in the gripper" in why["reason"]
    assert not [c for c in rule.candidates(held, view, tpl) if a in (c.slots["a"], c.slots["b"])]
    for tid in ("closest_choice", "depth_order_list"):  # nor as any option of a nearest or an order
        t = _template(tid)
        assert [c for c in rule_for(t).candidates(ft, view, t) if a in c.slots["objects"]], tid
        assert not [c for c in rule_for(t).candidates(held, view, t) if a in c.slots["objects"]], tid


# -- 4. markers that carry the answer --------------------------------------------------------------


@pytest.fixture(scope="module")
def leaky(tmp_path_factory):
    """A build with the earlier marker templates: depth and size asked of two marked objects, where
    on a table top the lower marker is the nearer and the bigger object."""
    root = tmp_path_factory.mktemp("leaky")
    folder = root / "leaky"
    folder.mkdir()
    for name in ("marked_farther_choice.yaml", "marked_larger_choice.yaml"):
        shutil.copy(LEAKY / name, folder / name)
    intent = write_intent(root, oe={"items": 200, "capabilities": ["depth_order", "size_scale"],
                                    "question_types": ["marked_object_choice", "yes_no", "single_choice"],
                                    "templates": ["marked_farther_choice", "marked_larger_choice", "closer_yesno",
                                                  "largest_choice"]},
                          templates_dirs=["leaky"])
    summary = run_build(intent, root / "store", root / "out")
    return {"store": root / "store", "summary": summary}


def test_markers_whose_places_give_the_answer_are_held_back(leaky):
    """Where the answer's marker mostly sits higher (the farther of two on a table top) or lower
    (the larger), the balance gate and allocation keep it as often low as high, and the marker
    solver is left at chance; where almost no answer sits on the other marker, almost nothing is
    drawn. (Rings whose size gives the answer are flagged by C1: the next test.)"""
    with Store(leaky["store"], read_only=True) as s:
        failed = {t: json.loads(d) for t, d in s.execute(
            "SELECT template, details FROM gate_decisions WHERE gate = 'C1' AND subject_type = 'Template' "
            "AND decision = 'fail'").fetchall()}
        places = [p for (p,) in s.execute(
            "SELECT json_extract_string(content, '$.presentation.answer_place') FROM artifacts "
            "WHERE type = 'Binding' AND json_extract_string(content, '$.template') = 'marked_farther_choice'"
        ).fetchall()]
    # Larger: the bigger of two objects is the lower marker in almost every binding: few are drawn,
    # and the markers do not tell which.
    larger = _items(leaky["store"], "marked_larger_choice")
    assert len(larger) <= 4 and (not larger or blind_report(larger)["accuracies"]["marker_geometry"] <= 0.6)
    # Farther: the answer is the upper marker in most bindings, but not in the items made.
    upper = sum(p.split(",")[1] == "1" for p in places) / len(places)
    assert len(places) >= 40 and upper > 0.7, (len(places), upper)
    made = _items(leaky["store"], "marked_farther_choice")
    assert made and blind_report(made)["accuracies"]["marker_geometry"] <= 0.6
    assert "marked_farther_choice" not in failed


def test_c1_flags_rings_whose_size_gives_the_answer():
    """Rings drawn at the size of the object's box answer "which is larger" with no look at the
    picture, wherever the markers stand: C1's marker-only solver reads the ring sizes and the
    template is held back."""
    from forge.gatelog import GateLog
    from forge_skills.oe.verify.gates import blind_evaluation

    items = {}
    for i, it in enumerate(_marked_pairs(120, 0.5)):
        markers = [dict(m, r=0.15 if m["label"] == it.answer else 0.1) for m in it.markers]
        items[digest(("ring", i))[:12]] = it.model_copy(update={"template": "ringed", "markers": markers})
    settings = {"min_blind_items": 10, "blind_margin": 0.05, "blind_alpha": 0.05}
    kept, reports = blind_evaluation(GateLog("t"), items, settings)
    assert not kept and reports["ringed"]["flagged"] and reports["ringed"]["best_solver"] == "marker_geometry"
    even = {i: it.model_copy(update={"markers": [dict(m, r=0.1) for m in it.markers]}) for i, it in items.items()}
    assert len(blind_evaluation(GateLog("t"), even, settings)[0]) == len(items)


def test_rings_share_one_size_and_the_marker_solver_stays_at_chance_elsewhere(wide):
    for tid in ("grounding_choice", "marked_nearest_choice"):
        items = _items(wide["store"], tid)
        assert items, tid
        for _, it in items:
            assert len({m["r"] for m in it.markers}) == 1
        report = blind_report(items)
        # Beating chance by less than 15 points, or by no more than a handful of items can show
        # (the blind gate's own test: Bonferroni over the solvers).
        excess = report["accuracies"]["marker_geometry"] - report["chance"]
        assert excess < 0.15 or report["p_value"] >= 0.05, (tid, report)


def test_marked_answers_take_turns_by_where_their_marker_lies(wide):
    """The nearer of two objects is mostly the lower marker: bindings of a marker-choice template
    spread their answers over left and right, low and high markers about as chance would."""
    with Store(wide["store"], read_only=True) as s:
        rows = s.execute("SELECT content FROM artifacts WHERE type = 'Binding'").fetchall()
    evidence = _evidence_by_id(wide["store"])
    for tid in ("marked_nearest_choice", "grounding_choice"):
        places = []
        for (content,) in rows:
            b = json.loads(content)
            if b["template"] == tid:
                ft = FactTable(evidence[b["evidence"]])
                place = _marker_place(ft, b["view"], Candidate(b["slots"], b["answer"], 0.0, None))
                places.append(([int(v) for v in place.split(",")] if place else None, len(b["slots"]["marked"])))
        assert len(places) >= 40 and all(p is not None for p, _ in places), tid
        chance = sum(1 / n for _, n in places) / len(places)
        for axis in (0, 1):
            share = sum(p[axis] == 0 for p, _ in places) / len(places)  # furthest left, lowest
            assert abs(share - chance) < 0.15, (tid, axis, share, chance)


def _marked_supply(n: int) -> list[tuple[str, str, str]]:
    """(band, answer, where its marker lies) for ``n`` marked-pair questions as depth makes
    them: the easy ones are those whose answer also stands lower, so all of them have the lower
    marker as the answer; the hard ones the upper."""
    out = []
    for i in range(n):
        band = "easy" if i % 5 < 3 else "hard"
        answer = "AB"[i % 2]
        lower = band == "easy"
        out.append((band, answer, f"{'AB'.index(answer)},{0 if lower else 1},2"))
    return out


def test_allocation_drawing_towards_a_band_keeps_markers_from_giving_the_answer():
    """Household scene_marked_closer_choice: binding spread the answer's marker over low and high,
    but allocation, drawing the easy band the mix asked for, took mostly items whose answer is
    the lower marker, and the marker-only solver read 76% of them."""
    from forge_skills.oe.verify.gates import BindingSummary, allocate

    bindings = {}
    for i, (band, answer, place) in enumerate(_marked_supply(100)):
        det = json.dumps({"quantity": "depth", "evidence": f"e{i}", "views": [0], "referents": ["a", "b"]})
        bindings[f"b{i:03d}"] = BindingSummary(template="closer", answer=answer, capability="depth_order",
                                               determinant=det, question_type="marked_object_choice",
                                               difficulty=band, place=place)
    bp = Blueprint(name="t", version="1", seed=0, track="oe", items_target=40, capabilities=["depth_order"],
                   question_types=["marked_object_choice"], capability_targets={"depth_order": 40}, sources=[],
                   templates=[], gates={}, intent_hash="", difficulty={"easy": 0.8, "medium": 0.1, "hard": 0.1})
    chosen = allocate(bp, bindings, 1.0)["closer"]
    assert len(chosen) == 40
    lower = sum(bindings[b].place.endswith(",0,2") for b in chosen) / len(chosen)
    assert 0.4 <= lower <= 0.6, lower


def test_release_drawing_towards_a_band_keeps_markers_from_giving_the_answer():
    """The same at release: items take turns by where the answer's marker lies, not only by answer."""
    items = []
    for i, (band, answer, place) in enumerate(_marked_supply(100)):
        low = place.endswith(",0,2")
        # The answer's marker stands lower (larger y) than the other one, or higher.
        ya, yb = (0.7, 0.4) if (answer == "A") == low else (0.4, 0.7)
        markers = [{"label": "A", "x": 0.3, "y": ya, "r": 0.1}, {"label": "B", "x": 0.6, "y": yb, "r": 0.1}]
        items.append((f"i{i:03d}", OEItem.model_construct(template="closer", capability="depth_order", answer=answer,
                                                          difficulty=band, markers=markers)))
    bp = Blueprint(name="t", version="1", seed=0, track="oe", items_target=40, capabilities=["depth_order"],
                   question_types=["marked_object_choice"], capability_targets={"depth_order": 40}, sources=[],
                   templates=[], gates={}, intent_hash="", difficulty={"easy": 0.8, "medium": 0.1, "hard": 0.1})
    chosen = select_composition(bp, items)
    assert len(chosen) == 40
    lower = []
    for _, it in chosen:
        mark = {m["label"]: m for m in it.markers}
        lower.append(mark[it.answer]["y"] > max(m["y"] for m in it.markers if m["label"] != it.answer))
    assert 0.4 <= sum(lower) / len(lower) <= 0.6, sum(lower) / len(lower)


def _marked_pairs(n: int, lower_share: float) -> list[OEItem]:
    """``n`` marked-pair items whose answer is the lower marker in ``lower_share`` of them (as on
    a floor, where the nearer of two mostly stands lower), answers A and B even."""
    out = []
    for i in range(n):
        answer = "AB"[i % 2]
        low = (i * 7919 % n) < lower_share * n
        ya, yb = (0.7, 0.4) if (answer == "A") == low else (0.4, 0.7)
        markers = [{"label": "A", "x": 0.3 + 0.01 * (i % 5), "y": ya, "r": 0.1},
                   {"label": "B", "x": 0.6 - 0.01 * (i % 3), "y": yb, "r": 0.1}]
        out.append(OEItem.model_construct(template="closer", capability="depth_order", answer=answer,
                                          answer_index="AB".index(answer), options=["A", "B"], markers=markers,
                                          question="Which marked object, A or B, is nearer the camera?",
                                          question_type="marked_object_choice", kinds=["cube", "ball"],
                                          scoring={"protocol": "exact_choice"}, difficulty="medium"))
    return out


def test_the_balance_gate_holds_back_answers_whose_marker_sits_low_too_often():
    """Household scene_marked_closer_choice: the nearer of two objects on a floor is mostly the
    lower marker, and however binding and allocation took turns, three in four items had the
    answer on the lower marker (the marker-only solver read 75%, C1 held the template, and the
    build rendered 6,000 more rooms for depth items). The balance gate now keeps as many answers
    on the upper marker as on the lower, and allocation draws only what it would keep."""
    from forge.gatelog import GateLog
    from forge_skills.oe.verify.gates import BindingSummary, keepable
    from forge_skills.oe.verify.balance_gate import balance_answers

    items = {digest(i)[:12]: it for i, it in enumerate(_marked_pairs(200, 0.8))}
    before = blind_report(sorted(items.items()))
    assert before["best_solver"] == "marker_geometry" and before["best_accuracy"] >= 0.75, before
    kept = balance_answers(GateLog("t"), items, 0.025, 8)
    low = [i for i in kept if items[i].markers["AB".index(items[i].answer)]["y"] == 0.7]
    assert 70 <= len(kept) <= 84 and abs(len(low) / len(kept) - 0.5) <= 0.05, (len(kept), len(low))
    after = blind_report(sorted((i, items[i]) for i in kept))
    assert after["accuracies"]["marker_geometry"] <= 0.56 and after["p_value"] > 0.05, after
    summaries = {}
    for iid, it in items.items():
        det = json.dumps({"quantity": "depth", "evidence": iid, "views": [0], "referents": ["a", "b"]})
        summaries[iid] = BindingSummary(template="closer", answer=it.answer, capability="depth_order", determinant=det,
                                        question_type="marked_object_choice", kinds='["cube", "ball"]',
                                        place=_marker_place_of(it))
    drawn = keepable(summaries)["closer"]
    assert abs(len(drawn) - len(kept)) <= 4
    assert abs(sum(i in low or items[i].markers["AB".index(items[i].answer)]["y"] == 0.7 for i in drawn)
               / len(drawn) - 0.5) <= 0.05


def _marker_place_of(item: OEItem) -> str:
    from forge_skills.oe.synthesize.marker_place import marked_answer_place
    return marked_answer_place(item.markers, item.answer)


def test_answers_stay_even_when_their_markers_lie_in_more_places_for_some():
    """Places take turns within an answer, not beside the answers: with three marked options, one
    answer's marker may lie in nine places and another's in four, and turns over (answer, place)
    pairs gave the first twice the items; the balance gate then set them aside and the household
    package came out short of visibility items."""
    from forge_skills.oe.synthesize.difficulty import steered

    groups = [[[f"a{p}-{i}" for i in range(10)] for p in range(9)], [[f"b{p}-{i}" for i in range(30)] for p in range(4)]]
    chosen = steered(groups, 40, lambda i: "easy" if i.endswith(("0", "2", "4")) else "hard", {"easy": 20, "hard": 20})
    assert sum(i.startswith("a") for i in chosen) == sum(i.startswith("b") for i in chosen) == 20
    places = {i.split("-")[0] for i in chosen if i.startswith("b")}
    assert places == {"b0", "b1", "b2", "b3"}  # and every place of an answer has its turn


def _evidence_by_id(store_dir: Path) -> dict[str, EvidenceRecord]:
    with Store(store_dir, read_only=True) as s:
        rows = s.execute("SELECT id, content FROM artifacts WHERE type = 'EvidenceRecord'").fetchall()
    return {i: EvidenceRecord.model_validate_json(c) for i, c in rows}


# -- 5. regions that contain the other options -----------------------------------------------------


@pytest.fixture(scope="module")
def aerial(tmp_path_factory):
    if not DOTA.is_dir():
        pytest.skip(f"{DOTA} is not beside the project")
    root = tmp_path_factory.mktemp("regions")
    path = root / "intent.yaml"
    path.write_text(json.dumps({"name": "regions", "seed": 3, "oe": {
        "items": 30, "capabilities": ["visibility", "metric_distance"],
        "question_types": ["grounding_choice", "numeric"]},
        "sources": [{"kind": "image_folder", "adapter": "dota", "root": str(DOTA)}], "gates": {"grey_batch": 4}}))
    summary = run_build(path, root / "store", root / "out")
    return {"store": root / "store", "summary": summary}


def test_a_harbour_is_never_marked_against_the_ships_inside_it(aerial):
    """A ring sized for a harbour holds dozens of ships: a pair of a harbour and a ship, or of two
    ships in a packed marina, is not marked with rings; the grounding question marks outlines."""
    tpl = _template("aerial_marked_larger_choice")
    caught = 0
    for ev in _evidence(aerial["store"]):
        ft = FactTable(ev)
        view = ft.views[0]
        harbours = [o for o in ft.objects if ft.category(o) == "harbor" and ft.fact(o, view).center_2d]
        ships = [o for o in ft.objects if ft.category(o) == "ship" and ft.fact(o, view).center_2d]
        for h in harbours:
            for s in ships:
                (hx, hy), radius = ft.fact(h, view).center_2d, max(_extent(ft.fact(h, view).bbox_2d), 
                                                                   _extent(ft.fact(s, view).bbox_2d)) + 5
                inside = [o for o in ships if o != s and (ft.fact(o, view).center_2d[0] - hx) ** 2
                          + (ft.fact(o, view).center_2d[1] - hy) ** 2 < radius ** 2]
                if inside:  # the harbour's ring would hold ships besides the marked one
                    problem = marker_problem(ft, tpl, view, {"marked": [h, s]})
                    assert problem is not None and "would also enclose" in problem
                    caught += 1
    assert caught > 0
    outline = _template("aerial_category_grounding")
    assert outline["media"]["markers"] == "outline"


def _extent(box: list[int]) -> float:
    return max(box[2] - box[0], box[3] - box[1]) / 2


# -- 6. too easy to tell models apart --------------------------------------------------------------


def test_difficulty_follows_the_margins(wide):
    assert by_field({"image_margin": 5.0}, _template("largest_choice"), None, None) == "easy"  # a 5:1 area ratio
    # 1.7:1 was judged one-glance (scene_largest in the last review); 1.25:1 takes a careful look.
    assert by_field({"image_margin": 1.7}, _template("largest_choice"), None, None) == "easy"
    assert by_field({"image_margin": 1.25}, _template("largest_choice"), None, None) == "hard"
    assert by_grounding({"confusers": []}, {}, None, None) == "easy"  # a single-referent colour check
    # The only purple object among black and green ones is found at a glance, cubes or not.
    assert by_grounding({"confusers": ["kind"]}, {}, None, None) == "easy"
    assert by_grounding({"confusers": ["colour"]}, {}, None, None) == "easy"  # then its shape, at a glance
    assert by_grounding({"confusers": ["colour", "kind"]}, {}, None, None) == "medium"
    # Four objects are seen as four at a glance; six must be counted.
    assert [by_count({"count": n}, {}, None, None) for n in (1, 4, 5, 6, 9)] == ["easy", "easy", "medium", "hard", "hard"]


def test_which_is_further_left_is_hardest_between_objects_one_above_the_other(wide):
    """The same 30 px sideways between two objects side by side is a glance, and still one with
    80 px between them down the image (reviewers judged leftmost objects 25-35 px clear
    one-glance); between one high in the picture and one far below it, or with less to spare,
    the eye must carry a line down the image."""
    ev = _evidence(wide["store"])[0]
    ft = FactTable(ev)
    view = ft.views[0]
    a, b = ft.visible(view, 1)[:2]
    tpl = _template("left_of_yesno")

    def band(ya: float, yb: float) -> str:
        placed = _with_fact(_with_fact(ev, a, view, center_2d=[100.0, ya]), b, view, center_2d=[130.0, yb])
        why = {"values": {a: 100.0, b: 130.0}, "margin": 30.0}
        return by_field(why, tpl, FactTable(placed), view)
    assert band(120, 120) == "easy"
    assert band(100, 180) == "easy"  # 80 px apart down the image
    closer = _with_fact(_with_fact(ev, a, view, center_2d=[100.0, 100.0]), b, view, center_2d=[125.0, 180.0])
    assert by_field({"values": {a: 100.0, b: 125.0}}, tpl, FactTable(closer), view) == "medium"  # 25 px, 80 down
    assert band(40, 200) == "easy"  # 160 px down, but 30 px (9%) sideways: still a glance
    far = _with_fact(_with_fact(ev, a, view, center_2d=[100.0, 40.0]), b, view, center_2d=[125.0, 200.0])
    assert by_field({"values": {a: 100.0, b: 125.0}}, tpl, FactTable(far), view) == "hard"  # 25 px, 160 down
    narrow = _with_fact(_with_fact(ev, a, view, center_2d=[100.0, 120.0]), b, view, center_2d=[112.0, 120.0])
    assert by_field({"values": {a: 100.0, b: 112.0}}, tpl, FactTable(narrow), view) == "hard"  # 12 px of 320
    # An extreme is rated by the answer against each other option, not by the other options' gaps.
    three = _with_fact(narrow, a, view, center_2d=[40.0, 120.0])
    c = ft.visible(view, 1)[2]
    three = _with_fact(three, c, view, center_2d=[112.0, 120.0])
    why = {"values": {a: 40.0, b: 112.0, c: 112.0}, "pick": "min"}
    assert by_field(why, _template("leftmost_choice"), FactTable(three), view) == "easy"


def test_a_count_beside_is_as_hard_as_its_closest_call(wide):
    """"How many objects are left of the X": every object must be put on its side of X, so the
    count is as demanding as the object nearest X's column (7aefd42a, two objects 45 px clear of
    the anchor, was judged a glance; one 12 px from it, or far below it, is not)."""
    ev = _evidence(wide["store"])[0]
    ft = FactTable(ev)
    view = ft.views[0]
    anchor, a, b = ft.visible(view, 1)[:3]
    tpl = _template("count_left_numeric")
    rule = rule_for(tpl)

    def band(xa: float, ya: float, xb: float = 260.0) -> str:
        placed = _with_fact(ev, anchor, view, center_2d=[150.0, 120.0])
        placed = _with_fact(_with_fact(placed, a, view, center_2d=[xa, ya]), b, view, center_2d=[xb, 120.0])
        why = {"count": 1, "anchor": anchor, "offsets_px": {a: xa - 150.0, b: xb - 150.0}}
        return rule.difficulty_of(why, tpl, FactTable(placed), view)
    assert band(100.0, 120.0) == "easy"  # 50 px clear, side by side
    assert band(130.0, 120.0) == "easy"  # 20 px of 320, side by side: 4 px clear of each other
    assert band(138.0, 120.0) == "hard"  # 12 px: overlapping
    assert band(100.0, 10.0) == "easy"  # 50 px sideways (16% of the width), however far down
    assert band(124.0, 40.0) == "medium"  # 26 px sideways, 80 px down the picture
    assert band(125.0, 10.0) == "hard"  # 25 px sideways, 110 px down
    assert band(100.0, 120.0, xb=155.0) == "hard"  # the uncounted side's closest call counts too
    many = {"count": 6, "anchor": anchor, "offsets_px": {a: -50.0, b: 110.0}}
    assert rule.difficulty_of(many, tpl, FactTable(_with_fact(ev, anchor, view, center_2d=[150.0, 120.0])), view) == "hard"
    # Rooms and grounds ask it too, so their counting has more than glance-sized counts.
    assert rule_for(_template("scene_count_left_numeric")).name == "count_beside"
    assert _template("scene_count_right_numeric")["answer_rule"]["side"] == "right"


def test_whether_an_object_is_in_a_tray_is_asked_only_with_a_tray_in_view(built):
    """7210c00a asked whether a jenga block on a side table was in the tray with no tray in sight:
    "no" is read off the picture without finding the block. The tray must be in view: the same
    question asked of a view whose trays are taken out of the picture is refused."""
    tpl = _template("in_tray_yesno")
    for ev in _evidence(built["store"]):
        ft = FactTable(ev)
        for view in ft.views:
            asked = [c for c in rule_for(tpl).candidates(ft, view, tpl)
                     if c.answer == "no" and admission_problem(ft, tpl, view, c.slots) is None]
            if not asked:
                continue
            shown = ft.view(view).body_pixels
            assert max(px for n, px in shown.items() if n.startswith("tray")) >= 600
            trayless = {n: (0 if n.startswith("tray") else px) for n, px in shown.items()}
            views = [v.model_copy(update={"body_pixels": trayless}) if v.index == view else v for v in ev.views]
            problem = admission_problem(FactTable(ev.model_copy(update={"views": views})), tpl, view, asked[0].slots)
            assert problem is not None and "the tray shows 0 px" in problem
            return
    pytest.fail("no view of the built store is asked whether an object is in a tray")


def test_a_nearest_that_is_also_clearly_lowest_is_a_glance(wide):
    """0dda26f0: "which marked object is nearer", the nearer one far lower in the picture; its
    height answers at a glance, and the markers' positions alone answered a vehicle template's
    items (72.7% against 50%). Such items are easy; a nearer one that stands higher (on a table,
    say) is rated by its depth margin."""
    ev = _evidence(wide["store"])[0]
    ft = FactTable(ev)
    view = ft.views[0]
    a, b = ft.visible(view, 1)[:2]
    tpl = _template("closest_choice")

    def at(record, name, x: float, base: float):  # standing on the table at image row ``base``
        return _with_fact(record, name, view, center_2d=[x, base - 15.0], bbox_2d=[int(x) - 10, int(base) - 30, int(x) + 10, int(base)])

    def band(ya: float, yb: float) -> str:
        placed = at(at(ev, a, 100.0, ya), b, 200.0, yb)
        why = {"values": {a: 1.0, b: 1.1}, "pick": "min", "image_margin": 0.1}
        return by_field(why, tpl, FactTable(placed), view)
    assert band(200.0, 120.0) == "easy"  # the nearer 80 px lower
    assert band(120.0, 200.0) == "medium"  # the nearer higher: the depth margin rates it
    assert band(125.0, 120.0) == "medium"  # 5 px is no cue
    # Read at the base: a tall object's centre stands high though its base is the lowest.
    tall = _with_fact(at(ev, b, 200.0, 120.0), a, view, center_2d=[100.0, 100.0], bbox_2d=[90, 0, 110, 200])
    assert by_field({"values": {a: 1.0, b: 1.1}, "pick": "min", "image_margin": 0.1}, tpl, FactTable(tall), view) == "easy"
    # "Is A nearer than B?" the same; an order of three is left to its depth margins.
    pair = at(at(ev, a, 100.0, 200.0), b, 200.0, 120.0)
    assert by_field({"values": {a: 1.0, b: 1.1}, "image_margin": 0.1}, _template("closer_yesno"),
                    FactTable(pair), view) == "easy"
    c = ft.visible(view, 1)[2]
    three = at(pair, c, 300.0, 60.0)
    assert by_field({"values": {a: 1.0, b: 1.1, c: 1.2}, "image_margin": 0.1}, _template("depth_order_list"),
                    FactTable(three), view) == "medium"
    # So is the nearest of three: rated by height, kinds that stand low filled the easy band and
    # the names alone guessed the nearest (C1 flagged closest_choice at 10,000 items).
    assert by_field({"values": {a: 1.0, b: 1.1, c: 1.2}, "pick": "min", "image_margin": 0.1}, tpl,
                    FactTable(three), view) == "medium"


def test_a_count_with_a_small_one_asks_a_search(wide):
    """Two large mugs are seen as two at a glance; when one of them is a small patch in the
    picture it must be searched for first, and the count is one band harder."""
    ev = _evidence(wide["store"])[0]
    ft = FactTable(ev)
    view = ft.views[0]
    tpl = _template("count_visible_numeric")
    area = ft.view(view).width * ft.view(view).height
    large, small = int(0.02 * area), int(0.002 * area)
    assert by_count({"count": 2, "visible_pixels": {"a": large, "b": large, "c": 0}}, tpl, ft, view) == "easy"
    assert by_count({"count": 2, "visible_pixels": {"a": large, "b": small}}, tpl, ft, view) == "medium"
    assert by_count({"count": 5, "visible_pixels": {f"o{i}": large for i in range(5)}}, tpl, ft, view) == "medium"
    assert by_count({"count": 5, "visible_pixels": {**{f"o{i}": large for i in range(4)}, "x": small}}, tpl, ft,
                    view) == "hard"
    assert by_count({"count": 0, "visible_pixels": {"a": 0}}, tpl, ft, view) == "easy"


def test_one_of_three_in_a_tray_and_a_clear_column_gap_are_glances():
    """Reviewers found one listed object in a tray among three, and a leftmost object 30 px clear
    of the next (rated medium because the two stood far apart vertically), one-glance."""
    from forge_skills.oe.synthesize.difficulty import _call
    from forge_skills.oe.synthesize.rules_scene import _select_difficulty

    assert _select_difficulty({"selected": 1, "listed": 3}, {}, None, None) == "easy"
    assert _select_difficulty({"selected": 1, "listed": 4}, {}, None, None) == "medium"
    assert _select_difficulty({"selected": 2, "listed": 4}, {}, None, None) == "hard"
    assert _call(30.0, 100.0, 320.0) == 0  # 9% of the width: clear, however far apart vertically
    assert _call(22.0, 200.0, 240.0) == 0  # a topmost 22 px of 240 above the next, far to one side (dd31c3a9)
    assert _call(25.0, 100.0, 400.0) == 1  # 6%: a look
    assert _call(12.0, 10.0, 320.0) == 2


def test_which_is_further_right_is_a_glance_when_the_two_do_not_overlap():
    """Reviewers found a can plainly right of a milk carton (centres 7% of the width apart, their
    boxes 4 px clear) one-glance, and two balls whose extents overlap a careful look whatever their
    centres. A left/right call is easy when the extents do not overlap, and at least medium when
    they do."""
    from forge_skills.oe.synthesize.difficulty import _pair_call

    can, milk = [162, 70, 182, 105], [138, 60, 158, 105]
    assert _pair_call(milk, can, 0, 22.0, 5.0, 320.0) == 0
    wide_ball, small_ball = [80, 100, 112, 130], [105, 90, 121, 106]
    assert _pair_call(wide_ball, small_ball, 0, 12.0, 19.0, 320.0) == 2
    assert _pair_call(wide_ball, small_ball, 0, 30.0, 19.0, 320.0) == 1  # a clear gap of centres, but overlapping
    assert _pair_call([40, 10, 90, 40], [80, 150, 150, 200], 0, 60.0, 150.0, 320.0) == 1  # far apart, overlapping
    assert _pair_call(None, None, 0, 30.0, 100.0, 320.0) == 0  # no boxes: by the centres


def test_a_marked_kind_told_by_its_size_is_a_glance():
    """"Which marked object is a harbor?" with a pier and a boat marked: reviewers found three such
    items one-glance. Marked objects several times apart in area are easy; alike in size, medium."""
    from forge_skills.oe.types import EvidenceObject, EvidenceView, ObjectViewFact
    from forge_skills.oe.synthesize.difficulty import by_marked_kinds

    def table(px_a: int, px_b: int) -> FactTable:
        objs = [EvidenceObject(name=n, category=c, color="") for n, c in (("ship #1", "ship"), ("harbor #2", "harbor"))]
        facts = [ObjectViewFact(object=o.name, view=0, visible_pixels=px, in_frustum=True)
                 for o, px in zip(objs, (px_a, px_b))]
        view = EvidenceView(index=0, rgb="0" * 64, width=600, height=600, role="view")
        return FactTable(EvidenceRecord(source="s", scene_index=0, views=[view], objects=objs, facts=facts))

    why = {"labels": {"A": "ship #1", "B": "harbor #2"}}
    assert by_marked_kinds(why, {}, table(900, 21000), 0) == "easy"
    assert by_marked_kinds(why, {}, table(900, 1500), 0) == "medium"


def test_a_view_offers_its_demanding_questions_first():
    """A view holds a few demanding questions among many one-glance ones: each answer's candidates
    take turns by band, the hardest first, so the bindings drawn hold the bands the mix asks for."""
    import numpy as np
    from forge_skills.oe.synthesize.synthesis import _select
    cands = [Candidate({"object": f"o{i}"}, "yes" if i % 2 else "no", 1.0) for i in range(24)]
    band = {f"o{i}": "hard" if i in (5, 18) else "medium" if i in (7, 9, 12) else "easy" for i in range(24)}
    rate = lambda c: band[c.slots["object"]]  # noqa: E731
    picked = _select(cands, 4, np.random.default_rng(0), lambda c: True, band=rate)
    assert sorted(rate(c) for c in picked) == ["hard", "hard", "medium", "medium"]
    assert sorted(c.answer for c in picked) == ["no", "no", "yes", "yes"]  # answers still take turns
    plain = _select(cands, 4, np.random.default_rng(0), lambda c: True)
    assert [rate(c) for c in plain].count("easy") >= 2  # drawn at random, most are one-glance ones


def test_an_absence_is_as_hard_as_the_look_alikes_in_view(wide):
    """"Can you see the green mug?" with nothing green in view is answered at a glance, a blue mug
    or not (colour is scanned first: reviewers found such "no" answers one-glance); a green duck
    asks for its shape to be read, and a green duck beside a blue mug for both. Visibility checks
    are rated by the objects in view that share the named one's colour (and kind) but not its
    answer, so the mix can ask for the demanding ones; real scenes hold all three bands, and what
    is in view is always easy to confirm."""
    tid = "visibility_yesno"
    tpl = _template(tid)
    rule = rule_for(tpl)
    bands: dict[str, int] = {}
    for ev in _evidence(wide["store"]):
        ft = FactTable(ev)
        for view in ft.views:
            seen = ft.visible(view, int(tpl["admission"]["min_visible_pixels"]))
            for cand in rule.candidates(ft, view, tpl):
                obj = cand.slots["object"]
                answer, why = rule.derive(ft, view, cand.slots, tpl)
                band = rule.difficulty_of(why, tpl, ft, view)
                other = [o for o in seen if o != obj and rule.derive(ft, view, {"object": o}, tpl)[0] not in (None, answer)]
                kind = any(ft.category(o) == ft.category(obj) for o in other)
                colour = any(ft.object(o).color == ft.object(obj).color for o in other)
                assert band == ("easy" if not colour else "hard" if kind else "medium"), (ev.scene_index, view, obj, band, other)
                if answer == "yes":
                    assert band == "easy"  # nothing in view answers otherwise
                bands[band] = bands.get(band, 0) + 1
    assert all(bands.get(b, 0) > 0 for b in ("easy", "medium", "hard")), bands


def test_which_listed_objects_are_in_view_is_as_hard_as_its_absent_look_alikes(wide):
    """"Which of these are in the picture?" over a lone teddy bear and three things unlike it in
    colour is a glance; each absent option that shares a colour with something in view must be
    ruled out with care (its kind read), and one sharing its kind too asks more."""
    from forge_skills.oe.synthesize.difficulty import absence_band
    tpl = _template("visible_set_multi")
    rule = rule_for(tpl)
    cases = set()
    for ev in _evidence(wide["store"]):
        ft = FactTable(ev)
        for view in ft.views:
            seen = ft.visible(view, int(tpl["admission"]["min_visible_pixels"]))
            absent = [o for o in ft.objects if ft.fact(o, view).visible_pixels == 0]
            if not seen:
                continue
            plain = [o for o in absent if absence_band(ft, o, seen) == 0]
            alike = [o for o in absent if absence_band(ft, o, seen) == 1]
            both = [o for o in absent if absence_band(ft, o, seen) == 2]
            assert all("colour" in confusers(ft, o, seen) for o in alike + both)

            def rate(listed: list[str]) -> str:
                shown = {o: ft.fact(o, view).visible_pixels for o in listed}
                return rule.difficulty_of({"visible_pixels": shown}, tpl, ft, view)
            if plain:
                assert rate([seen[0], *plain]) == "easy"
                cases.add("easy")
            if alike:
                assert rate([seen[0], alike[0], *plain]) == "medium"
                cases.add("medium")
            if len(alike) > 1 or both:
                assert rate([seen[0], *(both[:1] or alike)]) == "hard"
                cases.add("hard")
    assert cases == {"easy", "medium", "hard"}, cases


def test_grounding_marks_an_object_that_shares_its_kind_or_colour(wide):
    """"Which label marks the red cube?" with no other cube and nothing else red is read from one
    glance at the colour: the grounding templates mark at least one object that shares the named
    one's kind or its colour."""
    tpl = _template("grounding_choice")
    plain = {**tpl, "admission": {k: v for k, v in tpl["admission"].items() if k != "min_confusers"}}
    checked = refused = 0
    for ev in _evidence(wide["store"])[:12]:
        ft = FactTable(ev)
        for view in ft.views:
            for cand in rule_for(plain).candidates(ft, view, plain):
                target, marked = cand.slots["target"], cand.slots["marked"]
                shared = confusers(ft, target, [n for n in marked if n != target])
                answer, why = rule_for(tpl).derive(ft, view, cand.slots, tpl)
                checked += 1
                if shared:
                    assert answer == cand.answer and why["confusers"] == sorted(shared)
                else:
                    refused += 1
                    assert answer is None and "one attribute" in why["reason"]
    assert checked and refused, (checked, refused)


def test_a_selection_lists_objects_each_decided_by_the_single_object_rule(wide):
    """"Which of these objects are inside a tray?": every listed object is decided as the yes/no
    question on it would be, and the list holds objects of both answers."""
    tpl, single = _template("in_tray_select_multi"), _template("in_tray_yesno")
    seen = 0
    for ev in _evidence(wide["store"]):
        ft = FactTable(ev)
        for view in ft.views:
            for cand in rule_for(tpl).candidates(ft, view, tpl):
                per = {o: rule_for(single).derive(ft, view, {"object": o}, single)[0] for o in cand.slots["objects"]}
                chosen = {o for o, a in per.items() if a == "yes"}
                assert set(cand.answer.split(", ")) == chosen and 0 < len(chosen) < len(per), (cand, per)
                seen += 1
    assert seen
    assert rule_for(tpl).difficulty_of({"selected": 1, "listed": 3}, tpl, None, None) == "easy"
    assert rule_for(tpl).difficulty_of({"selected": 1, "listed": 4}, tpl, None, None) == "medium"
    assert rule_for(tpl).difficulty_of({"selected": 2, "listed": 4}, tpl, None, None) == "hard"


def test_a_template_of_one_band_takes_only_its_part_of_that_band():
    """Templates split each band's quota by what they hold: a yes/no template of easy items takes
    the easy part, not an even half of the capability (which put 70% of a room package in easy)."""
    quota = {"easy": 2, "medium": 4, "hard": 4}
    q = template_quotas(10, quota, {"yesno": {"easy": 50}, "select": {"medium": 20, "hard": 20}})
    assert q["yesno"] == {"easy": 2, "medium": 0, "hard": 0}
    assert q["select"] == {"easy": 0, "medium": 4, "hard": 4}
    q = template_quotas(10, quota, {"yesno": {"easy": 50}, "select": {"medium": 3}})
    assert q["select"]["medium"] == 3 and q["yesno"]["easy"] == 7  # what the bands cannot fill, any band does


def test_the_release_meets_the_asked_difficulty_mix(wide):
    comp = json.loads((wide["package"] / "composition.json").read_text())
    mix = comp["difficulty"]
    assert mix["target_shares"] == {"easy": 0.2, "medium": 0.4, "hard": 0.4}
    assert sum(mix["items"].values()) == comp["items"]
    released = {json.loads(x)["id"] for x in open(wide["package"] / "items.jsonl")}
    items = _items(wide["store"])
    bands = [it.difficulty for aid, it in items if aid in released]
    assert {b: bands.count(b) for b in ("easy", "medium", "hard")} == mix["items"]
    # Templates keep their shares of each capability and answers stay balanced, so the release
    # can only lean towards the asked mix: harder than the same choice made without one, and
    # saying why where it still misses.
    with Store(wide["store"], read_only=True) as s:
        (bp,) = s.execute("SELECT content FROM artifacts WHERE type = 'Blueprint'").fetchone()
    bp = Blueprint.model_validate_json(bp)
    plain = [it.difficulty for _, it in select_composition(bp.model_copy(update={"difficulty": {}}), items)]
    leaned = [it.difficulty for _, it in select_composition(bp, items)]
    assert leaned.count("hard") > plain.count("hard") and leaned.count("easy") < plain.count("easy"), (mix, plain)
    assert mix["met"] or "too few hard" in mix["shortfall"], mix


def test_band_quotas_move_items_to_where_the_mix_is_short():
    quotas = band_quotas({"a": 10, "b": 10}, {"a": {"easy": 10}, "b": {"easy": 10, "medium": 10, "hard": 10}},
                         {"easy": 0.2, "medium": 0.4, "hard": 0.4})
    assert quotas["a"] == {"easy": 10, "medium": 0, "hard": 0}
    assert quotas["b"]["easy"] == 0 and quotas["b"]["medium"] + quotas["b"]["hard"] == 10


def test_allocation_fills_a_capability_its_band_quotas_leave_short():
    """Band quotas are counted over all bindings; where most of a band's bindings determine each
    other (a distance is the same from every view of a scene), the quotas draw fewer keepable
    bindings than the capability needs, and it takes the rest from its other templates' keepable
    ones. Before, more units never closed such a gap: the quotas grew with them."""
    from forge_skills.oe.verify.gates import BindingSummary, allocate

    def summary(template: str, band: str, evidence: str, answer: str) -> BindingSummary:
        det = json.dumps({"quantity": template, "evidence": evidence, "views": [0], "referents": ["a", "b"]})
        return BindingSummary(template=template, answer=answer, capability="metric_distance", determinant=det,
                              question_type="numeric", difficulty=band)

    # 40 hard bindings on 5 records: 5 keepable; 40 easy ones, each on its own record.
    bindings = {f"h{i}": summary("far", "hard", f"e{i % 5}", str(10 + i)) for i in range(40)}
    bindings |= {f"e{i}": summary("near", "easy", f"r{i}", "yes" if i % 2 else "no") for i in range(40)}
    bp = Blueprint(name="t", version="1", seed=0, track="oe", items_target=20, capabilities=["metric_distance"],
                   question_types=["numeric"], capability_targets={"metric_distance": 20}, sources=[], templates=[],
                   gates={}, intent_hash="", difficulty={"easy": 0.2, "medium": 0.4, "hard": 0.4})
    plan = allocate(bp, bindings, 1.0)
    assert len(plan["far"]) == 5  # every keepable one of the band the mix wants
    assert len(plan["far"]) + len(plan["near"]) == 20
    answers = [bindings[b].answer for b in plan["near"]]
    assert abs(answers.count("yes") - answers.count("no")) <= 1  # answers still take turns


def test_a_capability_short_of_its_target_says_why(wide):
    """A shortfall is stated with its reason in composition.json and the package README."""
    from collections import Counter

    from forge_skills.oe.package.oe_package import _composition, _readme

    with Store(wide["store"], read_only=True) as s:
        (bp,) = s.execute("SELECT content FROM artifacts WHERE type = 'Blueprint'").fetchone()
    bp = Blueprint.model_validate_json(bp)
    items = _items(wide["store"])
    cap = sorted(bp.capability_targets)[0]
    asked = bp.model_copy(update={"capability_targets": {**bp.capability_targets, cap: 10_000}})
    chosen = select_composition(asked, items)
    comp = _composition(asked, [it for _, it in chosen], ["pybullet_tabletop"] * len(chosen),
                        Counter(it.capability for _, it in items))
    row = comp["capabilities"][cap]
    assert not row["within_tolerance"] and "every one of its" in row["shortfall"]
    assert all("shortfall" not in r for c, r in comp["capabilities"].items() if r["within_tolerance"])
    assert f"{cap} is short of its target: every one of its" in _readme(asked, comp, "m")


def test_no_listed_kind_is_chosen_far_more_or_less_often_than_the_rest():
    """Household scene_visible_set_multi: ducks and mugs, small at room scale, are seen clearly
    only close up, so they were listed as out of view in 81 of 88 and 100 of 116 lists, and the
    names alone told a reader which options to leave out. The balance gate holds back lists
    until every listed word is chosen about as often as options are on the whole."""
    from forge.gatelog import GateLog
    from forge_skills.oe.verify.balance_gate import LISTED_WORD_SKEW, balance_answers

    colours = ["red", "green", "blue", "yellow"]
    kinds = ["ball", "cube", "duck", "domino", "lego brick", "mug", "jenga block"]
    items = {}
    for i in range(240):
        names = [f"{colours[(i + k) % 4]} {kinds[(i * 3 + k) % 7]}" for k in range(4)]
        # One, two or three chosen in turn; ducks and mugs seldom among them.
        small = [k for k, n in enumerate(names) if n.endswith(("duck", "mug"))]
        order = [k for k in range(4) if k not in small] + small if i % 8 else small + [k for k in range(4) if k not in small]
        chosen = sorted(order[: 1 + i % 3])
        items[digest(i)[:12]] = OEItem.model_construct(
            template="visible_set", capability="visibility", question_type="multiple_choice", options=names,
            answer=", ".join(names[k] for k in chosen), answer_indices=chosen, markers=[], kinds=[],
            scoring={"protocol": "set_match"}, difficulty="medium")

    def skew(ids: list[str], word: str) -> float:
        on = [k in (items[i].answer_indices or []) for i in ids for k, n in enumerate(items[i].options)]
        mine = [k in (items[i].answer_indices or []) for i in ids for k, n in enumerate(items[i].options)
                if word in n.split()]
        return sum(mine) / len(mine) - sum(on) / len(on)

    every = sorted(items)
    assert skew(every, "duck") < -0.2 and skew(every, "mug") < -0.2, (skew(every, "duck"), skew(every, "mug"))
    kept = balance_answers(GateLog("t"), items, 0.025, 8)
    assert len(kept) >= 60
    for word in ("duck", "mug", "ball", "cube", "red"):
        assert abs(skew(kept, word)) <= LISTED_WORD_SKEW + 0.03, (word, skew(kept, word))


def test_a_rare_count_of_chosen_options_does_not_hold_a_selection_back():
    """Household in_tray_select_multi: of 243 lists of four, 189 had one object in a tray, 52 two
    and 2 three; asking each count its equal third kept six items. A count too rare to pay as a
    guess is left out of the shares: one and two of four are evened out, and a template whose
    lists all choose one still keeps none."""
    from forge.gatelog import GateLog
    from forge_skills.oe.verify.balance_gate import balance_answers

    names = ["red ball", "green cube", "blue duck", "yellow mug", "orange domino", "white ball", "black cube"]

    def lists(counts: list[int]) -> dict[str, OEItem]:
        out = {}
        for i, chosen in enumerate(c for c, n in enumerate(counts, start=1) for _ in range(n)):
            options = [names[(i + k) % 7] for k in range(4)]
            picked = sorted((i + k) % 4 for k in range(chosen))
            out[digest(("sel", i))[:12]] = OEItem.model_construct(
                template="in_tray", capability="containment_support", question_type="multiple_choice",
                options=options, answer=", ".join(options[k] for k in picked), answer_indices=picked, markers=[],
                kinds=[], scoring={"protocol": "set_match"}, difficulty="medium")
        return out

    items = lists([189, 52, 2])
    kept = balance_answers(GateLog("t"), items, 0.025, 8)
    by_count = {n: sum(len(items[i].answer_indices) == n for i in kept) for n in (1, 2, 3)}
    assert by_count[2] >= 45 and by_count[1] <= by_count[2] * 1.12 + 1 and by_count[3] == 2, by_count
    assert balance_answers(GateLog("t"), lists([60]), 0.025, 8) == []
