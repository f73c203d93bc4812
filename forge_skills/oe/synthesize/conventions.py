"""Conventions an answer key relies on, and the sentences that state them to the model.

A key follows rules a reader must know to agree with it: what a count includes, how far the arm
reaches, what sets the scale of a metric answer, what "nearer" is measured from, that left and
right are as seen in the image, that "bigger" means covering more of the picture. An answer rule
names the conventions its key relies on (``Rule.conventions``); a template states each in one
sentence (``assumptions``), or takes its source's own statement (``source``: the descriptor's
``conventions``, e.g. what its scenes count as objects, which visible body gives the scale). Every
item shows those sentences as its instruction line. TPL-1 checks that a template states every
convention its rule relies on; OE-12 that every item's visible text carries each statement.

A source statement may need a static body in view to hold (``{text, body, min_pixels}``: "the
table top is 150 cm long" is a scale reference only where the table can be seen), and enough of
its corners (``corners``: world points, ``min_corners``) for a length to be read off it; an item
whose media do not show them cannot be made.
"""

from __future__ import annotations

import math
import string
from typing import Any

from forge_skills.oe.synthesize.camera import camera_of, project

CONVENTIONS: dict[str, str] = {
    "counted": "which things a count includes and which it leaves out",
    "reach": "how far the embodiment reaches, and from where",
    "scale": "a length to measure by: an object or body of stated size in view, a drawn scale bar, the camera height",
    "depth": "what nearer and farther are measured from",
    "image_sides": "that left, right, higher and lower are as seen in the image",
    "apparent_size": "that bigger means covering more of the picture, not being bigger in real life",
    "separation": "between which points a distance is measured",
}
FROM_SOURCE = "source"  # a template's assumption text that defers to the source's statement
FIELD_CONVENTIONS = {"median_depth": ("depth",), "center_x": ("image_sides",), "center_y": ("image_sides",),
                     "visible_pixels": ("apparent_size",)}


def of_field(tpl: dict[str, Any]) -> tuple[str, ...]:
    """The conventions of a rule that compares one measured field (depth, image position, area)."""
    return FIELD_CONVENTIONS.get(str(tpl["answer_rule"].get("field")), ())


def _values(tpl: dict[str, Any]) -> dict[str, Any]:
    """Placeholders a statement may use: the answer rule's parameters, metres also in centimetres."""
    values = {k: v for k, v in tpl["answer_rule"].items() if isinstance(v, (int, float, str))}
    values.update({f"{k[:-2]}_cm": round(float(v) * 100) for k, v in list(values.items())
                   if k.endswith("_m") and isinstance(v, (int, float))})
    return values


def template_problems(tpl: dict[str, Any], needed: tuple[str, ...]) -> list[str]:
    """What a template's assumptions leave unstated (of the conventions its rule relies on, see
    ``Rule.conventions``) or cannot fill."""
    declared = tpl.get("assumptions") or {}
    problems = [f"the key relies on the {c!r} convention ({CONVENTIONS.get(c, '?')}), which the template does "
                f"not state (assumptions: {{{c}: SENTENCE or {FROM_SOURCE}}})"
                for c in needed if c not in declared]
    problems += [f"assumption {c!r} is not a known convention ({sorted(CONVENTIONS)})"
                 for c in declared if c not in CONVENTIONS]
    values = _values(tpl)
    for c, text in declared.items():
        fields = {f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(text) if f}
        if text != FROM_SOURCE and not fields <= set(values):
            problems.append(f"assumption {c!r} uses {sorted(fields - set(values))}, which the answer rule does not "
                            f"give ({sorted(values)})")
    return problems


def statements(evidence: Any, tpl: dict[str, Any], shown: list[int]) -> tuple[list[str], str | None]:
    """(the sentences an item states, why it cannot be made): a source statement the source does
    not make, or whose body the shown views do not show clearly enough."""
    out: list[str] = []
    values = _values(tpl)
    for c, text in sorted((tpl.get("assumptions") or {}).items()):
        if text != FROM_SOURCE:
            out.append(text.format(**values))
            continue
        stated = (evidence.conventions or {}).get(c)
        if stated is None:
            return [], f"the source states no {c!r} convention ({CONVENTIONS.get(c, c)})"
        if isinstance(stated, str):
            out.append(stated.format(**_view_values(evidence, shown)))
            continue
        body, need = stated.get("body"), int(stated.get("min_pixels", 1))
        if body:
            views = {v.index: v for v in evidence.views}
            short = [v for v in shown if views[v].body_pixels.get(body, 0) < need]
            if short or not shown:
                return [], f"the {body} that sets the {c} is not clearly in view {short[:1] or shown}"
            # A length is read off a body between two of its corners: a view that shows a corner
            # of the table and two edges running out of the picture gives no scale.
            # A template measuring from a body it shows (the arm's base) may need fewer.
            corners = stated.get("corners")
            least = int((tpl.get("admission") or {}).get("scale_min_corners", stated.get("min_corners", 2)))
            seen = [sum(_in_image(views[v], p) for p in corners) for v in shown] if corners else []
            if seen and min(seen) < least:
                return [], (f"view {shown[seen.index(min(seen))]} shows {min(seen)} of the {body}'s corners, "
                            f"too few to measure the {c} by (needs {least})")
        out.append(stated["text"].format(**_view_values(evidence, shown)))
    return out, None


def _in_image(view: Any, point: list[float]) -> bool:
    """Whether a world point projects inside a calibrated view's picture (uncalibrated: unknown,
    taken as inside)."""
    camera = camera_of(view)
    if camera is None:
        return True
    uv = project(camera, point)
    return uv is not None and 0 <= uv[0] < view.width and 0 <= uv[1] < view.height


def _view_values(evidence: Any, shown: list[int]) -> dict[str, Any]:
    """Placeholders a source statement may use: the height of the (first shown) camera above the
    ground plane, in metres (one decimal) and centimetres, and its vertical field of view."""
    views = {v.index: v for v in evidence.views}
    first = views.get(shown[0]) if shown else None
    if first is None or first.camera_position is None:
        return {}
    z = float(first.camera_position[2])
    out = {"camera_height_m": f"{z:.1f}", "camera_height_cm": f"{z * 100:.0f}"}
    if first.intrinsics:  # with the height, the field of view lets a reader turn image rows into distances
        out["vertical_fov_deg"] = f"{math.degrees(2 * math.atan(first.height / (2 * first.intrinsics['fy']))):.0f}"
    return out


def instruction(texts: list[str]) -> str:
    return " ".join(t.strip() for t in texts if t.strip())
