"""Answer rules for real images: category presence and ground distance from labels, capture
order and stereo side from what file names register."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from forge_skills.oe.synthesize.difficulty import by_marked_kinds, constant
from forge_skills.oe.synthesize.answer_rules import Rule, register
from forge_skills.oe.synthesize.rule_margins import Derivation, _adm, separated_pairs
from forge_skills.oe.synthesize.fact_table import Candidate, FactTable
from forge_skills.oe.synthesize.rules_scene import plural


def _presence_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    """Labels are exhaustive for the dataset's categories: no label of a kind means none there."""
    kind = slots["category"]
    pool = [o for o in ft.objects if plural(ft.category(o)) == kind]
    if not pool:
        return "no", {"labelled": 0}
    clear = [o for o in pool if ft.label_ok(o) and ft.fact(o, view).visible_pixels >= _adm(tpl, "min_visible_pixels", 1)]
    if not clear:
        return None, {"reason": "only difficult, truncated or tiny objects of this kind"}
    return "yes", {"labelled": len(pool), "clear": len(clear)}


def _presence_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    vocabulary = [plural(c) for c in tpl["answer_rule"]["categories"]]
    out = []
    for kind in vocabulary:
        answer, d = _presence_derive(ft, view, {"category": kind}, tpl)
        if answer is not None:
            out.append(Candidate({"category": kind}, answer, 1.0, d))
    return out


def _marked_distance_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    a, b = slots["marked"]
    if ft.evidence.metres_per_pixel is None:
        return None, {"reason": "no ground sampling distance"}
    for n in (a, b):
        if not ft.label_ok(n) or ft.fact(n, view).visible_pixels < _adm(tpl, "min_visible_pixels", 1):
            return None, {"reason": f"{n} is not clearly labelled"}
    pa, pb = np.array(ft.object(a).position), np.array(ft.object(b).position)
    metres = float(np.linalg.norm(pa - pb))
    ca, cb = ft.fact(a, view).center_2d, ft.fact(b, view).center_2d
    gap = float(np.hypot(ca[0] - cb[0], ca[1] - cb[1]))
    if metres < _adm(tpl, "min_distance_m", 0.0) or gap < _adm(tpl, "min_separation_px", 0):
        return None, {"reason": "the objects are too close to tell apart"}
    return f"{metres:.0f}", {"distance_m": metres}


def _marked_distance_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    visible = ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1)))
    out = []
    for i, j in separated_pairs(ft, view, visible, _adm(tpl, "min_separation_px", 0))[0].tolist():
        if i > j:  # unordered pairs, in itertools.combinations order
            continue
        answer, d = _marked_distance_derive(ft, view, {"marked": [visible[i], visible[j]]}, tpl)
        if answer is not None:
            out.append(Candidate({"marked": [visible[i], visible[j]]}, answer, d["distance_m"], d))
            if len(out) == 200:
                break
    return out


def _category_grounding_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    """Which marked object is of the named kind: exactly one of them is, and every marked
    object's label is clear (so the others are known not to be)."""
    marked, kind = list(slots["marked"]), slots["category"]
    labels = tpl["options"].get("labels", ["A", "B", "C"])
    if len(marked) != len(labels):
        return None, {"reason": "one marked object per label"}
    for n in marked:
        if not ft.label_ok(n) or ft.fact(n, view).visible_pixels < _adm(tpl, "min_visible_pixels", 1):
            return None, {"reason": f"{n} is not clearly labelled"}
    hits = [n for n in marked if plural(ft.category(n)) == kind]
    if len(hits) != 1:
        return None, {"reason": f"{len(hits)} marked objects are {kind}"}
    centers = [ft.fact(n, view).center_2d for n in marked]
    gap = min(float(np.hypot(a[0] - b[0], a[1] - b[1])) for a, b in itertools.combinations(centers, 2))
    if gap < _adm(tpl, "min_separation_px", 0):
        return None, {"reason": f"markers {gap:.0f} px apart, below admission"}
    return labels[marked.index(hits[0])], {"labels": dict(zip(labels, marked)), "separation_px": gap}


def _category_grounding_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    """Marked sets of one object per kind, for every set of kinds the view holds; each kind is
    asked about in turn, its object at every label position."""
    k = len(tpl["options"].get("labels", ["A", "B"]))
    by_kind: dict[str, list[str]] = {}
    for o in ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1))):
        if ft.label_ok(o):
            by_kind.setdefault(plural(ft.category(o)), []).append(o)
    per_kind = int(_adm(tpl, "objects_per_kind", 4))
    out = []
    for kinds in itertools.combinations(sorted(by_kind), k):
        pools = [sorted(by_kind[kind], key=lambda n: -ft.fact(n, view).visible_pixels)[:per_kind] for kind in kinds]
        for combo in itertools.product(*pools):
            for target, position in itertools.product(combo, range(k)):
                marked = [n for n in combo if n != target]
                marked.insert(position, target)
                slots = {"category": plural(ft.category(target)), "marked": marked}
                answer, d = _category_grounding_derive(ft, view, slots, tpl)
                if answer is not None:
                    out.append(Candidate(slots, answer, d["separation_px"], d["labels"]))
    return out[:400]


def _pair_label(ft: FactTable, slots: dict[str, Any], index: int) -> str:
    return f"View {list(slots['pair']).index(index) + 1}"


def _capture_order_derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    i, j = slots["pair"]
    ti, tj = ft.view(i).time, ft.view(j).time
    if ti is None or tj is None or ti == tj:
        return None, {"reason": "capture order is not registered"}
    return _pair_label(ft, slots, i if ti < tj else j), {"frame_numbers": [ti, tj]}


def _capture_order_candidates(ft: FactTable, view: Any, tpl: dict[str, Any]) -> list[Candidate]:
    out = []
    for i, j in itertools.permutations(ft.views, 2):
        answer, d = _capture_order_derive(ft, None, {"pair": [i, j]}, tpl)
        if answer is not None:
            out.append(Candidate({"pair": [i, j]}, answer, 1.0, d))
    return out


def _stereo_side_derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    roles = {k: ft.view(k).role for k in slots["pair"]}
    if sorted(roles.values()) != ["left", "right"]:
        return None, {"reason": "not a registered stereo pair"}
    left = next(k for k, r in roles.items() if r == "left")
    return _pair_label(ft, slots, left), {"sides": roles}


def _stereo_side_candidates(ft: FactTable, view: Any, tpl: dict[str, Any]) -> list[Candidate]:
    out = []
    for i, j in itertools.permutations(ft.views, 2):
        answer, d = _stereo_side_derive(ft, None, {"pair": [i, j]}, tpl)
        if answer is not None:
            out.append(Candidate({"pair": [i, j]}, answer, 1.0, d))
    return out


for _rule in (
    Rule("presence", _presence_candidates, _presence_derive, ("category",), ("yes_no",), complete_labels=True,
         difficulty=constant("easy")),
    Rule("marked_distance", _marked_distance_candidates, _marked_distance_derive, ("marked",), ("numeric",),
         conventions=("scale", "separation"), difficulty=constant("hard")),
    Rule("category_grounding", _category_grounding_candidates, _category_grounding_derive, ("category", "marked"),
         ("grounding_choice",), difficulty=by_marked_kinds),
    Rule("capture_order", _capture_order_candidates, _capture_order_derive, ("pair",), ("temporal_choice",)),
    Rule("stereo_side", _stereo_side_candidates, _stereo_side_derive, ("pair",), ("multi_view_choice",),
         difficulty=constant("hard")),
):
    register(_rule)
