"""Would a person accept these items? Per template of a built package: every blind solver's
accuracy against chance, the share of items whose referents pass the template's visibility
rules, colour-name agreement of the named referents, and the items each check of the current
code would reject.

    python benchmarks/validity.py --example household_robot            # build it, then measure
    python benchmarks/validity.py --package DIR --store DIR [--json]     # measure a built package

Referents, colours and visibility are measured again from the stored source records (raw
segmentation and RGB) with the current naming and the current templates, so packages built
by earlier code can be measured the same way. Blind solvers run cross-fitted on the released
items of each template, scored by the package scorer.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from forge.artifact_types import OEItem, SourceRecord
from forge_skills.verify.blind_solvers import SOLVERS, blind_report
from forge.store import Store
from forge_skills.synthesize.admission import naming_problem, named_slots, shown_views, slot_names, visibility_problem
from forge_skills.synthesize.answer_rules import FactTable, rule_for
from forge_skills.structure.appearance import MIN_NAMED_PIXELS
from forge_skills.structure.scene_evidence import measure_evidence
from forge_skills.synthesize.templates import builtin_root, read_template

ROOT = Path(__file__).resolve().parents[1]
ALPHA, MIN_ITEMS = 0.05, 8  # the blind gate's defaults: an excess it would flag
SHORT = {"answer_prior": "ans", "position_prior": "pos", "longest_option": "long", "shortest_option": "short",
         "question_overlap": "ovl", "category_prior": "cat", "option_frequency": "freq", "constant_number": "const",
         "category_number": "catnum", "bag_of_words": "bow", "marker_geometry": "mark"}


def current_templates() -> dict[str, dict[str, Any]]:
    return {p.stem: read_template(p).model_dump() for p in sorted(builtin_root().glob("*/*.yaml"))}


def measure(store_dir: Path, package: Path) -> dict[str, Any]:
    store = Store(store_dir, read_only=True)
    ids = [json.loads(line)["id"] for line in open(package / "items.jsonl")]
    content = {aid: json.loads(c) for aid, c in store.artifact_column(ids, "content").items()}
    cache: dict[str, Any] = {}

    def load(aid: str) -> dict[str, Any]:
        if aid not in cache:
            cache[aid] = json.loads(store.one("SELECT content FROM artifacts WHERE id = ?", [aid])[0])
        return cache[aid]

    templates = current_templates()
    items = {i: OEItem.model_validate(content[i]) for i in ids}
    rows: dict[str, dict[str, Any]] = defaultdict(lambda: {"items": 0, "referents": 0, "colour_ok": 0,
                                                           "visible_ok": 0, "checked": 0, "lost": Counter()})
    remeasured: dict[str, FactTable] = {}
    for iid, item in items.items():
        row = rows[item.template]
        row["items"] += 1
        binding = load(item.binding)
        evidence = load(binding["evidence"])
        source = load(evidence["source"])
        tpl = templates.get(item.template)
        if tpl is None:
            continue
        if "adapter" in source:  # real images: names and visibility come from labels, not pixels
            from forge_resources.image_folder import adapter_for

            complete = adapter_for(source["adapter"]).labels_complete or source.get("labels_complete") is True
            if rule_for(tpl).complete_labels and not complete:
                row["lost"]["completeness"] += 1
            continue
        if evidence["source"] not in remeasured:
            src = SourceRecord.model_validate(source)
            remeasured[evidence["source"]] = FactTable(
                measure_evidence(src, evidence["source"], store.get_arrays(src.arrays), store.get_image))
        ft = remeasured[evidence["source"]]
        # Names the item shows -> the object they were given to -> its name from pixels now.
        old = {o["name"]: o.get("source_name") or o["name"] for o in evidence["objects"]}
        new = {o.source_name: o.name for o in ft.evidence.objects}
        slots = {k: ([new[old[x]] if x in old else x for x in v] if isinstance(v, list)
                     else new[old[v]] if isinstance(v, str) and v in old else v) for k, v in binding["slots"].items()}
        view = binding["view"]
        shown = shown_views(ft, tpl, view, slots)
        for slot in named_slots(tpl):
            for shown_name, name in zip(slot_names(binding["slots"].get(slot)), slot_names(slots.get(slot))):
                row["referents"] += 1
                word = shown_name.split(" ", 1)[0]
                obj = ft.object(name)
                reads = [ft.fact(name, v).colour for v in shown if ft.fact(name, v).visible_pixels >= MIN_NAMED_PIXELS]
                row["colour_ok"] += int(obj.referable and obj.color == word and all(r == word for r in reads))
        row["checked"] += 1
        naming = naming_problem(ft, tpl, view, slots)
        visibility = visibility_problem(ft, tpl, view, slots)
        row["visible_ok"] += visibility is None
        answer, _ = rule_for(tpl).derive(ft, view, slots, tpl)
        if naming:
            row["lost"]["naming"] += 1
        elif visibility:
            row["lost"]["visibility"] += 1
        elif answer is None:
            row["lost"]["rule"] += 1
    by_template: dict[str, list[tuple[str, OEItem]]] = defaultdict(list)
    for iid in sorted(items):
        by_template[items[iid].template].append((iid, items[iid]))
    out = {}
    for t, group in sorted(by_template.items()):
        report = blind_report(group)
        r = rows[t]
        out[t] = {"items": r["items"], "chance": report["chance"], "accuracies": report["accuracies"],
                  "best_solver": report["best_solver"], "excess": report["excess"], "p_value": report["p_value"],
                  "referents": r["referents"],
                  "colour_agreement": r["colour_ok"] / r["referents"] if r["referents"] else None,
                  "visibility_pass": r["visible_ok"] / r["checked"] if r["checked"] else None,
                  "lost": dict(r["lost"])}
    store.close()
    return out


def _pct(x: float | None) -> str:
    return "   -" if x is None else f"{x * 100:4.0f}"


def print_table(name: str, rows: dict[str, Any]) -> None:
    solvers = list(SOLVERS)
    head = f"{'template':<28} {'n':>5} {'chance':>6} " + " ".join(f"{SHORT[s]:>6}" for s in solvers) + \
           f" {'best+':>6} {'p':>6} {'vis%':>5} {'col%':>5}  lost"
    print(f"\n== {name}: blind accuracy per solver (%), excess of the best over chance (points) and its p-value "
          f"(Bonferroni over the solvers), referents passing visibility (%), colour-name agreement (%), items the "
          f"current checks reject")
    print(head)
    worst = significant = 0.0
    for t, r in rows.items():
        accs = " ".join(f"{r['accuracies'][s] * 100:6.1f}" for s in solvers)
        lost = ", ".join(f"{k} {v}" for k, v in sorted(r["lost"].items())) or "-"
        print(f"{t:<28} {r['items']:>5} {r['chance'] * 100:6.1f} {accs} {r['excess'] * 100:+6.1f} "
              f"{r['p_value']:6.3f} {_pct(r['visibility_pass']):>5} {_pct(r['colour_agreement']):>5}  {lost}")
        worst = max(worst, r["excess"])
        if r["p_value"] < ALPHA and r["items"] >= MIN_ITEMS:
            significant = max(significant, r["excess"])
    total = sum(r["items"] for r in rows.values())
    refs = sum(r["referents"] for r in rows.values())
    col = sum((r["colour_agreement"] or 0) * r["referents"] for r in rows.values())
    lost = Counter()
    for r in rows.values():
        lost.update(r["lost"])
    print(f"{'all':<28} {total:>5}  largest excess {worst * 100:+.1f} points, {significant * 100:+.1f} among "
          f"significant ones (Bonferroni p < {ALPHA}, n >= {MIN_ITEMS}); colour agreement "
          f"{col / refs * 100 if refs else 100:.1f}% of {refs} named referents; rejected now: "
          f"{dict(lost) or 'none'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--example", help="build examples/<name>.yaml into a temporary folder, then measure it")
    ap.add_argument("--package", type=Path)
    ap.add_argument("--store", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.example:
        from forge.build import BuildOptions, build

        work = Path(tempfile.mkdtemp(prefix="forge-validity-"))
        summary = build(ROOT / "examples" / f"{args.example}.yaml",
                        BuildOptions(store_dir=work / "store", out_dir=work / "out", progress=False))
        package, store, name = Path(summary["package_path"]), work / "store", args.example
    elif args.package and args.store:
        package, store, name = args.package, args.store, args.package.name
    else:
        ap.error("give --example, or --package and --store")
    rows = measure(store, package)
    if args.json:
        json.dump(rows, sys.stdout, indent=1, default=str)
        print()
    else:
        print_table(name, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
