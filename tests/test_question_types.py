"""Every question type: answers against ground truth recomputed from raw simulator arrays and
object states, executable scorers, and blind solvers near chance."""

from __future__ import annotations

import pytest

import itertools
import json
import string

import numpy as np

from forge.store import Store
from tests.conftest import named_as_shown
from forge_skills.scoring import scorer as oe_scorer
from forge_skills.oe.verify.reverify import reverify_package

# Both files read the session build `wide`: one worker builds it once for both.
pytestmark = pytest.mark.xdist_group("wide")

L = string.ascii_uppercase


def _items(wide):
    store = Store(wide["store"], read_only=True)
    released = [json.loads(x) for x in open(wide["package"] / "answers.jsonl")]
    out = []
    for key in released:
        item = json.loads(store.one("SELECT content FROM artifacts WHERE id = ?", [key["id"]])[0])
        b = json.loads(store.one("SELECT content FROM artifacts WHERE id = ?", [item["binding"]])[0])
        ev = json.loads(store.one("SELECT content FROM artifacts WHERE id = ?", [item["evidence"]])[0])
        src = named_as_shown(json.loads(store.one("SELECT content FROM artifacts WHERE id = ?", [ev["source"]])[0]), ev)
        out.append((key, item, b, src, store.get_arrays(src["arrays"])))
    return store, out


def _center(src, name):
    o = next(o for o in src["objects"] if o["name"] == name)
    return (np.array(o["aabb_min"]) + np.array(o["aabb_max"])) / 2


def test_new_question_types_against_ground_truth(wide):
    store, items = _items(wide)
    seen = set()
    for key, item, b, src, arrays in items:
        body = {o["name"]: o["body"] for o in src["objects"]}
        t = item["template"]
        if b["view"] is not None:
            seg, depth = arrays[f"seg_{b['view']}"], arrays[f"depth_{b['view']}"]
            px = {n: int((seg == body[n]).sum()) for n in body}
        if t in ("count_visible_numeric", "count_visible_interval"):
            n = sum(1 for v in px.values() if v >= 120)
            assert item["answer_value"] == n
            if t == "count_visible_interval":
                lo, hi = key["scoring"]["intervals"][key["answer_index"]]
                assert lo <= n <= hi
        elif t in ("count_left_numeric", "count_right_numeric"):
            # Objects whose pixel centre lies on the asked side of the anchor's, among those
            # clearly in view (x measured towards that side).
            sign = -1.0 if t == "count_left_numeric" else 1.0
            cx = {n: sign * float(np.nonzero(seg == body[n])[1].mean()) for n in body if px[n] >= 120}
            anchor = b["slots"]["anchor"]
            assert item["answer_value"] == sum(1 for n, x in cx.items() if n != anchor and x > cx[anchor])
            others = [abs(x - cx[anchor]) for n, x in cx.items() if n != anchor]
            assert len(others) >= 2 and min(others) >= 25
            # A faint object may stand only on the other side, clear of the anchor's column.
            faint = {n: sign * float(np.nonzero(seg == body[n])[1].mean()) for n in body if 0 < px[n] < 120}
            assert all(x <= cx[anchor] - 25 for x in faint.values()), faint
        elif t == "depth_order_list":
            objs = b["slots"]["objects"]
            order = sorted(objs, key=lambda o: float(np.median(depth[seg == body[o]])))
            assert [key["options"][i] for i in key["answer_indices"]] == order
        elif t == "left_to_right_list":
            objs = b["slots"]["objects"]
            order = sorted(objs, key=lambda o: float(np.nonzero(seg == body[o])[1].mean()))
            assert [key["options"][i] for i in key["answer_indices"]] == order
        elif t == "visible_set_multi":
            assert {key["options"][i] for i in key["answer_indices"]} == {o for o in key["options"] if px[o] > 0}
        elif t == "largest_choice":
            assert key["answer"] == max(b["slots"]["objects"], key=lambda o: px[o])
        elif t == "nearest_to_choice":
            anchor = _center(src, b["slots"]["anchor"])
            assert key["answer"] == min(b["slots"]["objects"], key=lambda o: np.linalg.norm(_center(src, o) - anchor))
        elif t == "distance_numeric":
            cm = np.linalg.norm(_center(src, b["slots"]["a"]) - _center(src, b["slots"]["b"])) * 100
            assert abs(item["answer_value"] - cm) < 0.51
        else:
            continue
        seen.add(item["question_type"])
    assert {"numeric", "interval_choice", "ordered_list", "multiple_choice"} <= seen
    qts = json.loads((wide["package"] / "composition.json").read_text())["question_types"]
    assert len(qts) >= 8


def test_whole_wide_release_reverifies(wide):
    with Store(wide["store"], read_only=True) as s:
        report = reverify_package(s, wide["package"])
    assert report["invalid"] == 0, report["reasons"]


def test_blind_solvers_near_chance_for_every_type(wide):
    for template, row in wide["summary"]["templates"].items():
        blind = row["blind"]
        assert blind["flagged"] is False, template
        if blind["items"] and blind["items"] >= 40:
            assert blind["best_accuracy"] - blind["chance"] < 0.2, (template, blind)


def test_scorers():
    order = {"scoring": {"protocol": "ordered_list"}, "options": ["cup", "box", "ball"], "answer_indices": [2, 0, 1]}
    assert oe_scorer.score_item(order, "C, A, B") == 1.0
    assert oe_scorer.score_item(order, "ball > cup > box") == 1.0
    assert oe_scorer.score_item(order, "A, B, C") == 0.0
    assert oe_scorer.secondary(order, "C, B, A")["kendall_tau"] == 1 / 3
    assert oe_scorer.secondary(order, "B, A, C")["kendall_tau"] == -1.0
    assert oe_scorer.score_item(order, "A, A, B") == 0.0  # repeated option: invalid
    multi = {"scoring": {"protocol": "set_match"}, "options": ["w", "x", "y", "z"], "answer_indices": [0, 3]}
    assert oe_scorer.score_item(multi, "D, A") == 1.0
    assert oe_scorer.score_item(multi, "A") == 0.0 and oe_scorer.score_item(multi, "A, D, B") == 0.0
    num = {"scoring": {"protocol": "numeric", "abs_tol": 3, "rel_tol": 0.15}, "answer_value": 40.0}
    assert oe_scorer.score_item(num, "about 45 cm") == 1.0
    assert oe_scorer.score_item(num, "47") == 0.0 and oe_scorer.score_item(num, "far") == 0.0
    interval = {"scoring": {"protocol": "interval", "intervals": [[0, 1], [2, 3], [4, 9]]},
                "options": ["0-1", "2-3", "4+"], "answer_index": 2}
    assert oe_scorer.score_item(interval, "C") == 1.0 and oe_scorer.score_item(interval, "5") == 1.0
    assert oe_scorer.score_item(interval, "2") == 0.0
    exact = {"scoring": {"protocol": "exact_choice"}, "options": ["red cube", "blue ball"], "answer_index": 1}
    for good in ("B", "(b)", "b.", "Answer: B", "blue ball", " Blue Ball "):
        assert oe_scorer.score_item(exact, good) == 1.0, good
    for bad in ("C", "", None, "A or B", "red"):
        assert oe_scorer.score_item(exact, bad) == 0.0, bad
    for perm in itertools.permutations(range(3)):
        k = dict(order, answer_indices=list(perm))
        assert oe_scorer.score_item(k, ", ".join(L[i] for i in perm)) == 1.0


def test_matching_and_temporal_scorers():
    match = {"scoring": {"protocol": "matching"}, "options": ["red cube", "blue ball", "duck"],
             "targets": ["Frame 1", "Frame 2", "Frame 3", "Frame 4"], "answer_indices": [1, 0, 3]}
    for good in ("A=2, B=1, C=4", "a: Frame 2; b: Frame 1; c: Frame 4", "C=4, A=2, B=1", [2, 1, 4]):
        assert oe_scorer.score_item(match, good) == 1.0, good
    for bad in ("A=2, B=1", "A=2, B=1, C=3", "A=2, A=1, C=4", "A=9, B=1, C=4", "2, 1, 4", None, ""):
        assert oe_scorer.score_item(match, bad) == 0.0, bad
    assert oe_scorer.secondary(match, "A=2, B=1, C=3")["pairs_correct"] == 2 / 3
    assert oe_scorer.secondary(match, "nonsense")["pairs_correct"] == 0.0
    temporal = {"scoring": {"protocol": "exact_choice"}, "options": ["Frame 1", "Frame 2", "Frame 3"], "answer_index": 1}
    assert oe_scorer.score_item(temporal, "B") == 1.0 and oe_scorer.score_item(temporal, "Frame 2") == 1.0
    assert oe_scorer.score_item(temporal, "Frame 3") == 0.0 and oe_scorer.score_item(temporal, "2") == 0.0
    result = oe_scorer.score_all({"m": dict(match, capability="temporal", question_type="matching", template="t")},
                                 {"m": "A=2, B=1, C=3"})
    assert result["accuracy"] == 0.0 and result["mean_pairs_correct"] == 2 / 3
