"""Independent re-verification of items built from real-image folders.

DOTA answers are recomputed from the label file on disk (parsed again here, with its own
area and truncation measures), frame answers from the file names; media that reference
non-redistributable files are checked by their recipe against the file's SHA-256.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

NOT_AN_IMAGE_RULE = object()


def _labels(path: Path, crop: list[int]) -> tuple[float | None, list[dict[str, Any]]]:
    gsd, out = None, []
    x0, y0, x1, y1 = crop
    index = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split()
        if line.startswith("gsd:"):
            try:
                gsd = float(line[4:]) or None
            except ValueError:
                gsd = None
        if len(parts) < 9 or ":" in parts[0]:
            continue
        index += 1
        xy = np.array([float(v) for v in parts[:8]]).reshape(4, 2)
        inside = _inside_fraction(xy, crop)
        if inside * _shoelace(xy) < 1.0:
            continue  # outside the tile
        area = _shoelace(xy)
        out.append({"name": f"{parts[8]} #{index}", "category": parts[8], "difficult": len(parts) > 9 and parts[9] == "1", "area": float(round(area * inside)),
                    "inside": inside, "center": xy.mean(axis=0) - np.array([x0, y0])})
    return gsd, out


def _inside_fraction(xy: np.ndarray, crop: list[int]) -> float:
    """Exact share of the polygon's area inside the crop: the polygon is cut by the crop's four
    half-planes in turn (each cut keeps the part on the inner side of one line)."""
    x0, y0, x1, y1 = crop
    pts = [tuple(p) for p in xy]
    for axis, bound, keep_above in ((0, x0, True), (0, x1, False), (1, y0, True), (1, y1, False)):
        cut = []
        for k in range(len(pts)):
            p, q = np.array(pts[k - 1]), np.array(pts[k])
            p_in = p[axis] >= bound if keep_above else p[axis] <= bound
            q_in = q[axis] >= bound if keep_above else q[axis] <= bound
            if p_in != q_in:
                t = (bound - p[axis]) / (q[axis] - p[axis])
                cut.append(tuple(p + t * (q - p)))
            if q_in:
                cut.append(tuple(q))
        pts = cut
        if not pts:
            return 0.0
    whole = _shoelace(xy)
    return _shoelace(np.array(pts)) / whole if whole > 0 else 0.0


def _shoelace(xy: np.ndarray) -> float:
    return float(0.5 * abs(np.dot(xy[:, 0], np.roll(xy[:, 1], -1)) - np.dot(xy[:, 1], np.roll(xy[:, 0], -1))))


def _plural(category: str) -> str:
    word = category.replace("-", " ")
    return word + ("es" if word.endswith(("s", "ch", "sh", "x")) else "s")


def expected_image_answer(template: dict[str, Any], slots: dict[str, Any], record: dict[str, Any],
                          evidence: dict[str, Any]):
    """The answer the dataset files give, or None; NOT_AN_IMAGE_RULE for rules it does not know."""
    rule, adm = template["answer_rule"], template["admission"]
    name = rule["rule"]
    if name == "capture_order":
        times = {v["index"]: v["time"] for v in record["views"]}
        i, j = slots["pair"]
        first = i if times[i] < times[j] else j
        return f"View {list(slots['pair']).index(first) + 1}"
    if name == "stereo_side":
        sides = {v["index"]: v["role"] for v in record["views"]}
        left = [k for k in slots["pair"] if sides[k] == "left"]
        return f"View {list(slots['pair']).index(left[0]) + 1}" if len(left) == 1 else None
    if not record.get("labels_file"):
        return NOT_AN_IMAGE_RULE
    gsd, labels = _labels(Path(record["root"]) / record["labels_file"], record["crop"])
    min_px = adm.get("min_visible_pixels", 1)
    for lab in labels:
        lab["ok"] = not lab["difficult"] and lab["inside"] >= 0.7
    by_name = {lab["name"]: lab for lab in labels}  # "<category> #<object line in the file>"
    if name in ("count_category", "presence") and not record.get("labels_complete", True):
        return None  # labels that are not exhaustive show no count and no absence
    if name == "category_grounding":
        marked = [by_name.get(n) for n in slots["marked"]]
        if any(m is None or not m["ok"] or m["area"] < min_px for m in marked):
            return None
        hits = [k for k, m in enumerate(marked) if _plural(m["category"]) == slots["category"]]
        return template["options"]["labels"][hits[0]] if len(hits) == 1 else None
    if name == "count_category":
        pool = [lab for lab in labels if _plural(lab["category"]) == slots["category"]]
        if not pool or any(not lab["ok"] for lab in pool) or any(0 < lab["area"] < min_px for lab in pool):
            return None
        return str(sum(1 for lab in pool if lab["area"] >= min_px))
    if name == "presence":
        pool = [lab for lab in labels if _plural(lab["category"]) == slots["category"]]
        if not pool:
            return "no"
        return "yes" if any(lab["ok"] and lab["area"] >= min_px for lab in pool) else None
    if name in ("marked_compare", "marked_distance"):
        marked = [by_name.get(n) for n in slots["marked"]]
        if any(m is None or not m["ok"] or m["area"] < min_px for m in marked):
            return None
        if name == "marked_distance":
            return None if gsd is None else float(np.linalg.norm(marked[0]["center"] - marked[1]["center"]) * gsd)
        value = [m["area"] if rule["field"] == "visible_pixels" else m["center"][0] for m in marked]
        if abs(value[0] - value[1]) < adm.get("min_margin", 0.0):
            return None
        pick = int(np.argmax(value) if rule.get("pick") == "max" else np.argmin(value))
        return template["options"].get("labels", ["A", "B"])[pick]
    return NOT_AN_IMAGE_RULE


def recipe_problem(media_row: dict[str, Any], root: Path) -> str | None:
    """A referenced medium must name dataset files whose SHA-256 still matches."""
    for view in media_row["recipe"]["views"]:
        path = root / view["file"]
        if not path.exists():
            return f"{view['file']}: referenced file not found"
        if hashlib.sha256(path.read_bytes()).hexdigest() != view["sha256"]:
            return f"{view['file']}: SHA-256 differs from the recipe"
    return None


def same_number(key: float | None, truth: float, rel: float = 0.03, floor: float = 1.0) -> bool:
    return key is not None and abs(key - truth) <= max(floor, rel * abs(truth))

