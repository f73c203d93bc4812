"""Independent re-derivation of the fixture rules from a source record: the part's pixels counted
again in the raw segmentation by its segmentation value, its state and facing read from the
record's parts and the view's camera position."""

from __future__ import annotations

from forge.registry import register
from forge_skills.oe.synthesize.rules_fixtures import facing_deg


def part_open(template, slots, view, source, arrays):
    adm = template["admission"]
    part = (source.get("parts") or {}).get(slots["part"])
    if part is None or part.get("state") not in ("open", "closed"):
        return None
    if int((arrays[f"seg_{view}"] == part["segment"]).sum()) < adm.get("min_part_pixels", 1):
        return None
    camera = next(v for v in source["views"] if v["index"] == view)["camera_position"]
    angle = facing_deg(camera, part)
    if angle is None or angle > adm.get("max_facing_deg", 70.0):
        return None
    return "yes" if part["state"] == "open" else "no"


register("rule_reverifier", "part_open", part_open)
