"""Answer rules on the drawers and doors of fixtures (a cabinet's top drawer, a microwave's door):
whether one stands open, from the state its source read off the joint.

Only a part whose state is clearly open or closed is asked, from a view that shows enough of it
and stands on the side it opens toward: from behind or beside a cabinet, a shut drawer and a pulled
one look alike.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from forge_skills.oe.synthesize.answer_rules import Rule, register
from forge_skills.oe.synthesize.fact_table import Candidate, FactTable
from forge_skills.oe.synthesize.rule_margins import Derivation, _adm

FACING_EASY_DEG = 35.0  # a camera this square to the front shows the part plainly


def facing_deg(camera: list[float] | None, part: dict[str, Any]) -> float | None:
    """Horizontal angle between the part's opening direction and the direction from the part to the
    camera (0: the camera looks straight at its front)."""
    if camera is None:
        return None
    to_cam = np.array(camera[:2], dtype=float) - np.array(part["position"][:2], dtype=float)
    norm = float(np.linalg.norm(to_cam))
    if norm < 1e-6:
        return None
    cos = float(np.dot(to_cam / norm, np.array(part["opens_toward"][:2], dtype=float)))
    return math.degrees(math.acos(max(-1.0, min(1.0, cos))))


def _part_open_derive(ft: FactTable, view: int, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    label = slots["part"]
    part = ft.evidence.parts.get(label)
    if part is None:
        return None, {"reason": f"the scene has no {label}"}
    if part.get("state") not in ("open", "closed"):
        return None, {"reason": f"the {label} is {part.get('state') or 'in no known state'}: neither clearly open nor closed"}
    px = ft.view(view).body_pixels.get(label, 0)
    need = int(_adm(tpl, "min_part_pixels", 1))
    if px < need:
        return None, {"reason": f"the {label} shows {px} px (needs {need})"}
    angle = facing_deg(ft.view(view).camera_position, part)
    limit = _adm(tpl, "max_facing_deg", 70.0)
    if angle is None or angle > limit:
        return None, {"reason": f"the view sees the {label} from {angle if angle is None else round(angle)} degrees "
                                f"off its front (at most {limit:.0f})"}
    return ("yes" if part["state"] == "open" else "no"), {"state": part["state"], "pixels": px,
                                                         "facing_deg": round(angle, 1)}


def _part_open_candidates(ft: FactTable, view: int, tpl: dict[str, Any]) -> list[Candidate]:
    out = []
    for label in sorted(ft.evidence.parts):
        answer, d = _part_open_derive(ft, view, {"part": label}, tpl)
        if answer is not None:
            out.append(Candidate({"part": label}, answer, float(d["pixels"]), d, d))
    return out


def _facing_band(why: dict[str, Any], tpl: dict[str, Any], ft: Any, view: Any) -> str:
    return "easy" if why.get("facing_deg", 90.0) <= FACING_EASY_DEG else "medium"


register(Rule("part_open", _part_open_candidates, _part_open_derive, ("part",), ("yes_no",), difficulty=_facing_band))
