"""Build and validate the interactive household benchmark from scratch, and time it.

    python benchmarks/ie_build.py [--tasks 220] [--workers 0]

Prints tasks per minute, seconds per stage, the C2 executions (reference runs, prefix checks and
controls), tasks by split and scene type, the reference agent's and a random agent's SR, and peak
memory. Target on a 2-core machine: all 220 tasks built and validated in at most 10 minutes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path


from forge.build import BuildOptions, build
from workspace import example_intent, peak_memory_mb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=220)
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    work, path = example_intent("household_interactive", "forge-ie-",
                                lambda intent: intent["ie"].update(tasks=args.tasks))
    t0 = time.perf_counter()
    s = build(path, BuildOptions(store_dir=work / "store", out_dir=work / "out", workers=args.workers, progress=False))
    seconds = time.perf_counter() - t0
    pkg = Path(s["package_path"])
    comp = json.loads((pkg / "composition.json").read_text())
    checked = s["gates"]["C2"]["pass"] + s["gates"]["C2"].get("fail", 0)
    plans = [json.loads(p.read_text())["reference_plan"] for p in (pkg / "answers").glob("*.json")]
    # C2 per task: three executions of the reference plan (each prefix checked on the way) and two controls.
    executions = checked * (3 + 2)
    from forge_skills.ie.evaluation import evaluate_agent

    t1 = time.perf_counter()
    ref = evaluate_agent(pkg, "reference", None)
    rnd = evaluate_agent(pkg, "random", None)
    eval_s = time.perf_counter() - t1
    peak_self, peak_children = peak_memory_mb()
    print(f"tasks requested      {args.tasks}")
    print(f"tasks released       {s['tasks_released']}  (candidates {s['tasks_candidates']}, accepted {s['tasks_accepted']},"
          f" scene units {s['units_collected']}, top-ups {s['topups']})")
    print(f"build + validation   {seconds:.1f} s  ({s['tasks_released'] / seconds * 60:.0f} tasks/min)")
    for stage, sec in s["stage_seconds"].items():
        print(f"  stage {stage:<14} {sec:.1f} s")
    print(f"gates                B2 {s['gates']['B2']}, C2 {s['gates']['C2']}, D2 {s['gates']['D2']}")
    print(f"C2 executions        {executions} ({checked} tasks x 3 reference runs + 2 controls)")
    print(f"reference plans      mean {sum(map(len, plans)) / len(plans):.1f} steps, max {max(map(len, plans))}")
    print("splits               " + ", ".join(f"{k} {v}" for k, v in comp["splits"].items()))
    print("scene types          " + ", ".join(f"{k} {v['simple']['achieved']}+{v['hard']['achieved']}"
                                            for k, v in comp["scene_types"].items()))
    print(f"reference agent      SR {ref['metrics']['overall']['SR']:.3f}, "
          f"EQA {ref['metrics']['overall']['EQA_accuracy']:.3f}")
    print(f"random agent         SR {rnd['metrics']['overall']['SR']:.3f}  (episodes of both: {eval_s:.1f} s)")
    print(f"peak memory          {peak_self:.0f} MB main process, {peak_children:.0f} MB largest worker")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
