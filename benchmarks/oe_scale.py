"""A 10,000-item benchmark from one intent, from scratch, then a one-template rebuild.

    python benchmarks/oe_scale.py [--items 10000] [--workers 0]

Prints items per minute, seconds per stage, renders per item (rendering is shared: one
render serves every item asked about that view), peak memory (main process and the largest
worker) and the one-template rebuild time as a ratio of the full build. Targets on a 2-core
machine: full build within 10 minutes, under 4 GB, one-template rebuild under 5%.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

import yaml

from forge.build import BuildOptions, build
from forge_skills.template_library import builtin_root

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--template", default="closest_choice", help="the template edited for the rebuild")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="forge-scale-"))
    intent = yaml.safe_load((ROOT / "examples" / "tabletop_spatial.yaml").read_text())
    intent["oe"]["items"] = args.items
    intent["templates_dirs"] = ["templates"]
    shutil.copytree(builtin_root() / "tabletop", work / "templates")
    path = work / "intent.yaml"
    path.write_text(yaml.safe_dump(intent, sort_keys=False))
    opts = BuildOptions(store_dir=work / "store", out_dir=work / "out", workers=args.workers, progress=False)

    t0 = time.perf_counter()
    full = build(path, opts)
    t_full = time.perf_counter() - t0
    edited = work / "templates" / f"{args.template}.yaml"
    text = edited.read_text()
    edited.write_text(text.replace("realizations:\n", "realizations:\n  - \"Looking closely, which object is nearest the camera?\"\n", 1))
    t0 = time.perf_counter()
    one = build(path, opts)
    t_one = time.perf_counter() - t0

    views = intent["sources"][0].get("views", 3)
    renders = full["units_collected"] * views
    released = full["items_released"]
    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"items requested              {args.items}")
    print(f"items released               {released}  (candidates {full['items_candidates']}, "
          f"rejected {full['items_rejected']}, repaired {full['artifacts_repaired']})")
    print(f"full build                   {t_full:.1f} s  ({released / t_full * 60:.0f} items/min)")
    for stage, sec in full["stage_seconds"].items():
        print(f"  stage {stage:<22} {sec:.1f} s")
    print(f"renders                      {renders} ({full['units_collected']} scenes x {views} views) "
          f"= {renders / released:.3f} per item")
    print(f"peak memory                  {peak_self:.0f} MB main process, {peak_children:.0f} MB largest worker")
    print(f"one-template rebuild         {t_one:.1f} s = {t_one / t_full:.3f} of full  "
          f"(skills executed {one['skills_executed']}, items re-created {one['nodes']['realize']['created']})")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
