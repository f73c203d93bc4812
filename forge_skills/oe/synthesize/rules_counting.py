"""Answer rules over sets of objects in one view: counts, counts beside an anchor, orders and
the set of objects in view (the rules themselves are assembled in answer_rules)."""

from __future__ import annotations

import itertools
from typing import Any

from forge_skills.oe.synthesize.fact_table import Candidate, FactTable
from forge_skills.oe.synthesize.rule_margins import Derivation, _adm, held_problem, image_margin


def count_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    min_vis = _adm(tpl, "min_visible_pixels", 1)
    category = slots.get("category")
    pool = [o for o in ft.objects if category is None or ft.category(o) == category]
    px = {o: ft.fact(o, view).visible_pixels for o in pool}
    unclear = [o for o, p in px.items() if p > 0 and not ft.clear(o, view, min_vis, border=False)]
    if unclear:
        return None, {"reason": f"{len(unclear)} object(s) seen but not clearly enough to count"}
    n = sum(1 for p in px.values() if p >= min_vis)
    if n < _adm(tpl, "min_count", 0):
        return None, {"reason": "too few objects to count"}
    return str(n), {"count": n, "visible_pixels": px}


def count_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    answer, d = count_derive(ft, view, {}, tpl)
    return [Candidate({}, answer, float(d["count"]), d["visible_pixels"])] if answer is not None else []


def count_beside_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    """How many other objects lie on one side of the anchor in the image (by centre column).
    Every object on that side or near the anchor's column must be clearly in view or out of it
    (one on the other side cannot change the count), and none may sit so near the anchor's
    column that a person could not tell which side it is on."""
    rule = tpl["answer_rule"]
    anchor = slots["anchor"]
    min_vis = _adm(tpl, "min_visible_pixels", 1)
    px = {o: ft.fact(o, view).visible_pixels for o in ft.objects}
    if px[anchor] < min_vis or not ft.clear(anchor, view, min_vis, border=False):
        return None, {"reason": f"{anchor} is not clearly visible"}
    side = rule.get("side", "left")
    sign = -1.0 if side == "left" else 1.0
    at = ft.value(anchor, view, "center_x")
    near = _adm(tpl, "min_margin", 0.0)
    unclear = [o for o, p in px.items() if p > 0 and not ft.clear(o, view, min_vis, border=False)
               and (ft.value(o, view, "center_x") is None or sign * (ft.value(o, view, "center_x") - at) > -near)]
    if unclear:
        return None, {"reason": "an object on the counted side is seen but not clearly enough to count"}
    x = {o: ft.value(o, view, "center_x") for o, p in px.items()
         if p >= min_vis and ft.clear(o, view, min_vis, border=False)}
    others = {o: v - x[anchor] for o, v in x.items() if o != anchor}
    if len(others) < _adm(tpl, "min_others", 0):
        return None, {"reason": "too few other objects in view to count"}
    margin = min((abs(d) for d in others.values()), default=float("inf"))
    if margin < _adm(tpl, "min_margin", 0.0):
        return None, {"reason": f"an object is within {margin:.0f} px of the anchor's column"}
    n = sum(1 for d in others.values() if (d < 0 if side == "left" else d > 0))
    return str(n), {"count": n, "side": side, "anchor": anchor, "offsets_px": others, "margin": margin}


def count_beside_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    out = []
    for anchor in ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1))):
        answer, d = count_beside_derive(ft, view, {"anchor": anchor}, tpl)
        if answer is not None:
            out.append(Candidate({"anchor": anchor}, answer, d["margin"], d["offsets_px"], d))
    return out


def order_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    rule = tpl["answer_rule"]
    names = list(slots["objects"])
    min_vis = _adm(tpl, "min_visible_pixels", 1)
    if any(ft.fact(n, view).visible_pixels < min_vis for n in names):
        return None, {"reason": "an object is not clearly visible"}
    values = {n: ft.value(n, view, rule["field"]) for n in names}
    if any(v is None for v in values.values()):
        return None, {"reason": "value missing"}
    if rule["field"] == "median_depth" and (why := held_problem(ft, names)) is not None:
        return None, {"reason": why}
    ranked = sorted(names, key=lambda n: values[n], reverse=rule.get("direction", "ascending") == "descending")
    gaps = [abs(values[a] - values[b]) for a, b in zip(ranked, ranked[1:])]
    if min(gaps) < _adm(tpl, "min_margin", 0.0):
        return None, {"reason": "two neighbours in the order are too close"}
    seen = []
    pairs = itertools.combinations(ranked, 2) if rule["field"] in ("center_x", "center_y") else zip(ranked, ranked[1:])
    for a, b in pairs:
        m, why = image_margin(ft, view, rule["field"], *sorted((a, b), key=lambda n: values[n]), tpl)
        if why:
            return None, {"reason": why}
        if m is not None:
            seen.append(m)
    return " > ".join(ranked), {"values": values, "margin": min(gaps),
                                **({"image_margin": round(min(seen), 4)} if seen else {})}


def order_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    count = int(tpl["slots"]["objects"].get("count", 3))
    visible = ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1)))
    out = []
    for combo in itertools.combinations(visible, count):
        answer, d = order_derive(ft, view, {"objects": list(combo)}, tpl)
        if answer is not None:
            out.append(Candidate({"objects": list(combo)}, answer, d["margin"], d["values"], d))
    return out


def visible_set_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    min_vis = _adm(tpl, "min_visible_pixels", 1)
    px = {n: ft.fact(n, view).visible_pixels for n in slots["objects"]}
    if any(p > 0 and not ft.clear(n, view, min_vis) for n, p in px.items()):
        return None, {"reason": "an option is seen but not clearly"}
    seen = sorted(n for n, p in px.items() if p >= min_vis)
    if not seen or len(seen) == len(px):
        return None, {"reason": "needs both visible and absent options"}
    return ", ".join(seen), {"visible_pixels": px}


def visible_set_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    count = int(tpl["slots"]["objects"].get("count", 4))
    out = []
    for combo in itertools.combinations(ft.objects, count):
        answer, d = visible_set_derive(ft, view, {"objects": list(combo)}, tpl)
        if answer is not None:
            out.append(Candidate({"objects": list(combo)}, answer, 0.0, d["visible_pixels"]))
    return out
