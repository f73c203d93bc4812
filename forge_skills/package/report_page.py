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


IRT_BACKENDS = ("2pl", "py-irt")


def bayes_cross_check(folder: Path, epochs: int = 1000) -> dict[str, Any]:
    """The py-irt (Bayesian 2PL) fit of the package's response matrix beside the regularized
    fit: rank agreement of slopes and abilities, and each model's ability under both."""
    import numpy as np

    from forge_skills.evaluate import cross_check, fit_2pl, fit_py_irt
    from forge_skills.package.report_data import panel_scores

    scores = panel_scores(folder)
    models, y = scores.models, scores.y
    fit, bayes = fit_2pl(y), fit_py_irt(y, epochs=epochs, seed=0)
    check = cross_check(fit, bayes)
    return {"backend": "py-irt", "priors": bayes.priors, "epochs": bayes.epochs,
            "spearman_a": round(float(check.spearman_a), 4), "spearman_theta": round(float(check.spearman_theta), 4),
            "items": check.n_items, "models": check.n_models,
            "theta": {m: [round(float(t2), 4), round(float(tb), 4)]
                      for m, t2, tb in zip(models, fit.theta, np.asarray(bayes.theta, dtype=float))}}


def package_report(folder: Path, irt_backend: str = "2pl") -> tuple[str, dict[str, Any]]:
    """(the page, its numbers); a package without evaluation records is a ValueError. With
    ``irt_backend="py-irt"`` the Bayesian fit is added as a cross-check of the regularized one."""
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
    if irt_backend not in IRT_BACKENDS:
        raise ValueError(f"--irt-backend {irt_backend!r}: choose one of {', '.join(IRT_BACKENDS)}")
    if irt_backend == "py-irt":
        check = report["irt_cross_check"] = bayes_cross_check(folder)
        section = ("<h2>Bayesian cross-check (py-irt)</h2><p class=\"note\">The same response matrix fitted by py-irt's "
                   f"2PL ({check['priors']} priors, {check['epochs']} epochs) beside the regularized fit: rank "
                   f"agreement of slopes {check['spearman_a']:.3f}, of abilities {check['spearman_theta']:.3f}.</p>"
                   + _table("cross-check", ["model", "ability (regularized 2PL)", "ability (py-irt)"],
                            [(m, t[0], t[1]) for m, t in check["theta"].items()], "no model"))
        page = page.replace("</body></html>", section + "</body></html>")
    return page, report
