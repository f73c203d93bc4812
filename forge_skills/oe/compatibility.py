"""Whether an OE intent can be built from its sources' templates, before anything runs: every asked
capability and question type paired by some template, items per source that fit the package;
and which pairs a synthesizer would have to write."""

from __future__ import annotations

from typing import Any

from forge.errors import CompositionError, IntentError
from forge.intent import LoadedIntent
from forge.planner import available_templates


def missing_pairs(loaded: LoadedIntent) -> list[tuple[str, str]]:
    """(capability, question type) pairs a synthesizer would have to write so that every asked
    capability and question type has a template: an unpaired capability with the first asked
    question type, an unpaired question type with the first asked capability."""
    oe = loaded.intent.oe
    rows = _usable_templates(loaded)
    unavailable = {c for s in loaded.intent.sources for c in s.unavailable(list(oe.capabilities))}
    out: list[tuple[str, str]] = []
    for cap in oe.capabilities:
        if cap not in unavailable and not {r["question_type"] for r in rows if r["capability"] == cap} & set(oe.question_types):
            out.append((cap, oe.question_types[0]))
    for qt in oe.question_types:
        if not {r["capability"] for r in rows if r["question_type"] == qt} & set(oe.capabilities) \
                and not any(q == qt for _, q in out):
            out.append((next(c for c in oe.capabilities if c not in unavailable), qt))
    return out


def _usable_templates(loaded: LoadedIntent) -> list[dict[str, Any]]:
    oe = loaded.intent.oe
    rows = available_templates(loaded)
    if oe.templates != "all":
        rows = [r for r in rows if r["id"] in oe.templates]
    return rows


def _check_source_units(loaded: LoadedIntent) -> None:
    """A source whose contents decide its units (a folder) and that has none is named with what
    it looked for, before anything runs."""
    for index, src in enumerate(loaded.intent.sources):
        # Folders from the intent's folder, links kept, so the message can say where one leads.
        located = src.model_copy(update={f: str(loaded.path.parent.absolute() / getattr(src, f))
                                         for f in type(src).FOLDERS if getattr(src, f, None)})
        if located.fixed_units(located.model_dump(mode="json")) == 0:
            raise IntentError(f"{loaded.path}: sources.{index} ({src.kind}): {located.no_units({})}")


def check_compatibility(loaded: LoadedIntent) -> None:
    """Every asked capability and question type has a template of the intent's sources that
    pairs it with an asked counterpart, before anything runs; the message lists what would."""
    oe = loaded.intent.oe
    _check_source_units(loaded)
    _check_source_items(loaded)
    rows = available_templates(loaded)
    kinds = ", ".join(sorted({s.kind for s in loaded.intent.sources}))
    if oe.templates != "all":
        known = {r["id"] for r in rows}
        missing = [t for t in oe.templates if t not in known]
        if missing:
            raise CompositionError(f"intent field oe.templates: no template {missing} for source {kinds}; "
                                   f"available: {sorted(known)}")
        rows = [r for r in rows if r["id"] in oe.templates]
    unavailable = {c for s in loaded.intent.sources for c in s.unavailable(list(oe.capabilities))}
    problems = []
    for cap in oe.capabilities:
        if cap in unavailable:
            continue
        pairs = {r["question_type"] for r in rows if r["capability"] == cap}
        if not pairs & set(oe.question_types):
            problems.append(f"capability {cap!r}: " + (f"its templates for {kinds} ask {sorted(pairs)} "
                                                        f"(none of oe.question_types)" if pairs
                                                        else f"no template for {kinds}"))
    for qt in oe.question_types:
        pairs = {r["capability"] for r in rows if r["question_type"] == qt}
        if not pairs & set(oe.capabilities):
            problems.append(f"question type {qt!r}: " + (f"its templates for {kinds} test {sorted(pairs)} "
                                                          f"(none of oe.capabilities)" if pairs
                                                          else f"no template for {kinds}"))
    if problems:
        offered = sorted({(r["capability"], r["question_type"]) for r in rows})
        raise CompositionError(
            f"{loaded.path}: the intent asks for what no template of its sources gives:\n  " + "\n  ".join(problems)
            + "\n  compatible (capability, question type) pairs: "
            + ", ".join(f"{c}/{q}" for c, q in offered),
            hint="choose among the compatible pairs, or add a template (intent field templates_dirs); "
                 "`forge templates` lists them")


def _check_source_items(loaded: LoadedIntent) -> None:
    """Items set per source must fit the package: two or more sources, at most ``oe.items`` in
    all, exactly that when every source sets its own."""
    given = [(i, s.items) for i, s in enumerate(loaded.intent.sources) if s.items]
    if not given:
        return
    total, items = sum(n for _, n in given), loaded.intent.oe.items
    where = f"{loaded.path}: intent field sources.{given[0][0]}.items"
    if len(loaded.intent.sources) < 2:
        raise CompositionError(f"{where}: items per source needs two or more sources (the one source gives all "
                               f"{items} items)")
    if total > items or (len(given) == len(loaded.intent.sources) and total != items):
        raise CompositionError(f"{where}: the sources' items add up to {total}, the package has oe.items = {items}")
