"""Answer rules for trajectories, supports, object states and category counts.

Temporal rules read frames in time order; a first appearance counts only when every earlier
frame shows none of the object (a partly visible object makes the moment ambiguous).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from forge_skills.oe.synthesize.difficulty import (BANDS, absence_band, banded, by_count, by_turn, confusers,
                                                constant)
from forge_skills.oe.synthesize.answer_rules import Rule, register, rule_for
from forge_skills.oe.synthesize.rule_margins import Derivation, _adm, _center_of, per_object
from forge_skills.oe.synthesize.fact_table import Candidate, FactTable


def frame_label(rank: int) -> str:
    return f"Frame {rank + 1}"


def plural(category: str) -> str:
    word = category.replace("-", " ")
    return word + ("es" if word.endswith(("s", "ch", "sh", "x")) else "s")


def singular(word: str) -> str:
    """The singular of a :func:`plural` ("ships" -> "ship", "boxes" -> "box")."""
    if word.endswith("es") and word[:-2].endswith(("s", "ch", "sh", "x")):
        return word[:-2]
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def _first_rank(ft: FactTable, obj: str, tpl: dict[str, Any]) -> int | None:
    """Time rank of the first frame that clearly shows ``obj``; None when unclear or never."""
    min_vis = _adm(tpl, "min_visible_pixels", 1)
    # Pixels an earlier frame may show and still count as not showing it: 0 in the built-in
    # templates, as readers make out a 5 by 3 px speck of the right colour and take it for the object.
    absent = _adm(tpl, "max_absent_pixels", 0)
    for rank, view in enumerate(ft.frames()):
        px = ft.fact(obj, view).visible_pixels
        if px >= min_vis:
            return rank
        if px > absent:
            return None
    return None


# -- temporal ---------------------------------------------------------------------------------


def _first_seen_derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    names = list(slots["objects"])
    ranks = {n: _first_rank(ft, n, tpl) for n in names}
    if any(r is None for r in ranks.values()):
        return None, {"reason": "an object is never clearly seen, or first seen only partly"}
    ordered = sorted(names, key=lambda n: ranks[n])
    if ranks[ordered[1]] - ranks[ordered[0]] < _adm(tpl, "min_frame_gap", 1):
        return None, {"reason": "two objects appear in the same frame"}
    return ordered[0], {"first_frame": {n: frame_label(r) for n, r in ranks.items()},
                        "margin": ranks[ordered[1]] - ranks[ordered[0]]}


def _objects_combos(ft: FactTable, tpl: dict[str, Any], pool: list[str]):
    return itertools.combinations(pool, int(tpl["slots"]["objects"].get("count", 3)))


def _first_seen_candidates(ft: FactTable, view: Any, tpl: dict[str, Any]) -> list[Candidate]:
    seen = [o for o in ft.objects if _first_rank(ft, o, tpl) is not None]
    out = []
    for combo in _objects_combos(ft, tpl, seen):
        answer, d = _first_seen_derive(ft, None, {"objects": list(combo)}, tpl)
        if answer is not None:
            out.append(Candidate({"objects": list(combo)}, answer, float(d["margin"]), d["first_frame"]))
    return out


def _first_frame_derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    """The first frame of the window ``[start, end]`` (time ranks) that shows the object; every
    frame before it, inside the window or not, shows none of it."""
    start, end = slots["window"]
    frames = ft.frames()
    if not 0 <= start < end < len(frames):
        return None, {"reason": "the window is not a run of registered frames"}
    rank = _first_rank(ft, slots["object"], tpl)
    if rank is None:
        return None, {"reason": "never clearly seen, or first seen only partly"}
    if not start <= rank <= end:
        return None, {"reason": "does not come into view inside the window"}
    first_px = ft.fact(slots["object"], ft.frames()[rank]).visible_pixels
    return frame_label(rank - start), {"first_frame": frame_label(rank), "window": [start, end], "first_pixels": first_px,
                                       "object": slots["object"]}


def _first_frame_candidates(ft: FactTable, view: Any, tpl: dict[str, Any]) -> list[Candidate]:
    """One window per object, placed so that the object's first frame falls at varying positions
    of the window: answers spread over the frames shown instead of piling on the first ones."""
    size = min(int(tpl["answer_rule"].get("window", 4)), len(ft.frames()))
    out = []
    for k, obj in enumerate(ft.objects):
        rank = _first_rank(ft, obj, tpl)
        if not rank:
            continue  # never clearly seen, or in view from the very start (nothing comes into view)
        starts = [s for s in range(max(0, rank - size + 1), rank + 1) if s + size - 1 < len(ft.frames())]
        if not starts:
            continue
        # Answer positions take turns across scenes and objects: the wanted position, or the
        # nearest one this object's first frame allows.
        wanted = (ft.evidence.scene_index * 7 + k) % size
        start = min(starts, key=lambda s: (abs((rank - s) - wanted), s))
        slots = {"object": obj, "window": [start, start + size - 1]}
        answer, d = _first_frame_derive(ft, None, slots, tpl)
        if answer is not None:
            out.append(Candidate(slots, answer, 1.0, d))
    return out


def _appearance_order_derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    names = list(slots["objects"])
    ranks = {n: _first_rank(ft, n, tpl) for n in names}
    if any(r is None for r in ranks.values()):
        return None, {"reason": "an object is never clearly seen, or first seen only partly"}
    ordered = sorted(names, key=lambda n: ranks[n])
    if len({ranks[n] for n in names}) != len(names):
        return None, {"reason": "two objects appear in the same frame"}
    return " > ".join(ordered), {"first_frame": {n: frame_label(r) for n, r in ranks.items()}, "margin": 1.0}


def _appearance_order_candidates(ft: FactTable, view: Any, tpl: dict[str, Any]) -> list[Candidate]:
    seen = [o for o in ft.objects if _first_rank(ft, o, tpl) is not None]
    out = []
    for combo in _objects_combos(ft, tpl, seen):
        answer, d = _appearance_order_derive(ft, None, {"objects": list(combo)}, tpl)
        if answer is not None:
            out.append(Candidate({"objects": list(combo)}, answer, 1.0, d["first_frame"]))
    return out


def _seen_along_derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    px = {frame_label(r): ft.fact(slots["object"], v).visible_pixels for r, v in enumerate(ft.frames())}
    if max(px.values()) >= _adm(tpl, "min_visible_pixels", 1):
        return "yes", {"visible_pixels": px, "object": slots["object"]}
    if max(px.values()) == 0:
        return "no", {"visible_pixels": px, "object": slots["object"]}
    return None, {"reason": "only ever partly visible"}


def _sighting_difficulty(ft: FactTable, obj: str, pixels: int, views: list[int], tpl: dict[str, Any]) -> str:
    """Whether an object is seen in some pictures: a "yes" is found at a glance when the object
    stands out large (four times what it takes to make it out) or is the only thing of its colour
    shown, and asks a search when it is small among things of its colour; a "no" means ruling out
    what is shown, as hard as the things that share its colour (``absence_band``)."""
    min_vis = _adm(tpl, "min_visible_pixels", 1)
    shown = [o for o in ft.objects if o != obj and any(ft.fact(o, v).visible_pixels >= min_vis for v in views)]
    if pixels > 0:
        alone = "colour" not in confusers(ft, obj, shown)
        return "easy" if pixels >= 4 * min_vis or alone else "medium"
    return BANDS[absence_band(ft, obj, shown)]


def _seen_along_difficulty(why: dict[str, Any], tpl: dict[str, Any], ft: FactTable, view: Any) -> str:
    if "object" not in why:
        return "medium"
    return _sighting_difficulty(ft, why["object"], max(why["visible_pixels"].values()), ft.frames(), tpl)


def _first_frame_difficulty(why: dict[str, Any], tpl: dict[str, Any], ft: FactTable, view: Any) -> str:
    """The frame an object first appears in: at a glance when no other object of its colour shows
    in the frames up to the window's end (the only blue thing in the sequence, 22d9d2f1) or when
    it comes in large (eight times what it takes to make it out); a careful look when it first
    shows as a small or cut-off patch (under three times) among objects of its colour."""
    px, obj = why.get("first_pixels"), why.get("object")
    if px is None or obj is None:
        return "medium"
    colour = ft.object(obj).color
    min_vis = _adm(tpl, "min_visible_pixels", 1)
    frames = ft.frames()[: why["window"][1] + 1]
    if colour and not any(ft.object(o).color == colour and any(ft.fact(o, v).visible_pixels >= min_vis for v in frames)
                          for o in ft.objects if o != obj):
        return "easy"
    return banded(px / min_vis, 8.0, 3.0)



def _frame_match_derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    names = sorted(slots["objects"])
    ranks = {n: _first_rank(ft, n, tpl) for n in names}
    if any(r is None for r in ranks.values()):
        return None, {"reason": "an object is never clearly seen, or first seen only partly"}
    if len(set(ranks.values())) != len(names):
        return None, {"reason": "two objects first appear in the same frame"}
    return "; ".join(f"{n} -> {frame_label(ranks[n])}" for n in names), \
        {"first_frame": {n: frame_label(r) for n, r in ranks.items()}, "margin": 1.0}


def _frame_match_candidates(ft: FactTable, view: Any, tpl: dict[str, Any]) -> list[Candidate]:
    seen = [o for o in ft.objects if _first_rank(ft, o, tpl) is not None]
    out = []
    for combo in _objects_combos(ft, tpl, seen):
        answer, d = _frame_match_derive(ft, None, {"objects": list(combo)}, tpl)
        if answer is not None:
            out.append(Candidate({"objects": list(combo)}, answer, 1.0, d["first_frame"]))
    return out


# -- camera motion along a trajectory --------------------------------------------------------


def _heading(forward: list[float] | None) -> float | None:
    if forward is None or abs(forward[0]) + abs(forward[1]) < 1e-6:
        return None
    return float(np.degrees(np.arctan2(forward[1], forward[0])))


def _turn_derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    frames = ft.frames()
    if len(frames) < 2:
        return None, {"reason": "needs two frames"}
    h0, h1 = _heading(ft.view(frames[0]).forward), _heading(ft.view(frames[-1]).forward)
    if h0 is None or h1 is None:
        return None, {"reason": "viewing directions are not registered"}
    delta = (h1 - h0 + 180.0) % 360.0 - 180.0
    if abs(delta) < _adm(tpl, "min_turn_degrees", 15.0):
        return None, {"reason": f"a turn of {delta:.0f} degrees is too small to tell"}
    shifts = {}
    if "min_landmark_shift" in tpl["admission"]:
        # The turn must show in the images: from each shown frame to the next, objects seen in both
        # slide the way the turn moves the scene (a left turn moves it right). At least half of
        # the steps show such an object, and no step shows one sliding clearly the other way.
        need, sign = _adm(tpl, "min_landmark_shift", 0.0), (1.0 if delta > 0 else -1.0)
        steps = list(zip(frames, frames[1:])) if tpl["media"].get("layout") == "frames" else [(frames[0], frames[-1])]
        shown = 0
        for a, b in steps:
            step = landmark_shifts(ft, a, b, _adm(tpl, "min_landmark_pixels", 0))
            if any(sign * d <= -need for d in step.values()):
                return None, {"reason": f"an object moves against the turn between frames {a} and {b}"}
            shown += any(sign * d >= need for d in step.values())
            shifts[f"{a}-{b}"] = step
        if shown * 2 < len(steps):
            return None, {"reason": f"only {shown} of {len(steps)} steps show an object moving with the turn"}
    labels = tpl["answer_rule"]["labels"]
    return (labels["positive"] if delta > 0 else labels["negative"]), {"turn_degrees": delta, "shifts": shifts}


def landmark_shifts(ft: FactTable, first: int, last: int, min_pixels: float) -> dict[str, float]:
    """Horizontal image shift (share of the width, positive to the right) from the first frame
    to the last of every object clearly seen in both."""
    width = ft.view(first).width
    out = {}
    for obj in ft.objects:
        a, b = ft.fact(obj, first), ft.fact(obj, last)
        if a.visible_pixels >= max(1, min_pixels) and b.visible_pixels >= max(1, min_pixels):
            out[obj] = round((b.center_2d[0] - a.center_2d[0]) / width, 4)
    return out


def _turn_candidates(ft: FactTable, view: Any, tpl: dict[str, Any]) -> list[Candidate]:
    answer, d = _turn_derive(ft, None, {}, tpl)
    return [Candidate({}, answer, abs(d["turn_degrees"]), d)] if answer is not None else []


def _approach_derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    frames = ft.frames()
    obj = slots["object"]
    first, last = ft.view(frames[0]), ft.view(frames[-1])
    if ft.fact(obj, first.index).visible_pixels < _adm(tpl, "min_visible_pixels", 1):
        return None, {"reason": "not clearly visible in the first frame"}
    center = _center_of(ft, obj)
    d0 = float(np.linalg.norm(center - np.array(first.camera_position)))
    d1 = float(np.linalg.norm(center - np.array(last.camera_position)))
    if abs(d1 - d0) < _adm(tpl, "min_change_m", 0.3):
        return None, {"reason": "the distance barely changed"}
    return ("yes" if d1 < d0 else "no"), {"distance_first_m": d0, "distance_last_m": d1}



# -- support, containment and object state ---------------------------------------------------


def _support_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    obj = ft.object(slots["object"])
    if ft.fact(obj.name, view).visible_pixels < _adm(tpl, "min_visible_pixels", 1):
        return None, {"reason": "not clearly visible"}
    names = tpl["answer_rule"]["names"]
    if obj.support not in names:
        return None, {"reason": f"support {obj.support!r} is not one the template names"}
    body = obj.attributes.get("support_body")
    if obj.support != "floor" and ft.view(view).body_pixels.get(body, 0) < _adm(tpl, "min_support_pixels", 1):
        return None, {"reason": "the supporting body is not clearly visible"}
    rival = _adm(tpl, "min_rival_pixels", 0)
    if rival and not _rival_holders(ft.view(view).body_pixels, body, rival):
        return None, {"reason": "no table or tray in view besides what it rests on: nothing to tell it from"}
    return names[obj.support], {"support": obj.support, "support_body": body}


HOLDERS = ("table", "tray")  # furniture an object may rest on, besides the floor


def _rival_holders(shown: dict[str, int], support_body: str | None, need: float) -> list[str]:
    """Tables and trays in view, other than the one the object rests on, showing ``need`` px."""
    return [n for n, px in shown.items()
            if n != support_body and n.rsplit(" ", 1)[0] in HOLDERS and px >= need]



def _state_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    obj = ft.object(slots["object"])
    rule = tpl["answer_rule"]
    if obj.category not in rule["categories"]:
        return None, {"reason": f"{obj.category} has no clear up axis"}
    if ft.fact(obj.name, view).visible_pixels < _adm(tpl, "min_visible_pixels", 1):
        return None, {"reason": "not clearly visible"}
    tilt = obj.tilt_deg
    upright, lying = tpl["admission"].get("upright_below_deg", 20), tpl["admission"].get("lying_above_deg", 65)
    if tilt is None or upright <= tilt <= lying:
        return None, {"reason": f"tilt {tilt} is neither upright nor lying"}
    state = "upright" if tilt < upright else "lying"
    return rule["labels"][state], {"tilt_deg": tilt, "state": state}



# -- several objects checked against one per-object rule ---------------------------------------


def _select_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    """The listed objects for which the per-object rule ``of`` gives ``selected``: every one must
    be decidable by that rule, and the list must hold both kinds, so each object has to be looked
    at in turn."""
    inner = _inner_rule(tpl)
    answers: dict[str, str] = {}
    for obj in slots["objects"]:
        answer, d = inner.derive(ft, view, {"object": obj}, tpl)
        if answer is None:
            return None, {"reason": f"{obj}: {d.get('reason', 'undecidable')}"}
        answers[obj] = answer
    return _selection(answers, tpl["answer_rule"]["selected"])


def _selection(answers: dict[str, str], selected: str) -> Derivation:
    chosen = sorted(o for o, a in answers.items() if a == selected)
    if not chosen or len(chosen) == len(answers):
        return None, {"reason": "needs both listed objects that are and that are not selected"}
    return ", ".join(chosen), {"answers": answers, "selected": len(chosen), "listed": len(answers)}


def _select_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    count = int(tpl["slots"]["objects"].get("count", 4))
    inner = _inner_rule(tpl)
    decided = {}
    for obj in ft.objects:  # each object decided once, not once per list it is in
        answer, _ = inner.derive(ft, view, {"object": obj}, tpl)
        if answer is not None:
            decided[obj] = answer
    out = []
    for combo in itertools.combinations(sorted(decided), count):
        answer, d = _selection({o: decided[o] for o in combo}, tpl["answer_rule"]["selected"])
        if answer is not None:
            out.append(Candidate({"objects": list(combo)}, answer, float(min(d["selected"], d["listed"] - d["selected"])),
                                 d["answers"]))
    return out


def _select_difficulty(why: dict[str, Any], tpl: dict[str, Any], ft: FactTable, view: Any) -> str:
    """Every listed object must be checked; the fewer of the minority kind, the sooner a guess
    from the majority pays: one of one kind among three is easy (reviewers found one object in
    a tray among three listed one-glance), among four or more medium, two or more of each hard."""
    if "selected" not in why:
        return "medium"
    fewer = min(why["selected"], why["listed"] - why["selected"])
    if fewer >= 2:
        return "hard"
    return "easy" if why["listed"] <= 3 else "medium"


def _inner_rule(tpl: dict[str, Any]) -> Rule:
    return rule_for({**tpl, "answer_rule": {**tpl["answer_rule"], "rule": tpl["answer_rule"]["of"]}})


# -- counting by category and cross-view visibility -------------------------------------------


def _count_category_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    pool = [o for o in ft.objects if plural(ft.category(o)) == slots["category"]]
    if not pool:
        return None, {"reason": "no object of this kind in the scene"}
    min_vis = _adm(tpl, "min_visible_pixels", 1)
    px = {o: ft.fact(o, view).visible_pixels for o in pool}
    # Every object in view, of any kind, must be made out: a blob too small to recognise might be
    # one of the kind counted.
    if any(ft.fact(o, view).visible_pixels > 0 and not ft.clear(o, view, min_vis, border=False) for o in ft.objects):
        return None, {"reason": "an object is seen but not clearly enough to tell whether it is of this kind"}
    if any(not ft.label_ok(o) for o in pool if px[o] > 0):
        return None, {"reason": "an object of this kind is labelled difficult or cut by the tile edge"}
    n = sum(1 for p in px.values() if p >= min_vis)
    if n < _adm(tpl, "min_count", 0):
        return None, {"reason": "too few to count"}
    return str(n), {"count": n, "visible_pixels": px}


def _count_category_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    out = []
    for kind in sorted({plural(ft.category(o)) for o in ft.objects}):
        answer, d = _count_category_derive(ft, view, {"category": kind}, tpl)
        if answer is not None:
            out.append(Candidate({"category": kind}, answer, float(d["count"]), d["visible_pixels"]))
    return out


def _marked_seen_derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    """Is the object marked in the overview visible in the given forward frame?"""
    obj, frame = slots["object"], slots["frame"]
    overview = ft.views_with_role(["overview"])
    min_vis = _adm(tpl, "min_visible_pixels", 1)
    if len(overview) != 1 or ft.fact(obj, overview[0]).visible_pixels < _adm(tpl, "min_marked_pixels", 1):
        return None, {"reason": "not clearly visible in the overview"}
    px = ft.fact(obj, frame).visible_pixels
    if px >= min_vis:
        return "yes", {"visible_pixels": px, "object": obj, "frame": frame}
    if px == 0:
        return "no", {"visible_pixels": px, "object": obj, "frame": frame}
    return None, {"reason": "only partly visible in the forward view"}


def _marked_seen_difficulty(why: dict[str, Any], tpl: dict[str, Any], ft: FactTable, view: Any) -> str:
    if "object" not in why:
        return "medium"
    return _sighting_difficulty(ft, why["object"], why["visible_pixels"], [why["frame"]], tpl)


def _marked_seen_candidates(ft: FactTable, view: Any, tpl: dict[str, Any]) -> list[Candidate]:
    out = []
    for frame in ft.views_with_role(["forward"]):
        for obj in ft.objects:
            answer, d = _marked_seen_derive(ft, None, {"object": obj, "frame": frame}, tpl)
            if answer is not None:
                out.append(Candidate({"object": obj, "frame": frame}, answer, 1.0, {"visible_pixels": d["visible_pixels"]}))
    return out


def _approach_difficulty(why: dict[str, Any], tpl: dict[str, Any], ft: FactTable, view: Any) -> str:
    change = abs(why["distance_last_m"] - why["distance_first_m"]) if "distance_first_m" in why else None
    return banded(change, 1.5, 0.7)


def _first_frames(tpl: dict[str, Any]) -> str:
    return "first_frame"  # first-seen, appearance order, frame matching and seen-along all read it


for _rule in (
    Rule("first_seen", _first_seen_candidates, _first_seen_derive, ("objects",), ("single_choice",), _first_frames),
    Rule("first_frame", _first_frame_candidates, _first_frame_derive, ("object", "window"), ("temporal_choice",),
         _first_frames, difficulty=_first_frame_difficulty),
    Rule("appearance_order", _appearance_order_candidates, _appearance_order_derive, ("objects",), ("ordered_list",),
         _first_frames, whole_order=True),
    Rule("seen_along", per_object(_seen_along_derive, values=lambda d: d["visible_pixels"]),
         _seen_along_derive, ("object",), ("yes_no",), _first_frames, difficulty=_seen_along_difficulty),
    Rule("frame_match", _frame_match_candidates, _frame_match_derive, ("objects",), ("matching",), _first_frames,
         whole_order=True),
    Rule("turn", _turn_candidates, _turn_derive, (), ("single_choice",), difficulty=by_turn("turn_degrees", 60, 30)),
    Rule("approach", per_object(_approach_derive, lambda d: abs(d["distance_last_m"] - d["distance_first_m"])),
         _approach_derive, ("object",), ("yes_no",), difficulty=_approach_difficulty),
    # A fact read off one named object once it is found is a glance, however small the object
    # stands: reviewers found lying dominoes and objects in trays 12-20 px across one-glance
    # (3aba003f, 4e75c678, 1fb1279e), rated by size or not.
    Rule("support", per_object(_support_derive), _support_derive, ("object",), ("single_choice", "yes_no"),
         difficulty=constant("easy")),
    Rule("state", per_object(_state_derive), _state_derive, ("object",), ("single_choice", "yes_no"),
         difficulty=constant("easy")),
    Rule("count_category", _count_category_candidates, _count_category_derive, ("category",),
         ("numeric", "interval_choice"), complete_labels=True, difficulty=by_count),
    Rule("select", _select_candidates, _select_derive, ("objects",), ("multiple_choice",),
         lambda t: t["answer_rule"]["of"], whole_order=True, difficulty=_select_difficulty, scene_fact=True),
    Rule("marked_seen", _marked_seen_candidates, _marked_seen_derive, ("object", "frame"), ("yes_no",),
         difficulty=_marked_seen_difficulty),
):
    register(_rule)
