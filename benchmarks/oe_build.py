"""Build an N-item OE benchmark from scratch and time it, then time a no-op rebuild and a
one-template rebuild.

    python benchmarks/oe_build.py [--items 2000] [--workers 0]

Prints items per minute, seconds per stage, peak memory (this process and its workers),
and the rebuild times as ratios of the full build.
"""

from __future__ import annotations

import argparse
import shutil
import time


from forge.build import build
from workspace import peak_memory_mb, prepare


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()

    work, path, opts = prepare(args.items, args.workers, "forge-bench-")

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

    peak_self, peak_children = peak_memory_mb()
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
