"""Would a person accept these items? Per template of a built package: every blind solver's
accuracy against chance (the marker-only solver among them), the share of items whose referents
pass the template's visibility rules, colour-name agreement of the named referents, how much of
each named referent shows (visible share of its whole projection), how well it stands out
(CIELAB contrast), the image margin that decides the comparison, the share of items stating
every convention their key relies on, the difficulty bands, and the items each check of the
current code would reject.

    python benchmarks/validity.py --example household_robot            # build it, then measure
    python benchmarks/validity.py --package DIR --store DIR [--json]     # measure a built package

Referents, colours, contrast, margins and visibility are measured again from the stored source
records (raw segmentation and RGB) with the current naming and the current templates, so
packages built by earlier code can be measured the same way (a visible share needs the source
to have rendered objects alone: '-' where it did not). Blind solvers run cross-fitted on the
released items of each template, scored by the package scorer; items built before markers were
recorded on them get the geometry their rings were drawn with.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from forge_skills.oe.types import EvidenceRecord, OEItem, SourceRecord
from forge_skills.oe.verify.blind_solvers import SOLVERS, blind_report
from forge.errors import DefinitionError
from forge.store import Store
from forge_skills.oe.synthesize.admission import (naming_problem, named_slots, shown_views, slot_names,
                                                  visibility_problem)
from forge_skills.oe.synthesize.answer_rules import rule_for
from forge_skills.oe.synthesize.fact_table import FactTable
from forge_skills.oe.synthesize.conventions import statements
from forge_skills.oe.synthesize.difficulty import BANDS
from forge_skills.oe.structure.appearance import MIN_NAMED_PIXELS, NAMES as COLOUR_NAMES
from forge_skills.oe.structure.scene_evidence import measure_evidence
from forge_skills.oe.synthesize.templates import builtin_root, read_template

ROOT = Path(__file__).resolve().parents[1]
# Templates the library no longer holds (the marker-only solver beats them) measure old packages.
RETIRED = ROOT / "tests" / "fixtures" / "leaky_templates"
ALPHA, MIN_ITEMS = 0.05, 8  # the blind gate's defaults: an excess it would flag
SHORT = {"answer_prior": "ans", "position_prior": "pos", "longest_option": "long", "shortest_option": "short",
         "question_overlap": "ovl", "category_prior": "cat", "option_frequency": "freq", "constant_number": "const",
         "category_number": "catnum", "bag_of_words": "bow", "marker_geometry": "mark"}


def current_templates() -> dict[str, dict[str, Any]]:
    paths = sorted(builtin_root().glob("*/*.yaml")) + sorted(RETIRED.glob("*.yaml"))
    out = {}
    for p in paths:
        try:
            out[p.stem] = read_template(p).model_dump()
        except DefinitionError:  # an interactive task template, not an item template
            continue
    return out


def _old_markers(binding: dict[str, Any], evidence: dict[str, Any]) -> list[dict[str, Any]]:
    """The geometry of rings drawn before items recorded it: one per marked box, sized to it."""
    marks = binding["presentation"].get("markers") or []
    if not marks or "bbox" not in marks[0]:
        return []
    view = next(v for v in evidence["views"] if v["index"] == binding["view"])
    out = []
    for m in marks:
        x0, y0, x1, y1 = m["bbox"]
        out.append({"label": m["label"], "x": (x0 + x1) / 2 / view["width"], "y": (y0 + y1) / 2 / view["height"],
                    "r": (max(x1 - x0, y1 - y0) / 2 + 5) / view["height"]})
    return out


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


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
                                                           "visible_ok": 0, "checked": 0, "lost": Counter(),
                                                           "share": [], "contrast": [], "margin": [],
                                                           "stated": 0, "needs": False, "bands": Counter()})
    remeasured: dict[str, FactTable] = {}
    for iid, item in items.items():
        row = rows[item.template]
        row["items"] += 1
        binding = load(item.binding)
        evidence = load(binding["evidence"])
        source = load(evidence["source"])
        if not item.markers:
            items[iid] = item = item.model_copy(update={"markers": _old_markers(binding, evidence)})
        tpl = templates.get(item.template)
        if tpl is None:
            continue
        if "adapter" in source:  # real images: names and visibility come from labels, not pixels
            from forge_resources.image_folder import adapter_for

            complete = adapter_for(source["adapter"]).labels_complete or source.get("labels_complete") is True
            if rule_for(tpl).complete_labels and not complete:
                row["lost"]["completeness"] += 1
            ft = FactTable(EvidenceRecord.model_validate(evidence))
            slots, view = binding["slots"], binding["view"]
        else:
            if evidence["source"] not in remeasured:
                src = SourceRecord.model_validate(source)
                remeasured[evidence["source"]] = FactTable(
                    measure_evidence(src, evidence["source"], store.get_arrays(src.arrays), store.get_image))
            ft = remeasured[evidence["source"]]
            # Names the item shows -> the object they were given to -> its name from pixels now.
            old = {o["name"]: o.get("source_name") or o["name"] for o in evidence["objects"]}
            new = {o.source_name: o.name for o in ft.evidence.objects}
            slots = {k: ([new[old[x]] if x in old else x for x in v] if isinstance(v, list)
                         else new[old[v]] if isinstance(v, str) and v in old else v)
                     for k, v in binding["slots"].items()}
            view = binding["view"]
        shown = shown_views(ft, tpl, view, slots)
        _referents(row, ft, tpl, binding, slots, shown)
        rule = rule_for(tpl)
        answer, why = rule.derive(ft, view, slots, tpl)
        if answer is not None:
            row["bands"][rule.difficulty_of(why, tpl, ft, view)] += 1
            if why.get("image_margin") is not None:
                row["margin"].append(float(why["image_margin"]))
        needs = rule.conventions_of(tpl)
        row["needs"] = row["needs"] or bool(needs)
        texts, _ = statements(ft.evidence, tpl, shown)
        said = f"{item.question} {item.instruction}"
        row["stated"] += bool(needs) and len(texts) >= len(needs) and all(t in said for t in texts)
        if "adapter" in source:
            continue
        row["checked"] += 1
        naming = naming_problem(ft, tpl, view, slots)
        visibility = visibility_problem(ft, tpl, view, slots)
        row["visible_ok"] += visibility is None
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
                  "visible_share": _median(r["share"]), "visible_share_min": min(r["share"], default=None),
                  "contrast": _median(r["contrast"]), "contrast_min": min(r["contrast"], default=None),
                  "image_margin": _median(r["margin"]),
                  "stated": r["stated"] / r["items"] if r["needs"] and r["items"] else None,
                  "bands": {b: r["bands"].get(b, 0) for b in BANDS}, "lost": dict(r["lost"])}
    store.close()
    return out


def _referents(row: dict[str, Any], ft: FactTable, tpl: dict[str, Any], binding: dict[str, Any],
               slots: dict[str, Any], shown: list[int]) -> None:
    """Colour agreement, visible share and contrast of the objects the item names or marks."""
    names = {n for slot in named_slots(tpl) for n in slot_names(slots.get(slot))}
    names |= set(slot_names(slots.get("marked")))
    shown_names = {n: s for slot in named_slots(tpl)
                   for s, n in zip(slot_names(binding["slots"].get(slot)), slot_names(slots.get(slot)))}
    for name in sorted(names):
        if name not in ft.objects:
            continue
        facts = [ft.fact(name, v) for v in shown if ft.fact(name, v).visible_pixels > 0]
        row["share"] += [f.visible_share for f in facts if f.visible_share is not None]
        row["contrast"] += [f.contrast for f in facts if f.contrast is not None]
        if name in shown_names:
            row["referents"] += 1
            word = shown_names[name].split(" ", 1)[0]
            obj = ft.object(name)
            reads = [f.colour for f in facts if f.visible_pixels >= MIN_NAMED_PIXELS]
            by_colour = word in COLOUR_NAMES  # identity names ("the milk carton") carry no colour
            row["colour_ok"] += int(obj.referable and (not by_colour or (obj.color == word
                                                                         and all(r == word for r in reads))))


def _pct(x: float | None) -> str:
    return "   -" if x is None else f"{x * 100:4.0f}"


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def print_table(name: str, rows: dict[str, Any]) -> None:
    solvers = list(SOLVERS)
    head = f"{'template':<30} {'n':>5} {'chance':>6} " + " ".join(f"{SHORT[s]:>6}" for s in solvers) + \
           f" {'best+':>6} {'p':>6} {'vis%':>5} {'col%':>5} {'share':>5} {'ctr':>5} {'margin':>6} {'said%':>5} " \
           f"{'e/m/h':>11}  lost"
    print(f"\n== {name}: blind accuracy per solver (%; 'mark' reads only the markers), excess of the best over "
          f"chance (points) and its p-value (Bonferroni over the solvers), referents passing visibility (%), "
          f"colour-name agreement (%), median visible share and CIELAB contrast of named referents, median "
          f"image margin, items stating every convention the key relies on (%), difficulty bands, items the "
          f"current checks reject")
    print(head)
    worst = significant = 0.0
    for t, r in rows.items():
        accs = " ".join(f"{r['accuracies'][s] * 100:6.1f}" for s in solvers)
        lost = ", ".join(f"{k} {v}" for k, v in sorted(r["lost"].items())) or "-"
        bands = "/".join(str(r["bands"][b]) for b in BANDS)
        print(f"{t:<30} {r['items']:>5} {r['chance'] * 100:6.1f} {accs} {r['excess'] * 100:+6.1f} "
              f"{r['p_value']:6.3f} {_pct(r['visibility_pass']):>5} {_pct(r['colour_agreement']):>5} "
              f"{_num(r['visible_share'], '.2f'):>5} {_num(r['contrast'], '.0f'):>5} {_num(r['image_margin'], '.3f'):>6} "
              f"{_pct(r['stated']):>5} {bands:>11}  {lost}")
        worst = max(worst, r["excess"])
        if r["p_value"] < ALPHA and r["items"] >= MIN_ITEMS:
            significant = max(significant, r["excess"])
    total = sum(r["items"] for r in rows.values())
    refs = sum(r["referents"] for r in rows.values())
    col = sum((r["colour_agreement"] or 0) * r["referents"] for r in rows.values())
    lost = Counter()
    bands = Counter()
    for r in rows.values():
        lost.update(r["lost"])
        bands.update(r["bands"])
    needing = [r for r in rows.values() if r["stated"] is not None]
    stated = sum(r["stated"] * r["items"] for r in needing) / max(1, sum(r["items"] for r in needing))
    rated = sum(bands.values()) or 1
    print(f"{'all':<30} {total:>5}  largest excess {worst * 100:+.1f} points, {significant * 100:+.1f} among "
          f"significant ones (Bonferroni p < {ALPHA}, n >= {MIN_ITEMS}); colour agreement "
          f"{col / refs * 100 if refs else 100:.1f}% of {refs} named referents; conventions stated in "
          f"{stated * 100:.0f}% of the items that rely on one; difficulty "
          + ", ".join(f"{b} {bands[b] / rated:.0%}" for b in BANDS) + f"; rejected now: {dict(lost) or 'none'}")


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
