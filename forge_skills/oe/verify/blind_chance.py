"""Chance for gate C1: what a uniform guess scores on an item, sampled per question type over
the items' own answer space, and the binomial tail a blind solver's hits are judged by; the
form of a blind solver's response."""

from __future__ import annotations

import math
from typing import Callable, Union

from forge.vocabulary import answer_form
from forge_skills.oe.types import OEItem

Response = Union[str, list[str], None]  # a list: equally preferred responses, scored by their mean


def _form(it: OEItem) -> str:
    return answer_form(it.question_type)


def _key(it: OEItem) -> dict:
    return it.key()


def chance(it: OEItem, sampled_chance: float, population: list[OEItem] | None = None) -> float:
    """Chance accuracy of one item: its question type's own ``chance(item, population)`` (the
    template's items of that type), else a uniform guess over its options, or for numbers and
    other values how often a guess drawn from the template's own answers scores
    (``sampled_chance``)."""
    from forge.vocabulary import question_types

    qt = question_types().get(it.question_type)
    if qt is not None and qt.chance is not None:
        return qt.chance(it, population if population is not None else [it])
    form, n = _form(it), len(it.options)
    if form in ("number", "value"):
        return sampled_chance
    if form == "options":
        return 1.0 / (2 ** n - 1)
    if form == "order":
        return 1.0 / math.factorial(n)
    if form == "matching":  # distinct targets per option, the best a guesser can do without the media
        m = len(it.targets)
        return 1.0 / math.prod(range(m - n + 1, m + 1)) if m >= n else 1.0 / max(1, m) ** n
    return 1.0 / n


def _sampled_chance(items: list[tuple[str, OEItem]], score_item) -> dict[str, float]:
    """Per question type, for numbers and other values: how often a guess drawn from the
    template's own answers of that type scores (guessing from the answer distribution is the
    reference, not a uniform range). A guess is drawn from the item's own answer space: answers
    its key cannot read (a vector of another length) are not guesses anyone would make."""
    from forge_skills.scoring.scorer import parse

    by_type: dict[str, list[OEItem]] = {}
    for _, it in items:
        if _form(it) in ("number", "value") and (it.answer_value is not None or _form(it) == "value"):
            by_type.setdefault(it.question_type, []).append(it)
    out: dict[str, float] = {}
    for qt, valued in by_type.items():
        sample = valued[:: max(1, len(valued) // 150)]
        hits = pairs = 0.0
        for a in sample:
            key = _key(a)
            for b in sample:
                guess = b.answer_value if _form(b) == "number" else b.answer
                if _form(b) == "value" and parse(key, guess) is None:
                    continue  # outside a's answer space
                pairs += 1
                hits += score_item(key, guess)
        out[qt] = hits / pairs if pairs else 0.0
    return out


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


def expected_score(score_item: Callable, key: dict, response: Response) -> float:
    if isinstance(response, list):
        return sum(score_item(key, r) for r in response) / len(response) if response else 0.0
    return score_item(key, response)
