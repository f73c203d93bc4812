"""Build the LIBERO benchmarks from scratch, re-verify them, and time them: the arm's
(``examples/arm_libero.yaml``), the household robot's (``examples/household_libero.yaml``) and
LIBERO's own tasks as interactive tasks (``examples/libero_interactive.yaml``).

    python benchmarks/libero_build.py [--items 1000] [--household-items 600] [--tasks 120] [--workers 0] [--keep]

Prints, per OE example, items per minute, scenes rendered and renders per item, seconds per
stage and re-verification; for the interactive one, tasks per minute, units tried and admitted
with the reasons the others were not, the gates, the reference and random agents' SR and
re-verification; then peak memory (the main process and the largest worker). ``--items 0``,
``--household-items 0`` or ``--tasks 0`` skips one; ``--keep`` keeps each build's folder (store
and package) and prints where. Needs the LIBERO extra (pip install -e ".[libero]").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from collections import Counter
from pathlib import Path

from forge.build import BuildOptions, build
from forge.store import Store
from forge_skills.oe.verify.reverify import reverify_package
from workspace import example_intent, peak_memory_mb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--household-items", type=int, default=600)
    ap.add_argument("--tasks", type=int, default=120)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep each build's folder")
    args = ap.parse_args()
    for example, items in (("arm_libero", args.items), ("household_libero", args.household_items)):
        if items:
            run(example, items, args.workers, args.keep)
    if args.tasks:
        run_tasks(args.tasks, args.workers, args.keep)
    peak_self, peak_children = peak_memory_mb()
    print(f"peak memory            {peak_self:.0f} MB main process, {peak_children:.0f} MB largest worker")


def run(example: str, items: int, workers: int, keep: bool) -> None:
    work, path = example_intent(example, f"forge-{example}-", lambda intent: intent["oe"].update(items=items))
    t0 = time.perf_counter()
    s = build(path, BuildOptions(store_dir=work / "store", out_dir=work / "out", workers=workers, progress=False))
    seconds = time.perf_counter() - t0
    pkg = Path(s["package_path"])
    comp = json.loads((pkg / "composition.json").read_text())
    t1 = time.perf_counter()
    with Store(work / "store", read_only=True) as store:
        report = reverify_package(store, pkg)
        views, scenes = store.one("SELECT sum(json_array_length(json_extract(content, '$.views'))), count(*) "
                                  "FROM artifacts WHERE type = 'SourceRecord'")
    reverify_s = time.perf_counter() - t1
    released = s["items_released"]
    print(f"== {example}")
    print(f"items requested        {items}")
    print(f"items released         {released}  (candidates {s['items_candidates']}, accepted {s['items_accepted']}, "
          f"top-ups {s.get('topups', 0)})  composition met: {comp['composition_met']}")
    print(f"build                  {seconds:.1f} s  ({released / seconds * 60:.0f} items/min) on "
          f"{workers or os.cpu_count()} worker(s)")
    for stage, sec in s["stage_seconds"].items():
        print(f"  stage {stage:<16} {sec:.1f} s")
    print(f"renders                {scenes} scenes, {views} camera views ({views / max(released, 1):.2f} per item; "
          "each RGB + depth + segmentation)")
    print(f"re-verification        {report['items'] - report['invalid']}/{report['items']} valid  ({reverify_s:.1f} s)")
    if keep:
        print(f"kept                   {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


def run_tasks(tasks: int, workers: int, keep: bool) -> None:
    from forge_skills.ie.evaluation import evaluate_agent
    from forge_skills.ie.reverify import reverify_ie_package

    work, path = example_intent("libero_interactive", "forge-libero-ie-", lambda intent: intent["ie"].update(tasks=tasks))
    t0 = time.perf_counter()
    s = build(path, BuildOptions(store_dir=work / "store", out_dir=work / "out", workers=workers, progress=False))
    seconds = time.perf_counter() - t0
    pkg = Path(s["package_path"])
    comp = json.loads((pkg / "composition.json").read_text())
    with Store(work / "store", read_only=True) as store:
        rows = store.execute("SELECT json_extract_string(content, '$.suite'), json_extract_string(content, '$.admitted'),"
                             " json_extract_string(content, '$.reason') FROM artifacts WHERE type = 'LiberoTaskState'"
                             ).fetchall()
        t1 = time.perf_counter()
        report = reverify_ie_package(store, pkg)
        reverify_s = time.perf_counter() - t1
    ref = evaluate_agent(pkg, "reference", None)
    rnd = evaluate_agent(pkg, "random", None)
    released = s["tasks_released"]
    print("== libero_interactive")
    print(f"tasks requested        {tasks}")
    print(f"tasks released         {released}  (candidates {s['tasks_candidates']}, accepted {s['tasks_accepted']}, "
          f"units {s['units_collected']}, top-ups {s['topups']})  composition met: {comp['composition_met']}")
    print(f"build + validation     {seconds:.1f} s  ({released / seconds * 60:.1f} tasks/min) on "
          f"{workers or os.cpu_count()} worker(s)")
    for stage, sec in s["stage_seconds"].items():
        print(f"  stage {stage:<16} {sec:.1f} s")
    print(f"gates                  B2 {s['gates']['B2']}, C2 {s['gates']['C2']}, D2 {s['gates']['D2']}")
    print("units per suite        admitted / tried, and why the others were not")
    for suite in sorted({r[0] for r in rows}):
        mine = [r for r in rows if r[0] == suite]
        kept = sum(r[1] == "true" for r in mine)
        reasons = Counter(r[2] for r in mine if r[1] != "true")
        print(f"  {suite:<20} {kept} / {len(mine)}" + "".join(f"\n      {n:>4}  {why}" for why, n in reasons.most_common()))
    print("scene types            " + ", ".join(f"{k} {v['simple']['achieved']}+{v['hard']['achieved']}"
                                              for k, v in comp["scene_types"].items()))
    print(f"reference agent        SR {ref['metrics']['overall']['SR']:.3f}")
    print(f"random agent           SR {rnd['metrics']['overall']['SR']:.3f}")
    print(f"re-verification        {report['items'] - report['invalid']}/{report['items']} valid  ({reverify_s:.1f} s)")
    if keep:
        print(f"kept                   {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
