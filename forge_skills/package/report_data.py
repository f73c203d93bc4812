"""The numbers of a package's evaluation report, computed from the package's own records.

Everything here is read from files the package ships: the items and the answer key, the
composition, the panel's scored responses (``evaluation/responses.jsonl``), the build's record
(``evaluation/build.json``: gate funnel, repairs, skill use, blind margins) and, for an IE
package, its episodes. The same function writes ``report.json`` at build time and recomputes it
in ``forge verify``, so a number that does not follow from the records is found.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from forge_skills.package.episode_panel import EPISODES_FILE, episode_metrics
from forge_skills.package.panel import read_responses, score_matrix

FORMAT = "forge.report/1"
PANEL_FILE = "evaluation/panel.json"
RESPONSES_FILE = "evaluation/responses.jsonl"
BUILD_FILE = "evaluation/build.json"
IRT_FILE = "evaluation/irt.json"
REPORT_FILE = "report.json"
HTML_FILE = "report.html"
# Slope bins whose edges include the band limits (0, 0.3, 0.7); slopes beyond the ends are clipped in.
HISTOGRAM_EDGES = [-3.0, -1.5, -0.7, -0.3, 0.0, 0.3, 0.7, 1.5, 3.0, 6.0]
NEAR_ZERO = 0.05  # |a| below this: the item does not separate the panel's models


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _round(x: Any, digits: int = 6) -> Any:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return round(float(x), digits) + 0.0  # + 0.0: no negative zero


@dataclass(frozen=True)
class PanelScores:
    """The panel's 0/1 matrix (its models x the released items) with the labels of both axes."""

    models: list[str]
    items: list[str]
    y: np.ndarray


def panel_scores(folder: Path, rows: list[dict[str, Any]] | None = None,
                 items: list[dict[str, Any]] | None = None) -> PanelScores:
    """The matrix gate F fits; ``rows`` are the records of ``evaluation/responses.jsonl`` and
    ``items`` the package's :func:`item_rows`, when the caller holds them."""
    panel = json.loads((folder / PANEL_FILE).read_text())
    models = [m["model"] for m in panel["members"]]
    ids = [r["id"] for r in (item_rows(folder) if items is None else items)]
    rows = read_responses((folder / RESPONSES_FILE).read_bytes()) if rows is None else rows
    return PanelScores(models, ids, score_matrix(models, ids, rows))


def irt_diagnosis(folder: Path, bootstrap: int, seed: int, rows: list[dict[str, Any]] | None = None,
                  items: list[dict[str, Any]] | None = None, scores: PanelScores | None = None) -> Any:
    """Gate F on the package's response matrix (``scores``, or :func:`panel_scores` of the
    other arguments)."""
    from forge_skills.evaluate import diagnose

    s = panel_scores(folder, rows, items) if scores is None else scores
    return diagnose(s.y, model_ids=s.models, item_ids=s.items, bootstrap_replicates=bootstrap, seed=seed)


def item_rows(folder: Path, items: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The released items as the report groups them: question items by capability and question
    type; interactive tasks (``tasks.jsonl``) by scene type and split. ``items``: the records of
    ``items.jsonl`` when the caller has read them."""
    if items is not None or (folder / "items.jsonl").is_file():
        return [{"id": r["id"], "capability": r.get("capability"), "question_type": r.get("question_type")}
                for r in (_jsonl(folder / "items.jsonl") if items is None else items)]
    return [{"id": r["task_id"], "capability": r.get("scene_type"), "question_type": r.get("split")}
            for r in _jsonl(folder / "tasks.jsonl")]


def compute_report(folder: Path, rows: list[dict[str, Any]] | None = None,
                   items: list[dict[str, Any]] | None = None,
                   models: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """report.json's content from the records in the package folder (``rows``: the records of
    ``evaluation/responses.jsonl``, ``items``: its :func:`item_rows`, ``models``: their
    :func:`model_results`, when the caller holds them)."""
    manifest = json.loads((folder / "manifest.json").read_text())
    items = item_rows(folder) if items is None else items
    composition = json.loads((folder / "composition.json").read_text())
    build = json.loads((folder / BUILD_FILE).read_text())
    panel = json.loads((folder / PANEL_FILE).read_text())
    if models is None:
        models = model_results(panel, read_responses((folder / RESPONSES_FILE).read_bytes()) if rows is None else rows,
                               items)
    irt = json.loads((folder / IRT_FILE).read_text())
    return {
        "format": FORMAT,
        "package": {"name": manifest["name"], "version": manifest["version"], "track": manifest.get("track"),
                    "items": len(items)},
        "composition": _composition(items, composition),
        "funnel": build.get("funnel", []),
        "repairs": build.get("repairs", {}),
        "skills": build.get("skills", {}),
        "blind": build.get("blind", []),
        "models": models,
        "irt": _irt(irt),
        "human_review": composition.get("human_review"),
        **({"episodes": episode_metrics(_jsonl(folder / EPISODES_FILE), panel["members"])}
           if (folder / EPISODES_FILE).is_file() else {}),
    }


def _composition(items: list[dict[str, Any]], composition: dict[str, Any]) -> dict[str, Any]:
    caps = sorted({str(it.get("capability")) for it in items})
    qts = sorted({str(it.get("question_type")) for it in items})
    cells = Counter((str(it.get("capability")), str(it.get("question_type"))) for it in items)
    tasks = "scene_types" in composition  # a package of interactive tasks
    return {"rows": "scene type" if tasks else "capability", "columns": "split" if tasks else "question type",
            "capabilities": caps, "question_types": qts,
            "counts": [[cells[(c, q)] for q in qts] for c in caps],
            "by_source": {k: v.get("items") if isinstance(v, dict) else v
                          for k, v in sorted((composition.get("sources") or {}).items())},
            **({"difficulty": composition["difficulty"]} if composition.get("difficulty") else {})}


def model_results(panel: dict[str, Any], rows: list[dict[str, Any]],
                  items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The report's row per panel member: accuracy overall and per capability, invalid replies."""
    keys = {r["id"]: r for r in items}
    by_model: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(r)
    out = []
    for m in panel["members"]:
        mine = by_model.get(m["model"], [])
        caps: dict[str, list[float]] = {}
        for r in mine:
            caps.setdefault(str(keys.get(r["item_id"], {}).get("capability")), []).append(float(r["score"]))
        n = len(mine)
        out.append({"model": m["model"], "label": m["label"], "simulated": m["simulated"],
                    "models_reported": sorted({r["model_reported"] for r in mine}), "items": n,
                    "accuracy": _round(sum(float(r["score"]) for r in mine) / n) if n else None,
                    "invalid": sum(not r["valid"] and r.get("response") is not None for r in mine),
                    "abstained": sum(r.get("response") is None for r in mine),
                    "by_capability": {c: _round(sum(v) / len(v)) for c, v in sorted(caps.items())}})
    return out


def _irt(d: dict[str, Any]) -> dict[str, Any]:
    a = np.array([np.nan if x is None else x for x in d["a"]], dtype=float)
    counts, _ = np.histogram(np.clip(a[~np.isnan(a)], HISTOGRAM_EDGES[0], HISTOGRAM_EDGES[-1]), bins=HISTOGRAM_EDGES)
    boot = d.get("bootstrap")
    intervals = []
    if boot:
        order = sorted(range(len(a)), key=lambda i: (a[i], d["item_ids"][i]))
        intervals = [{"item": d["item_ids"][i], "a": _round(a[i], 4), "low": _round(boot["a_low"][i], 4),
                      "high": _round(boot["a_high"][i], 4)} for i in order]
    test = np.array(d["test_information"], dtype=float)
    peak = float(test.max()) if test.size and test.max() > 0 else 1.0
    flagged = []
    for i, iid in enumerate(d["item_ids"]):
        reasons = []
        if not math.isnan(a[i]) and abs(a[i]) < NEAR_ZERO:
            reasons.append("near-zero discrimination: the panel's models do not differ on it")
        elif d["band"][i] == "reversed":
            reasons.append("reversed: stronger models fail it more often")
        rest = d["item_rest"][i]
        if rest is not None and rest < 0:
            reasons.append("item-rest correlation below zero")
        if reasons:
            flagged.append({"item": iid, "a": _round(a[i], 4), "band": d["band"][i], "why": "; ".join(reasons)})
    return {
        "converged": d["converged"], "band_counts": d["band_counts"], "high_disc_share": _round(d["high_disc_share"]),
        "mean_gap": _round(d["mean_gap"]), "spearman_a_gap": _round(d["spearman_a_gap"]),
        "theta": {m: _round(t, 4) for m, t in zip(d["model_ids"], d["theta"])},
        "histogram": {"edges": HISTOGRAM_EDGES, "counts": [int(c) for c in counts]},
        "bootstrap": ({"replicates": boot["replicates"], "seed": boot["seed"], "level": boot["level"],
                       "high_disc_interval": [_round(x) for x in boot["high_disc_interval"]], "intervals": intervals}
                      if boot else None),
        "information": {"grid": [_round(x, 4) for x in d["information_grid"]],
                        "test": [_round(x, 6) for x in test], "normalized": [_round(x / peak, 6) for x in test],
                        "theta_peak": _round(d["test_theta_peak"], 4)},
        "flagged": flagged,
    }
