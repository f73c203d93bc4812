"""Quality gates of the OE track, in the order they apply: A (grey batch per template), B1
(invalid-item screening), DUP (near duplicates), DEP (items whose answers determine each
other), BAL (answer balance) and C1 (evidence-blind evaluation). Gate settings
come from the intent; a decision is stored for every item (and every template for A and C1)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping

from forge_skills.oe.types import OEItem
from forge.gatelog import GateLog
from forge.keys import GateId, digest
from forge.vocabulary import answer_form
from forge_skills.oe.verify.blind_solvers import blind_report
from forge_skills.oe.synthesize.difficulty import BANDS, band_quotas, steered, template_quotas, water_fill
from forge_skills.oe.synthesize.slots import chosen_class
from forge_skills.oe.verify.balance_gate import (BALANCE_SLACK, balance_cap, kind_groups, place_balanced,
                                                 select_classes, tolerance_bins)
from forge_skills.oe.verify.dependence_gates import independent

GATE_A, GATE_B1, GATE_C1 = GateId("A"), GateId("B1"), GateId("C1")


@dataclass(frozen=True, slots=True)
class BindingSummary:
    """The fields allocation needs, read without loading whole bindings (a build holds one per
    binding, 57,000 at 10,000 items: slots, and the caller shares repeated field texts)."""

    template: str
    answer: str
    capability: str
    determinant: str = ""  # what the answer is a function of (bindings sharing one make dependent items)
    question_type: str = ""
    scoring: str = ""  # the template's scoring (JSON): numeric answers balance in tolerance-wide bins
    kinds: str = ""  # the kinds of object the question names (JSON): answers balance per kind
    difficulty: str = "medium"  # easy, medium or hard: allocation draws towards the intent's mix
    place: str = ""  # where the answer's marker lies among the others (marked-object options)


_KEEPABLE: dict[str, dict[str, list[str]]] = {}


def keepable(bindings: dict[str, BindingSummary], min_items: int = 8) -> dict[str, list[str]]:
    """As :func:`_keepable`, remembered for the last few sets of bindings: the yield estimate after
    binding and the allocation that follows ask it of the same bindings (a binding's id fixes its
    summary, so the ids are the key)."""
    key = digest(sorted(bindings), min_items)
    found = _KEEPABLE.get(key)
    if found is None:
        if len(_KEEPABLE) >= 4:
            _KEEPABLE.clear()
        found = _KEEPABLE[key] = _keepable(bindings, min_items)
    return {t: list(ids) for t, ids in found.items()}


def _keepable(bindings: dict[str, BindingSummary], min_items: int) -> dict[str, list[str]]:
    """Per template, the bindings the gates can be expected to let through, in an order whose
    every prefix stays balanced: those whose determinants are independent of each other (as the
    independence gate keeps them), and per kind of object named and answer no more
    than the balance gate's cap. Allocation draws prefixes of these lists, so the items it
    realizes are seldom held back afterwards for dependence or imbalance."""
    kept, _ = independent(_Determinants(bindings))
    per_template: dict[str, list[str]] = {}
    for bid in kept:  # in the independence gate's order
        per_template.setdefault(bindings[bid].template, []).append(bid)
    out: dict[str, list[str]] = {}
    for template, ids in per_template.items():
        answers = _answer_classes(ids, bindings)
        if len(answers) > 12:  # answers that are names: balancing holds back little
            out[template] = ids
            continue
        if len(ids) < min_items:  # the balance gate leaves templates this small alone
            out[template] = _take_turns([answers[a] for a in sorted(answers, key=digest)])
            continue
        cls = {bid: a for a, members in answers.items() for bid in members}
        n_classes = select_classes([len(v) for v in answers.values()]) \
            if answer_form(bindings[ids[0]].question_type) == "options" else len(answers)
        lists = []
        for _, members in kind_groups(ids, lambda b: bindings[b].kinds, len(answers)):
            by_answer: dict[str, list[str]] = {}
            for bid in members:
                by_answer.setdefault(cls[bid], []).append(bid)
            cap = balance_cap([len(v) for v in by_answer.values()], 1.0 / n_classes + BALANCE_SLACK)
            lists.append(_take_turns([by_answer[a][:cap] for a in sorted(by_answer, key=digest)]))
        merged = _merge_balanced(lists, cls)
        out[template] = place_balanced(merged, lambda b: bindings[b].place, BALANCE_SLACK)
    return out


class _Determinants(Mapping[str, dict[str, Any]]):
    """Binding id -> its determinant, parsed when asked: :func:`independent` reads each once, and
    the parsed determinants of a 10,000-item build's bindings held at once take 70 MB."""

    def __init__(self, bindings: dict[str, BindingSummary]) -> None:
        self._bindings = bindings

    def __getitem__(self, bid: str) -> dict[str, Any]:
        text = self._bindings[bid].determinant
        return json.loads(text) if text else {}

    def __iter__(self) -> Iterator[str]:
        return iter(self._bindings)

    def __len__(self) -> int:
        return len(self._bindings)


def binding_determinants(bindings: dict[str, BindingSummary]) -> Mapping[str, dict[str, Any]]:
    """Binding id -> its determinant (parsed when read), as :func:`independent` takes them."""
    return _Determinants(bindings)


def _merge_balanced(lists: list[list[str]], answer_of: dict[str, str]) -> list[str]:
    """Merge per-kind lists, each already balanced in every prefix, so that the merged prefixes
    are balanced too: the next binding is the head whose answer the output holds least of, from
    the kind drawn least so far."""
    heads = [0] * len(lists)
    held: dict[str, int] = {}
    out: list[str] = []
    while True:
        best: tuple[tuple[int, int, int], int] | None = None
        for g, members in enumerate(lists):
            if heads[g] < len(members):
                key = (held.get(answer_of[members[heads[g]]], 0), heads[g], g)
                if best is None or key < best[0]:
                    best = (key, g)
        if best is None:
            return out
        g = best[1]
        bid = lists[g][heads[g]]
        heads[g] += 1
        held[answer_of[bid]] = held.get(answer_of[bid], 0) + 1
        out.append(bid)


def _answer_classes(ids: list[str], bindings: dict[str, BindingSummary]) -> dict[str, list[str]]:
    """Bindings per answer class as the balance gate counts them: numeric answers in the bins
    of the scorer's tolerance, select-all answers by how many they choose, others by the
    answer shown."""
    first = bindings[ids[0]]
    bins = None
    if answer_form(first.question_type) == "number":
        values = {bid: _number(bindings[bid].answer) for bid in ids}
        if all(v is not None for v in values.values()):
            bins = tolerance_bins(list(values.values()), json.loads(first.scoring or "{}"))
    sets = answer_form(first.question_type) == "options"
    classes: dict[str, list[str]] = {}
    for bid in ids:
        if sets:
            key = chosen_class(len(bindings[bid].answer.split(", ")))
        else:
            key = bindings[bid].answer if bins is None else f"bin {sum(1 for e in bins if values[bid] >= e)}"
        classes.setdefault(key, []).append(bid)
    return classes


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def expected_yield(bindings: dict[str, BindingSummary]) -> dict[str, int]:
    """Items per capability the gates can be expected to let through (see ``keepable``)."""
    capability = {b.template: b.capability for b in bindings.values()}
    out: dict[str, int] = {}
    for template, ids in keepable(bindings).items():
        out[capability[template]] = out.get(capability[template], 0) + len(ids)
    return out


def source_quotas(blueprint) -> dict[str, int] | None:
    """Items per source kind when the intent sets any (``items`` of a source); the sources that do
    not set theirs share what is left evenly. None when no source sets one."""
    given = {s["kind"]: s.get("items") for s in blueprint.sources}
    if len(given) < 2 or not any(given.values()):
        return None
    rest = max(0, blueprint.items_target - sum(v for v in given.values() if v))
    open_kinds = [k for k, v in given.items() if not v]
    out = {k: int(v) for k, v in given.items() if v}
    for i, k in enumerate(open_kinds):
        out[k] = rest // len(open_kinds) + (1 if i < rest % len(open_kinds) else 0)
    return out


def split_targets(targets: dict[str, int], quotas: dict[str, int]) -> dict[str, dict[str, int]]:
    """Each capability's target split over the sources in proportion to their quotas (largest
    remainders, so the parts add up to the target)."""
    total = sum(quotas.values()) or 1
    out: dict[str, dict[str, int]] = {k: {} for k in quotas}
    for cap, t in sorted(targets.items()):
        exact = {k: t * q / total for k, q in quotas.items()}
        parts = {k: int(math.floor(v)) for k, v in exact.items()}
        for k in sorted(quotas, key=lambda k: (parts[k] - exact[k], k))[: t - sum(parts.values())]:
            parts[k] += 1
        for k, n in parts.items():
            out[k][cap] = n
    return out


def allocate_by_source(blueprint, bindings: dict[str, BindingSummary], source_of: dict[str, str],
                       headroom: float) -> dict[str, list[str]]:
    """As :func:`allocate`, with every source given its share of each capability's target when
    the intent sets items per source; ``source_of``: binding id -> source kind."""
    quotas = source_quotas(blueprint)
    if quotas is None:
        return allocate(blueprint, bindings, headroom)
    plan: dict[str, list[str]] = {}
    for kind, targets in split_targets(blueprint.capability_targets, quotas).items():
        own = {b: s for b, s in bindings.items() if source_of.get(b) == kind}
        part = type(blueprint)(**{**blueprint.model_dump(), "capability_targets": targets})
        for template, ids in allocate(part, own, headroom).items():
            plan[template] = plan.get(template, []) + ids
    return plan


def allocate(blueprint, bindings: dict[str, BindingSummary], headroom: float) -> dict[str, list[str]]:
    """Which bindings to realize, per template: each capability's target (times ``headroom``)
    spread evenly over its templates, a template short of bindings leaving its share to the
    others; with a difficulty mix, each band's part of the target spread over the templates
    holding that band. Only keepable bindings are drawn; within a template answers take turns,
    so any prefix stays balanced."""
    ordered = keepable(bindings)
    caps: dict[str, set[str]] = {}
    for b in bindings.values():
        caps.setdefault(b.capability, set()).add(b.template)
    plan: dict[str, list[str]] = {}
    needs = {cap: math.ceil(blueprint.capability_targets.get(cap, 0) * headroom) for cap in caps}
    shares = getattr(blueprint, "difficulty", None) or {}
    if shares:
        # Bands counted over all bindings, the capability's and each template's, not over the
        # keepable ones: a template edit changes its bindings' ids, and with them which are
        # keepable, but not how many of each band it has, and must not move the others' quotas.
        available: dict[str, dict[str, int]] = {cap: dict.fromkeys(BANDS, 0) for cap in caps}
        held: dict[str, dict[str, int]] = {t: dict.fromkeys(BANDS, 0) for ts in caps.values() for t in ts}
        for b in bindings.values():
            available[b.capability][b.difficulty] = available[b.capability].get(b.difficulty, 0) + 1
            held[b.template][b.difficulty] = held[b.template].get(b.difficulty, 0) + 1
        quotas = band_quotas(needs, available, shares)
    for cap, templates in caps.items():
        if not shares:
            share = water_fill(needs[cap], {t: len(ordered.get(t, [])) for t in templates})
            for t in templates:
                plan[t] = ordered.get(t, [])[: share[t]]
            continue
        # Templates share each band's quota by what they hold of that band: a template of easy
        # items only takes its part of the easy quota, and its answers still take turns.
        per_template = template_quotas(needs[cap], quotas[cap], {t: held[t] for t in templates})
        for t in sorted(templates):
            plan[t] = steered(_answer_turns(ordered.get(t, []), bindings), sum(per_template[t].values()),
                              lambda b: bindings[b].difficulty, dict(per_template[t]))
        _fill_short(plan, needs[cap], sorted(templates), ordered, bindings)
    return plan


def _fill_short(plan: dict[str, list[str]], need: int, templates: list[str], ordered: dict[str, list[str]],
                bindings: dict[str, BindingSummary]) -> None:
    """Quotas are counted over all bindings, most of which the gates would not keep where many
    determine each other (a distance between two objects is the same in every view of a scene):
    a capability whose quotas drew fewer keepable bindings than it needs takes the rest from its
    templates' other keepable bindings, of any band, answers still taking turns. Without this,
    more units would not bring it closer: its quotas grow with them, its keepable share does not."""
    left = need - sum(len(plan.get(t, [])) for t in templates)
    if left <= 0:
        return
    taken = {t: set(plan.get(t, [])) for t in templates}
    spare = {t: [b for b in ordered.get(t, []) if b not in taken[t]] for t in templates}
    for t, n in water_fill(left, {t: len(ids) for t, ids in spare.items()}).items():
        if n:
            plan[t] = plan.get(t, []) + _take_turns(_flat_turns(_answer_turns(spare[t], bindings)))[:n]


def _answer_turns(ids: list[str], bindings: dict[str, BindingSummary]) -> list[list[list[str]]]:
    """A template's bindings per answer class in the order they first take their turn (one group
    when its answers are names: balancing does not apply), and within each class per place of
    the answer's marker among the others (one place for questions without marked options)."""
    classes = _answer_classes(ids, bindings) if ids else {}
    if len(classes) > 12:
        return [[list(ids)]]
    cls = {bid: a for a, members in classes.items() for bid in members}
    order: dict[str, dict[str, list[str]]] = {}
    for bid in ids:
        order.setdefault(cls[bid], {}).setdefault(bindings[bid].place, []).append(bid)
    return [list(places.values()) for places in order.values()]


def _flat_turns(groups: list[list[list[str]]]) -> list[list[str]]:
    """Per answer, its places' ids taking turns."""
    return [_take_turns(places) for places in groups]


def _take_turns(lists: list[list[str]]) -> list[str]:
    # Answers take turns in an order unrelated to their text (the caller orders the lists by a
    # digest of the answer): in alphabetical order, a template whose answers are all distinct
    # (orders of named objects) would realize the alphabetically first ones, and names early in
    # the alphabet would come first in its answers.
    return [x[d] for d in range(max((len(x) for x in lists), default=0)) for x in lists if len(x) > d]


def grey_batches(plan: dict[str, list[str]], size: int) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Split each template's planned bindings into its grey batch (the first ``size``) and the rest."""
    grey = {t: ids[:size] for t, ids in plan.items() if ids}
    rest = {t: ids[size:] for t, ids in plan.items() if ids}
    return grey, rest


def judge_grey_batch(log: GateLog, template: str, verified: list[str], rejected: list[str],
                     min_valid: float) -> bool:
    total = len(verified) + len(rejected)
    rate = len(verified) / total if total else 0.0
    passed = total > 0 and len(verified) > 0 and rate >= min_valid
    log.decide(GATE_A, template, "Template", template, "pass" if passed else "fail",
               {"grey_items": total, "valid": len(verified), "valid_rate": rate, "min_valid": min_valid})
    for iid in verified:
        log.decide(GATE_A, iid, "OEItem", template, "pass" if passed else "fail", {"grey": True})
    for iid in rejected:
        log.decide(GATE_A, iid, "OEItem", template, "fail", {"grey": True, "reason": "failed its contract"})
    return passed


def screen_invalid(log: GateLog, items: dict[str, OEItem], rejected: dict[str, tuple[str, list[str]]]) -> list[str]:
    """B1: an item passes when it met every blocking requirement; the rest are recorded with
    the requirements they failed."""
    for iid, (template, failed) in sorted(rejected.items()):
        log.decide(GATE_B1, iid, "OEItem", template, "fail", {"failed_requirements": failed})
    for iid, item in items.items():
        log.decide(GATE_B1, iid, "OEItem", item.template, "pass")
    return sorted(items)


def blind_evaluation(log: GateLog, items: dict[str, OEItem], settings: dict[str, Any],
                     memo: dict[str, dict] | None = None, repaired: set[str] | frozenset[str] = frozenset(),
                     replaced: dict[str, OEItem] | None = None) -> tuple[list[str], dict[str, dict]]:
    """C1: per template, blind solvers must stay near chance; flagged templates are held back.

    A template's own realizations and the versions repairs made of them are two populations,
    tested apart: a repair must not dilute the shortcut of items realized later from the same
    template. The realizations a repair replaced (``replaced``) still count in their template's
    population, without a decision of their own.

    A report is a pure function of the items (content-addressed ids) and the solver code, so
    ``memo`` (key -> report) lets unchanged templates skip the solvers."""
    groups: dict[tuple[str, bool], list[tuple[str, OEItem]]] = {}
    for iid in sorted(items):
        groups.setdefault((items[iid].template, iid in repaired), []).append((iid, items[iid]))
    history: dict[str, list[tuple[str, OEItem]]] = {}
    for iid, item in sorted((replaced or {}).items()):
        if iid not in items:
            history.setdefault(item.template, []).append((iid, item))
    kept: list[str] = []
    reports: dict[str, dict] = {}
    for (template, is_repair), group in sorted(groups.items()):
        population = group if is_repair else group + history.get(template, [])
        key = digest("C1", blind_code_version(), [iid for iid, _ in population])
        if memo is not None and key in memo:
            report = dict(memo[key])
        else:
            report = blind_report(population)
            if memo is not None:
                memo[key] = dict(report)
        enough = report["items"] >= settings["min_blind_items"]
        flagged = enough and report["excess"] > settings["blind_margin"] and report["p_value"] < settings["blind_alpha"]
        report.update({"flagged": flagged, "tested": enough,
                       "full_condition": "not evaluated: no panel model configured"})
        if is_repair and (template, False) in groups:
            reports[template]["repaired"] = report  # the realized population's report comes first
        else:
            reports[template] = report
            log.decide(GATE_C1, template, "Template", template, "fail" if flagged else "pass", report)
        for iid, _ in group:
            log.decide(GATE_C1, iid, "OEItem", template, "fail" if flagged else "pass",
                       {"best_solver": report["best_solver"], "excess": round(report["excess"], 4)})
            if not flagged:
                kept.append(iid)
    return kept, reports


class StoreMemo(dict):
    """Gate results by input digest: looked up in the store on first use, new ones written back
    by :meth:`flush`."""

    def __init__(self, store: Any) -> None:
        super().__init__()
        self.store = store
        self.new: dict[str, Any] = {}

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        found = self.store.memo_get([str(key)])
        dict.update(self, found)
        return bool(found)

    def __setitem__(self, key: str, value: Any) -> None:
        dict.__setitem__(self, key, value)
        self.new[key] = value

    def flush(self) -> None:
        self.store.memo_put(self.new)
        self.new = {}


@lru_cache(maxsize=1)
def blind_code_version() -> str:
    """The solvers', chance's and scorer's source (a plugin's blind solvers too): a report computed
    by other code is not reused."""
    import inspect

    from forge.registry import entries, lookup, registered_code
    from forge_skills.oe.verify import blind_chance, blind_solvers

    scorer = inspect.getsourcefile(lookup("scorer", "oe"))
    plugged = sorted({path for name, solver in entries("blind_solver").items()
                      if getattr(solver, "__module__", None) != blind_solvers.__name__
                      for path in registered_code("blind_solver", name).values()})
    return digest(*(Path(m.__file__).read_text() for m in (blind_solvers, blind_chance)),
                  Path(scorer).read_text() if scorer else "", *(Path(p).read_text() for p in plugged))


