"""S5 gates E and F on a released package, its evaluation report, and its exports.

Gate E: the panel (built-in simulated solvers, plus models whose scored replies the build passes
in) answers every released item; the response matrix must be complete (contract PKG-3). Gate F:
the regularized 2PL fit of that matrix, with the model bootstrap and information curves; it
flags items (reversed, near-zero discrimination) and never releases or rejects one. The report
(``report.json`` and ``report.html``) is computed from the records the package ships, and the
package gains an inspect_ai task, a Parquet split and an OpenEQA-style file.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from forge.artifact_types import Package
from forge.skills import SkillContext, skill
from forge_skills.evaluate.bootstrap import BOOTSTRAP_SEED
from forge_skills.package import exports
from forge_skills.oe.package.oe_package import module_name
from forge.evaluation import item_memo
from forge.evaluation.solvers import DEFAULT_PANEL
from forge_skills.package.episode_panel import DEFAULT_AGENTS, EPISODES_FILE, episode_responses, is_task_package
from forge_skills.package.panel import matrix_problems, response_lines, solver_responses
from forge_skills.package.report_data import (BUILD_FILE, HTML_FILE, IRT_FILE, PANEL_FILE, REPORT_FILE, RESPONSES_FILE,
                                              compute_report, irt_diagnosis, item_rows, model_results,
                                              panel_scores)
from forge_skills.package.report_html import render_report


class AssessParams(BaseModel):
    panel: list[str] = Field(default_factory=lambda: list(DEFAULT_PANEL),
                             description="built-in solvers of gate E's panel (builtin:NAME[:ARG])")
    model_members: list[dict[str, Any]] = Field(default_factory=list,
                                                description="panel models: {model, label} per member, in order")
    model_rows: list[dict[str, Any]] = Field(default_factory=list,
                                             description="the panel models' scored responses, one per item")
    agents: list[str] = Field(default_factory=lambda: list(DEFAULT_AGENTS),
                              description="built-in agents of gate E for interactive tasks")
    bootstrap: int = Field(1000, ge=0, description="model-bootstrap replicates of the IRT fit (0: none)")
    seed: int = BOOTSTRAP_SEED
    build: dict[str, Any] = Field(default_factory=dict, description="the build's record: funnel, repairs, skills, "
                                                                    "blind margins")


_ROW = json.JSONEncoder(sort_keys=True, ensure_ascii=False)  # one encoder for a hundred thousand rows


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(_ROW.encode(r) + "\n" for r in rows).encode()


def _json(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _one_field_per_line(obj: dict[str, Any]) -> bytes:
    """A record with a line per top-level field: readable, and written by the C encoder (an
    indented IRT record of 10,000 items is 150,000 lines through the pure-Python one)."""
    fields = (f" {json.dumps(k)}: {json.dumps(v, allow_nan=False, ensure_ascii=False)}" for k, v in obj.items())
    return ("{\n" + ",\n".join(fields) + "\n}\n").encode()


@skill("package.assess", stage="S5", params=AssessParams, consults=("episode_panel",))
def assess(ctx: SkillContext, package: Package) -> list[Package]:
    """Gates E and F over the released items, the evaluation report and the exports."""
    p = ctx.params
    files = dict(package.files)

    def add(rel: str, data: bytes | bytearray, folder: Path | None = None) -> None:
        """Store a file the assessment adds to the package at once (and write it into the working
        folder where a later step reads it): a hundred thousand responses need not wait in memory."""
        files[rel] = ctx.put_blob(data)
        if folder is not None:
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(data)

    with tempfile.TemporaryDirectory(prefix="forge-assess-") as tmp:
        folder = Path(tmp)
        for rel, blob in files.items():
            if not rel.startswith("media/"):  # the panel reads items and keys; media stay in the store
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_bytes(ctx.get_blob(blob))
        tasks = is_task_package(folder)
        if tasks:  # interactive tasks: agents run the episodes
            members, rows, records = episode_responses(folder, p.agents)
            add(EPISODES_FILE, _jsonl(records), folder)
            listed = item_rows(folder)
        else:  # the items, the key and the scorer read once, for the panel and the exports
            from forge.evaluation import load_package

            pkg = load_package(folder)
            memo = item_memo.memo_key(pkg)  # the unchanged items' replies, from the last assessment
            item_memo.load(pkg, ctx.store.get_memo(memo))
            solvers, rows = solver_responses(pkg, p.panel)
            ctx.store.put_memo(memo, item_memo.dump(pkg, (it["id"] for it in pkg.items)))
            pkg.memo.clear()  # what the panel computed is in the rows now; the rest needs the room
            members = [asdict(m) for m in solvers]
            mod = module_name(package.name)
            add(exports.TASK_FILE, exports.inspect_task(mod))
            add(f"{mod}/prompt.py", exports.prompt_module())
            add(exports.PARQUET_FILE, exports.parquet(pkg.items, pkg.keys))
            free_form = exports.openeqa_records(pkg.items, pkg.keys)
            add(exports.OPENEQA_FILE, exports.openeqa(free_form))
            listed = item_rows(folder, pkg.items)
            del pkg  # and its replies read by the panel: gate F needs the room
        panel = {"members": members + [{**m, "simulated": False} for m in p.model_members],
                 "bootstrap": p.bootstrap, "seed": p.seed,
                 "note": "members marked simulated are built-in solvers computed here, not models"}
        rows += p.model_rows
        problems = matrix_problems(panel["members"], [it["id"] for it in listed], rows)
        if problems:
            raise ValueError("gate E: the response matrix is incomplete: " + "; ".join(problems[:5]))
        order = {m["model"]: k for k, m in enumerate(panel["members"])}
        rows.sort(key=lambda r: (order[r["model"]], r["item_id"]))
        add(PANEL_FILE, _json(panel), folder)
        add(RESPONSES_FILE, response_lines(rows))  # not into the folder: gate F and the report take what follows
        add(BUILD_FILE, _json(p.build), folder)
        scores, results = panel_scores(folder, rows, listed), model_results(panel, rows, listed)
        del rows  # gate F and the report need only these two: the bootstrap gets the records' room
        diagnosis = irt_diagnosis(folder, p.bootstrap, p.seed, scores=scores)
        add(IRT_FILE, _one_field_per_line(diagnosis.to_dict()), folder)
        del diagnosis
        report_json = _json(compute_report(folder, items=listed, models=results))
    add(REPORT_FILE, report_json)
    report = json.loads(report_json)  # the page renders what report.json says, as verify re-renders it
    add(HTML_FILE, render_report(report).encode())
    readme = ctx.get_blob(files["README.md"]).decode().rstrip("\n") + "\n\n"
    if tasks:
        add("README.md", (readme + _readme_section(report, None)).encode())
    else:  # question items run in other tools too
        add("README.md", (exports.dataset_card_header(package.name) + readme
                          + _readme_section(report, len(free_form))).encode())
    manifest = json.loads(ctx.get_blob(package.manifest))
    manifest.pop("files", None)
    manifest["evaluation"] = {"panel": [m["model"] for m in panel["members"]],
                              "simulated": [m["model"] for m in panel["members"] if m["simulated"]],
                              "flagged_items": len(report["irt"]["flagged"]), "report": HTML_FILE}
    manifest["files"] = {rel: files[rel] for rel in sorted(files) if rel != "manifest.json"}
    files["manifest.json"] = ctx.put_blob((json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode())
    return [Package(name=package.name, version=package.version, files=files, counts=package.counts,
                    manifest=files["manifest.json"])]


def _readme_section(report: dict[str, Any], openeqa_items: int | None) -> str:
    models = report["models"]
    irt = report["irt"]
    what = "ran every task's episode" if openeqa_items is None else "answered every item"
    score = "Success rate" if openeqa_items is None else "Accuracy"
    lines = ["## Evaluation", "",
             f"Gate E: {len(models)} panel members {what} "
             f"({sum(m['simulated'] for m in models)} simulated: built-in, not models). "
             f"{score}: " + ", ".join(f"{m['model']} {m['accuracy']:.3f}" for m in models) + ".", "",
             f"Gate F (2PL IRT, auxiliary): {irt['band_counts'].get('high', 0)} high, "
             f"{irt['band_counts'].get('moderate', 0)} moderate, {irt['band_counts'].get('low', 0)} low and "
             f"{irt['band_counts'].get('reversed', 0)} reversed items; {len(irt['flagged'])} flagged for diagnosis "
             "(`report.json`, `evaluation/irt.json`).", "",
             "The report is `report.html`; `forge verify` recomputes every number in it from `evaluation/` and the "
             "items.", ""]
    if openeqa_items is None:
        return "\n".join(lines)
    lines += ["Run it elsewhere:", "",
              f"    inspect eval {exports.TASK_FILE} --model PROVIDER/MODEL      # inspect_ai",
              f"    datasets.load_dataset(\"PATH/TO/PACKAGE\")                    # the {exports.PARQUET_FILE} split",
              "",
              f"`{exports.OPENEQA_FILE}` holds the {openeqa_items} items with a free-form answer in OpenEQA's format.",
              ""]
    return "\n".join(lines)
