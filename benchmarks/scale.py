"""The same build on each executor: the local process pool, and Ray with 1 and 2 workers.

    python benchmarks/scale.py [--items 10000] [--example tabletop_spatial] [--skip-local]

Each build starts from an empty store. Prints, per executor, wall time, items per minute, the
collection stage's time, the speedup over Ray with one worker, and whether the package is
byte-identical (manifest and every file checksum) to the local pool's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from forge.build import BuildOptions, build
from workspace import peak_memory_mb, prepare


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--example", default="tabletop_spatial")
    args = ap.parse_args()
    work, path, opts = prepare(args.items, 2, "forge-ray-scale-", copy_templates=False, example=args.example)
    runs = [("local pool, 2 workers", "local", 2), ("ray, 1 worker", "ray", 1), ("ray, 2 workers", "ray", 2)]
    rows = []
    for label, executor, workers in runs:
        folder = work / label.replace(" ", "_").replace(",", "")
        options = BuildOptions(store_dir=folder / "store", out_dir=folder / "out", workers=workers, progress=False,
                               executor=executor)
        t0 = time.perf_counter()
        summary = build(path, options)
        seconds = time.perf_counter() - t0
        manifest = (Path(summary["package_path"]) / "manifest.json").read_bytes()
        rows.append({"label": label, "seconds": seconds, "released": summary["items_released"],
                     "collect": summary["stage_seconds"].get("S2", 0.0), "manifest": manifest,
                     "files": json.loads(manifest)["files"]})
    ray_one = next(r for r in rows if r["label"] == "ray, 1 worker")["seconds"]
    reference = rows[0]
    print(f"items requested {args.items} ({args.example})")
    print(f"{'executor':<24}{'seconds':>10}{'items/min':>12}{'S2 s':>9}{'speedup vs ray 1':>18}  identical package")
    for r in rows:
        same = r["manifest"] == reference["manifest"] and r["files"] == reference["files"]
        print(f"{r['label']:<24}{r['seconds']:>10.1f}{r['released'] / r['seconds'] * 60:>12.0f}{r['collect']:>9.1f}"
              f"{ray_one / r['seconds']:>18.2f}  {'yes' if same else 'NO'}")
    peak_self, peak_children = peak_memory_mb()
    print(f"peak memory {peak_self:.0f} MB driver, {peak_children:.0f} MB largest child")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
