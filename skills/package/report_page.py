"""``forge report PACKAGE``: the evaluation report page recomputed from the package's records,
with the runs ``forge eval`` stored beside the package (``PACKAGE/.eval``) added as a table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from forge_skills.package.report_data import REPORT_FILE, compute_report
from forge_skills.package.report_html import _table, render_report


def later_runs(folder: Path) -> list[dict[str, Any]]:
    """The reports ``forge eval`` wrote for this package (``.eval/*.json``), by model."""
    out = []
    for path in sorted((folder / ".eval").glob("*.json")):
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(report, dict) and "accuracy" in report and "model" in report:
            out.append(report)
    return out


def package_report(folder: Path) -> tuple[str, dict[str, Any]]:
    """(the page, its numbers); a package without evaluation records is a ValueError."""
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    if REPORT_FILE not in manifest.get("files", {}):
        raise ValueError(f"{folder}: the package has no evaluation records (built before gates E and F ran, or "
                         "by a track that writes none)")
    report = json.loads(json.dumps(compute_report(folder)))
    page = render_report(report)
    runs = later_runs(folder)
    if runs:
        rows = [(r["model"], r.get("label"), r.get("items"), r.get("accuracy"), r.get("invalid")) for r in runs]
        section = ("<h2>Later evaluations (forge eval)</h2><p class=\"note\">Runs stored beside the package; not part "
                   "of the released records.</p>"
                   + _table("later-runs", ["model", "label", "items", "accuracy", "invalid responses"], rows, "none"))
        page = page.replace("</body></html>", section + "</body></html>")
    report["later_runs"] = [{"model": r["model"], "accuracy": r.get("accuracy")} for r in runs]
    return page, report
