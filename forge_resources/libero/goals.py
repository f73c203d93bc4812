"""LIBERO's goal facts as data, evaluated on simulator state: forge's verifier of a LIBERO task.

A task's BDDL goal is a conjunction of ``In``, ``On``, ``Open``, ``Close``, ``Turnon`` and
``Turnoff`` facts. :func:`compile_goal` turns each into a fact on the model's own names (bodies,
sites, joints) with the numbers it is judged by, read once from the task's environment; the
result is plain JSON. :func:`holds` evaluates it on anything answering the physical queries
(``body_position``, ``site_position``, ``site_matrix``, ``joint_position``, ``bodies_touching``),
with numpy alone, so a package can ship this module and check its tasks without forge or LIBERO.

The facts follow LIBERO's own definitions, so the two agree on every state:

- ``in_site``: the object's origin inside the region's box, its half sizes turned by the site's
  rotation (as LIBERO turns them) and its floor 1 cm lower;
- ``on_site``: the object's origin within the region's footprint and from just below the top of its
  box to 10 cm above it, measured in the site's frame, touching the region's owner when it has one;
- ``on_object``: the object's origin within 3 cm of the support's horizontally, not below it, the two
  touching;
- ``open`` / ``closed``: a joint past its open threshold (any of the part's joints), or every joint
  within its closed threshold; ``on`` / ``off``: a knob turned past its on threshold, or every knob
  back below its off threshold.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ON_OBJECT_XY_M = 0.03  # LIBERO: an object is on another within 3 cm of its origin horizontally
ON_SITE_BELOW_M = 0.005  # how far below a region's top an origin may lie and still be on it
ON_SITE_ABOVE_M = 0.10  # and how far above
IN_SITE_FLOOR_M = 0.01  # a region's floor is this much lower for what is in it


def holds(goal: dict[str, Any], scene: Any) -> bool:
    """Whether the compiled goal (one fact, or ``{"kind": "all", "goals": [...]}``) holds now."""
    kind = goal["kind"]
    if kind == "all":
        return all(holds(g, scene) for g in goal["goals"])
    if kind == "in_site":
        return _in_box(scene, goal)
    if kind == "on_site":
        return _on_site(scene, goal)
    if kind == "on_object":
        obj, support = scene.body_position(goal["object"]), scene.body_position(goal["support"])
        return bool(support[2] <= obj[2] and np.linalg.norm(obj[:2] - support[:2]) < goal.get("xy_m", ON_OBJECT_XY_M)
                    and scene.bodies_touching(goal["support"], goal["object"]))
    if kind in ("open", "closed", "on", "off"):
        states = [_past(scene.joint_position(j["joint"]), j["threshold"], j["side"]) for j in goal["joints"]]
        return any(states) if kind in ("open", "on") else all(states)
    raise ValueError(f"unknown LIBERO goal fact {kind!r}")


def facts(goal: dict[str, Any]) -> list[dict[str, Any]]:
    return goal["goals"] if goal.get("kind") == "all" else [goal]


def _past(value: float, threshold: float, side: str) -> bool:
    return value < threshold if side == "below" else value > threshold if side == "above" else value >= threshold


def _in_box(scene: Any, goal: dict[str, Any]) -> bool:
    centre, mat = scene.site_position(goal["site"]), scene.site_matrix(goal["site"])
    half = np.abs(mat @ np.asarray(goal["half"], dtype=float))
    low, high = centre - half, centre + half
    low[2] -= IN_SITE_FLOOR_M
    pos = scene.body_position(goal["object"])
    return bool(np.all(pos > low) and np.all(pos < high))


def _on_site(scene: Any, goal: dict[str, Any]) -> bool:
    half = np.asarray(goal["half"], dtype=float)
    centre, mat = scene.site_position(goal["site"]), scene.site_matrix(goal["site"])
    delta = mat @ (scene.body_position(goal["object"]) - centre)  # LIBERO's convention for the site's frame
    inside = half[2] - ON_SITE_BELOW_M < delta[2] < half[2] + ON_SITE_ABOVE_M and bool(np.all(np.abs(delta[:2]) < half[:2]))
    if not inside:
        return False
    return goal.get("owner") is None or scene.bodies_touching(goal["owner"], goal["object"])


# -- compiling a task's goal --------------------------------------------------------------------------


class GoalError(ValueError):
    """A goal fact forge cannot state on the task's model (the message names the fact)."""


def compile_goal(env: Any, goal_facts: list[tuple[str, ...]]) -> dict[str, Any]:
    """LIBERO's parsed goal (``env.parsed_problem["goal_state"]``: ``(predicate, arg, ...)`` rows,
    lower-case predicates) as a compiled goal on the environment's model."""
    compiled = [compile_fact(env, fact) for fact in goal_facts]
    return compiled[0] if len(compiled) == 1 else {"kind": "all", "goals": compiled}


def compile_fact(env: Any, fact: tuple[str, ...]) -> dict[str, Any]:
    name, *args = fact
    name = name.lower()
    if name in ("in", "on") and len(args) == 2:
        obj = _body(env, args[0])
        if args[1] in env.object_sites_dict:
            site = env.object_sites_dict[args[1]]
            if not hasattr(site, "under"):
                raise GoalError(f"{name}({', '.join(args)}): region {args[1]} has no extent forge can check")
            out = {"kind": "in_site" if name == "in" else "on_site", "object": obj, "site": args[1],
                   "half": [float(v) for v in site.size], "of": list(args)}
            if name == "on":
                owner = site.parent_name if site.parent_name in {**env.fixtures_dict, **env.objects_dict} else None
                out["owner"] = _body(env, owner) if owner else None
            return out
        if name == "on":
            return {"kind": "on_object", "object": obj, "support": _body(env, args[1]), "xy_m": ON_OBJECT_XY_M,
                    "of": list(args)}
        raise GoalError(f"in({', '.join(args)}): {args[1]} is not a region")
    if name in ("open", "close", "turnon", "turnoff") and len(args) == 1:
        return _joint_fact(env, name, args[0])
    raise GoalError(f"{name}({', '.join(args)}): no physical fact of this form")


def _body(env: Any, instance: str) -> str:
    thing = {**env.fixtures_dict, **env.objects_dict}.get(instance)
    if thing is None:
        raise GoalError(f"{instance} is neither an object nor a fixture of the task")
    return thing.root_body


def _joint_fact(env: Any, name: str, instance: str) -> dict[str, Any]:
    """A part's joints with LIBERO's thresholds: a region names the joints of its drawer, a fixture
    all of its own; the thresholds are the owner's open/closed (or on/off) ranges."""
    if instance in env.object_sites_dict:
        site = env.object_sites_dict[instance]
        joints, owner = list(site.joints or []), env.fixtures_dict.get(site.parent_name) or env.objects_dict.get(site.parent_name)
    else:
        owner = env.fixtures_dict.get(instance) or env.objects_dict.get(instance)
        joints = list(owner.joints) if owner is not None else []
    if owner is None or not joints:
        raise GoalError(f"{name}({instance}): no joint moves it")
    ranges = (getattr(owner, "object_properties", {}) or {}).get("articulation") or {}
    if name in ("open", "close"):
        opened, shut = ranges.get("default_open_ranges") or [], ranges.get("default_close_ranges") or []
        if not opened or not shut:
            raise GoalError(f"{name}({instance}): its owner has no open and closed ranges")
        # a part that opens toward negative values (LIBERO's drawers and the microwave's door) is
        # open below the top of its open range and closed above the bottom of its closed range
        negative = max(opened) <= min(shut)
        if name == "open":
            threshold, side = (max(opened), "below") if negative else (min(opened), "above")
        else:
            threshold, side = (min(shut), "above") if negative else (max(shut), "below")
        kind = "open" if name == "open" else "closed"
    else:
        on, off = ranges.get("default_turnon_ranges") or [], ranges.get("default_turnoff_ranges") or []
        if not on or not off:
            raise GoalError(f"{name}({instance}): its owner has no on and off ranges")
        threshold, side = (min(on), "at_least") if name == "turnon" else (max(off), "below")
        kind = "on" if name == "turnon" else "off"
    return {"kind": kind, "joints": [{"joint": j, "threshold": float(threshold), "side": side} for j in joints],
            "of": [instance]}


def goal_bodies(goal: dict[str, Any]) -> list[str]:
    """The bodies a compiled goal reads (its objects, supports and owners)."""
    out = []
    for fact in facts(goal):
        out += [fact[k] for k in ("object", "support", "owner") if fact.get(k)]
    return list(dict.fromkeys(out))
