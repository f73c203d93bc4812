"""Capability ``planar_position`` and question type ``coordinate_pair``: where an object's centre
lies in the image, answered as x and y in percent of the image width and height (from the
top-left corner), scored by relative error."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from forge_skills.oe.types import OEItem
from forge.vocabulary import Capability, QuestionType
from forge_skills.oe.synthesize.answer_rules import Rule, register
from forge_skills.oe.synthesize.rule_margins import per_object
from forge_skills.oe.synthesize.fact_table import FactTable

CAPABILITY = Capability("planar_position", "where an object lies in the image, as coordinates",
                        ("image coordinates", "pixel position*", "where exactly", "coordinates of"))


def percent_position(cx: float, cy: float, width: int, height: int, margin: float) -> tuple[str | None, float]:
    """``"x, y"`` in whole percent, or None when a coordinate lies within ``margin`` of a
    rounding boundary (the answer would hang on how the centre is measured)."""
    x, y = 100.0 * cx / width, 100.0 * cy / height
    closest = min(abs((v % 1.0) - 0.5) for v in (x, y))
    if closest < margin:
        return None, closest
    return f"{math.floor(x + 0.5)}, {math.floor(y + 0.5)}", closest


def _position_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]):
    adm = tpl["admission"]
    fact = ft.fact(slots["object"], view)
    if fact.visible_pixels < adm.get("min_visible_pixels", 1) or fact.center_2d is None:
        return None, {"reason": f"{slots['object']} is not clearly visible"}
    if not ft.object(slots["object"]).referable:
        return None, {"reason": f"{slots['object']} may not be named"}
    v = ft.view(view)
    answer, margin = percent_position(fact.center_2d[0], fact.center_2d[1], v.width, v.height,
                                      float(adm.get("rounding_margin", 0.05)))
    if answer is None:
        return None, {"reason": "a coordinate lies on a rounding boundary"}
    return answer, {"center_2d": fact.center_2d, "margin": margin}


register(Rule("image_position", per_object(_position_derive, lambda d: d["margin"], lambda d: {"center_2d": d["center_2d"]}),
              _position_derive, ("object",), ("coordinate_pair",), lambda t: "position"))


def reverify_position(template: dict[str, Any], slots: dict[str, Any], view: int | None, source: dict[str, Any],
                      arrays: dict[str, np.ndarray]) -> str | None:
    """The answer recomputed from the raw segmentation (not from the registered evidence)."""
    body = next(o["body"] for o in source["objects"] if o["name"] == slots["object"])
    mask = arrays[f"seg_{view}"] == body
    if int(mask.sum()) < template["admission"].get("min_visible_pixels", 1):
        return None
    ys, xs = np.nonzero(mask)
    v = next(v for v in source["views"] if v["index"] == view)
    answer, _ = percent_position(float(xs.mean()), float(ys.mean()), v["width"], v["height"],
                                 float(template["admission"].get("rounding_margin", 0.05)) / 2)
    return answer


def _numbers(text: str) -> list[float]:
    return [float(p) for p in text.split(",")]


def mean_position(items: list[tuple[str, OEItem]]) -> dict[str, Any]:
    """Blind solver: the mean answer of the other fold (items split in two by id), whatever the
    question asks about."""
    out: dict[str, Any] = {}
    for fold in (0, 1):
        train = [_numbers(it.answer) for iid, it in items
                 if it.question_type == "coordinate_pair" and int(iid[:8], 16) % 2 != fold]
        if not train:
            continue
        mean = [sum(c) / len(train) for c in zip(*train)]
        for iid, it in items:
            if it.question_type == "coordinate_pair" and int(iid[:8], 16) % 2 == fold:
                out[iid] = ", ".join(f"{m:.0f}" for m in mean)
    return out


def _wrong(item: OEItem) -> list[str]:
    x, y = _numbers(item.answer)
    return [f"{x + 30:g}, {y + 30:g}", f"{x:g}, {y + 45:g}", f"{x:g}"]


QUESTION_TYPE = QuestionType(
    "coordinate_pair", "two numbers: where a point lies in the image, as x and y", "value", "relative_error",
    ("none",), "Answer with two numbers, x then y, separated by a comma.",
    solvers={"mean_position": mean_position}, gold_response=lambda item: item.answer, wrong_responses=_wrong,
    guess=lambda item, rng: f"{rng.randint(0, 100)}, {rng.randint(0, 100)}", metrics=("relative_error",))
