"""Answer rules: how a template's answer follows from registered evidence.

Each rule enumerates admissible slot assignments for one view (or one scene) and, separately,
derives the answer from a given assignment. Contracts call :func:`derive` again on every
binding and item, so an answer that is not uniquely and reproducibly derivable from the
evidence never passes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from forge.registry import load_plugins, view
from forge_skills.oe.synthesize.conventions import of_field
from forge_skills.oe.synthesize.difficulty import (by_absent_lookalikes, by_contrast, by_count, by_count_beside, by_field,
                                                by_grounding, by_image_ratio, by_reach, by_turn, by_view_ratio, confusers, constant)
from forge_skills.oe.synthesize.fact_table import Candidate, FactTable
from forge_skills.oe.synthesize.rule_margins import (Derivation, MIN_IMAGE_RATIO, _adm, _center_of, _view_label,
                                                     held_problem, image_margin, image_separations, per_object,
                                                     separated_pairs)
from forge_skills.oe.synthesize.rules_counting import (count_beside_candidates, count_beside_derive,
                                                       count_candidates, count_derive, order_candidates,
                                                       order_derive, visible_set_candidates, visible_set_derive)


# -- rules ---------------------------------------------------------------------------------


def _extreme_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    rule = tpl["answer_rule"]
    names = list(slots["objects"])
    min_vis = _adm(tpl, "min_visible_pixels", 1)
    values = {}
    for n in names:
        if ft.fact(n, view).visible_pixels < min_vis:
            return None, {"reason": f"{n} is not clearly visible"}
        values[n] = ft.value(n, view, rule["field"])
        if values[n] is None:
            return None, {"reason": f"{n} has no {rule['field']}"}
    if tpl["admission"].get("same_category") and len({ft.category(n) for n in names}) != 1:
        return None, {"reason": "options must share one category"}
    if rule["field"] == "median_depth" and (why := held_problem(ft, names)) is not None:
        return None, {"reason": why}
    ranked = sorted(names, key=lambda n: values[n], reverse=rule.get("pick", "min") == "max")
    margin = abs(values[ranked[0]] - values[ranked[1]])
    if margin < _adm(tpl, "min_margin", 0.0):
        return None, {"reason": f"margin {margin:.3f} below admission", "values": values}
    # Positions: the answer against every other option (a far-off centre may still have the
    # further edge); other fields: against the runner-up.
    rivals = ranked[1:] if rule["field"] in ("center_x", "center_y") else ranked[1:2]
    seen = None
    for other in rivals:
        low, high = sorted((ranked[0], other), key=lambda n: values[n])
        m, why = image_margin(ft, view, rule["field"], low, high, tpl)
        if why:
            return None, {"reason": why, "values": values}
        seen = m if seen is None or (m is not None and m < seen) else seen
    return ranked[0], {"field": rule["field"], "pick": rule.get("pick", "min"), "values": values, "margin": margin,
                       **({"image_margin": round(seen, 4)} if seen is not None else {})}


def _extreme_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    count = int(tpl["slots"]["objects"].get("count", 3))
    visible = ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1)))
    same = tpl["admission"].get("same_category", False)
    out = []
    for combo in itertools.combinations(visible, count):
        if same and len({ft.category(n) for n in combo}) != 1:
            continue
        answer, d = _extreme_derive(ft, view, {"objects": list(combo)}, tpl)
        if answer is not None:
            out.append(Candidate({"objects": list(combo)}, answer, d["margin"], d["values"], d))
    return out


def _compare_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    rule = tpl["answer_rule"]
    a, b = slots["a"], slots["b"]
    min_vis = _adm(tpl, "min_visible_pixels", 1)
    for n in (a, b):
        if ft.fact(n, view).visible_pixels < min_vis:
            return None, {"reason": f"{n} is not clearly visible"}
    va, vb = ft.value(a, view, rule["field"]), ft.value(b, view, rule["field"])
    if va is None or vb is None:
        return None, {"reason": "value missing"}
    margin = abs(va - vb)
    if margin < _adm(tpl, "min_margin", 0.0):
        return None, {"reason": f"margin {margin:.3f} below admission"}
    seen, why = image_margin(ft, view, rule["field"], *((a, b) if va < vb else (b, a)), tpl)
    if why:
        return None, {"reason": why}
    holds = va < vb if rule.get("relation", "less") == "less" else va > vb
    return ("yes" if holds else "no"), {"field": rule["field"], "relation": rule.get("relation", "less"),
                                         "values": {a: va, b: vb}, "margin": margin,
                                         **({"image_margin": round(seen, 4)} if seen is not None else {})}


def _compare_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    visible = ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1)))
    out = []
    for a, b in itertools.permutations(visible, 2):
        answer, d = _compare_derive(ft, view, {"a": a, "b": b}, tpl)
        if answer is not None:
            out.append(Candidate({"a": a, "b": b}, answer, d["margin"], d["values"], d))
    return out


def _marked_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    labels = tpl["options"].get("labels", ["A", "B"])
    # Markers must be far enough apart on the image to tell which label belongs to which object.
    centers = [ft.fact(n, view).center_2d for n in slots["marked"]]
    if any(c is None for c in centers):
        return None, {"reason": "a marked object is not visible"}
    if not all(ft.label_ok(n) for n in slots["marked"]):
        return None, {"reason": "a marked object's label is difficult or truncated"}
    gap = min(((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5 for a, b in itertools.combinations(centers, 2))
    if gap < _adm(tpl, "min_separation_px", 0):
        return None, {"reason": f"markers {gap:.0f} px apart, below admission"}
    answer, d = _extreme_derive(ft, view, {"objects": list(slots["marked"])}, tpl)
    if answer is None:
        return None, d
    return labels[list(slots["marked"]).index(answer)], {**d, "labels": dict(zip(labels, slots["marked"]))}


def _marked_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    rule = tpl["answer_rule"]
    min_vis = _adm(tpl, "min_visible_pixels", 1)
    visible = [o for o in ft.visible(view, int(min_vis)) if ft.fact(o, view).visible_pixels >= min_vis]
    # Rare settings (options sharing a category, more than two labels): every pair is derived exactly.
    near_all = bool(tpl["admission"].get("same_category")) or len(tpl["options"].get("labels", ["A", "B"])) != 2 \
        or rule["field"] in ("median_depth", "visible_pixels")  # an image margin to check per pair
    pairs, near = separated_pairs(ft, view, visible, _adm(tpl, "min_separation_px", 0), rule["field"],
                                  _adm(tpl, "min_margin", 0.0))
    labels = tpl["options"].get("labels", ["A", "B"])
    values = {o: ft.value(o, view, rule["field"]) for o in visible}
    pick_max = rule.get("pick", "min") == "max"
    out = []
    for (i, j), borderline in zip(pairs.tolist(), near.tolist()):
        a, b = visible[i], visible[j]
        if borderline or near_all:
            answer, d = _marked_derive(ft, view, {"marked": [a, b]}, tpl)
            if answer is not None:
                out.append(Candidate({"marked": [a, b]}, answer, d["margin"], d["values"], d))
            continue
        # Clearly admissible (as _marked_derive would find): the answer is the extreme of the two.
        va, vb = values[a], values[b]
        first = (va > vb) if pick_max else (va < vb)
        out.append(Candidate({"marked": [a, b]}, labels[0] if first else labels[1], abs(va - vb), {a: va, b: vb}))
    return out


def _visible_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    """Yes when a person can make the object out (enough pixels, and by the source's referent
    rules not cut off by the border, mostly hidden or lost against its surroundings); no when
    none of it shows; anything between is not asked (a sliver at the edge could be anything)."""
    obj = slots["object"]
    px = ft.fact(obj, view).visible_pixels
    if px == 0:
        return "no", {"visible_pixels": px, "object": obj}
    if px < _adm(tpl, "min_visible_pixels", 1):
        return None, {"reason": f"{px} visible pixels is neither clearly visible nor absent"}
    why = ft.makes_out(obj, view)
    if why is not None:
        return None, {"reason": f"seen but not made out: {why}"}
    return "yes", {"visible_pixels": px, "object": obj}


def _best_view_derive(ft: FactTable, view: int | None, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    obj = slots["object"]
    px = {v: ft.fact(obj, v).visible_pixels for v in ft.views}
    ranked = sorted(ft.views, key=lambda v: px[v], reverse=True)
    best, second = px[ranked[0]], px[ranked[1]]
    if best < _adm(tpl, "min_visible_pixels", 1):
        return None, {"reason": "not clearly visible in any view"}
    ratio = best / max(second, 1)
    if ratio < _adm(tpl, "min_ratio", 1.5):
        return None, {"reason": f"best/second ratio {ratio:.2f} below admission"}
    return _view_label(ft, ranked[0]), {"visible_pixels": {_view_label(ft, v): px[v] for v in ft.views},
                                         "ratio": ratio}


def _only_view_derive(ft: FactTable, view: int | None, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    obj = slots["object"]
    px = {v: ft.fact(obj, v).visible_pixels for v in ft.views}
    seen = [v for v in ft.views if px[v] >= _adm(tpl, "min_visible_pixels", 1)]
    absent = [v for v in ft.views if px[v] == 0]
    if len(seen) != 1 or len(absent) != len(ft.views) - 1:
        return None, {"reason": "not visible in exactly one view"}
    return _view_label(ft, seen[0]), {"visible_pixels": {_view_label(ft, v): px[v] for v in ft.views}}


# -- counting, sets, orders and 3D relations ------------------------------------------------


def _nearest_to_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    anchor, names = slots["anchor"], list(slots["objects"])
    if anchor in names:
        return None, {"reason": "the anchor is among the options"}
    if any(ft.fact(n, view).visible_pixels < _adm(tpl, "min_visible_pixels", 1) for n in [anchor, *names]):
        return None, {"reason": "an object is not clearly visible"}
    at = ft.center_3d(anchor)
    dist = {n: math.dist(ft.center_3d(n), at) for n in names}
    ranked = sorted(names, key=lambda n: dist[n])
    margin = dist[ranked[1]] - dist[ranked[0]]
    if margin < _adm(tpl, "min_margin", 0.05):
        return None, {"reason": f"margin {margin:.3f} m below admission"}
    seen = image_separations(ft, view, anchor, names)
    if seen is not None:
        ratio = seen[ranked[1]] / max(seen[ranked[0]], 1e-6)
        need = _adm(tpl, "min_image_ratio", MIN_IMAGE_RATIO)
        if min(seen, key=seen.get) != ranked[0] or ratio < need:
            return None, {"reason": f"in the image the {ranked[0]} is not clearly the nearest to the {anchor} "
                                    f"(ratio {ratio:.2f}, needs {need:.2f})"}
        return ranked[0], {"distances_m": dist, "margin": margin, "image_margin": round(ratio, 4)}
    return ranked[0], {"distances_m": dist, "margin": margin}


def _nearest_to_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    count = int(tpl["slots"]["objects"].get("count", 3))
    visible = ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1)))
    out = []
    for anchor in visible:
        others = [o for o in visible if o != anchor]
        for combo in itertools.combinations(others, count):
            answer, d = _nearest_to_derive(ft, view, {"anchor": anchor, "objects": list(combo)}, tpl)
            if answer is not None:
                out.append(Candidate({"anchor": anchor, "objects": list(combo)}, answer, d["margin"], d["distances_m"], d))
    return out


def _marked_nearest_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    """Which of two marked objects stands nearer the named anchor: the markers alone cannot tell,
    as nothing in them says where the anchor is."""
    labels = tpl["options"].get("labels", ["A", "B"])
    marked = list(slots["marked"])
    centers = [ft.fact(n, view).center_2d for n in marked]
    if any(c is None for c in centers):
        return None, {"reason": "a marked object is not visible"}
    gap = math.dist(centers[0], centers[1])
    if gap < _adm(tpl, "min_separation_px", 0):
        return None, {"reason": f"markers {gap:.0f} px apart, below admission"}
    answer, d = _nearest_to_derive(ft, view, {"anchor": slots["anchor"], "objects": marked}, tpl)
    if answer is None:
        return None, d
    return labels[marked.index(answer)], {**d, "labels": dict(zip(labels, marked))}


def _marked_nearest_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    visible = ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1)))
    out = []
    for anchor in visible:
        for a, b in itertools.permutations([o for o in visible if o != anchor], 2):
            answer, d = _marked_nearest_derive(ft, view, {"anchor": anchor, "marked": [a, b]}, tpl)
            if answer is not None:
                out.append(Candidate({"anchor": anchor, "marked": [a, b]}, answer, d["margin"], d["distances_m"], d))
    return out


def _distance_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    a, b = slots["a"], slots["b"]
    if any(ft.fact(n, view).visible_pixels < _adm(tpl, "min_visible_pixels", 1) for n in (a, b)):
        return None, {"reason": "an object is not clearly visible"}
    cm = float(np.linalg.norm(_center_of(ft, a) - _center_of(ft, b))) * 100.0
    if cm < _adm(tpl, "min_distance_cm", 0.0):
        return None, {"reason": "the objects are too close to tell apart"}
    return f"{cm:.0f}", {"distance_cm": cm}


def _distance_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    visible = ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1)))
    out = []
    for a, b in itertools.combinations(visible, 2):
        answer, d = _distance_derive(ft, view, {"a": a, "b": b}, tpl)
        if answer is not None:
            out.append(Candidate({"a": a, "b": b}, answer, d["distance_cm"], d))
    return out


# -- reach, camera motion and grounding -------------------------------------------------------


def _reach_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    obj = slots["object"]
    if ft.fact(obj, view).visible_pixels < _adm(tpl, "min_visible_pixels", 1):
        return None, {"reason": "not clearly visible"}
    # the arm's base as the scene recorded it; the template's for sources that do not record one
    base = np.array(ft.evidence.robot_base or tpl["answer_rule"]["base"], dtype=float)
    reach = float(tpl["answer_rule"]["reach_m"])
    d = float(np.linalg.norm(_center_of(ft, obj) - base))
    if abs(d - reach) < _adm(tpl, "min_margin", 0.0):
        return None, {"reason": f"{d:.2f} m is too close to the reach limit"}
    return ("yes" if d <= reach else "no"), {"distance_m": d, "reach_m": reach}


def _orbit_derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    i, j = slots["pair"]
    cams = {v.index: v.camera_position for v in ft.evidence.views}
    if cams.get(i) is None or cams.get(j) is None:
        return None, {"reason": "camera poses are not registered"}
    center = tpl["answer_rule"].get("center", [0.0, 0.0])
    a1 = np.degrees(np.arctan2(cams[i][1] - center[1], cams[i][0] - center[0]))
    a2 = np.degrees(np.arctan2(cams[j][1] - center[1], cams[j][0] - center[0]))
    delta = (a2 - a1 + 180.0) % 360.0 - 180.0
    lo, hi = tpl["admission"].get("turn_degrees", [20, 160])
    if not lo <= abs(delta) <= hi:
        return None, {"reason": f"a turn of {delta:.0f} degrees is not clearly one way"}
    labels = tpl["answer_rule"]["labels"]
    return (labels["positive"] if delta > 0 else labels["negative"]), {"turn_degrees": delta}


def _orbit_candidates(ft: FactTable, view: Any, tpl: dict[str, Any]) -> list[Candidate]:
    out = []
    for i, j in itertools.permutations(ft.views, 2):
        answer, d = _orbit_derive(ft, None, {"pair": [i, j]}, tpl)
        if answer is not None:
            out.append(Candidate({"pair": [i, j]}, answer, abs(d["turn_degrees"]), d))
    return out


def _grounding_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    marked, target = list(slots["marked"]), slots["target"]
    labels = tpl["options"].get("labels", ["A", "B", "C", "D"])
    if target not in marked or len(marked) != len(labels):
        return None, {"reason": "the target must be one of the marked objects"}
    facts = [ft.fact(n, view) for n in marked]
    if any(f.visible_pixels < _adm(tpl, "min_visible_pixels", 1) for f in facts):
        return None, {"reason": "a marked object is not clearly visible"}
    gap = min(((a.center_2d[0] - b.center_2d[0]) ** 2 + (a.center_2d[1] - b.center_2d[1]) ** 2) ** 0.5
              for a, b in itertools.combinations(facts, 2))
    if gap < _adm(tpl, "min_separation_px", 0):
        return None, {"reason": f"markers {gap:.0f} px apart, below admission"}
    shared = confusers(ft, target, [n for n in marked if n != target])
    if len(shared) < _adm(tpl, "min_confusers", 0):
        return None, {"reason": f"the other marked objects share {sorted(shared) or 'nothing'} with the one named: "
                                "a glance at one attribute picks it out"}
    return labels[marked.index(target)], {"labels": dict(zip(labels, marked)), "target": target, "separation_px": gap,
                                          "confusers": sorted(shared)}


def _grounding_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    """As ``_grounding_derive`` over every marked set, target and label, with what depends only
    on the set (marker separation) or the set and target (what they share) found once each."""
    labels = tpl["options"].get("labels", ["A", "B", "C", "D"])
    k = len(labels)
    visible = ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1)))
    centers = {n: ft.fact(n, view).center_2d for n in visible}
    min_gap, min_shared = _adm(tpl, "min_separation_px", 0), _adm(tpl, "min_confusers", 0)
    out = []
    for combo in itertools.combinations(visible, k):
        gap = min(((centers[a][0] - centers[b][0]) ** 2 + (centers[a][1] - centers[b][1]) ** 2) ** 0.5
                  for a, b in itertools.combinations(combo, 2))
        if gap < min_gap:
            continue
        # Every member of the set may be the one named, at every label: with the first always
        # named, where its marker sits would follow the order objects are listed in.
        for target in combo:
            others = [n for n in combo if n != target]
            if len(confusers(ft, target, others)) < min_shared:
                continue
            for shift in range(k):
                marked = list(others)
                marked.insert(shift, target)
                out.append(Candidate({"target": target, "marked": marked}, labels[shift], gap, dict(zip(labels, marked))))
    return out


@dataclass(frozen=True)
class Rule:
    """An answer rule. ``quantity`` names what its answer is a function of: two items on the same
    media reading the same quantity determine each other when their referents are the same, or
    when one's answer orders all of its referents (``whole_order``: an order, a pairwise
    comparison) and the other's referents are among them. ``complete_labels``: the answer needs
    every object of the scene registered (a count, an absence), which real-image labels may not
    give."""

    name: str
    candidates: Callable[[FactTable, Any, dict[str, Any]], list[Candidate]]
    derive: Callable[[FactTable, Any, dict[str, Any], dict[str, Any]], Derivation]
    slots: tuple[str, ...]
    question_types: tuple[str, ...]
    quantity: Callable[[dict[str, Any]], str] | None = None
    complete_labels: bool = False
    whole_order: bool = False  # the answer orders all its referents: it settles any question on a subset
    # A rule whose slots, question types and behaviour a template declares (``program``): rule_for
    # gives the rule this function makes from the template.
    for_template: Callable[[dict[str, Any]], "Rule"] | None = None
    # The conventions its key relies on, which a template must state (see conventions.py): a
    # tuple, or a function of the template for rules whose conventions follow their field.
    conventions: tuple[str, ...] | Callable[[dict[str, Any]], tuple[str, ...]] = ()
    # How demanding an item is from its derivation (see difficulty.py); medium when unrated.
    difficulty: Callable[[dict[str, Any], dict[str, Any], Any, Any], str] | None = None
    # The answer lists facts of the scene, not of the view (which of these rest in a tray): two
    # such lists on one record that share an object repeat its answer, from whatever view, and
    # the independence gate keeps the longer. (Single-object rules leave it off: one question
    # per object and record would take most rooms' yes/no supply for a redundancy each item
    # does not show on its own.)
    scene_fact: bool = False

    def quantity_of(self, template: dict[str, Any]) -> str:
        return self.quantity(template) if self.quantity else self.name

    def difficulty_of(self, why: dict[str, Any], template: dict[str, Any], ft: "FactTable", view: Any) -> str:
        return self.difficulty(why, template, ft, view) if self.difficulty else "medium"

    def conventions_of(self, template: dict[str, Any]) -> tuple[str, ...]:
        return tuple(self.conventions(template) if callable(self.conventions) else self.conventions)


def _field(tpl: dict[str, Any]) -> str:
    return f"field:{tpl['answer_rule'].get('field')}"


# Every registered answer rule by name: the built-in ones below and those plugins register.
RULES: Mapping[str, Rule] = view("answer_rule")

_BUILTIN_RULES = (
    Rule("extreme", _extreme_candidates, _extreme_derive, ("objects",), ("single_choice",), _field,
         conventions=of_field, difficulty=by_field),
    Rule("compare", _compare_candidates, _compare_derive, ("a", "b"), ("yes_no",), _field, whole_order=True,
         conventions=of_field, difficulty=by_field),
    Rule("marked_compare", _marked_candidates, _marked_derive, ("marked",), ("marked_object_choice",), _field,
         whole_order=True, conventions=of_field, difficulty=by_field),
    Rule("visible", per_object(_visible_derive, lambda d: d["visible_pixels"]),
         _visible_derive, ("object",), ("yes_no",), lambda t: "visible",
         difficulty=by_contrast(_visible_derive)),
    Rule("best_view", per_object(_best_view_derive, lambda d: d["ratio"], lambda d: d["visible_pixels"]),
         _best_view_derive, ("object",), ("multi_view_choice",), conventions=("apparent_size",),
         difficulty=by_view_ratio),
    Rule("only_view", per_object(_only_view_derive, lambda d: max(d["visible_pixels"].values()),
                                 lambda d: d["visible_pixels"]),
         _only_view_derive, ("object",), ("multi_view_choice",)),
    Rule("count", count_candidates, count_derive, (), ("numeric", "interval_choice"), complete_labels=True,
         conventions=("counted",), difficulty=by_count),
    Rule("count_beside", count_beside_candidates, count_beside_derive, ("anchor",), ("numeric",),
         lambda t: f"count_beside:{t['answer_rule'].get('side', 'left')}", complete_labels=True,
         conventions=("counted", "image_sides"), difficulty=by_count_beside),
    Rule("order", order_candidates, order_derive, ("objects",), ("ordered_list",), _field, whole_order=True,
         conventions=of_field, difficulty=by_field),
    Rule("visible_set", visible_set_candidates, visible_set_derive, ("objects",), ("multiple_choice",),
         lambda t: "visible", whole_order=True, difficulty=by_absent_lookalikes),
    Rule("nearest_to", _nearest_to_candidates, _nearest_to_derive, ("anchor", "objects"), ("single_choice",),
         conventions=("separation",), difficulty=by_image_ratio),
    Rule("marked_nearest_to", _marked_nearest_candidates, _marked_nearest_derive, ("anchor", "marked"),
         ("marked_object_choice",), lambda t: "nearest_to", conventions=("separation",),
         difficulty=by_image_ratio),
    Rule("distance", _distance_candidates, _distance_derive, ("a", "b"), ("numeric",),
         conventions=("scale", "separation"), difficulty=constant("hard")),
    Rule("reach", per_object(_reach_derive, lambda d: abs(d["distance_m"] - d["reach_m"])),
         _reach_derive, ("object",), ("yes_no",), conventions=("reach", "scale"), difficulty=by_reach),
    Rule("orbit", _orbit_candidates, _orbit_derive, ("pair",), ("single_choice",),
         difficulty=by_turn("turn_degrees", 90, 45)),
    Rule("grounding", _grounding_candidates, _grounding_derive, ("target", "marked"), ("grounding_choice",),
         difficulty=by_grounding),
)


def register(rule: Rule, origin: str | None = None) -> Rule:
    """Register an answer rule as ``answer_rule:<name>`` (a name taken by another rule is an
    error naming both origins)."""
    import inspect

    from forge import registry

    if origin is None:
        caller = inspect.currentframe().f_back
        origin = caller.f_globals.get("__name__", "?") if caller else "?"
    registry.register("answer_rule", rule.name, rule, origin)
    return rule


def rule_for(template: dict[str, Any]) -> Rule:
    name = template["answer_rule"].get("rule")
    if name not in RULES:
        load_plugins()  # a plugin's rule registers when its plugin loads
    if name not in RULES:
        raise KeyError(f"template {template.get('id')!r}: unknown answer rule {name!r}; known: {sorted(RULES)}")
    rule = RULES[name]
    return rule.for_template(template) if rule.for_template is not None else rule


for _rule in _BUILTIN_RULES:
    register(_rule, __name__)


