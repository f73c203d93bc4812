"""S5: assemble the release: items, answer key, media, scorer, composition and manifest.

The package is an artifact whose content maps every file to a blob; the engine writes it to
``packages_out/<name>-<version>/`` atomically. Nothing here depends on time or machine, so
the same accepted items always give byte-identical files.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from forge import PACKAGE_FORMAT_VERSION
from forge.artifact_types import Package
from forge_skills.oe.types import Blueprint, OEItem
from forge.keys import digest
from forge.skills import SkillContext, skill
from forge_skills.oe.verify.gates import source_quotas, split_targets
from forge_skills.oe.synthesize.marker_place import marked_answer_place
from forge_skills.oe.synthesize.difficulty import BANDS, band_quotas, mix_report, steered, template_quotas
from forge_skills.scoring import scorer
from forge_skills.oe.synthesize import media


def module_name(package_name: str) -> str:
    return package_name.replace("-", "_")


class PackageParams(BaseModel):
    human_review: list[dict[str, Any]] = Field(default_factory=list, description="people's verdicts on items "
                                                                                "(forge review --import)")
    quality: dict[str, Any] | None = Field(None, description="the judges' rubric scores (per judge and averaged)")
    model_checks: dict[str, Any] | None = Field(None, description="which checks ran on a model and which on a "
                                                                  "built-in backend")


# The package ships the source of the scoring protocols plugins register beside its scorer.
@skill("package.oe_package", stage="S5", params=PackageParams, consults=("scoring_protocol",))
def oe_package(ctx: SkillContext, blueprint: Blueprint, items: list[OEItem]) -> list[Package]:
    """Select the blueprint's composition from accepted items and lay out the package files."""
    from forge.review import review_summary

    ids = ctx.input_ids["items"]
    # Every accepted item's source kind, read once: selection needs it with items set per
    # source, the composition always.
    kinds = _source_kinds(ctx, items)
    kind_of = dict(zip(ids, kinds))
    selected = select_composition(blueprint, list(zip(ids, items)), kinds)
    review = review_summary(ctx.params.human_review, {i for i, _ in selected})
    mod = module_name(blueprint.name)
    files: dict[str, str] = {}
    item_rows, answer_rows = [], []
    reference = _media_mode(blueprint) == "reference"
    referenced = 0
    for iid, item in selected:
        media_paths = []
        for m in item.media:
            if m.recipe is not None and reference:
                # Pixels that may not be redistributed: the entry says how to rebuild them from the
                # user's own copy of the dataset, and the pixel hash the rebuild must give.
                media_paths.append({"recipe": m.recipe, "pixels_sha256": pixels_sha256(ctx.get_image(m.blob)),
                                    "path": f"media/{m.blob[:32]}.png", "role": m.role, "label": m.label})
                referenced += 1
                continue
            path = f"media/{m.blob[:32]}.png"
            files[path] = m.blob
            media_paths.append({"path": path, "role": m.role, "label": m.label})
        visible = {f: getattr(item, f) for f in OEItem.VISIBLE_FIELDS if f != "media"}
        if not item.targets:
            visible.pop("targets")  # only matching items have targets
        if not item.instruction:
            visible.pop("instruction")  # only items whose keys rely on a stated convention have one
        item_rows.append({"id": iid, **visible, "media": media_paths})
        answer_rows.append({"id": iid, **item.key(), "capability": item.capability,
                            "question_type": item.question_type, "template": item.template})
    composition = _composition(blueprint, [it for _, it in selected], [kind_of[i] for i, _ in selected],
                               Counter(it.capability for it in items))
    if referenced:
        composition["media_referenced"] = referenced
    if review:
        composition["human_review"] = review
    files["items.jsonl"] = ctx.put_blob(_jsonl(item_rows))
    files["answers.jsonl"] = ctx.put_blob(_jsonl(answer_rows))
    files["composition.json"] = ctx.put_blob(_json(composition))
    files[f"{mod}/__init__.py"] = ctx.put_blob(f'"""Scorer of the {blueprint.name} benchmark."""\n'.encode())
    files[f"{mod}/score.py"] = ctx.put_blob(Path(scorer.__file__).read_bytes())
    for name, source in _protocol_files([it for _, it in selected]).items():
        files[f"{mod}/protocols/{name}.py"] = ctx.put_blob(source)
    if referenced:
        files[f"{mod}/media.py"] = ctx.put_blob(Path(media.__file__).read_bytes())
        files[f"{mod}/materialize.py"] = ctx.put_blob((Path(__file__).parent / "materialize.py").read_bytes())
    if ctx.params.quality is not None:
        files["quality.json"] = ctx.put_blob(_json(ctx.params.quality))
    checks = ctx.params.model_checks
    files["README.md"] = ctx.put_blob(_readme(blueprint, composition, mod, ctx.params.quality, checks).encode())
    counts = {"items": len(item_rows), "media": sum(1 for p in files if p.startswith("media/")),
              "media_referenced": referenced, "accepted_candidates": len(items)}
    manifest = {
        "format_version": PACKAGE_FORMAT_VERSION,
        "name": blueprint.name,
        "version": blueprint.version,
        "track": blueprint.track,
        "intent_hash": blueprint.intent_hash,
        "store_snapshot": digest(sorted(i for i, _ in selected)),
        "counts": counts,
        "licence": _licence(blueprint, referenced),
        **({"human_review": review} if review else {}),
        **({"model_checks": checks} if checks else {}),
        "files": {p: files[p] for p in sorted(files)},
    }
    manifest_blob = ctx.put_blob(_json(manifest))
    files["manifest.json"] = manifest_blob
    return [Package(name=blueprint.name, version=blueprint.version, files=files, counts=counts,
                    manifest=manifest_blob)]


def _protocol_files(items: list[OEItem]) -> dict[str, bytes]:
    """The source of every scoring protocol the items use that the scorer does not build in
    (standard-library modules a plugin registered), shipped beside ``score.py``."""
    import inspect

    from forge_skills.scoring import scorer as oe_scorer

    out = {}
    for name in sorted({it.scoring.get("protocol") for it in items} - set(oe_scorer.BUILTIN_PROTOCOLS)):
        module = oe_scorer.protocol_module(name)
        path = inspect.getsourcefile(module) if module is not None else None
        if path is None:
            raise ValueError(f"scoring protocol {name!r} has no source file to ship with the package")
        out[name] = Path(path).read_bytes()
    return out


def select_composition(blueprint: Blueprint, items: list[tuple[str, OEItem]],
                       kinds: list[str] | None = None) -> list[tuple[str, OEItem]]:
    """Meet the capability targets: round-robin over each capability's templates, in id order.
    With items set per source (``kinds``: each item's source kind), each source first gives its
    share of every capability; shortfalls are then filled from any source."""
    quotas = source_quotas(blueprint) if kinds is not None else None
    shares = blueprint.difficulty
    if quotas is None:
        return _select(blueprint.capability_targets, items, shares)
    source_of = {iid: k for (iid, _), k in zip(items, kinds)}
    selected: list[tuple[str, OEItem]] = []
    for kind, targets in split_targets(blueprint.capability_targets, quotas).items():
        selected += _select(targets, [(i, it) for i, it in items if source_of[i] == kind], shares)
    have: dict[str, int] = {}
    for _, it in selected:
        have[it.capability] = have.get(it.capability, 0) + 1
    chosen = {i for i, _ in selected}
    short = {c: t - have.get(c, 0) for c, t in blueprint.capability_targets.items() if have.get(c, 0) < t}
    selected += _select(short, [(i, it) for i, it in items if i not in chosen], shares)
    return sorted(selected, key=lambda x: x[0])


def _select(targets: dict[str, int], items: list[tuple[str, OEItem]],
            shares: dict[str, float] | None = None) -> list[tuple[str, OEItem]]:
    """Per capability, round-robin over its templates (answers taking turns in each); with a
    difficulty mix, each band's quota (``band_quotas``) spread over the templates holding that
    band (``template_quotas``), then whatever band is left."""
    by_cap: dict[str, dict[str, list[tuple[str, OEItem]]]] = {}
    for iid, item in sorted(items, key=lambda x: x[0]):
        by_cap.setdefault(item.capability, {}).setdefault(item.template, []).append((iid, item))
    quotas = band_quotas(targets, {c: {b: sum(it.difficulty == b for pool in by_cap.get(c, {}).values()
                                             for _, it in pool) for b in BANDS} for c in targets}, shares) \
        if shares else {}
    selected: list[tuple[str, OEItem]] = []
    for cap, target in sorted(targets.items()):
        templates = sorted(by_cap.get(cap, {}))
        pools = [_interleave_answers(by_cap[cap][t]) for t in templates]
        if not quotas:
            counts = _round_robin_counts([len(p) for p in pools], target)
            selected += [x for p, n in zip(pools, counts) for x in p[:n]]
            continue
        # Each band's quota spread over the templates holding that band; which items of a
        # template, answers still taking turns.
        item = {iid: it for p in pools for iid, it in p}
        held = {t: {b: sum(it.difficulty == b for _, it in by_cap[cap][t]) for b in BANDS} for t in templates}
        per_template = template_quotas(target, quotas[cap], held)
        for t in templates:
            groups: dict[str, dict[str, list[str]]] = {}
            for iid, it in _interleave_answers(by_cap[cap][t]):
                # Within an answer, places of its marker take turns: bands are not spread evenly over
                # them (the nearer of two is easy when it also stands lower), and drawing towards a
                # band must not let the markers' places give the answer.
                groups.setdefault(it.answer, {}).setdefault(marked_answer_place(it.markers, it.answer), []).append(iid)
            chosen = steered([list(p.values()) for p in groups.values()], sum(per_template[t].values()),
                             lambda i: item[i].difficulty,
                             dict(per_template[t]))
            selected += [(i, item[i]) for i in chosen]
    return sorted(selected, key=lambda x: x[0])


def _round_robin_counts(sizes: list[int], n: int) -> list[int]:
    """How many of each pool round-robin takes to reach ``n`` (one from each in turn)."""
    counts = [0] * len(sizes)
    while sum(counts) < n and any(c < s for c, s in zip(counts, sizes)):
        for i, s in enumerate(sizes):
            if counts[i] < s and sum(counts) < n:
                counts[i] += 1
    return counts


def _interleave_answers(pool: list[tuple[str, OEItem]]) -> list[tuple[str, OEItem]]:
    """Alternate answers (in id order within each) so any prefix keeps the answers balanced."""
    groups: dict[str, list[tuple[str, OEItem]]] = {}
    for iid, item in pool:
        groups.setdefault(item.answer, []).append((iid, item))
    out: list[tuple[str, OEItem]] = []
    lists = [groups[a] for a in sorted(groups, key=lambda a: digest(a))]  # an order unrelated to the text
    for depth in range(max((len(x) for x in lists), default=0)):
        out.extend(x[depth] for x in lists if len(x) > depth)
    return out


def _media_mode(blueprint: Blueprint) -> str:
    """copy or reference; ``auto`` references whatever the source's licence forbids copying."""
    mode = blueprint.sources[0].get("media", "auto")
    return "copy" if mode == "copy" else "reference"


def _licence(blueprint: Blueprint, referenced: int) -> dict[str, Any]:
    from forge.resources import descriptor

    kind = blueprint.sources[0]["kind"]
    terms = descriptor(kind).licence
    note = terms.get(blueprint.sources[0].get("adapter"), terms)
    return {"source": kind, "media_mode": _media_mode(blueprint) if referenced else "copy",
            "media_referenced": referenced, "terms": note}


def pixels_sha256(rgb) -> str:
    import hashlib

    return hashlib.sha256(f"{rgb.shape}".encode() + rgb.tobytes()).hexdigest()


def _within(achieved: int, target: int, tolerance: float) -> bool:
    """At most ``tolerance`` of the target short (never less than one item of slack), never over."""
    return target - max(1, round(target * tolerance)) <= achieved <= target


def _source_kinds(ctx: SkillContext, items: list[OEItem]) -> list[str]:
    """The source kind each item's evidence was collected from (two bulk reads, not two loads
    per item)."""
    evidence = ctx.store.fields({it.evidence for it in items}, {"source": "$.source"})
    records = ctx.store.fields({e["source"] for e in evidence.values()}, {"kind": "$.source_kind"})
    return [records[evidence[it.evidence]["source"]]["kind"] for it in items]


def _short_reason(achieved: int, accepted: int) -> str:
    """Why a capability fell short of its target: no more items passed, or balance held some."""
    if achieved >= accepted:
        return (f"every one of its {accepted} accepted items is released: the contracts and gates held or "
                "rejected its other candidates (the build summary's rejections and templates say which)")
    return (f"{accepted - achieved} of its {accepted} accepted items were left out to keep answers and "
            "templates balanced")


def _composition(blueprint: Blueprint, items: list[OEItem], kinds: list[str],
                 accepted: Counter | None = None) -> dict[str, Any]:
    quotas = source_quotas(blueprint)
    caps = Counter(i.capability for i in items)
    qts = Counter(i.question_type for i in items)
    tpls = Counter(i.template for i in items)
    answers = Counter((i.template, i.answer_index) for i in items)
    short = {c: t for c, t in sorted(blueprint.capability_targets.items())
             if not _within(caps.get(c, 0), t, blueprint.composition_tolerance)}
    return {
        "target_items": blueprint.items_target,
        "items": len(items),
        "tolerance": blueprint.composition_tolerance,
        "tolerance_field": "oe.tolerance",
        "composition_met": not short,
        "shortfall": [{"part": f"{c} items", "target": t, "achieved": caps.get(c, 0),
                       **({"why": _short_reason(caps.get(c, 0), accepted.get(c, 0))} if accepted is not None else {})}
                      for c, t in short.items()],
        "capabilities": {c: {"target": t, "achieved": caps.get(c, 0),
                             "within_tolerance": _within(caps.get(c, 0), t, blueprint.composition_tolerance),
                             **({"shortfall": _short_reason(caps.get(c, 0), accepted.get(c, 0))}
                                if accepted is not None and not _within(caps.get(c, 0), t, blueprint.composition_tolerance)
                                else {}),
                             **({"chosen_by": blueprint.capability_sources[c]} if c in blueprint.capability_sources else {})}
                         for c, t in sorted(blueprint.capability_targets.items())},
        **({"unavailable": dict(sorted(blueprint.unavailable.items()))} if blueprint.unavailable else {}),
        "question_types": dict(sorted(qts.items())),
        "sources": {kind: {"items": n, **({"target": quotas[kind]} if quotas else {}), "capabilities": dict(sorted(Counter(i.capability for i, k in zip(items, kinds)
                                                                          if k == kind).items()))}
                    for kind, n in sorted(Counter(kinds).items())},
        **({"difficulty": mix_report([i.difficulty for i in items], blueprint.difficulty,
                                     {c: dict(sorted(Counter(i.difficulty for i in items if i.capability == c).items()))
                                      for c in sorted(caps)})} if blueprint.difficulty else {}),
        "templates": dict(sorted(tpls.items())),
        "answer_positions": {t: {str(k): v for (tt, k), v in sorted(answers.items(), key=lambda x: (x[0][0], str(x[0][1])))
                                 if tt == t} for t in sorted(tpls)},
    }


def _readme(blueprint: Blueprint, composition: dict[str, Any], mod: str, quality: dict[str, Any] | None = None,
            checks: dict[str, Any] | None = None) -> str:
    lines = [f"# {blueprint.name} {blueprint.version}", "",
             f"Offline-EQA benchmark with {composition['items']} items.", "",
             f"Each capability meets its target within {composition['tolerance']:.0%} "
             f"(at least one item of slack): {'yes' if composition['composition_met'] else 'no'}.", "",
             "| capability | target | achieved | within tolerance |", "|---|---|---|---|"]
    for cap, row in composition["capabilities"].items():
        lines.append(f"| {cap} | {row['target']} | {row['achieved']} | {'yes' if row['within_tolerance'] else 'no'} |")
    for cap, row in composition["capabilities"].items():
        if row.get("shortfall"):
            lines += ["", f"{cap} is short of its target: {row['shortfall']}."]
    if len(composition["sources"]) > 1:
        lines += ["", "Items per source: " + ", ".join(f"{k} {v['items']}" for k, v in composition["sources"].items())
                  + "."]
    for cap, why in composition.get("unavailable", {}).items():
        lines += ["", f"Asked for but not included: {cap}. {why[0].upper() + why[1:]}; its share went to the "
                      "other capabilities."]
    mix = composition.get("difficulty")
    if mix:
        lines += ["", "Difficulty, rated from each item's own margins: " + ", ".join(
            f"{b} {mix['items'][b]} ({mix['shares'][b]:.0%}, asked {mix['target_shares'][b]:.0%})" for b in mix["items"])
            + ("." if mix["met"] else f"; not met: {mix['shortfall']}.")]
    review = composition.get("human_review")
    if review:
        lo, hi = review["ci95"]
        lines += ["", f"Human review: {review['correct']} of {review['reviewed']} sampled items judged correct "
                      f"({review['accuracy']:.0%}, 95% interval {lo:.0%}-{hi:.0%}; {review['ambiguous']} ambiguous, "
                      f"{review['wrong']} wrong, by {', '.join(review['reviewers'])}). Items judged wrong or ambiguous "
                      "were repaired or removed before this release."]
        if review.get("trivial"):
            t = review["trivial"]
            lines[-1] += f" {t['marked']} of the {t['n']} asked were marked answerable at a glance."
    if quality is not None:
        avg = (quality.get("average") or {}).get("items") or {}
        if avg.get("overall") is not None:
            lines += ["", f"Judged quality (rubric, 0-100, {quality['average']['judges']} judge(s), a sample per "
                          f"template): overall {avg['overall']:.1f}; " + ", ".join(
                              f"{d} {avg[d]:.1f}" for d in ("UIA", "FSQ", "QAC", "EGC", "SGC", "AFC", "TSD", "SSC")
                              if avg.get(d) is not None) + " (`quality.json`)."]
        elif quality.get("note"):
            lines += ["", f"Quality rubric: {quality['note']} (`quality.json`)."]
    if checks and checks.get("without_model"):
        lines += ["", "Checks that ran on built-in backends, without a model: " + "; ".join(checks["without_model"])
                  + "."]
    limited = sorted((c, r["detail"]) for c, r in ((checks or {}).get("checks") or {}).items() if r.get("detail"))
    if limited:
        lines += [""] + [f"{c}: {d}." for c, d in limited]
    if composition.get("media_referenced"):
        lines += ["", f"{composition['media_referenced']} media are not included because the source images may not be "
                      "redistributed. Rebuild them from your own copy of the dataset (needs numpy and Pillow):", "",
                  f"    python -m {mod}.materialize --data-root /path/to/dataset", ""]
    lines += ["", "Give models `items.jsonl` and the `media/` folder; keep `answers.jsonl` hidden.",
              "Score predictions (one `{\"id\": ..., \"response\": ...}` per line) with:", "",
              f"    python -m {mod}.score predictions.jsonl", ""]
    declared = _declared_metrics(composition["question_types"])
    if declared:
        lines += ["Besides accuracy, the scorer reports the mean of "
                  + "; ".join(f"{', '.join(m)} ({qt})" for qt, m in declared.items())
                  + " over the items whose reply it can read.", ""]
    return "\n".join(lines)


def _declared_metrics(question_types: dict[str, int]) -> dict[str, tuple[str, ...]]:
    """The secondary metrics each question type in the package declares."""
    from forge.vocabulary import question_types as registered

    known = registered()
    return {qt: known[qt].metrics for qt in sorted(question_types) if qt in known and known[qt].metrics}


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows).encode()


def _json(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()
