"""Answer rules for contact and manipulation: whether two objects touch, whether one is stacked
on another, whether the gripper is closed and what it holds, whether a door stands open; all
from the simulator's state.

A "yes" needs a contact the simulator reports; a "no" needs a clear gap between the objects'
3D boxes, so a person looking at the picture can tell they stand apart (a box overstates a
rotated object, so the real gap is never smaller).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from forge_skills.oe.synthesize.difficulty import constant
from forge_skills.oe.synthesize.answer_rules import Rule, register
from forge_skills.oe.synthesize.rule_margins import Derivation, _adm, per_object
from forge_skills.oe.synthesize.fact_table import Candidate, FactTable
from forge_skills.oe.synthesize.rules_scene import frame_label


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


def _pairs(derive, *, ordered: bool, margin=lambda d: 1.0):
    """Candidates over pairs of visible objects (ordered pairs where the relation is not symmetric)."""
    def candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
        visible = ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1)))
        pairs = itertools.permutations(visible, 2) if ordered else itertools.combinations(visible, 2)
        out = []
        for a, b in pairs:
            answer, d = derive(ft, view, {"a": a, "b": b}, tpl)
            if answer is not None:
                out.append(Candidate({"a": a, "b": b}, answer, margin(d), d))
        return out
    return candidates


register(Rule("touching", _pairs(_touching_derive, ordered=False, margin=lambda d: abs(d["gap_cm"])),
              _touching_derive, ("a", "b"), ("yes_no",)))


# -- the gripper, hinges and stacking -----------------------------------------------------------


def _gripper_seen(ft: FactTable, view: int, tpl: dict[str, Any]) -> str | None:
    need = int(_adm(tpl, "min_gripper_pixels", 1))
    px = ft.view(view).body_pixels.get("gripper", 0)
    return None if px >= need else f"the gripper shows {px} px (needs {need})"


def _gripper_closed_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    grip = ft.evidence.gripper
    if grip is None:
        return None, {"reason": "no gripper in the scene"}
    if (why := _gripper_seen(ft, view, tpl)) is not None:
        return None, {"reason": why}
    if grip.get("state") not in ("open", "closed"):
        return None, {"reason": f"the fingers are moving ({grip['opening_m'] * 100:.1f} cm apart)"}
    if grip["state"] == "open" and grip.get("between"):
        return None, {"reason": f"the {grip['between']} stands between the open fingers: from outside they look closed on it"}
    return ("yes" if grip["state"] == "closed" else "no"), {"state": grip["state"], "opening_m": grip["opening_m"]}


def _gripper_closed_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    answer, d = _gripper_closed_derive(ft, view, {}, tpl)
    return [Candidate({}, answer, abs(d["opening_m"] - 0.06), d)] if answer is not None else []


def _holding_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    """Yes for the object both fingers grip; no for one clearly away from the gripper's fingers
    (no contact, and its box at least ``min_gap_cm`` below or beside the held one's, or nothing held
    while the gripper is open)."""
    obj = slots["object"]
    grip = ft.evidence.gripper
    if grip is None or grip.get("state") not in ("open", "closed"):
        return None, {"reason": "the gripper's state is unclear"}
    if (why := _gripper_seen(ft, view, tpl)) is not None:
        return None, {"reason": why}
    if ft.fact(obj, view).visible_pixels < _adm(tpl, "min_visible_pixels", 1):
        return None, {"reason": "not clearly visible"}
    held = grip.get("holding")
    if held == obj:
        return "yes", {"holding": held}
    if held is None and grip["state"] == "open":
        if grip.get("between") == obj:
            return None, {"reason": f"the {obj} stands between the open fingers: it looks held"}
        return "no", {"holding": None}
    if held is not None and box_gap_m(ft, obj, held) * 100.0 >= _adm(tpl, "min_gap_cm", 0.0):
        return "no", {"holding": held}
    return None, {"reason": "too close to what the gripper holds to tell"}


def _hinge_open_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    obj = ft.object(slots["object"])
    angle = obj.attributes.get("opening_deg")
    if angle is None:
        return None, {"reason": f"the {obj.name} has no hinge"}
    if ft.fact(obj.name, view).visible_pixels < _adm(tpl, "min_visible_pixels", 1):
        return None, {"reason": "not clearly visible"}
    open_above, closed_below = _adm(tpl, "open_above_deg", 20.0), _adm(tpl, "closed_below_deg", 3.0)
    if closed_below <= angle <= open_above:
        return None, {"reason": f"{angle:.0f} degrees is neither clearly open nor closed"}
    return ("yes" if angle > open_above else "no"), {"opening_deg": angle}


def _stacked_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    """Yes when ``a`` rests on ``b`` by the simulator's contacts; no when ``a`` rests on something
    else (a table, a bin) and the two stand apart."""
    a, b = slots["a"], slots["b"]
    if any(ft.fact(n, view).visible_pixels < _adm(tpl, "min_visible_pixels", 1) for n in (a, b)):
        return None, {"reason": "an object is not clearly visible"}
    on = ft.object(a).attributes.get("resting_on")
    support = ft.object(a).support
    if on == b:
        return "yes", {"resting_on": b}
    if support in ("table", "bin") and box_gap_m(ft, a, b) * 100.0 >= _adm(tpl, "min_gap_cm", 0.0):
        return "no", {"resting_on": support}
    return None, {"reason": "what it rests on is unclear"}


register(Rule("gripper_closed", _gripper_closed_candidates, _gripper_closed_derive, (), ("yes_no",),
              difficulty=constant("easy")))
register(Rule("holding", per_object(_holding_derive), _holding_derive, ("object",), ("yes_no",),
              difficulty=constant("easy")))
register(Rule("hinge_open", per_object(_hinge_open_derive, lambda d: d["opening_deg"]), _hinge_open_derive,
              ("object",), ("yes_no",)))
register(Rule("stacked", _pairs(_stacked_derive, ordered=True), _stacked_derive, ("a", "b"), ("yes_no",)))


# -- clips: what changed between moments --------------------------------------------------------


def _frame_states(ft: FactTable, tpl: dict[str, Any]) -> list[str | None] | None:
    """The gripper's state at every frame in time order, None where it is unclear or unseen."""
    timeline = ft.evidence.timeline
    if not timeline:
        return None
    need = int(_adm(tpl, "min_gripper_pixels", 1))
    out = []
    for v in ft.frames():
        grip = timeline[v].get("gripper") or {}
        out.append(grip.get("state") if ft.view(v).body_pixels.get("gripper", 0) >= need else None)
    return out


def _gripper_change_derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    """The first frame in which the gripper is in the template's state (``to``: closed or open),
    every earlier frame clearly in the other state; never the first frame (nothing changed)."""
    to = tpl["answer_rule"].get("to", "closed")
    other = "open" if to == "closed" else "closed"
    states = _frame_states(ft, tpl)
    if states is None:
        return None, {"reason": "not a clip"}
    first = next((k for k, s in enumerate(states) if s == to), None)
    if first is None or first == 0:
        return None, {"reason": f"the gripper is not {to} first at a later frame"}
    if any(s != other for s in states[:first]):
        return None, {"reason": "an earlier frame's gripper state is unclear"}
    return frame_label(first), {"first": first, "states": states}


def _gripper_change_candidates(ft: FactTable, view: Any, tpl: dict[str, Any]) -> list[Candidate]:
    answer, d = _gripper_change_derive(ft, view, {}, tpl)
    return [Candidate({}, answer, 1.0, d)] if answer is not None else []


def _lifted_derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    """Yes when the object stands at least ``min_rise_cm`` higher in the last frame than in the
    first; no when its height changed by less than ``max_still_cm``; visible in both."""
    obj = slots["object"]
    timeline = ft.evidence.timeline
    if not timeline:
        return None, {"reason": "not a clip"}
    frames = ft.frames()
    first, last = frames[0], frames[-1]
    if any(ft.fact(obj, v).visible_pixels < _adm(tpl, "min_visible_pixels", 1) for v in (first, last)):
        return None, {"reason": "not clearly visible in the first and last frames"}
    z0, z1 = timeline[first]["heights"].get(obj), timeline[last]["heights"].get(obj)
    if z0 is None or z1 is None:
        return None, {"reason": "no recorded height"}
    rise = (z1 - z0) * 100.0
    if rise >= _adm(tpl, "min_rise_cm", 5.0):
        return "yes", {"rise_cm": rise}
    if abs(rise) <= _adm(tpl, "max_still_cm", 0.5):
        return "no", {"rise_cm": rise}
    return None, {"reason": f"a change of {rise:.1f} cm is neither a lift nor standing still"}


register(Rule("gripper_change", _gripper_change_candidates, _gripper_change_derive, (), ("temporal_choice",),
              lambda t: f"gripper_change:{t['answer_rule'].get('to', 'closed')}"))
register(Rule("lifted", per_object(_lifted_derive, lambda d: abs(d["rise_cm"])), _lifted_derive, ("object",),
              ("yes_no",)))
