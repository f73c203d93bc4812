"""Independent re-verification of released items of simulated sources.

Every answer is recomputed from the simulator's raw arrays (segmentation and metric depth of
the source record), not from the registered evidence, the binding or the construction code;
the visible media and options are checked against what a model must see. Used to measure
the valid rate of a release (ablations) and by tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np

from forge.store import Store
from forge.errors import BlobError
from forge_skills.oe.verify.reverify_media import _frames, _media_problem, _options_plain


def _measure(arrays: dict[str, np.ndarray], body: int, view: int) -> dict[str, float | None]:
    mask = arrays[f"seg_{view}"] == body
    px = int(mask.sum())
    if not px:
        return {"px": 0, "cx": None, "cy": None, "depth": None}
    ys, xs = np.nonzero(mask)
    # At the precision the evidence records, so a margin exactly at its floor is decided alike.
    return {"px": px, "cx": round(float(xs.mean()), 2), "cy": round(float(ys.mean()), 2),
            "depth": round(float(np.median(arrays[f"depth_{view}"][mask])), 5)}


def _plural(category: str) -> str:
    word = category.replace("-", " ")
    return word + ("es" if word.endswith(("s", "ch", "sh", "x")) else "s")


NOT_A_SCENE_RULE = object()


def _heading(view: dict[str, Any]) -> float:
    vm = np.array(view["view_matrix"], dtype=float).reshape(4, 4, order="F")
    forward = -vm[2, :3]  # the third row of the rotation is the camera's back axis
    return float(np.degrees(np.arctan2(forward[1], forward[0])))


def _scene_rules(name: str, template: dict[str, Any], slots: dict[str, Any], source: dict[str, Any],
                 arrays: dict[str, np.ndarray], body: dict[str, int]):
    """Rules over a trajectory's frames, recomputed from the per-frame segmentation."""
    rule, adm = template["answer_rule"], template["admission"]
    min_px, absent = adm.get("min_visible_pixels", 1), adm.get("max_absent_pixels", 0)
    frames = _frames(source)
    views = {v["index"]: v for v in source["views"]}

    def first(obj: str) -> int | None:
        for rank, v in enumerate(frames):
            px = int((arrays[f"seg_{v}"] == body[obj]).sum())
            if px >= min_px:
                return rank
            if px > absent:
                return None
        return None

    if name in ("first_seen", "appearance_order", "frame_match"):
        ranks = {n: first(n) for n in slots["objects"]}
        if any(r is None for r in ranks.values()):
            return None
        ordered = sorted(ranks, key=ranks.get)
        if name == "first_seen":
            return ordered[0] if ranks[ordered[1]] - ranks[ordered[0]] >= adm.get("min_frame_gap", 1) else None
        if len(set(ranks.values())) != len(ranks):
            return None
        if name == "appearance_order":
            return " > ".join(ordered)
        return "; ".join(f"{n} -> Frame {ranks[n] + 1}" for n in sorted(ranks))
    if name == "first_frame":
        rank, (start, end) = first(slots["object"]), slots["window"]
        return None if rank is None or not start <= rank <= end else f"Frame {rank - start + 1}"
    if name == "seen_along":
        most = max(int((arrays[f"seg_{v}"] == body[slots["object"]]).sum()) for v in frames)
        return "yes" if most >= min_px else ("no" if most == 0 else None)
    if name == "turn":
        delta = (_heading(views[frames[-1]]) - _heading(views[frames[0]]) + 180.0) % 360.0 - 180.0
        if abs(delta) < adm.get("min_turn_degrees", 15.0):
            return None
        if "min_landmark_shift" in adm:
            sign, need = (1.0 if delta > 0 else -1.0), adm["min_landmark_shift"]
            steps = list(zip(frames, frames[1:])) if template["media"].get("layout") == "frames" \
                else [(frames[0], frames[-1])]
            shown = 0
            for f0, f1 in steps:
                shifts = []
                for o in source["objects"]:
                    a, b = _measure(arrays, o["body"], f0), _measure(arrays, o["body"], f1)
                    if min(a["px"], b["px"]) >= max(1, adm.get("min_landmark_pixels", 0)):
                        shifts.append(sign * (b["cx"] - a["cx"]) / views[f0]["width"])
                if any(d <= -need for d in shifts):
                    return None
                shown += any(d >= need for d in shifts)
            if shown * 2 < len(steps):
                return None
        return rule["labels"]["positive" if delta > 0 else "negative"]
    if name == "approach":
        obj = next(o for o in source["objects"] if o["name"] == slots["object"])
        if int((arrays[f"seg_{frames[0]}"] == obj["body"]).sum()) < min_px:
            return None
        center = (np.array(obj["aabb_min"]) + np.array(obj["aabb_max"])) / 2
        d0 = float(np.linalg.norm(center - np.array(views[frames[0]]["camera_position"])))
        d1 = float(np.linalg.norm(center - np.array(views[frames[-1]]["camera_position"])))
        return None if abs(d1 - d0) < adm.get("min_change_m", 0.3) else ("yes" if d1 < d0 else "no")
    if name == "marked_seen":
        overview = [v["index"] for v in source["views"] if v.get("role") == "overview"]
        obj = body[slots["object"]]
        if len(overview) != 1 or int((arrays[f"seg_{overview[0]}"] == obj).sum()) < adm.get("min_marked_pixels", 1):
            return None
        px = int((arrays[f"seg_{slots['frame']}"] == obj).sum())
        return "yes" if px >= min_px else ("no" if px == 0 else None)
    return NOT_A_SCENE_RULE


def _payload_agrees(key: dict[str, Any], payload: dict[str, Any]) -> bool:
    """Whether the key's own answer scores 1 under the payload re-derived from the raw arrays
    (a point key inside the re-measured mask): the shipped payload and the arrays tell one story
    only if the key's answer scores 1 under both."""
    from forge.registry import lookup

    score = lookup("scorer", "oe")
    return score({**key, "payload": payload}, key.get("answer")) == 1.0 and score(key, key.get("answer")) == 1.0


def expected_answer(template: dict[str, Any], slots: dict[str, Any], view: int | None, source: dict[str, Any],
                    arrays: dict[str, np.ndarray]) -> str | None | tuple[str | None, dict[str, Any]]:
    """The answer the raw arrays give for these slots, or None when no answer is admissible.
    A plugin's rule is re-derived by the function it registers as ``rule_reverifier:<rule>``; one
    whose items carry a hidden payload returns (answer, payload re-derived from the arrays)."""
    from forge.registry import entries

    rule = template["answer_rule"]
    own = entries("rule_reverifier").get(rule["rule"])
    if own is not None:
        return own(template, slots, view, source, arrays)
    adm = template["admission"]
    min_px = adm.get("min_visible_pixels", 1)
    body = {o["name"]: o["body"] for o in source["objects"]}
    views = [v["index"] for v in source["views"]]
    name = rule["rule"]
    if name in ("best_view", "only_view"):
        px = [_measure(arrays, body[slots["object"]], v)["px"] for v in views]
        order = np.argsort(px)[::-1]
        if name == "only_view":
            ok = sum(1 for p in px if p >= min_px) == 1 and sum(1 for p in px if p == 0) == len(px) - 1
        else:
            ok = px[order[0]] >= min_px and px[order[0]] / max(px[order[1]], 1) >= adm.get("min_ratio", 1.5)
        return f"View {int(order[0]) + 1}" if ok else None
    if name == "orbit":
        cams = {v["index"]: v["camera_position"] for v in source["views"]}
        i, j = slots["pair"]
        c = rule.get("center", [0.0, 0.0])
        delta = (np.degrees(np.arctan2(cams[j][1] - c[1], cams[j][0] - c[0]))
                 - np.degrees(np.arctan2(cams[i][1] - c[1], cams[i][0] - c[0])) + 180.0) % 360.0 - 180.0
        lo, hi = adm.get("turn_degrees", [20, 160])
        return (rule["labels"]["positive"] if delta > 0 else rule["labels"]["negative"]) if lo <= abs(delta) <= hi else None
    scene_answer = _scene_rules(name, template, slots, source, arrays, body)
    if scene_answer is not NOT_A_SCENE_RULE:
        return scene_answer
    m = {n: _measure(arrays, body[n], view) for n in body}
    if name == "count_category":
        pool = [o["name"] for o in source["objects"] if _plural(o["category"]) == slots["category"]]
        px = [m[n]["px"] for n in pool]
        if not pool or any(0 < p < min_px for p in px):
            return None
        return str(sum(1 for p in px if p >= min_px))
    if name in ("support", "state"):
        obj = next(o for o in source["objects"] if o["name"] == slots["object"])
        if m[obj["name"]]["px"] < min_px:
            return None
        if name == "state":
            if obj["category"] not in rule["categories"]:
                return None
            x, y, z, w = obj["orientation"]
            # The world-z row of the body's rotation, applied to its own up axis.
            row = np.array([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)])
            up_z = abs(float(row @ np.array(obj.get("up_axis", [0.0, 0.0, 1.0]))))
            tilt = float(np.degrees(np.arccos(min(1.0, up_z))))
            lo, hi = adm.get("upright_below_deg", 20), adm.get("lying_above_deg", 65)
            return None if lo <= tilt <= hi else rule["labels"]["upright" if tilt < lo else "lying"]
        kind = source.get("bodies", {}).get(obj.get("support"))
        if kind not in rule["names"]:
            return None
        seen = next(v for v in source["views"] if v["index"] == view)["body_pixels"].get(obj["support"], 0)
        if kind != "floor" and seen < adm.get("min_support_pixels", 1):
            return None
        return rule["names"][kind]
    if name == "grounding":
        if any(m[n]["px"] < min_px for n in slots["marked"]) or slots["target"] not in slots["marked"]:
            return None
        kinds = {o["name"]: o["category"] for o in source["objects"]}
        colours = {o["name"]: o.get("colour") or None for o in source["objects"]}  # read from its pixels
        target, others = slots["target"], [n for n in slots["marked"] if n != slots["target"]]
        shared = ({"kind"} if any(kinds[n] == kinds[target] for n in others) else set()) | \
            ({"colour"} if colours[target] and any(colours[n] == colours[target] for n in others) else set())
        if len(shared) < adm.get("min_confusers", 0):
            return None
        return template["options"]["labels"][list(slots["marked"]).index(slots["target"])]
    if name == "select":
        inner = {**template, "answer_rule": {**rule, "rule": rule["of"]}}
        answers = {o: expected_answer(inner, {"object": o}, view, source, arrays) for o in slots["objects"]}
        if any(a is None for a in answers.values()):
            return None
        chosen = sorted(o for o, a in answers.items() if a == rule["selected"])
        return ", ".join(chosen) if 0 < len(chosen) < len(answers) else None
    if name == "reach":
        if m[slots["object"]]["px"] < min_px:
            return None
        center = {o["name"]: (np.array(o["aabb_min"]) + np.array(o["aabb_max"])) / 2 for o in source["objects"]}
        d = float(np.linalg.norm(center[slots["object"]] - np.array(source.get("robot_base") or rule["base"])))
        return None if abs(d - rule["reach_m"]) < adm.get("min_margin", 0.0) else ("yes" if d <= rule["reach_m"] else "no")
    if name == "visible":
        p = m[slots["object"]]["px"]
        return "yes" if p >= min_px else ("no" if p == 0 else None)
    if name == "count":
        px = [v["px"] for v in m.values()]
        if any(0 < p < min_px for p in px):
            return None
        return str(sum(1 for p in px if p >= min_px))
    if name == "count_beside":
        px = {n: v["px"] for n, v in m.items()}
        if px[slots["anchor"]] < min_px:
            return None
        # A faint object matters on the counted side or near the anchor's column only.
        sign = -1.0 if rule.get("side", "left") == "left" else 1.0
        at = m[slots["anchor"]]["cx"]
        if any(0 < p < min_px and sign * (m[n]["cx"] - at) > -adm.get("min_margin", 0.0) for n, p in px.items()):
            return None
        offsets = [m[n]["cx"] - m[slots["anchor"]]["cx"] for n, p in px.items() if p >= min_px and n != slots["anchor"]]
        if len(offsets) < adm.get("min_others", 0) or (offsets and min(abs(d) for d in offsets) < adm.get("min_margin", 0.0)):
            return None
        return str(sum(1 for d in offsets if (d < 0 if rule.get("side", "left") == "left" else d > 0)))
    if name == "visible_set":
        px = {n: m[n]["px"] for n in slots["objects"]}
        if any(0 < p < min_px for p in px.values()):
            return None
        seen = sorted(n for n, p in px.items() if p >= min_px)
        return ", ".join(seen) if 0 < len(seen) < len(px) else None
    center = {o["name"]: (np.array(o["aabb_min"]) + np.array(o["aabb_max"])) / 2 for o in source["objects"]}
    if name in ("nearest_to", "marked_nearest_to", "distance"):
        options = slots.get("objects") or slots.get("marked") or []
        names = [slots["anchor"], *options] if name != "distance" else [slots["a"], slots["b"]]
        if any(m[n]["px"] < min_px for n in names):
            return None
        if name == "distance":
            cm = float(np.linalg.norm(center[slots["a"]] - center[slots["b"]])) * 100
            return f"{cm:.0f}" if cm >= adm.get("min_distance_cm", 0.0) else None
        dist = {n: float(np.linalg.norm(center[n] - center[slots["anchor"]])) for n in options}
        ranked = sorted(dist, key=dist.get)
        if dist[ranked[1]] - dist[ranked[0]] < adm.get("min_margin", 0.05):
            return None
        if name == "marked_nearest_to":
            return template["options"].get("labels", ["A", "B"])[list(options).index(ranked[0])]
        return ranked[0]
    field = {"center_x": "cx", "center_y": "cy", "median_depth": "depth", "visible_pixels": "px"}[rule["field"]]
    names = slots.get("objects") or slots.get("marked") or [slots["a"], slots["b"]]
    if any(m[n]["px"] < min_px for n in names):
        return None
    if adm.get("same_category") and len({n.split(" ", 1)[1] for n in names}) != 1:
        return None
    vals = {n: m[n][field] for n in names}
    ranked = sorted(names, key=lambda n: vals[n], reverse=rule.get("pick", "min") == "max")
    if abs(vals[ranked[0]] - vals[ranked[1]]) < adm.get("min_margin", 0.0):
        return None
    if name == "order":
        ranked = sorted(names, key=lambda n: vals[n], reverse=rule.get("direction", "ascending") == "descending")
        gaps = [abs(vals[a] - vals[b]) for a, b in zip(ranked, ranked[1:])]
        return " > ".join(ranked) if min(gaps) >= adm.get("min_margin", 0.0) else None
    if name == "compare":
        holds = vals[slots["a"]] < vals[slots["b"]] if rule.get("relation", "less") == "less" else vals[slots["a"]] > vals[slots["b"]]
        return "yes" if holds else "no"
    if name == "marked_compare":
        return template["options"].get("labels", ["A", "B"])[list(slots["marked"]).index(ranked[0])]
    return ranked[0]


def reverify_package(store: Store, package: Path, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Check every released item; returns counts and the reasons of the invalid ones. Damage
    (an unreadable line, a damaged media file or blob, an item the store does not know) makes
    the items it touches invalid with the reason, and lines that cannot be read are listed in
    ``file_problems``; nothing raises. ``progress(done, total)`` is called every hundred items
    and at the end."""
    file_problems: list[str] = []
    rows = [r for r in _jsonl(package / "items.jsonl", file_problems) if isinstance(r.get("id"), str)]
    keys = {k["id"]: k for k in _jsonl(package / "answers.jsonl", file_problems) if isinstance(k.get("id"), str)}
    contents = {aid: json.loads(c) for aid, c in store.artifact_column([r["id"] for r in rows], "content").items()}
    cache: dict[str, Any] = {}

    def load(aid: str) -> dict[str, Any]:
        if aid not in cache:
            found = store.artifact_column([aid], "content")
            if aid not in found:
                raise KeyError(f"artifact {aid[:12]} is not in the store")
            cache[aid] = json.loads(found[aid])
        return cache[aid]

    invalid: dict[str, str] = {}
    for done, row in enumerate(rows):
        if progress is not None and done % 100 == 0 and done:
            progress(done, len(rows))
        try:
            reason = _item_problem(row, keys, contents, load, cache, store, package)
        except Exception as exc:  # damage of any kind is reported on the item it touches
            reason = f"cannot be re-verified: {_damage(exc)}"
        if reason:
            invalid[row["id"]] = reason
    if progress is not None:
        progress(len(rows), len(rows))
    return {"items": len(rows), "valid": len(rows) - len(invalid), "invalid": len(invalid),
            "valid_rate": (len(rows) - len(invalid)) / len(rows) if rows else 0.0, "reasons": invalid,
            "file_problems": file_problems}


def _jsonl(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file; lines that are not one are listed in ``problems``."""
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        problems.append(f"{path.name}: cannot be read ({exc.strerror or exc})")
        return []
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            problems.append(f"{path.name} line {n}: not JSON")
            continue
        if not isinstance(value, dict):
            problems.append(f"{path.name} line {n}: not a JSON object")
            continue
        out.append(value)
    return out


def _damage(exc: BaseException) -> str:
    if isinstance(exc, BlobError):
        return f"store blob {exc.digest[:12]} is {exc.problem}"
    if isinstance(exc, KeyError):
        return f"{exc.args[0] if exc.args else exc} is missing"
    if isinstance(exc, OSError):
        return f"{Path(exc.filename).name if exc.filename else 'a file'}: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {str(exc)[:120]}"


def _item_problem(row: dict[str, Any], keys: dict[str, Any], contents: dict[str, Any], load, cache: dict[str, Any],
                  store, package: Path) -> str | None:
    """Why one released item is invalid, or None."""
    if row["id"] not in keys:
        return "the answer key has no entry for it"
    if row["id"] not in contents:
        return "the store has no item with this id"
    item = contents[row["id"]]
    binding = load(item["binding"])
    source_id = load(binding["evidence"])["source"]
    source = load(source_id)
    template = load(binding["template_artifact"])
    if "adapter" in source:  # a real-image record: its own re-verification
        return _image_item_problem(row, keys[row["id"]], template, binding, source, package)
    if source_id + ":arrays" not in cache:
        cache[source_id + ":arrays"] = store.get_arrays(source["arrays"])
        cache[source_id + ":names"] = names_from_pixels(source, cache[source_id + ":arrays"], store)
    arrays = cache[source_id + ":arrays"]
    naming = cache[source_id + ":names"]
    # Objects by the names their own pixels give them, not by the tint the scene asked for.
    source = {**source, "objects": [{**o, "name": naming[o["name"]][0].name, "colour": naming[o["name"]][0].colour,
                                      "source_name": o["name"]} for o in source["objects"]]}
    reason = _naming_problem(binding, template, naming)
    if reason:
        return reason
    truth = expected_answer(template, binding["slots"], binding["view"], source, arrays)
    key = keys[row["id"]]
    shown = _key_answer(key, template)
    reason = None
    if isinstance(truth, tuple):  # a plugin's re-derivation of the answer and of the hidden payload
        truth, payload = truth
        if truth is not None and not _payload_agrees(key, payload):
            return "the hidden payload disagrees with the raw arrays: the key's answer is not scored right by it"
    if truth is None:
        reason = "the raw arrays admit no unique answer"
    elif shown != truth:
        reason = f"key {shown!r} but the scene gives {truth!r}"
    elif not _options_plain(row["options"], source, template):
        reason = "an option carries text beyond its referent"
    else:
        reason = _media_problem(package, row, template, source, binding["slots"], store, binding["view"])
    return reason


def names_from_pixels(source: dict[str, Any], arrays: dict[str, np.ndarray], store: Store) -> dict[str, Any]:
    """Source object name -> (its naming, its colour reading per view index), read again from
    the stored RGB under the raw segmentation."""
    from forge_skills.oe.structure.appearance import name_referents, read_colour

    per_view: dict[str, dict[int, Any]] = {o["name"]: {} for o in source["objects"]}
    for v in source["views"]:
        rgb, seg = store.get_image(v["rgb"]), arrays[f"seg_{v['index']}"]
        for o in source["objects"]:
            mask = seg == o["body"]
            if mask.any():
                per_view[o["name"]][v["index"]] = read_colour(rgb[mask])
    naming = name_referents([(o["name"], o["category"]) for o in source["objects"]],
                            {k: list(r.values()) for k, r in per_view.items()},
                            by_identity=source.get("naming") == "identity")
    return {k: (naming[k], per_view[k]) for k in naming}


def _naming_problem(binding: dict[str, Any], template: dict[str, Any], naming: dict[str, Any]) -> str | None:
    """An object the item names that its pixels do not support: unknown, not nameable, or of
    another colour in a shown view where it can be made out."""
    from forge_skills.oe.synthesize.admission import named_slots, slot_names
    from forge_skills.oe.structure.appearance import MIN_NAMED_PIXELS

    by_name = {n.name: (n, views) for n, views in naming.values()}
    shown = {m["view"] for m in binding["presentation"]["media"]}
    for slot in named_slots(template):
        for name in slot_names(binding["slots"].get(slot)):
            if name not in by_name:
                return f"{name!r}: no object's pixels give this name"
            n, views = by_name[name]
            if not n.referable:
                return f"{name!r} may not be named: {n.reason}"
            for v in sorted(shown):
                r = views.get(v)
                if r is not None and r.pixels >= MIN_NAMED_PIXELS and r.name != n.colour and not n.by_identity:
                    return f"the {name} reads {r.name or 'no clear colour'} in view {v}"
    return None


def _image_item_problem(row: dict[str, Any], key: dict[str, Any], template: dict[str, Any], binding: dict[str, Any],
                        record: dict[str, Any], package: Path) -> str | None:
    from forge_skills.oe.verify.reverify_images import (NOT_AN_IMAGE_RULE, expected_image_answer, recipe_problem,
                                                        same_number)

    truth = expected_image_answer(template, binding["slots"], record, {})
    if truth is NOT_AN_IMAGE_RULE:
        return f"no independent re-derivation for rule {template['answer_rule']['rule']!r}"
    if truth is None:
        return "the dataset files admit no unique answer"
    shown = _key_answer(key, template)
    if isinstance(truth, float):
        if not same_number(key.get("answer_value"), truth):
            return f"key {shown!r} but the labels give {truth:.1f}"
    elif shown != truth:
        return f"key {shown!r} but the dataset gives {truth!r}"
    for m in row["media"]:
        if "recipe" in m:
            problem = recipe_problem(m, Path(record["root"]))
            if problem:
                return problem
        elif not (package / m["path"]).exists():
            return f"{m['path']}: missing"
    return None


def _key_answer(key: dict[str, Any], template: dict[str, Any]) -> str | None:
    """The released key in the answer rule's terms, read from the displayed options."""
    from forge.vocabulary import answer_form

    opts, qt = key["options"], key["question_type"]
    if answer_form(qt) == "value":  # a value its protocol parses: the key's text is the answer
        return key.get("answer")
    if qt == "numeric":
        return None if key.get("answer_value") is None else f"{key['answer_value']:g}"
    if qt == "interval_choice":
        value = key.get("answer_value")
        bounds = key["scoring"]["intervals"][key["answer_index"]] if key["answer_index"] is not None else None
        return f"{value:g}" if value is not None and bounds and bounds[0] <= value <= bounds[1] else None
    if qt == "ordered_list":
        return " > ".join(opts[i] for i in key.get("answer_indices") or [])
    if qt == "matching":
        targets = key.get("targets") or []
        return "; ".join(sorted(f"{opts[i]} -> {targets[j]}" for i, j in enumerate(key.get("answer_indices") or [])))
    if qt == "multiple_choice":
        return ", ".join(sorted(opts[i] for i in key.get("answer_indices") or []))
    return opts[key["answer_index"]] if key["answer_index"] is not None else None


