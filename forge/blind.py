"""Evidence-blind solvers: answer an item from its text alone, never its media.

If any of them beats chance on a template by more than the allowed margin, the template's
items carry a shortcut (an answer prior or option text that gives the answer away).
Priors are learned with two-fold cross-fitting so a solver never sees the item it answers.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Callable

from forge.artifact_types import OEItem

Solver = Callable[[list[tuple[str, OEItem]]], dict[str, int]]


def _fold(item_id: str) -> int:
    return int(item_id[:8], 16) % 2


def answer_prior(items: list[tuple[str, OEItem]]) -> dict[str, int]:
    """Pick the answer text most often correct on the other fold (else its usual position)."""
    out = {}
    for fold in (0, 1):
        train = [it for iid, it in items if _fold(iid) != fold]
        texts = Counter(it.answer for it in train)
        positions = Counter(it.answer_index for it in train)
        for iid, it in items:
            if _fold(iid) != fold:
                continue
            ranked = [t for t, _ in texts.most_common() if t in it.options]
            if ranked:
                out[iid] = it.options.index(ranked[0])
            else:
                pos = positions.most_common(1)[0][0] if positions else 0
                out[iid] = pos if pos is not None and pos < len(it.options) else 0
    return out


def position_prior(items: list[tuple[str, OEItem]]) -> dict[str, int]:
    """Pick the answer position most often correct on the other fold."""
    out = {}
    for fold in (0, 1):
        positions = Counter(it.answer_index for iid, it in items if _fold(iid) != fold)
        pos = positions.most_common(1)[0][0] if positions else 0
        for iid, it in items:
            if _fold(iid) == fold:
                out[iid] = pos if pos is not None and pos < len(it.options) else 0
    return out


def longest_option(items):
    return {iid: max(range(len(it.options)), key=lambda i: (len(it.options[i]), -i)) for iid, it in items}


def shortest_option(items):
    return {iid: min(range(len(it.options)), key=lambda i: (len(it.options[i]), i)) for iid, it in items}


def question_overlap(items):
    """Pick the option sharing most words with the question."""
    def words(s: str) -> set[str]:
        return set(re.findall(r"[a-z]+", s.lower()))

    return {iid: max(range(len(it.options)), key=lambda i: (len(words(it.options[i]) & words(it.question)), -i))
            for iid, it in items}


SOLVERS: dict[str, Solver] = {
    "answer_prior": answer_prior,
    "position_prior": position_prior,
    "longest_option": longest_option,
    "shortest_option": shortest_option,
    "question_overlap": question_overlap,
}


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
    n = len(items)
    chance = sum(1.0 / len(it.options) for _, it in items) / n if n else 0.0
    accuracies = {}
    for name, solver in SOLVERS.items():
        preds = solver(items)
        accuracies[name] = sum(1 for iid, it in items if preds.get(iid) == it.answer_index) / n if n else 0.0
    best = max(accuracies, key=accuracies.get) if accuracies else None
    best_acc = accuracies.get(best, 0.0) if best else 0.0
    # Bonferroni over the solvers: the best of several solvers is tested, not one.
    p_value = min(1.0, binomial_tail(round(best_acc * n), n, chance) * len(SOLVERS)) if n else 1.0
    return {"items": n, "chance": chance, "accuracies": accuracies, "best_solver": best,
            "best_accuracy": best_acc, "excess": best_acc - chance, "p_value": p_value}
