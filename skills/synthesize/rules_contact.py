"""Answer rules for contact: whether two objects touch, from the simulator's contacts.

A "yes" needs a contact the simulator reports; a "no" needs a clear gap between the objects'
3D boxes, so a person looking at the picture can tell they stand apart (a box overstates a
rotated object, so the real gap is never smaller).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from forge_skills.synthesize.answer_rules import Candidate, Derivation, FactTable, Rule, _adm, register


def box_gap_m(ft: FactTable, a: str, b: str) -> float:
    """The largest separation of two 3D boxes along any axis (0 or less when they overlap)."""
    oa, ob = ft.object(a), ft.object(b)
    lo_a, hi_a = np.array(oa.box_3d_min), np.array(oa.box_3d_max)
    lo_b, hi_b = np.array(ob.box_3d_min), np.array(ob.box_3d_max)
    return float(np.max(np.maximum(lo_b - hi_a, lo_a - hi_b)))


def _touching_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    a, b = slots["a"], slots["b"]
    if any(ft.fact(n, view).visible_pixels < _adm(tpl, "min_visible_pixels", 1) for n in (a, b)):
        return None, {"reason": "an object is not clearly visible"}
    touching = b in ft.object(a).attributes.get("touching", []) or a in ft.object(b).attributes.get("touching", [])
    gap_cm = box_gap_m(ft, a, b) * 100.0
    if touching:
        return "yes", {"touching": True, "gap_cm": gap_cm}
    if gap_cm < _adm(tpl, "min_gap_cm", 0.0):
        return None, {"reason": f"only {max(gap_cm, 0):.1f} cm apart without touching: too close to tell"}
    return "no", {"touching": False, "gap_cm": gap_cm}


def _touching_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    visible = ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1)))
    out = []
    for a, b in itertools.combinations(visible, 2):
        answer, d = _touching_derive(ft, view, {"a": a, "b": b}, tpl)
        if answer is not None:
            out.append(Candidate({"a": a, "b": b}, answer, abs(d["gap_cm"]), d))
    return out


register(Rule("touching", _touching_candidates, _touching_derive, ("a", "b"), ("yes_no",)))
