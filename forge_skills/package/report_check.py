"""``forge verify``'s recomputation of an assessed package's reported numbers.

From the package's own records: every panel response is read and scored again by the package's
scorer; the response matrix is checked complete; the IRT diagnosis is refitted (with the
recorded bootstrap replicates and seed); ``report.json`` is computed again, ``report.html``
rendered again from it, and the exports made again from the items. Any difference is named
with the file and the field; nothing raises on damage.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from forge_skills.package import exports
from forge_skills.package.episode_panel import EPISODES_FILE, is_task_package
from forge_skills.package.panel import matrix_problems, read_responses
from forge_skills.package.report_data import (HTML_FILE, IRT_FILE, PANEL_FILE, REPORT_FILE, RESPONSES_FILE,
                                              compute_report, irt_diagnosis, item_rows)
from forge_skills.package.report_html import render_report

TOLERANCE = 1e-6  # floating-point refits on another machine may differ in the last digits
MAX_PROBLEMS = 30


def differences(recorded: Any, recomputed: Any, path: str = "", out: list[str] | None = None) -> list[str]:
    """Paths where two JSON values differ (numbers within TOLERANCE agree)."""
    out = [] if out is None else out
    if len(out) >= MAX_PROBLEMS:
        return out
    if isinstance(recorded, bool) or isinstance(recomputed, bool):
        if recorded != recomputed:
            out.append(f"{path or '(top)'}: recorded {recorded!r}, recomputed {recomputed!r}")
    elif isinstance(recorded, (int, float)) and isinstance(recomputed, (int, float)):
        a, b = float(recorded), float(recomputed)
        if not (math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE) or (math.isnan(a) and math.isnan(b))):
            out.append(f"{path}: recorded {recorded!r}, recomputed {recomputed!r}")
    elif isinstance(recorded, dict) and isinstance(recomputed, dict):
        for k in sorted(set(recorded) | set(recomputed), key=str):
            if k not in recorded or k not in recomputed:
                out.append(f"{path}.{k}: {'not recorded' if k not in recorded else 'not recomputed'}")
            else:
                differences(recorded[k], recomputed[k], f"{path}.{k}" if path else str(k), out)
    elif isinstance(recorded, list) and isinstance(recomputed, list):
        if len(recorded) != len(recomputed):
            out.append(f"{path}: {len(recorded)} entries recorded, {len(recomputed)} recomputed")
        else:
            for i, (a, b) in enumerate(zip(recorded, recomputed)):
                differences(a, b, f"{path}[{i}]", out)
    elif recorded != recomputed:
        out.append(f"{path or '(top)'}: recorded {recorded!r}, recomputed {recomputed!r}")
    return out


def recheck(folder: Path) -> list[str]:
    """Every reported number that does not follow from the package's records (empty: all do)."""
    try:
        listed = json.loads((folder / "manifest.json").read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return []  # the file check reports an unreadable manifest
    if REPORT_FILE not in listed:
        return []  # not assessed: nothing reported
    try:
        return _recheck(folder)
    except Exception as exc:  # damaged records: report, never raise
        return [f"the evaluation records cannot be recomputed ({type(exc).__name__}: {exc})"]


def _recheck(folder: Path) -> list[str]:
    from forge.evaluation import load_package
    from forge.evaluation.prompt import read_reply

    problems: list[str] = []
    panel = json.loads((folder / PANEL_FILE).read_text())
    rows = read_responses((folder / RESPONSES_FILE).read_bytes())
    items = item_rows(folder)  # read once for the matrix check, gate F and the report
    problems += [f"{RESPONSES_FILE}: {p}" for p in matrix_problems(panel["members"], [it["id"] for it in items], rows)]
    if is_task_package(folder):
        problems += _episode_rows(folder, rows)
        return (problems + _report(folder, panel, rows, items))[:MAX_PROBLEMS]
    pkg = load_package(folder)
    for n, r in enumerate(rows, 1):
        if r.get("item_id") not in pkg.keys:
            continue  # named by the matrix check
        reading, _ = read_reply(str(r.get("response", "")), lambda text: pkg.parse(r["item_id"], text))
        score = pkg.score(r["item_id"], reading) if reading is not None else 0.0
        if reading != r.get("answer") or (reading is not None) != r.get("valid") or not math.isclose(score, float(r.get("score", -1))):
            problems.append(f"{RESPONSES_FILE} row {n} ({r.get('model')}, {r.get('item_id')}): recorded "
                            f"{r.get('answer')!r} scored {r.get('score')}, the package's scorer reads "
                            f"{reading!r} scored {score}")
        if len(problems) >= MAX_PROBLEMS:
            return problems
    problems += _report(folder, panel, rows, items)
    problems += _exports(folder, pkg)
    return problems[:MAX_PROBLEMS]


def _report(folder: Path, panel: dict[str, Any], rows: list[dict[str, Any]], items: list[dict[str, Any]]) -> list[str]:
    """The IRT diagnosis, report.json and the page, each made again (``rows``, ``items``: the
    package's response records and item rows, read once by the caller)."""
    problems = []
    diagnosis = irt_diagnosis(folder, int(panel.get("bootstrap", 0)), int(panel.get("seed", 0)), rows, items)
    problems += [f"{IRT_FILE}: {p}" for p in differences(json.loads((folder / IRT_FILE).read_text()),
                                                          json.loads(diagnosis.to_json()))]
    recorded = json.loads((folder / REPORT_FILE).read_text())
    problems += [f"{REPORT_FILE}: {p}" for p in differences(recorded, compute_report(folder, rows, items))]
    if (folder / HTML_FILE).read_text(encoding="utf-8") != render_report(recorded):
        problems.append(f"{HTML_FILE}: differs from the page report.json renders")
    return problems


def _episode_rows(folder: Path, rows: list[dict[str, Any]]) -> list[str]:
    """Each agent's task score agrees with its shipped episode record (re-running the episodes
    is re-verification's work)."""
    records = {(r["agent"], r["task_id"]): r for r in map(json.loads, (folder / EPISODES_FILE).read_text().splitlines())}
    problems = []
    for n, r in enumerate(rows, 1):
        rec = records.get((r.get("model"), r.get("item_id")))
        if rec is None:
            problems.append(f"{RESPONSES_FILE} row {n}: no episode record of {r.get('model')} on {r.get('item_id')}")
        elif float(r.get("score", -1)) != (1.0 if rec["success"] else 0.0):
            problems.append(f"{RESPONSES_FILE} row {n} ({r.get('model')}, {r.get('item_id')}): score {r.get('score')}, "
                            f"its episode {'succeeded' if rec['success'] else 'failed'}")
    return problems


def _exports(folder: Path, pkg: Any) -> list[str]:
    import pyarrow.parquet as pq

    problems = []
    # One thread: a short-lived command that starts Arrow's thread pool can abort at exit.
    shipped = pq.read_table(folder / exports.PARQUET_FILE, use_threads=False).to_pydict()
    if shipped != exports.parquet_columns(pkg.items, pkg.keys):
        problems.append(f"{exports.PARQUET_FILE}: rows differ from the items and answers")
    if json.loads((folder / exports.OPENEQA_FILE).read_text()) != exports.openeqa_records(pkg.items, pkg.keys):
        problems.append(f"{exports.OPENEQA_FILE}: records differ from the items and answers")
    return problems
