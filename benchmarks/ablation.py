"""The closed loop against its ablations, on one seed and one injected defect rate.

    python benchmarks/ablation.py [--items 1000] [--rate 0.04]

Plants the same defects in every variant (wrong answer keys, raw segmentation media, hidden
views, evidence joined to the wrong frame, inadmissible bindings, one broken answer program,
answer-revealing option text, one template with a position shortcut), builds, and
re-verifies every released item independently from the raw simulator arrays. Prints per variant: valid rate of released items, items
released, artifacts rebuilt by repairs, wall time, and the released templates a text-only
solver still beats (shortcuts no single item shows).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import yaml

from forge.build import ABLATIONS, BuildOptions, build
from forge.faults import Fault, FaultPlan
from forge.store import Store
from forge_skills.oe.verify.reverify import reverify_package
from workspace import prepare


def defect_plan(rate: float) -> FaultPlan:
    return FaultPlan([
        Fault("wrong_answer_key", "synthesize.realize_item", rate=rate, seed=1),
        Fault("raw_segmentation_media", "synthesize.realize_item", rate=rate / 2, seed=2),
        Fault("hidden_view_media", "synthesize.realize_item", rate=rate * 2, seed=3),
        Fault("answer_first", "synthesize.realize_item", where={"template": "closest_choice"}, seed=4),
        Fault("shortcut_phrase", "synthesize.realize_item", rate=rate / 2, seed=8),
        Fault("wrong_frame_join", "structure.rendered_evidence", rate=rate * 2, seed=5),
        Fault("below_admission", "synthesize.bind_template", rate=rate, seed=6),
        Fault("systematic_wrong_answer", "synthesize.bind_template", where={"template": "left_of_yesno"}, seed=7),
    ])


def shortcut_templates(store: Store, package: Path, margin: float = 0.15, alpha: float = 0.01) -> list[str]:
    """Released templates whose items a text-only solver answers well above chance: valid items
    one by one, but the release carries a shortcut (what gate C1 exists to stop)."""
    import json

    from forge_skills.oe.types import OEItem
    from forge_skills.oe.verify.blind_solvers import blind_report

    by_template: dict[str, list] = {}
    for line in open(package / "answers.jsonl"):
        iid = json.loads(line)["id"]
        item = OEItem.model_validate_json(store.one("SELECT content FROM artifacts WHERE id = ?", [iid])[0])
        by_template.setdefault(item.template, []).append((iid, item))
    out = []
    for template, items in sorted(by_template.items()):
        r = blind_report(items)
        if r["excess"] > margin and r["p_value"] < alpha:
            out.append(f"{template} ({r['best_solver']} {r['best_accuracy']:.2f} vs {r['chance']:.2f})")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=0.04)
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    work, path, _ = prepare(args.items, args.workers, "forge-ablation-", copy_templates=False)
    print(f"{args.items} items requested, defect rate {args.rate}, seed {yaml.safe_load(path.read_text())['seed']}")
    print(f"{'variant':<18} {'valid rate':>10} {'invalid':>8} {'released':>9} {'rebuilt':>8} {'planted':>8} {'seconds':>8}"
          "  released templates a blind solver beats")
    for variant in (None, *ABLATIONS):
        name = variant or "full loop"
        plan = defect_plan(args.rate)
        opts = BuildOptions(store_dir=work / name / "store", out_dir=work / name / "out", workers=args.workers,
                            progress=False, ablate=variant, faults=plan)
        t0 = time.perf_counter()
        try:
            s = build(path, opts)
        except Exception as exc:  # an ablation may fail to release anything; report it
            print(f"{name:<18} build failed: {exc}")
            continue
        seconds = time.perf_counter() - t0
        with Store(work / name / "store", read_only=True) as store:
            rv = reverify_package(store, Path(s["package_path"]))
            shortcuts = shortcut_templates(store, Path(s["package_path"]))
        rebuilt = (s.get("repair") or {}).get("artifacts_rebuilt", 0)
        print(f"{name:<18} {rv['valid_rate']:>10.4f} {rv['invalid']:>8} {s['items_released']:>9} {rebuilt:>8} "
              f"{len(plan.injected):>8} {seconds:>8.1f}  {', '.join(shortcuts) or '-'}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
