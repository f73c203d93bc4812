"""Independent re-derivation of the manipulation rules (``rule_reverifier:<rule>``) from a source
record as the simulator wrote it: pixels counted again in the raw segmentation, contacts,
supports, hinge angles, the gripper and a clip's timeline read from the record, never from the
evidence the item was made from. Objects are looked up by the names their pixels give them;
the record's own fields use the source's names, mapped here."""

from __future__ import annotations

from typing import Any

import numpy as np

from forge.registry import register


def _px(arrays: dict[str, np.ndarray], body: int, view: int) -> int:
    return int((arrays[f"seg_{view}"] == body).sum())


def _objects(source: dict[str, Any]) -> tuple[dict[str, dict], dict[str, str]]:
    """Objects by shown name, and source name -> shown name."""
    by_name = {o["name"]: o for o in source["objects"]}
    return by_name, {o.get("source_name", o["name"]): o["name"] for o in source["objects"]}


def _gap_cm(a: dict, b: dict) -> float:
    """The largest separation of two objects' 3D boxes along any axis, in centimetres."""
    lo_a, hi_a = np.array(a["aabb_min"]), np.array(a["aabb_max"])
    lo_b, hi_b = np.array(b["aabb_min"]), np.array(b["aabb_max"])
    return float(np.max(np.maximum(lo_b - hi_a, lo_a - hi_b))) * 100.0


def _gripper_px(source: dict[str, Any], view: int) -> int:
    return next(v for v in source["views"] if v["index"] == view)["body_pixels"].get("gripper", 0)


def _visible_pair(template, slots, view, source, arrays):
    """The pair's records and display names, or None when either shows too few pixels."""
    objs, shown = _objects(source)
    a, b = objs[slots["a"]], objs[slots["b"]]
    if any(_px(arrays, o["body"], view) < template["admission"].get("min_visible_pixels", 1) for o in (a, b)):
        return None
    return a, b, shown


def touching(template, slots, view, source, arrays):
    adm = template["admission"]
    pair = _visible_pair(template, slots, view, source, arrays)
    if pair is None:
        return None
    a, b, shown = pair
    if shown.get(b.get("source_name")) in [shown.get(t) for t in a.get("touching", [])] or \
            shown.get(a.get("source_name")) in [shown.get(t) for t in b.get("touching", [])]:
        return "yes"
    return "no" if _gap_cm(a, b) >= adm.get("min_gap_cm", 0.0) else None


def stacked(template, slots, view, source, arrays):
    adm = template["admission"]
    pair = _visible_pair(template, slots, view, source, arrays)
    if pair is None:
        return None
    a, b, shown = pair
    if shown.get(a.get("support")) == b["name"]:
        return "yes"
    kind = source.get("bodies", {}).get(a.get("support"))
    return "no" if kind in ("table", "bin") and _gap_cm(a, b) >= adm.get("min_gap_cm", 0.0) else None


def gripper_closed(template, slots, view, source, arrays):
    grip = source.get("gripper")
    if grip is None or _gripper_px(source, view) < template["admission"].get("min_gripper_pixels", 1):
        return None
    if grip.get("state") == "open" and grip.get("between"):
        return None  # open fingers around an object look closed on it
    return {"closed": "yes", "open": "no"}.get(grip.get("state"))


def holding(template, slots, view, source, arrays):
    adm = template["admission"]
    objs, shown = _objects(source)
    grip = source.get("gripper")
    obj = objs[slots["object"]]
    if grip is None or grip.get("state") not in ("open", "closed"):
        return None
    if _gripper_px(source, view) < adm.get("min_gripper_pixels", 1) or \
            _px(arrays, obj["body"], view) < adm.get("min_visible_pixels", 1):
        return None
    held = shown.get(grip.get("holding"))
    if held == obj["name"]:
        return "yes"
    if held is None:
        if shown.get(grip.get("between")) == obj["name"]:
            return None  # between the open fingers it looks held
        return "no" if grip["state"] == "open" else None
    return "no" if _gap_cm(obj, objs[held]) >= adm.get("min_gap_cm", 0.0) else None


def hinge_open(template, slots, view, source, arrays):
    adm = template["admission"]
    obj = _objects(source)[0][slots["object"]]
    angle = obj.get("opening_deg")
    if angle is None or _px(arrays, obj["body"], view) < adm.get("min_visible_pixels", 1):
        return None
    if adm.get("closed_below_deg", 3.0) <= angle <= adm.get("open_above_deg", 20.0):
        return None
    return "yes" if angle > adm.get("open_above_deg", 20.0) else "no"


def _frames(source: dict[str, Any]) -> list[int]:
    timed = [v for v in source["views"] if v.get("time") is not None and v.get("role") != "overview"]
    return [v["index"] for v in sorted(timed, key=lambda v: (v["time"], v["index"]))]


def gripper_change(template, slots, view, source, arrays):
    timeline = source.get("timeline")
    if not timeline:
        return None
    to = template["answer_rule"].get("to", "closed")
    other = "open" if to == "closed" else "closed"
    need = template["admission"].get("min_gripper_pixels", 1)
    states = [(timeline[v].get("gripper") or {}).get("state") if _gripper_px(source, v) >= need else None
              for v in _frames(source)]
    first = next((k for k, s in enumerate(states) if s == to), None)
    if not first or any(s != other for s in states[:first]):
        return None
    return f"Frame {first + 1}"


def lifted(template, slots, view, source, arrays):
    adm = template["admission"]
    timeline = source.get("timeline")
    if not timeline:
        return None
    obj = _objects(source)[0][slots["object"]]
    frames = _frames(source)
    if any(_px(arrays, obj["body"], v) < adm.get("min_visible_pixels", 1) for v in (frames[0], frames[-1])):
        return None
    key = obj.get("source_name", obj["name"])
    z0, z1 = timeline[frames[0]]["heights"].get(key), timeline[frames[-1]]["heights"].get(key)
    if z0 is None or z1 is None:
        return None
    rise = (z1 - z0) * 100.0
    if rise >= adm.get("min_rise_cm", 5.0):
        return "yes"
    return "no" if abs(rise) <= adm.get("max_still_cm", 0.5) else None


for _fn in (touching, stacked, gripper_closed, holding, hinge_open, gripper_change, lifted):
    register("rule_reverifier", _fn.__name__, _fn)
