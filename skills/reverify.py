"""Independent re-verification of released tabletop items.

Every answer is recomputed from the simulator's raw arrays (segmentation and metric depth of
the source record), not from the registered evidence, the binding or the construction code;
the visible media and options are checked against what a model must see. Used to measure
the valid rate of a release (ablations) and by tests.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from forge.store import Store


def _measure(arrays: dict[str, np.ndarray], body: int, view: int) -> dict[str, float | None]:
    mask = arrays[f"seg_{view}"] == body
    px = int(mask.sum())
    if not px:
        return {"px": 0, "cx": None, "depth": None}
    return {"px": px, "cx": float(np.nonzero(mask)[1].mean()), "depth": float(np.median(arrays[f"depth_{view}"][mask]))}


def expected_answer(template: dict[str, Any], slots: dict[str, Any], view: int | None, source: dict[str, Any],
                    arrays: dict[str, np.ndarray]) -> str | None:
    """The answer the raw arrays give for these slots, or None when no answer is admissible."""
    rule = template["answer_rule"]
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
    m = {n: _measure(arrays, body[n], view) for n in body}
    if name == "grounding":
        if any(m[n]["px"] < min_px for n in slots["marked"]):
            return None
        return template["options"]["labels"][list(slots["marked"]).index(slots["target"])]
    if name == "reach":
        if m[slots["object"]]["px"] < min_px:
            return None
        center = {o["name"]: (np.array(o["aabb_min"]) + np.array(o["aabb_max"])) / 2 for o in source["objects"]}
        d = float(np.linalg.norm(center[slots["object"]] - np.array(rule["base"])))
        return None if abs(d - rule["reach_m"]) < adm.get("min_margin", 0.0) else ("yes" if d <= rule["reach_m"] else "no")
    if name == "visible":
        p = m[slots["object"]]["px"]
        return "yes" if p >= min_px else ("no" if p == 0 else None)
    if name == "count":
        px = [v["px"] for v in m.values()]
        if any(0 < p < min_px for p in px):
            return None
        return str(sum(1 for p in px if p >= min_px))
    if name == "visible_set":
        px = {n: m[n]["px"] for n in slots["objects"]}
        if any(0 < p < min_px for p in px.values()):
            return None
        seen = sorted(n for n, p in px.items() if p >= min_px)
        return ", ".join(seen) if 0 < len(seen) < len(px) else None
    center = {o["name"]: (np.array(o["aabb_min"]) + np.array(o["aabb_max"])) / 2 for o in source["objects"]}
    if name in ("nearest_to", "distance"):
        names = [slots["anchor"], *slots["objects"]] if name == "nearest_to" else [slots["a"], slots["b"]]
        if any(m[n]["px"] < min_px for n in names):
            return None
        if name == "distance":
            cm = float(np.linalg.norm(center[slots["a"]] - center[slots["b"]])) * 100
            return f"{cm:.0f}" if cm >= adm.get("min_distance_cm", 0.0) else None
        dist = {n: float(np.linalg.norm(center[n] - center[slots["anchor"]])) for n in slots["objects"]}
        ranked = sorted(dist, key=dist.get)
        return ranked[0] if dist[ranked[1]] - dist[ranked[0]] >= adm.get("min_margin", 0.05) else None
    field = {"center_x": "cx", "median_depth": "depth", "visible_pixels": "px"}[rule["field"]]
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


def reverify_package(store: Store, package: Path) -> dict[str, Any]:
    """Check every released item; returns counts and the reasons of the invalid ones."""
    rows = [json.loads(line) for line in open(package / "items.jsonl")]
    keys = {json.loads(line)["id"]: json.loads(line) for line in open(package / "answers.jsonl")}
    contents = {aid: json.loads(c) for aid, c in store._ids_query(
        "SELECT id, content FROM artifacts WHERE id IN (SELECT id FROM _ids)", [r["id"] for r in rows])}
    cache: dict[str, Any] = {}

    def load(aid: str) -> dict[str, Any]:
        if aid not in cache:
            cache[aid] = json.loads(store.one("SELECT content FROM artifacts WHERE id = ?", [aid])[0])
        return cache[aid]

    invalid: dict[str, str] = {}
    for row in rows:
        item = contents[row["id"]]
        binding = load(item["binding"])
        source_id = load(binding["evidence"])["source"]
        source = load(source_id)
        if source_id + ":arrays" not in cache:
            cache[source_id + ":arrays"] = store.get_arrays(source["arrays"])
        arrays = cache[source_id + ":arrays"]
        template = load(binding["template_artifact"])
        truth = expected_answer(template, binding["slots"], binding["view"], source, arrays)
        key = keys[row["id"]]
        shown = _key_answer(key, template)
        reason = None
        if truth is None:
            reason = "the raw arrays admit no unique answer"
        elif shown != truth:
            reason = f"key {shown!r} but the scene gives {truth!r}"
        elif not _options_plain(row["options"], source, template):
            reason = "an option carries text beyond its referent"
        else:
            reason = _media_problem(package, row, template, source, binding["slots"])
        if reason:
            invalid[row["id"]] = reason
    return {"items": len(rows), "valid": len(rows) - len(invalid), "invalid": len(invalid),
            "valid_rate": (len(rows) - len(invalid)) / len(rows) if rows else 0.0, "reasons": invalid}


def _key_answer(key: dict[str, Any], template: dict[str, Any]) -> str | None:
    """The released key in the answer rule's terms, read from the displayed options."""
    opts, qt = key["options"], key["question_type"]
    if qt == "numeric":
        return None if key.get("answer_value") is None else f"{key['answer_value']:g}"
    if qt == "interval_choice":
        value = key.get("answer_value")
        bounds = key["scoring"]["intervals"][key["answer_index"]] if key["answer_index"] is not None else None
        return f"{value:g}" if value is not None and bounds and bounds[0] <= value <= bounds[1] else None
    if qt == "ordered_list":
        return " > ".join(opts[i] for i in key.get("answer_indices") or [])
    if qt == "multiple_choice":
        return ", ".join(sorted(opts[i] for i in key.get("answer_indices") or []))
    return opts[key["answer_index"]] if key["answer_index"] is not None else None


def _options_plain(options: list[str], source: dict[str, Any], template: dict[str, Any]) -> bool:
    names = {o["name"] for o in source["objects"]}
    allowed = names | {"yes", "no", "A", "B", "C", "D"} | {f"View {i + 1}" for i in range(len(source["views"]))}
    allowed |= {label for _, _, label in template["options"].get("intervals", [])}
    allowed |= set(template["options"].get("values", []))
    return all(o in allowed for o in options)


def _media_problem(package: Path, row: dict[str, Any], template: dict[str, Any], source: dict[str, Any],
                   slots: dict[str, Any]) -> str | None:
    for m in row["media"]:
        img = Image.open(io.BytesIO((package / m["path"]).read_bytes()))
        a = np.asarray(img.convert("RGB"))
        packed = (a[..., 0].astype(np.uint32) << 16) | (a[..., 1].astype(np.uint32) << 8) | a[..., 2]
        if img.mode != "RGB" or len(np.unique(packed)) < 48:
            return "visible media are not a processed RGB image"
        if template["media"].get("layout") == "multi_view":
            needed = [v for v in source["views"] if "pair" not in slots or v["index"] in slots["pair"]]
            width = sum(v["width"] for v in needed)
            if a.shape[1] < width:
                return "the media do not show every view the answer depends on"
    return None
