"""Evidence-blind solvers: answer an item from its text alone, never its media.

If any of them beats chance on a template by more than the allowed margin, the template's
items carry a shortcut (an answer prior or option text that gives the answer away).
Priors are learned with two-fold cross-fitting so a solver never sees the item it answers.
Responses are scored by the package's own scorer, so every question type is covered.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import Callable

from forge.artifact_types import OEItem

Solver = Callable[[list[tuple[str, OEItem]]], dict[str, str | None]]
LETTERS = string.ascii_uppercase
SINGLE = {"single_choice", "yes_no", "marked_object_choice", "multi_view_choice", "interval_choice", "temporal_choice"}


def _fold(item_id: str) -> int:
    return int(item_id[:8], 16) % 2


def _key(it: OEItem) -> dict:
    return {"scoring": it.scoring, "options": it.options, "answer_index": it.answer_index,
            "answer_indices": it.answer_indices, "answer_value": it.answer_value, "targets": it.targets}


def _as_response(it: OEItem, answer: str) -> str | None:
    """A remembered answer text, expressed against this item's options."""
    if it.question_type == "numeric":
        return answer
    values = it.values()
    if it.question_type == "matching":
        pairs = dict(p.split(" -> ") for p in answer.split("; "))
        if set(pairs) != set(values) or not all(t in it.targets for t in pairs.values()):
            return None
        return ", ".join(f"{LETTERS[i]}={it.targets.index(pairs[v]) + 1}" for i, v in enumerate(values))
    if it.question_type in ("ordered_list", "multiple_choice"):
        sep = " > " if it.question_type == "ordered_list" else ", "
        parts = answer.split(sep)
        return ", ".join(LETTERS[values.index(p)] for p in parts) if all(p in values for p in parts) else None
    return LETTERS[values.index(answer)] if answer in values else None


def _cross_fit(items, learn, apply):
    out = {}
    for fold in (0, 1):
        model = learn([it for iid, it in items if _fold(iid) != fold])
        for iid, it in items:
            if _fold(iid) == fold:
                out[iid] = apply(model, it)
    return out


def answer_prior(items):
    """Give the answer most often correct on the other fold (when this item offers it)."""
    return _cross_fit(items, lambda train: [a for a, _ in Counter(it.answer for it in train).most_common()],
                      lambda ranked, it: next((r for a in ranked for r in [_as_response(it, a)] if r), None))


def position_prior(items):
    """Give the answer position(s) most often correct on the other fold."""
    def position(it: OEItem):
        return tuple(it.answer_indices) if it.answer_indices else it.answer_index

    def apply(ranked, it):
        for pos in ranked:
            idx = pos if isinstance(pos, tuple) else (pos,)
            if it.question_type == "matching" and pos is not None and len(idx) == len(it.options) \
                    and all(j < len(it.targets) for j in idx):
                return ", ".join(f"{LETTERS[i]}={j + 1}" for i, j in enumerate(idx))
            if pos is not None and all(i < len(it.options) for i in idx):
                return ", ".join(LETTERS[i] for i in idx)
        return None
    return _cross_fit(items, lambda train: [p for p, _ in Counter(position(it) for it in train).most_common()], apply)


def _single_option(pick):
    def solver(items):
        return {iid: (LETTERS[pick(it)] if it.question_type in SINGLE and it.options else None) for iid, it in items}
    return solver


def _words(s: str) -> set[str]:
    return set(re.findall(r"[a-z]+", s.lower()))


longest_option = _single_option(lambda it: max(range(len(it.options)), key=lambda i: (len(it.options[i]), -i)))
shortest_option = _single_option(lambda it: min(range(len(it.options)), key=lambda i: (len(it.options[i]), i)))
question_overlap = _single_option(lambda it: max(range(len(it.options)),
                                                 key=lambda i: (len(_words(it.options[i]) & _words(it.question)), -i)))

SOLVERS: dict[str, Solver] = {
    "answer_prior": answer_prior,
    "position_prior": position_prior,
    "longest_option": longest_option,
    "shortest_option": shortest_option,
    "question_overlap": question_overlap,
}


def chance(it: OEItem, numeric_chance: float) -> float:
    qt, n = it.question_type, len(it.options)
    if qt == "numeric":
        return numeric_chance
    if qt == "multiple_choice":
        return 1.0 / (2 ** n - 1)
    if qt == "ordered_list":
        return 1.0 / math.factorial(n)
    if qt == "matching":  # distinct targets per option, the best a guesser can do without the media
        m = len(it.targets)
        return 1.0 / math.prod(range(m - n + 1, m + 1)) if m >= n else 1.0 / max(1, m) ** n
    return 1.0 / n


def _numeric_chance(items: list[tuple[str, OEItem]], score_item) -> float:
    """For numeric items: how often a guess drawn from the template's own answers is within
    tolerance (guessing from the answer distribution is the reference, not a uniform range)."""
    numeric = [it for _, it in items if it.question_type == "numeric" and it.answer_value is not None]
    if not numeric:
        return 0.0
    sample = numeric[:: max(1, len(numeric) // 150)]
    hits = sum(score_item(_key(a), b.answer_value) for a in sample for b in sample)
    return hits / (len(sample) ** 2)


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), computed in log space."""
    if k <= 0:
        return 1.0
    if p <= 0:
        return 0.0
    if p >= 1:
        return 1.0
    total = 0.0
    for i in range(k, n + 1):
        log_term = math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p) + (n - i) * math.log1p(-p)
        total += math.exp(log_term)
    return min(1.0, total)


def blind_report(items: list[tuple[str, OEItem]]) -> dict:
    """Accuracy of every blind solver on these items, against chance."""
    from forge_skills.oe_scorer import score_item

    n = len(items)
    numeric = _numeric_chance(items, score_item)
    base = sum(chance(it, numeric) for _, it in items) / n if n else 0.0
    accuracies = {}
    for name, solver in SOLVERS.items():
        preds = solver(items)
        accuracies[name] = sum(score_item(_key(it), preds.get(iid)) for iid, it in items) / n if n else 0.0
    best = max(accuracies, key=accuracies.get) if accuracies else None
    best_acc = accuracies.get(best, 0.0) if best else 0.0
    # Bonferroni over the solvers: the best of several solvers is tested, not one.
    p_value = min(1.0, binomial_tail(round(best_acc * n), n, base) * len(SOLVERS)) if n else 1.0
    return {"items": n, "chance": base, "accuracies": accuracies, "best_solver": best,
            "best_accuracy": best_acc, "excess": best_acc - base, "p_value": p_value}
