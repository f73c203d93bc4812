"""Answer rules: how a template's answer follows from registered evidence.

Each rule enumerates admissible slot assignments for one view (or one scene) and, separately,
derives the answer from a given assignment. Contracts call :func:`derive` again on every
binding and item, so an answer that is not uniquely and reproducibly derivable from the
evidence never passes.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from forge_skills.oe.types import EvidenceRecord, ObjectViewFact
from forge_skills.synthesize.camera import camera_of, project
from forge_skills.synthesize.conventions import of_field
from forge_skills.synthesize.difficulty import (by_absent_lookalikes, by_contrast, by_count, by_count_beside, by_field,
                                                by_grounding, by_image_ratio, by_reach, by_turn, by_view_ratio, confusers, constant)

FIELDS = ("center_x", "center_y", "median_depth", "visible_pixels")


@dataclass
class Candidate:
    slots: dict[str, Any]
    answer: str
    margin: float
    values: dict[str, Any] = field(default_factory=dict)
    # The derivation that found it, where its rule derived it to find it: rating and binding
    # read it instead of deriving the candidate again.
    why: dict[str, Any] | None = field(default=None, compare=False, repr=False)


class FactTable:
    """Evidence facts indexed by (object, view)."""

    def __init__(self, evidence: EvidenceRecord) -> None:
        self.evidence = evidence
        self.facts: dict[tuple[str, int], ObjectViewFact] = {(f.object, f.view): f for f in evidence.facts}
        self.objects = [o.name for o in evidence.objects]
        self.referents = [o.name for o in evidence.objects if o.referable]
        self._objects = {o.name: o for o in evidence.objects}
        self.views = [v.index for v in evidence.views]
        # Derivations ask for the same centres and camera matrices again and again (every
        # triple of objects in a view): each is computed once per table.
        self._centers: dict[str, np.ndarray] = {}
        self._views: dict[int, Any] | None = None
        self._cameras: dict[int, tuple[np.ndarray, dict[str, float]] | None] = {}
        self._feet: dict[tuple[str, float, int], tuple[float, float] | None] = {}

    def center_3d(self, name: str) -> np.ndarray:
        """Centre of an object's 3D box."""
        c = self._centers.get(name)
        if c is None:
            o = self._objects[name]
            c = self._centers[name] = (np.array(o.box_3d_min) + np.array(o.box_3d_max)) / 2.0
        return c

    def fact(self, obj: str, view: int) -> ObjectViewFact:
        try:
            return self.facts[(obj, view)]
        except KeyError:
            raise KeyError(f"no registered fact for object {obj!r} in view {view}") from None

    def value(self, obj: str, view: int, name: str) -> float | None:
        f = self.fact(obj, view)
        if name == "visible_pixels":
            return float(f.visible_pixels)
        if name == "median_depth":
            return f.median_depth
        if f.center_2d is None:
            return None
        return f.center_2d[0] if name == "center_x" else f.center_2d[1]

    def object(self, name: str):
        return self._objects[name]

    def category(self, name: str) -> str:
        return self._objects[name].category

    def visible(self, view: int, min_pixels: int) -> list[str]:
        """Objects clearly visible in the view whose labels (for real images) pass quality admission."""
        return [o for o in self.objects if self.fact(o, view).visible_pixels >= min_pixels and self.label_ok(o)]

    def label_ok(self, name: str) -> bool:
        return bool(self._objects[name].attributes.get("label_ok", True))

    def makes_out(self, obj: str, view: int, border: bool = True) -> str | None:
        """Why a person could not make out ``obj`` in ``view`` by the source's referent rules (too
        small for its category, mostly hidden, cut off by the border, lost against what surrounds
        it), or None. A source without rules, or a fact it did not measure, sets no limit. The
        border's cut is measured on the object's own projection where the source rendered it
        alone, else on its projected 3D box; ``border=False`` leaves it out (a count states that
        objects the border cuts count too)."""
        rules = self.evidence.referent_rules
        if not rules:
            return None
        f = self.fact(obj, view)
        sizes = rules.get("min_pixels") or {}
        need = int(sizes.get(self.category(obj), sizes.get("default", 0)))
        if f.visible_pixels < need:
            return f"{obj} shows {f.visible_pixels} px in view {view}; a {self.category(obj)} needs {need} to be recognised"
        cut = rules.get("max_truncation")
        outside = f.border_share if f.border_share is not None else f.truncation
        if border and cut is not None and outside is not None and outside > float(cut):
            return f"{obj} is {outside:.0%} outside view {view} (a referent at most {float(cut):.0%})"
        share = rules.get("min_visible_share")
        if share is not None and f.visible_share is not None and f.visible_share < float(share):
            return f"only {f.visible_share:.0%} of {obj} shows in view {view} (needs {float(share):.0%})"
        contrast = rules.get("min_contrast")
        if contrast is not None and f.contrast is not None and f.contrast < float(contrast):
            return f"{obj} stands out from its surroundings by {f.contrast:.0f} (CIELAB) in view {view} " \
                   f"(needs {float(contrast):.0f})"
        return None

    def camera(self, view: int) -> tuple[np.ndarray, dict[str, float]] | None:
        """(world-to-camera 4x4 matrix, intrinsics fx fy cx cy) of a calibrated view, or None:
        what a rule asking for depth, pose or a focal length reads."""
        if view not in self._cameras:
            self._cameras[view] = camera_of(self.view(view))
        return self._cameras[view]

    def project(self, point: Any, view: int) -> tuple[float, float] | None:
        """Pixel (u, v) of a world point in a calibrated view; None when the view has no camera
        geometry or the point is behind the camera."""
        camera = self.camera(view)
        return None if camera is None else project(camera, point)

    def foot(self, name: str, z: float, view: int) -> tuple[float, float] | None:
        """Pixel where the object's vertical centre line meets height ``z`` (a resting height):
        comparisons of where objects stand ask it of every pair and triple, so once each."""
        key = (name, z, view)
        if key not in self._feet:
            lo, hi = self._objects[name].box_3d_min, self._objects[name].box_3d_max
            self._feet[key] = self.project([(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, z], view)
        return self._feet[key]

    def clear(self, obj: str, view: int, min_pixels: float, border: bool = True) -> bool:
        """Clearly seen: at least ``min_pixels`` and made out by the source's referent rules."""
        return self.fact(obj, view).visible_pixels >= min_pixels and self.makes_out(obj, view, border) is None

    def frames(self) -> list[int]:
        """Views that are moments of a trajectory, in time order (overviews excluded)."""
        timed = [v for v in self.evidence.views if v.time is not None and v.role != "overview"]
        return [v.index for v in sorted(timed, key=lambda v: (v.time, v.index))]

    def view(self, index: int):
        if self._views is None:
            self._views = {v.index: v for v in self.evidence.views}
        return self._views[index]

    def views_with_role(self, roles: list[str] | None) -> list[int]:
        return [v.index for v in self.evidence.views if roles is None or v.role in roles]


Derivation = tuple[str | None, dict[str, Any]]

# What a person sees of a comparison, beside its metric margin: a depth gap shows as the nearer
# object standing lower in the image (height in the visual field, a share of the image height),
# a size difference as an area ratio.
MIN_DEPTH_CUE = 0.04
MIN_AREA_RATIO = 1.3
MIN_EDGE_GAP = 4.0  # pixels between like edges of two objects ordered by position in the image


def depth_cue(ft: FactTable, view: int, near: str, far: str) -> float | None:
    """How far below the farther object the nearer one stands in the image, as a share of the
    image height: the rows where each one's vertical line meets the lower of their two resting
    heights (on a common floor or table top, the nearer is the lower). None in an uncalibrated view."""
    a, b = ft.object(near), ft.object(far)
    if a.box_3d_min is None or b.box_3d_min is None or a.box_3d_max is None or b.box_3d_max is None:
        return None
    z = min(a.box_3d_min[2], b.box_3d_min[2])
    foot = [ft.foot(n, z, view) for n in (near, far)]
    if foot[0] is None or foot[1] is None:
        return None
    return (foot[0][1] - foot[1][1]) / ft.view(view).height


def held_problem(ft: FactTable, names: list[str]) -> str | None:
    """Why distances cannot be compared among ``names``: one is held up in the gripper. Lifted off
    the table it has no resting place to read its distance by; a person sees only its size and
    height, which mislead (a268df40)."""
    held = (ft.evidence.gripper or {}).get("holding")
    if held in names:
        return f"the {held} is held up in the gripper: nothing in the picture shows how far it is"
    return None


def image_margin(ft: FactTable, view: int, field: str, low: str, high: str, tpl: dict[str, Any]
                 ) -> tuple[float | None, str | None]:
    """(the margin a person sees, why it is too small) between two objects whose ``field`` values
    are ordered low < high: for depth the nearer one's drop below the farther in the image, for
    area the ratio of the larger to the smaller, for an image position the smaller gap between
    their like edges (left edges and right edges, or top and bottom)."""
    if field == "median_depth":
        if (why := held_problem(ft, [low, high])) is not None:
            return None, why
        cue = depth_cue(ft, view, low, high)
        need = _adm(tpl, "min_depth_cue", MIN_DEPTH_CUE)
        if cue is not None and cue < need:
            return cue, f"the nearer {low} stands {cue:.1%} of the image below the {high} (needs {need:.0%})"
        return cue, None
    if field == "visible_pixels":
        small, large = ft.value(low, view, field), ft.value(high, view, field)
        ratio = large / max(small, 1.0)
        need = _adm(tpl, "min_area_ratio", MIN_AREA_RATIO)
        return ratio, (None if ratio >= need else f"area ratio {ratio:.2f} below {need:.2f}")
    if field in ("center_x", "center_y"):
        # A person may judge "further left" by an object's centre or by its edge: both edges
        # must agree with the centres, or a large object whose edge reaches past a small one's
        # is the other answer.
        a, b = ft.fact(low, view).bbox_2d, ft.fact(high, view).bbox_2d
        if a is None or b is None:
            return None, None
        axis = 0 if field == "center_x" else 1
        gap = float(min(b[axis] - a[axis], b[axis + 2] - a[axis + 2]))
        need = _adm(tpl, "min_edge_gap", MIN_EDGE_GAP)
        if gap < need:
            return gap, (f"by their edges the {low} and the {high} are not clearly apart "
                         f"({gap:.0f} px, needs {need:.0f})")
        return gap, None
    return None, None


def _adm(tpl: dict[str, Any], key: str, default: float) -> float:
    return float(tpl["admission"].get(key, default))


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


def separated_pairs(ft: FactTable, view: int, names: list[str], min_px: float,
                    value_field: str | None = None, min_margin: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Ordered index pairs (row-major, as itertools.permutations yields them) of objects with
    clear labels whose centres are at least ``min_px`` apart and, given a field, whose values
    differ by at least ``min_margin``; and which of them are near a threshold. Pairs outside are
    certain to fail; pairs near a threshold need the exact derivation."""
    if len(names) < 2:
        return np.zeros((0, 2), dtype=int), np.zeros(0, dtype=bool)
    centers = [ft.fact(o, view).center_2d for o in names]
    ok = np.array([c is not None and ft.label_ok(o) for o, c in zip(names, centers)])
    xy = np.array([c if c is not None else (np.nan, np.nan) for c in centers], dtype=float)
    gap = np.hypot(xy[:, None, 0] - xy[None, :, 0], xy[:, None, 1] - xy[None, :, 1])
    keep = ok[:, None] & ok[None, :] & (gap >= min_px - 1e-6)
    near = gap < min_px + 1e-6
    if value_field is not None:
        vals = np.array([np.nan if (v := ft.value(o, view, value_field)) is None else v for o in names], dtype=float)
        diff = np.abs(vals[:, None] - vals[None, :])
        keep &= diff >= min_margin - 1e-9
        near |= diff < min_margin + 1e-9
    np.fill_diagonal(keep, False)
    pairs = np.argwhere(keep)
    return pairs, near[pairs[:, 0], pairs[:, 1]]


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



def per_object(derive: Callable[..., Derivation], margin: Callable[[dict[str, Any]], float] = lambda d: 1.0,
               values: Callable[[dict[str, Any]], Any] = lambda d: d) -> Callable[..., list[Candidate]]:
    """Candidates of a rule with one object slot: every object whose derivation admits an answer."""
    def candidates(ft: FactTable, view: Any, tpl: dict[str, Any]) -> list[Candidate]:
        out = []
        for obj in ft.objects:
            answer, d = derive(ft, view, {"object": obj}, tpl)
            if answer is not None:
                out.append(Candidate({"object": obj}, answer, float(margin(d)), values(d), d))
        return out
    return candidates


def _view_label(ft: FactTable, view: int) -> str:
    return f"View {ft.views.index(view) + 1}"


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


def _count_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
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


def _count_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    answer, d = _count_derive(ft, view, {}, tpl)
    return [Candidate({}, answer, float(d["count"]), d["visible_pixels"])] if answer is not None else []


def _count_beside_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
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


def _count_beside_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    out = []
    for anchor in ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1))):
        answer, d = _count_beside_derive(ft, view, {"anchor": anchor}, tpl)
        if answer is not None:
            out.append(Candidate({"anchor": anchor}, answer, d["margin"], d["offsets_px"], d))
    return out


def _order_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
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


def _order_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    count = int(tpl["slots"]["objects"].get("count", 3))
    visible = ft.visible(view, int(_adm(tpl, "min_visible_pixels", 1)))
    out = []
    for combo in itertools.combinations(visible, count):
        answer, d = _order_derive(ft, view, {"objects": list(combo)}, tpl)
        if answer is not None:
            out.append(Candidate({"objects": list(combo)}, answer, d["margin"], d["values"], d))
    return out


def _visible_set_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    min_vis = _adm(tpl, "min_visible_pixels", 1)
    px = {n: ft.fact(n, view).visible_pixels for n in slots["objects"]}
    if any(p > 0 and not ft.clear(n, view, min_vis) for n, p in px.items()):
        return None, {"reason": "an option is seen but not clearly"}
    seen = sorted(n for n, p in px.items() if p >= min_vis)
    if not seen or len(seen) == len(px):
        return None, {"reason": "needs both visible and absent options"}
    return ", ".join(seen), {"visible_pixels": px}


def _visible_set_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    count = int(tpl["slots"]["objects"].get("count", 4))
    out = []
    for combo in itertools.combinations(ft.objects, count):
        answer, d = _visible_set_derive(ft, view, {"objects": list(combo)}, tpl)
        if answer is not None:
            out.append(Candidate({"objects": list(combo)}, answer, 0.0, d["visible_pixels"]))
    return out


def _center_of(ft: FactTable, name: str):
    return ft.center_3d(name)


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


MIN_IMAGE_RATIO = 1.25  # the second nearest at least this much further from the anchor in the image


def image_separations(ft: FactTable, view: int, anchor: str, names: list[str]) -> dict[str, float] | None:
    """Image distance (pixels) from the anchor to each object, between the points where their
    vertical lines meet the lowest resting height among them; None in an uncalibrated view."""
    objs = [ft.object(n) for n in [anchor, *names]]
    if any(o.box_3d_min is None or o.box_3d_max is None for o in objs):
        return None
    z = min(o.box_3d_min[2] for o in objs)
    feet = [ft.foot(n, z, view) for n in [anchor, *names]]
    if any(f is None for f in feet):
        return None
    return {n: float(np.hypot(f[0] - feet[0][0], f[1] - feet[0][1])) for n, f in zip(names, feet[1:])}


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


RULES: dict[str, Rule] = {
    r.name: r for r in (
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
        Rule("count", _count_candidates, _count_derive, (), ("numeric", "interval_choice"), complete_labels=True,
             conventions=("counted",), difficulty=by_count),
        Rule("count_beside", _count_beside_candidates, _count_beside_derive, ("anchor",), ("numeric",),
             lambda t: f"count_beside:{t['answer_rule'].get('side', 'left')}", complete_labels=True,
             conventions=("counted", "image_sides"), difficulty=by_count_beside),
        Rule("order", _order_candidates, _order_derive, ("objects",), ("ordered_list",), _field, whole_order=True,
             conventions=of_field, difficulty=by_field),
        Rule("visible_set", _visible_set_candidates, _visible_set_derive, ("objects",), ("multiple_choice",),
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
}


def register(rule: Rule, origin: str | None = None) -> Rule:
    """Register an answer rule as ``answer_rule:<name>`` (a name taken by another rule is an
    error naming both origins)."""
    import inspect

    from forge import registry

    if origin is None:
        caller = inspect.currentframe().f_back
        origin = caller.f_globals.get("__name__", "?") if caller else "?"
    registry.register("answer_rule", rule.name, rule, origin)
    RULES[rule.name] = rule
    return rule


def rule_for(template: dict[str, Any]) -> Rule:
    name = template["answer_rule"].get("rule")
    if name not in RULES:
        from forge.registry import entries

        RULES.update(entries("answer_rule"))  # rules of plugins loaded since
    if name not in RULES:
        raise KeyError(f"template {template.get('id')!r}: unknown answer rule {name!r}; known: {sorted(RULES)}")
    rule = RULES[name]
    return rule.for_template(template) if rule.for_template is not None else rule


for _rule in list(RULES.values()):
    register(_rule, __name__)


