"""Gate BAL: answers balanced within each template (classes, kinds, listed words, marked places),
with no one set or order answer repeated beyond its share; the kinds and classes allocation
balances bindings by too."""

from __future__ import annotations

import math
from typing import Any, Callable

from forge.gatelog import GateLog
from forge.keys import GateId
from forge.vocabulary import answer_form, question_types
from forge_skills.oe.synthesize.slots import chosen_class
from forge_skills.oe.types import OEItem
from forge_skills.oe.synthesize.marker_place import marked_answer_place

GATE_BAL = GateId("BAL")


def kind_groups(ids: list[str], kind_of: Callable[[str], Any], classes: int) -> list[tuple[Any, list[str]]]:
    """How the balance gate groups a template's items (and allocation its bindings): a kind of
    object is balanced on its own once it has enough to show a prior (a few per answer class),
    smaller kinds together, under the kind None."""
    kinds: dict[Any, list[str]] = {}
    for i in ids:
        kinds.setdefault(kind_of(i), []).append(i)
    own = max(MIN_KIND_GROUP, KIND_ITEMS_PER_CLASS * classes)
    groups: list[tuple[Any, list[str]]] = [(k, m) for k, m in sorted(kinds.items()) if len(m) >= own]
    pooled = sorted(i for m in kinds.values() if len(m) < own for i in m)
    return groups + ([(None, pooled)] if pooled else [])


BALANCE_SLACK = 0.025  # the default blind margin halved, as the balance gate applies it
MIN_KIND_GROUP = 4  # kinds with fewer items than this in a template are balanced together
KIND_ITEMS_PER_CLASS = 4


def _balanced(question_type: str) -> bool:
    """Whether answers are one displayed option, whose texts the balance gate evens out."""
    qt = question_types().get(question_type)
    return bool(qt and qt.balanced)


def answer_class(item: OEItem, bins: list[float] | None = None) -> str | None:
    """What balancing counts: the displayed answer, for select-all items how many options the
    answer chooses, or for numeric items the tolerance-wide bin the value falls in (a flat
    spread of values leaves no typical number to guess)."""
    if _balanced(item.question_type):
        return item.answer
    if answer_form(item.question_type) == "options" and item.answer_indices:
        return chosen_class(len(item.answer_indices))
    if answer_form(item.question_type) == "number" and item.answer_value is not None and bins is not None:
        return f"bin {sum(1 for edge in bins if item.answer_value >= edge)}"
    return None


def tolerance_bins(values: list[float], scoring: dict[str, Any]) -> list[float]:
    """Bin edges over ``values``, each bin as wide as the scorer's tolerance window at its start."""
    abs_tol, rel_tol = float(scoring.get("abs_tol", 0.0)), float(scoring.get("rel_tol", 0.0))
    edges: list[float] = []
    start = None
    for v in sorted(values):
        if start is None or v > start + 2 * max(abs_tol, rel_tol * abs(start), 0.5):
            start = v
            edges.append(v)
    return edges[1:]


def balance_answers(log: GateLog, items: dict[str, OEItem], slack: float, min_items: int) -> list[str]:
    """Hold back items of over-represented answers until no answer class has a share above
    ``1 / classes + slack``, per template and per kind of object the question names (so the
    category named cannot give the answer away: a state question about mugs is upright as often
    as lying). Kinds with few items are balanced together. Which items are kept is decided by
    id, so the choice is reproducible. Templates with fewer than ``min_items`` items are left
    alone (too few to show a prior, as for the blind gate). Then what beside the answer text
    could give it is evened out too: where the answer's marker sits among the others, and which
    words of a select-all list are chosen."""
    by_template: dict[str, list[str]] = {}
    kept: list[str] = []
    repeats: dict[str, list[str]] = {}
    for iid in sorted(items):
        it = items[iid]
        if _balanced(it.question_type) or answer_form(it.question_type) == "number":
            by_template.setdefault(it.template, []).append(iid)
        elif answer_form(it.question_type) in REPEAT_CAPPED:
            repeats.setdefault(it.template, []).append(iid)
        else:
            kept.append(iid)
    for template, ids in repeats.items():
        capped = _cap_repeats(log, template, {i: items[i] for i in ids}, min_items)
        if answer_form(items[ids[0]].question_type) == "options":
            by_template[template] = capped  # and then balanced by how many each chooses
        else:
            kept += capped
    for template, ids in by_template.items():
        if len(ids) < min_items:
            kept += ids
            continue
        first = items[ids[0]]
        bins = tolerance_bins([items[i].answer_value for i in ids if items[i].answer_value is not None],
                              first.scoring) if answer_form(first.question_type) == "number" else None
        classes = (len(bins) + 1) if bins is not None else _classes(list(items[i] for i in ids))
        balanced: list[str] = []
        for kind, members in kind_groups(ids, lambda i: tuple(items[i].kinds), classes):
            balanced += _balance_group(log, template, kind or ("(few)",), {i: items[i] for i in members}, bins, slack)
        balanced = _balance_places(log, template, sorted(balanced), items, slack)
        if answer_form(first.question_type) == "options":
            balanced = _balance_listed_words(log, template, balanced, items)
        kept += balanced
    return sorted(kept)


LISTED_WORD_SKEW = 0.15  # a word's chosen share may stray this far from the template's
LISTED_WORD_MIN = 12  # listings a word needs before its share is held to that


def _balance_listed_words(log: GateLog, template: str, ids: list[str], items: dict[str, OEItem]) -> list[str]:
    """Select-all items held back until no word of the listed options is chosen much more or
    much less often than options are on the whole: ducks and mugs, small at room scale, were
    listed as out of view eleven times in twelve, and the names alone told which were not seen.
    The last items by id listing the most skewed word on its heavy side go first."""
    def words(iid: str) -> list[tuple[str, bool]]:
        it = items[iid]
        chosen = set(it.answer_indices or [])
        return [(w, k in chosen) for k, text in enumerate(it.values()) for w in set(text.lower().split())]

    listed = {i: words(i) for i in ids}
    counts: dict[str, list[int]] = {}  # word -> [chosen, not chosen]
    for pairs in listed.values():
        for w, on in pairs:
            counts.setdefault(w, [0, 0])[0 if on else 1] += 1
    kept = list(ids)
    on = sum(c[0] for c in counts.values())
    total = sum(c[0] + c[1] for c in counts.values())
    while True:
        if not total:
            return kept
        base = on / total
        skews = {w: c[0] / (c[0] + c[1]) - base for w, c in counts.items() if c[0] + c[1] >= LISTED_WORD_MIN}
        worst = max(skews, key=lambda w: (abs(skews[w]), w), default=None)
        if worst is None or abs(skews[worst]) <= LISTED_WORD_SKEW:
            return kept
        heavy = skews[worst] > 0
        victim = next(i for i in reversed(kept) if (worst, heavy) in listed[i])
        kept.remove(victim)
        for w, o in listed[victim]:
            counts[w][0 if o else 1] -= 1
            on, total = on - o, total - 1
        log.decide(GATE_BAL, victim, "OEItem", template, "fail",
                   {"reason": f"'{worst}' is listed {'chosen' if heavy else 'not chosen'} too often"})


def _balance_places(log: GateLog, template: str, ids: list[str], items: dict[str, OEItem], slack: float
                    ) -> list[str]:
    """Marked-object answers held back where their markers would sit at one place too often (the
    lower of two markers the nearer), so that the markers' positions alone tell no more than
    chance."""
    place = {i: marked_answer_place(items[i].markers, items[i].answer) for i in ids}
    kept = place_balanced(ids, place.__getitem__, slack)
    for iid in sorted(set(ids) - set(kept)):
        log.decide(GATE_BAL, iid, "OEItem", template, "fail", {"answer_place": place[iid],
                                                                "reason": "the answer's marker sits here too often"})
    return kept


PLACE_ITEMS_PER_MARKER = 8  # a template's marked answers are evened out by place from this many per marker


def place_balanced(ids: list[str], place_of: Callable[[str], str], slack: float) -> list[str]:
    """``ids`` (in their order) less those whose answer's marker would sit at one rank, down or
    across the picture, in more than ``1 / markers + slack`` of them (every rank counted, so the
    lowest marker cannot be the answer more often than chance). Ids without a place are kept."""
    kept = list(ids)
    for axis in (1, 0):  # down first: the nearer of two is mostly the lower
        ranks: dict[int, list[str]] = {}
        markers = 0
        for i in kept:
            parts = place_of(i).split(",")
            if len(parts) == 3:  # left, below, markers
                ranks.setdefault(int(parts[axis]), []).append(i)
                markers = max(markers, int(parts[2]))
        if not ranks or sum(len(v) for v in ranks.values()) < PLACE_ITEMS_PER_MARKER * markers:
            return kept  # too few for the markers to show a prior (C1 still tests what there is)
        counts = [len(ranks.get(r, [])) for r in range(markers)]
        cap = balance_cap(counts, 1.0 / markers + slack)
        dropped = {i for members in ranks.values() for i in members[cap:]}
        kept = [i for i in kept if i not in dropped]
    return kept


REPEAT_CAPPED = ("options", "order", "matching")  # answers that are sets, orders or pairings of names
REPEAT_SHARE = 0.05  # no one such answer above this share of a template's items (at least two)


def _cap_repeats(log: GateLog, template: str, items: dict[str, OEItem], min_items: int) -> list[str]:
    """Sets, orders and pairings of names are too many to balance, but one that recurs (the same
    objects seen in every frame of a walk) gives an answer prior a foothold: each distinct answer
    keeps at most a small share of the template's items, the first by id."""
    if len(items) < min_items:
        for iid in items:
            log.decide(GATE_BAL, iid, "OEItem", template, "pass")
        return sorted(items)
    cap = max(2, math.ceil(REPEAT_SHARE * len(items)))
    seen: dict[str, int] = {}
    kept = []
    for iid in sorted(items):
        answer = items[iid].answer
        seen[answer] = seen.get(answer, 0) + 1
        if seen[answer] <= cap:
            kept.append(iid)
            log.decide(GATE_BAL, iid, "OEItem", template, "pass")
        else:
            log.decide(GATE_BAL, iid, "OEItem", template, "fail", {"answer": answer, "repeat_cap": cap})
    return kept


def _balance_group(log: GateLog, template: str, kind: tuple, items: dict[str, OEItem], bins: list[float] | None,
                   slack: float) -> list[str]:
    classes: dict[str, list[str]] = {}
    for iid in sorted(items):
        classes.setdefault(answer_class(items[iid], bins) or "", []).append(iid)
    first = next(iter(items.values()))
    n_classes = (len(bins) + 1) if bins is not None else _classes(list(items.values()))
    limit = 1.0 / max(1, n_classes) + slack
    cap = balance_cap([len(v) for v in classes.values()], limit)
    if answer_form(first.question_type) == "number" and len(classes) == 1:
        cap = 0  # one typical number: guessable
    kept = []
    for answer, ids in classes.items():
        for k, iid in enumerate(ids):
            if k < cap:
                kept.append(iid)
                log.decide(GATE_BAL, iid, "OEItem", template, "pass")
            else:
                log.decide(GATE_BAL, iid, "OEItem", template, "fail",
                           {"answer": answer, "kind": list(kind), "cap": cap, "max_share": round(limit, 4)})
    return kept


def _classes(items: list[OEItem]) -> int:
    """How many answer classes a template's items take: one per option, or for select-all items
    the counts of chosen options that are not rare (:func:`select_classes`)."""
    if answer_form(items[0].question_type) == "options":
        sizes: dict[int, int] = {}
        for it in items:
            sizes[len(it.answer_indices or [])] = sizes.get(len(it.answer_indices or []), 0) + 1
        return select_classes(list(sizes.values()))
    return max(len(it.options) for it in items)


RARE_CLASS_SHARE = 0.05


def select_classes(sizes: list[int]) -> int:
    """How many counts of chosen options a select-all template's balance evens out: those holding
    at least RARE_CLASS_SHARE of its items, and never fewer than two (one count alone is a guess
    that pays). Asking every possible count its equal share held the tray lists of four to six
    items in a household build: three of four objects in trays happened twice in 243 lists, and
    capped one and two of four at two items each."""
    total = sum(sizes)
    return max(2, sum(1 for n in sizes if n >= RARE_CLASS_SHARE * total))


def balance_cap(counts: list[int], limit: float) -> int:
    """The largest per-answer cap under which no answer holds more than ``limit`` of the kept
    items (0 when even one item per answer is too many, or there is a single answer)."""
    counts = sorted(counts, reverse=True)
    for m in range(counts[0] if counts else 0, 0, -1):
        capped = [min(c, m) for c in counts]
        if len(capped) > 1 and max(capped) / sum(capped) <= limit:
            return m
    return 0
