"""Build an N-item OE benchmark from scratch and time it, then time a no-op rebuild and a
one-template rebuild.

    python benchmarks/oe_build.py [--items 2000] [--workers 0]

Prints items per minute, seconds per stage, peak memory (this process and its workers),
and the rebuild times as ratios of the full build.
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
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="forge-bench-"))
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

    t0 = time.perf_counter()
    noop = build(path, opts)
    t_noop = time.perf_counter() - t0

    edited = work / "templates" / "closest_choice.yaml"
    edited.write_text(edited.read_text().replace("closest to the camera?", "nearest to the camera?", 1))
    t0 = time.perf_counter()
    one = build(path, opts)
    t_one = time.perf_counter() - t0

    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    released = full["items_released"]
    print(f"items requested              {args.items}")
    print(f"items released               {released}  (candidates {full['items_candidates']}, "
          f"rejected {full['items_rejected']})")
    print(f"scenes collected             {full['units_collected']}  (top-up passes {full['topups']})")
    print(f"full build                   {t_full:.1f} s  ({released / t_full * 60:.0f} items/min)")
    for stage, sec in full["stage_seconds"].items():
        print(f"  stage {stage:<22} {sec:.1f} s")
    print(f"skills executed (full)       {full['skills_executed']}")
    print(f"peak memory                  {peak_self:.0f} MB main process, {peak_children:.0f} MB largest worker")
    print(f"no-op rebuild                {t_noop:.2f} s  = {t_noop / t_full:.3f} of full  "
          f"(skills executed {noop['skills_executed']})")
    print(f"one-template rebuild         {t_one:.2f} s  = {t_one / t_full:.3f} of full  "
          f"(skills executed {one['skills_executed']}, items re-created {one['nodes']['realize']['created']})")
    if args.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
