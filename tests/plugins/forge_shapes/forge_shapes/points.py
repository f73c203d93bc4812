"""Points on shapes: two question types that use the platform's per-view camera, drawn markers
and hidden payloads.

- ``point_on_object``: "give a point that lies on the red disc" (x, y in percent of the image).
  Any point inside the shape is right, so the key ships the shape's outline as a hidden
  ``payload`` (a polygon projected through the view's camera) and the ``inside_region`` protocol
  scores a reply by it; the key's own answer is the centre.
- ``marked_point_choice``: three numbered points are drawn on the canvas (``point`` markers the
  rule draws itself); which one lies on the named shape?
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from forge.keys import digest
from forge.vocabulary import QuestionType
from forge_skills.oe.synthesize.answer_rules import Rule, register
from forge_skills.oe.synthesize.rule_margins import per_object
from forge_skills.oe.synthesize.fact_table import Candidate, FactTable
from forge_shapes.position import percent_position
# The rule places points by the test its protocol scores replies with.
from forge_shapes.protocols.inside_region import inside

LABELS = ("1", "2", "3")
DISC_SIDES = 24


def outline(ft: FactTable, obj: str, view: int) -> list[tuple[float, float]] | None:
    """The shape's outline in pixels, projected from its box on the plane through the view's
    camera (a disc as a 24-gon, a square by its corners); None without camera geometry."""
    if ft.camera(view) is None:
        return None
    o = ft.object(obj)
    (x0, y0, _), (x1, y1, z) = o.box_3d_min, o.box_3d_max
    cx, cy, r = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2
    if o.category == "disc":
        corners = [(cx + r * math.cos(2 * math.pi * k / DISC_SIDES), cy + r * math.sin(2 * math.pi * k / DISC_SIDES))
                   for k in range(DISC_SIDES)]
    else:
        corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
    pixels = [ft.project([x, y, z], view) for x, y in corners]
    return None if any(p is None for p in pixels) else [(float(u), float(v)) for u, v in pixels]


# -- a point on the shape: the hidden region --------------------------------------------------


def _on_object_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]):
    adm = tpl["admission"]
    obj = slots["object"]
    fact = ft.fact(obj, view)
    if fact.visible_pixels < adm.get("min_visible_pixels", 1) or fact.center_2d is None:
        return None, {"reason": f"{obj} is not clearly visible"}
    if not ft.object(obj).referable:
        return None, {"reason": f"{obj} may not be named"}
    shape = outline(ft, obj, view)
    if shape is None:
        return None, {"reason": "the view has no camera to project the shape's outline"}
    v = ft.view(view)
    answer, margin = percent_position(fact.center_2d[0], fact.center_2d[1], v.width, v.height,
                                      float(adm.get("rounding_margin", 0.05)))
    if answer is None:
        return None, {"reason": "a coordinate of the centre lies on a rounding boundary"}
    region = [round(c, 3) for u, w in shape for c in (100.0 * u / v.width, 100.0 * w / v.height)]
    return answer, {"margin": margin, "payload": {"polygon": region}}


def reverify_on_object(template: dict[str, Any], slots: dict[str, Any], view: int | None, source: dict[str, Any],
                       arrays: dict[str, np.ndarray]) -> tuple[str | None, dict[str, Any]]:
    """The centre and the shape's region measured from the raw segmentation: the region is the
    convex hull of the shape's pixels, in percent of the image."""
    body = next(o["body"] for o in source["objects"] if o["name"] == slots["object"])
    mask = arrays[f"seg_{view}"] == body
    if int(mask.sum()) < template["admission"].get("min_visible_pixels", 1):
        return None, {}
    ys, xs = np.nonzero(mask)
    v = next(v for v in source["views"] if v["index"] == view)
    answer, _ = percent_position(float(xs.mean()), float(ys.mean()), v["width"], v["height"],
                                 float(template["admission"].get("rounding_margin", 0.05)) / 2)
    corners = {(float(x + dx), float(y + dy)) for x, y in zip(xs, ys) for dx in (0, 1) for dy in (0, 1)}
    hull = _hull(sorted(corners))
    return answer, {"polygon": [c for u, w in hull for c in (100.0 * u / v["width"], 100.0 * w / v["height"])]}


def _hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Convex hull (monotone chain) of points sorted by x then y."""
    def half(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
        out: list[tuple[float, float]] = []
        for p in pts:
            while len(out) >= 2 and ((out[-1][0] - out[-2][0]) * (p[1] - out[-2][1])
                                     - (out[-1][1] - out[-2][1]) * (p[0] - out[-2][0])) <= 0:
                out.pop()
            out.append(p)
        return out
    lower, upper = half(points), half(points[::-1])
    return lower[:-1] + upper[:-1]


register(Rule("point_on_shape", per_object(_on_object_derive, lambda d: d["margin"], lambda d: {"margin": d["margin"]}),
              _on_object_derive, ("object",), ("point_on_object",), lambda t: "position"))


# -- which numbered point lies on the shape: markers the rule draws -------------------------------


def _numbered_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    out = []
    for obj in ft.objects:
        slots = _place_points(ft, view, obj, tpl)
        if slots is None:
            continue
        answer, why = _numbered_derive(ft, view, slots, tpl)
        if answer is not None:
            out.append(Candidate(slots, answer, 1.0, {"points": slots["points"]}, why))
    return out


def _place_points(ft: FactTable, view: int, obj: str, tpl: dict[str, Any]) -> dict[str, Any] | None:
    """One point at the shape's centre and two on the bare canvas, at least ``clearance`` pixels
    from every shape's box and from each other; which label the shape's point takes turns by a
    hash of the scene and the shape."""
    fact = ft.fact(obj, view)
    if fact.center_2d is None or fact.visible_pixels < tpl["admission"].get("min_visible_pixels", 1):
        return None
    v = ft.view(view)
    clearance = float(tpl["admission"].get("clearance_px", 12))
    boxes = [ft.fact(o, view).bbox_2d for o in ft.objects if ft.fact(o, view).bbox_2d]
    rng = np.random.default_rng(int(digest(ft.evidence.scene_index, view, obj, length=12), 16))
    points = [[round(fact.center_2d[0], 1), round(fact.center_2d[1], 1)]]
    for _ in range(400):
        if len(points) == len(LABELS):
            break
        u, w = rng.uniform(clearance, v.width - clearance), rng.uniform(clearance, v.height - clearance)
        if any(x0 - clearance <= u <= x1 + clearance and y0 - clearance <= w <= y1 + clearance for x0, y0, x1, y1 in boxes):
            continue
        if any(math.hypot(u - p[0], w - p[1]) < 3 * clearance for p in points):
            continue
        points.append([round(u, 1), round(w, 1)])
    if len(points) < len(LABELS):
        return None
    turn = int(rng.integers(len(LABELS)))
    return {"object": obj, "points": points[-turn:] + points[:-turn] if turn else points}


def _numbered_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]):
    obj = slots["object"]
    if not ft.object(obj).referable:
        return None, {"reason": f"{obj} may not be named"}
    shape = outline(ft, obj, view)
    if shape is None:
        return None, {"reason": "the view has no camera to project the shape's outline"}
    on = [k for k, (u, w) in enumerate(slots["points"]) if inside(shape, u, w)]
    if len(on) != 1:
        return None, {"reason": f"{len(on)} of the points lie on {obj}"}
    markers = [{"style": "point", "label": LABELS[k], "at": p} for k, p in enumerate(slots["points"])]
    return LABELS[on[0]], {"markers": markers, "margin": 1.0}


def reverify_numbered(template: dict[str, Any], slots: dict[str, Any], view: int | None, source: dict[str, Any],
                      arrays: dict[str, np.ndarray]) -> str | None:
    """The label of the point whose pixel the shape covers in the raw segmentation."""
    body = next(o["body"] for o in source["objects"] if o["name"] == slots["object"])
    seg = arrays[f"seg_{view}"]
    on = [k for k, (u, w) in enumerate(slots["points"]) if seg[int(w), int(u)] == body]
    return LABELS[on[0]] if len(on) == 1 else None


register(Rule("numbered_point", _numbered_candidates, _numbered_derive, ("object", "points"), ("marked_point_choice",),
              lambda t: "position"))


# -- question types ---------------------------------------------------------------------------


def _pair(text: str) -> tuple[float, float]:
    x, y = (float(v) for v in text.split(","))
    return x, y


def _outside(item: Any) -> list[str]:
    """Replies off the shape: the centre pushed past the region's far side, and junk."""
    polygon = item.payload["polygon"]
    x, y = _pair(item.answer)
    far = max(abs(px - x) for px in polygon[0::2]) + 10
    return [f"{min(100.0, x + far):g}, {y:g}" if x + far <= 100 else f"{max(0.0, x - far):g}, {y:g}", f"{x:g}"]


POINT_ON_OBJECT = QuestionType(
    "point_on_object", "two numbers: a point that lies on a named object, as x and y in percent", "value",
    "inside_region", ("none",), "Answer with two numbers, x then y, separated by a comma.",
    gold_response=lambda item: item.answer, wrong_responses=_outside,
    guess=lambda item, rng: f"{rng.randint(0, 100)}, {rng.randint(0, 100)}", metrics=("distance_to_region",))

MARKED_POINT_CHOICE = QuestionType(
    "marked_point_choice", "choose among numbered points drawn on the image", "option", "exact_choice", ("labels",),
    "Answer with the number of the point.", True, gold_response=lambda item: item.answer,
    wrong_responses=lambda item: [o for o in item.options if o != item.answer])
