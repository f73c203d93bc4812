"""Build the robosuite manipulation benchmarks from scratch, re-verify them, and time them: the
OE one (generated scenes and replayed real demonstrations) and the interactive one (tasks with
physical verifiers).

    python benchmarks/robosuite_build.py [--items 2000] [--tasks 66] [--workers 0]

Prints renders per second (RGB, depth and segmentation of one camera view), items per minute,
seconds per stage, units per source and the re-verification result for OE; tasks per minute,
the seeds and bindings admitted, the executions gate C2 ran, re-verification and the reference
and random agents' success rates for IE; peak memory. ``--items 0`` or ``--tasks 0`` skips a
half. Needs the robosuite extra (pip install -e ".[robosuite]") and the demonstrations in
../shared/data.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path


from forge.build import BuildOptions, build
from forge.store import Store
from forge_skills.oe.verify.reverify import reverify_package
from workspace import example_intent, peak_memory_mb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--tasks", type=int, default=66)
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    if args.items:
        oe(args)
    if args.tasks:
        ie(args)
    peak_self, peak_children = peak_memory_mb()
    print(f"peak memory          {peak_self:.0f} MB main process, {peak_children:.0f} MB largest worker")


def oe(args: argparse.Namespace) -> None:
    def resize(intent: dict) -> None:
        scale = args.items / intent["oe"]["items"]
        intent["oe"]["items"] = args.items
        for src in intent["sources"]:
            if src.get("scenes"):  # the scene count the example sets, scaled with the items
                src["scenes"] = max(2, round(src["scenes"] * scale))

    work, path = example_intent("arm_robosuite", "forge-robosuite-", resize)
    t0 = time.perf_counter()
    s = build(path, BuildOptions(store_dir=work / "store", out_dir=work / "out", workers=args.workers, progress=False))
    seconds = time.perf_counter() - t0
    pkg = Path(s["package_path"])
    comp = json.loads((pkg / "composition.json").read_text())
    t1 = time.perf_counter()
    with Store(work / "store", read_only=True) as store:
        report = reverify_package(store, pkg)
        views = store.one("SELECT sum(json_array_length(json_extract(content, '$.views'))) FROM artifacts "
                          "WHERE type = 'SourceRecord'")[0]
    reverify_s = time.perf_counter() - t1
    collect_s = s["stage_seconds"].get("S2", 0.0)
    workers = args.workers or os.cpu_count() or 1
    print(f"items requested      {args.items}")
    print(f"items released       {s['items_released']}  (candidates {s['items_candidates']}, accepted "
          f"{s['items_accepted']}, top-ups {s.get('topups', 0)})")
    print("units by source      " + ", ".join(f"{k} {v}" for k, v in s["units_by_source"].items()))
    print("items by source      " + ", ".join(f"{k} {v['items']}" for k, v in comp["sources"].items()))
    print(f"build                {seconds:.1f} s  ({s['items_released'] / seconds * 60:.0f} items/min)")
    for stage, sec in s["stage_seconds"].items():
        print(f"  stage {stage:<14} {sec:.1f} s")
    print(f"renders              {views} camera views in S2 ({views / collect_s:.1f} views/s over {workers} "
          f"worker(s), each RGB + depth + segmentation)")
    print(f"re-verification      {report['items'] - report['invalid']}/{report['items']} valid  ({reverify_s:.1f} s)")
    shutil.rmtree(work, ignore_errors=True)


def ie(args: argparse.Namespace) -> None:
    from forge_resources.robosuite.task_kinds import wrong_target_control
    from forge_skills.ie.evaluation import evaluate_agent
    from forge_skills.ie.manipulation import subgoals_of
    from forge_skills.ie.manipulation_checks import REPEATS
    from forge_skills.ie.reverify import reverify_ie_package

    work, path = example_intent("tabletop_interactive", "forge-robosuite-ie-",
                                lambda intent: intent["ie"].update(tasks=args.tasks))
    t0 = time.perf_counter()
    s = build(path, BuildOptions(store_dir=work / "store", out_dir=work / "out", workers=args.workers, progress=False))
    seconds = time.perf_counter() - t0
    pkg = Path(s["package_path"])
    adm = json.loads((pkg / "composition.json").read_text())["admission"]
    with Store(work / "store", read_only=True) as store:  # every task the gates checked
        rows = store.execute("SELECT DISTINCT a.content FROM artifacts a JOIN verifications v ON v.artifact_id = a.id "
                             "WHERE a.type = 'IETask' AND v.requirement_id = 'C2-1'").fetchall()
    tasks = [json.loads(r[0]) for r in rows]
    controls = sum(1 + (wrong_target_control(subgoals_of(t["goal"], t["verifier"]["environment"]),
                                             t["verifier"]["environment"]) is not None) for t in tasks)
    t1 = time.perf_counter()
    report = reverify_ie_package(None, pkg)
    reverify_s = time.perf_counter() - t1
    ref = evaluate_agent(pkg, "reference")["metrics"]["overall"]
    rnd = evaluate_agent(pkg, "random:0")["metrics"]["overall"]
    print(f"tasks requested      {args.tasks}")
    print(f"tasks released       {s['tasks_released']}  (accepted {s['tasks_accepted']}, rejected "
          f"{s['tasks_rejected']})  gates {s['gates']}")
    print(f"seeds admitted       {adm['states_admitted']}/{adm['states_tried']}  {adm['not_admitted'] or ''}")
    print(f"bindings admitted    {adm['references_reached']}/{adm['bindings_drawn']} (scripted reference reached "
          "the goal, no strict prefix did)")
    print(f"build                {seconds:.1f} s  ({s['tasks_released'] / seconds * 60:.1f} tasks/min)")
    for stage, sec in s["stage_seconds"].items():
        print(f"  stage {stage:<14} {sec:.1f} s")
    print(f"C2 executions        {REPEATS * len(tasks) + controls} over {len(tasks)} tasks ({REPEATS} reference runs "
          f"each, {controls} controls)")
    print(f"re-verification      {report['items'] - report['invalid']}/{report['items']} valid  ({reverify_s:.1f} s)")
    print(f"reference agent      SR {ref['SR']:.3f}  EQA {ref['EQA_accuracy']:.3f}  avg steps {ref['avg_steps']}")
    print(f"random agent         SR {rnd['SR']:.3f}  EQA {rnd['EQA_accuracy']:.3f}  avg steps {rnd['avg_steps']}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
