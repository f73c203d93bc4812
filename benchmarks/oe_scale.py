"""A 10,000-item benchmark from one intent, from scratch, then a one-template rebuild.

    python benchmarks/oe_scale.py [--items 10000] [--workers 0] [--example tabletop_spatial --template closest_choice]

Prints items per minute, seconds per stage, renders per item (rendering is shared: one
render serves every item asked about that view), peak memory (main process and the largest
worker) and the one-template rebuild time as a ratio of the full build. Targets on a 2-core
machine: full build within 10 minutes, under 4 GB, one-template rebuild under 5%.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from forge.build import build
from forge.intent import load_intent
from workspace import peak_memory_mb, prepare


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--template", default="closest_choice", help="the template edited for the rebuild")
    ap.add_argument("--example", default="tabletop_spatial", help="the example intent (examples/<name>.yaml)")
    args = ap.parse_args()
    work, path, opts = prepare(args.items, args.workers, "forge-scale-", example=args.example)

    t0 = time.perf_counter()
    full = build(path, opts)
    t_full = time.perf_counter() - t0
    edited = work / "templates" / f"{args.template}.yaml"
    text = edited.read_text()
    edited.write_text(text.replace("realizations:\n", "realizations:\n  - \"Looking closely, which object is nearest the camera?\"\n", 1))
    t0 = time.perf_counter()
    one = build(path, opts)
    t_one = time.perf_counter() - t0

    views = load_intent(path).intent.sources[0].views  # cameras per scene (frames, plus an overview)
    renders = full["units_collected"] * views
    released = full["items_released"]
    peak_self, peak_children = peak_memory_mb()
    print(f"items requested              {args.items}")
    print(f"items released               {released}  (candidates {full['items_candidates']}, "
          f"rejected {full['items_rejected']}, repaired {full['artifacts_repaired']})")
    print(f"full build                   {t_full:.1f} s  ({released / t_full * 60:.0f} items/min)")
    for stage, sec in full["stage_seconds"].items():
        print(f"  stage {stage:<22} {sec:.1f} s")
    print(f"renders                      {renders} ({full['units_collected']} scenes x {views} views) "
          f"= {renders / released:.3f} per item")
    comp = json.loads((Path(full["package_path"]) / "composition.json").read_text())
    short = {c: f"{r['achieved']}/{r['target']}" for c, r in comp["capabilities"].items() if not r["within_tolerance"]}
    print(f"composition                  {'met' if full['composition_met'] else 'NOT met'} within "
          f"{comp['tolerance']:.0%}" + (f" (short: {short})" if short else ""))
    print(f"peak memory                  {peak_self:.0f} MB main process, {peak_children:.0f} MB largest worker")
    print(f"one-template rebuild         {t_one:.1f} s = {t_one / t_full:.3f} of full  "
          f"(skills executed {one['skills_executed']}, items re-created {one['nodes']['realize']['created']})")
    print("  " + ", ".join(f"{stage} {sec:.1f} s" for stage, sec in one["stage_seconds"].items()))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
