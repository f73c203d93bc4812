"""The evaluation report as one self-contained HTML page (inline SVG, no script, no outside file),
rendered from ``report.json`` alone, so the page and the numbers cannot disagree."""

from __future__ import annotations

from html import escape
from typing import Any, Sequence

from forge_skills.package import svg

CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1000px; color: #222; line-height: 1.4; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.6rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; } td.n { text-align: right; }
th { background: #f3f5f8; } .note { color: #555; font-size: 0.9rem; } svg.plot { display: block; margin: 0.5rem 0; }
.sim { color: #8a5a00; font-size: 0.8rem; }
"""


def _table(name: str, head: Sequence[str], rows: Sequence[Sequence[Any]], empty: str) -> str:
    """A table with a header; ``empty`` is its one row when there is nothing to list."""
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f'<td class="n">{v:.4g}</td>'
        if isinstance(v, int) and not isinstance(v, bool):
            return f'<td class="n">{v}</td>'
        return f"<td>{escape('' if v is None else str(v))}</td>"
    body = "".join("<tr>" + "".join(cell(v) for v in r) + "</tr>" for r in rows) or \
        f'<tr><td colspan="{len(head)}">{escape(empty)}</td></tr>'
    return (f'<table data-table="{escape(name)}"><thead><tr>' + "".join(f"<th>{escape(h)}</th>" for h in head)
            + f"</tr></thead><tbody>{body}</tbody></table>")


def _model_label(m: dict[str, Any]) -> str:
    return f"{m['model']} (simulated)" if m["simulated"] else m["model"]


def render_report(r: dict[str, Any]) -> str:
    pkg = r["package"]
    parts = [f"<h1>{escape(pkg['name'])} {escape(pkg['version'])}: evaluation report</h1>",
             f'<p class="note">Track {escape(str(pkg["track"]))}, {pkg["items"]} released items. Every number on this '
             "page is recomputed from the package's own records by <code>forge verify</code>. Panel members marked "
             "simulated are built-in solvers computed without a model.</p>"]
    parts += _composition(r["composition"])
    parts += _funnel(r["funnel"])
    parts += _repairs(r["repairs"])
    parts += _skills(r["skills"])
    parts += _models(r["models"])
    if r.get("episodes"):
        parts += _episodes(r["episodes"])
    parts += _irt(r["irt"])
    parts += _blind(r["blind"])
    parts += _review(r.get("human_review"))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(pkg['name'])} {escape(pkg['version'])} report</title><style>{CSS}</style></head><body>"
            + "\n".join(parts) + "</body></html>\n")


def _composition(c: dict[str, Any]) -> list[str]:
    by, of = c.get("rows", "capability"), c.get("columns", "question type")
    out = ["<h2>Composition</h2>", f'<p class="note">Released items per {escape(by)} and {escape(of)}.</p>',
           svg.heatmap("composition", c["capabilities"], c["question_types"],
                       [[v or None for v in row] for row in c["counts"]], title=f"items per {by} and {of}")]
    rows = [(cap, sum(row)) for cap, row in zip(c["capabilities"], c["counts"])]
    out.append(_table("composition", [by, "items"], rows, "no items"))
    if c.get("by_source"):
        out.append(_table("sources", ["source", "items"], list(c["by_source"].items()), "no source"))
    mix = c.get("difficulty")
    if mix:
        out.append('<p class="note">Difficulty, rated from each item\'s own margins (area ratio, image gap, count '
                   'size, distractors sharing the named object\'s colour or kind); asked shares beside reached ones'
                   + ("." if mix["met"] else f"; not met: {escape(mix['shortfall'])}.") + "</p>")
        out.append(_table("difficulty", ["band", "items", "share", "asked"],
                          [(b, mix["items"][b], f"{mix['shares'][b]:.0%}", f"{mix['target_shares'][b]:.0%}")
                           for b in mix["items"]], "no items"))
    return out


def _funnel(funnel: list[dict[str, Any]]) -> list[str]:
    out = ["<h2>Gate funnel</h2>", '<p class="note">Candidates through each gate to the release.</p>']
    if funnel:
        out.append(svg.bars("funnel", [f["stage"] for f in funnel], [f["items"] for f in funnel],
                            title="items remaining after each gate", fmt="{:.0f}"))
    out.append(_table("funnel", ["stage", "items"], [(f["stage"], f["items"]) for f in funnel], "no record"))
    return out


def _repairs(rep: dict[str, Any]) -> list[str]:
    out = ["<h2>Repairs</h2>"]
    rows = [(op, cause, n) for op, causes in sorted((rep.get("by_operator_and_cause") or {}).items())
            for cause, n in sorted(causes.items())]
    if rows:
        out.append(svg.bars("repairs", [f"{op}: {cause}" for op, cause, _ in rows], [n for *_, n in rows],
                            title="repairs by operator and cause", fmt="{:.0f}"))
    out.append(_table("repairs", ["operator", "cause", "repairs"], rows, "no repair was needed"))
    return out


def _skills(sk: dict[str, Any]) -> list[str]:
    s = sk.get("summary") or {}
    out = ["<h2>Skill reuse</h2>",
           '<p class="note">Skills this build invoked (each counted once); reused: used by at least one other '
           "track or source kind of the registry; specific: only by this one.</p>",
           _table("skill-summary", ["skills used", "reused", "specific", "reuse rate"],
                  [(s.get("used", 0), s.get("reused", 0), s.get("specific", 0), s.get("reuse_rate"))] if s else [],
                  "no record"),
           _table("skills", ["skill", "stage", "source kinds using it", "kind"],
                  [(u["skill"], u["stage"], u["settings"], "specific" if u["specific"] else "reused")
                   for u in sk.get("used", [])], "no record")]
    return out


def _models(models: list[dict[str, Any]]) -> list[str]:
    out = ["<h2>Models (gate E)</h2>"]
    if not models:
        return out + [_table("models", ["model", "accuracy"], [], "no panel answered")]
    labels = [_model_label(m) for m in models]
    out.append(svg.bars("model-accuracy", labels, [m["accuracy"] or 0.0 for m in models], maximum=1.0,
                        title="accuracy per panel member"))
    caps = sorted({c for m in models for c in m["by_capability"]})
    out.append(svg.heatmap("model-capability", labels, caps, [[m["by_capability"].get(c) for c in caps] for m in models],
                           title="accuracy per model and capability", fmt="{:.2f}", maximum=1.0))
    out.append(_table("models", ["model", "reported model ids", "items", "accuracy", "invalid responses", "abstained"],
                      [(_model_label(m), ", ".join(m["models_reported"]), m["items"], m["accuracy"], m["invalid"],
                        m.get("abstained", 0)) for m in models], "no panel answered"))
    return out


def _episodes(ep: dict[str, Any]) -> list[str]:
    rows = [(f"{a['agent']} (simulated)" if a["simulated"] else a["agent"], a["episodes"], a["sr"], a["eqa"], a["srl"],
             a["steps"]) for a in ep.get("agents", [])]
    out = ["<h2>Interactive episodes</h2>",
           '<p class="note">SR: success rate; EQA: trajectory-question accuracy (a micro average over questions); '
           "SRL: success and a correct answer together; steps: the average over every episode.</p>"]
    if rows:
        out.append(svg.bars("episode-sr", [r[0] for r in rows], [r[2] or 0.0 for r in rows], maximum=1.0,
                            title="success rate per agent"))
    out.append(_table("episodes", ["agent", "episodes", "SR", "EQA", "SRL", "average steps"], rows, "no episodes"))
    return out


def _irt(irt: dict[str, Any]) -> list[str]:
    hist = irt["histogram"]
    edges = hist["edges"]
    labels = [f"[{a:g}, {b:g})" for a, b in zip(edges, edges[1:])]
    out = ["<h2>Item diagnosis (gate F, 2PL IRT)</h2>",
           '<p class="note">Auxiliary: flags items for diagnosis; it never releases or rejects an item.</p>',
           _table("irt-summary", ["fit converged", "high-discrimination share", "Spearman (a, top-bottom gap)",
                                  "mean top-bottom gap", "test information peak"],
                  [(str(irt["converged"]), irt["high_disc_share"], irt["spearman_a_gap"], irt["mean_gap"],
                    irt["information"]["theta_peak"])], "no fit"),
           _table("bands", ["band", "items"], list(irt["band_counts"].items()), "no items"),
           svg.bars("discrimination-histogram", labels, hist["counts"], title="items per discrimination (slope a) bin",
                    fmt="{:.0f}")]
    boot = irt.get("bootstrap")
    if boot:
        iv = boot["intervals"]
        out.append(f'<p class="note">Slopes with {boot["level"]:.0%} model-bootstrap intervals ({boot["replicates"]} '
                   f"replicates, seed {boot['seed']}); high-discrimination share interval "
                   f"{boot['high_disc_interval']}.</p>")
        out.append(svg.intervals("discrimination-intervals", [x["a"] for x in iv], [x["low"] for x in iv],
                                 [x["high"] for x in iv], title="slope estimates and bootstrap intervals",
                                 guides=(0.0, 0.3, 0.7)))
    info = irt["information"]
    out.append(svg.curves("information-absolute", info["grid"], {"test information": info["test"]},
                          title="test information", x_label="ability (theta)", y_label="information",
                          marks={"test information": info["theta_peak"]}))
    out.append(svg.curves("information-normalized", info["grid"], {"normalized": info["normalized"]},
                          title="test information normalized by its peak", x_label="ability (theta)",
                          y_label="share of peak", marks={"normalized": info["theta_peak"]}))
    out.append(_table("abilities", ["model", "ability (theta)"], list(irt["theta"].items()), "no model"))
    out.append(_table("flagged", ["item", "slope a", "band", "why"],
                      [(f["item"], f["a"], f["band"], f["why"]) for f in irt["flagged"]], "no item flagged"))
    return out


def _blind(blind: list[dict[str, Any]]) -> list[str]:
    out = ["<h2>Blind-solver margins (gate C1)</h2>",
           '<p class="note">Per template C1 tested: its best blind solver\'s accuracy minus chance. The gate holds a '
           "template back when the excess is above its margin and significant (exact binomial test, Bonferroni over "
           "the solvers), so a small sample may show a larger margin that chance explains.</p>"]
    if blind:
        out.append(svg.bars("blind-margins", [b["template"] for b in blind], [b["margin"] for b in blind],
                            title="best blind accuracy minus chance", fmt="{:+.3f}"))
    out.append(_table("blind", ["template", "items tested", "chance", "best blind solver", "its accuracy", "margin"],
                      [(b["template"], b["items"], b["chance"], b["best_solver"], b["best_accuracy"], b["margin"])
                       for b in blind], "no template had enough items for the blind test"))
    return out


def _review(review: dict[str, Any] | None) -> list[str]:
    out = ["<h2>Human review</h2>"]
    head = ["reviewed", "correct", "accuracy", "95% interval", "released reviewed", "released accuracy",
            "marked trivial"]
    trivial = (review or {}).get("trivial")
    rows = [(review.get("reviewed"), review.get("correct"), review.get("accuracy"), str(review.get("ci95")),
             review.get("released_reviewed"), review.get("released_accuracy"),
             f"{trivial['marked']} of {trivial['n']}" if trivial else "not asked")] if review else []
    return out + [_table("review", head, rows, "no review imported")]
