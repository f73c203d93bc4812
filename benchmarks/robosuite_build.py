"""Build the robosuite manipulation benchmark (generated scenes and replayed real
demonstrations) from scratch, re-verify it, and time it.

    python benchmarks/robosuite_build.py [--items 2000] [--workers 0]

Prints renders per second (RGB, depth and segmentation of one camera view), items per minute,
seconds per stage, units per source, the re-verification result and peak memory. Needs the
robosuite extra (pip install -e ".[robosuite]") and the demonstrations in ../shared/data.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import yaml

from forge.build import BuildOptions, build
from forge.store import Store
from forge_skills.verify.reverify import reverify_package
from workspace import ROOT, peak_memory_mb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="forge-robosuite-"))
    intent = yaml.safe_load((ROOT / "examples" / "arm_robosuite.yaml").read_text())
    scale = args.items / intent["oe"]["items"]
    intent["oe"]["items"] = args.items
    for src in intent["sources"]:
        if "root" in src:
            src["root"] = str((ROOT / "examples" / src["root"]).resolve())
        if src.get("scenes"):  # the scene count the example sets, scaled with the items
            src["scenes"] = max(2, round(src["scenes"] * scale))
    path = work / "intent.yaml"
    path.write_text(yaml.safe_dump(intent, sort_keys=False))
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
    peak_self, peak_children = peak_memory_mb()
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
    print(f"peak memory          {peak_self:.0f} MB main process, {peak_children:.0f} MB largest worker")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
