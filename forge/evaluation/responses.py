"""Replies in an item's answer form: letters, matchings and numbers written as a panel member
writes them, the key's own reply and plausible wrong ones (as simulated evidence readers give)."""

from __future__ import annotations

import itertools
import math
import random
import re
import string
from typing import Any, Mapping, Sequence

LETTERS = string.ascii_uppercase


def letters(indices: Sequence[int]) -> str:
    return ", ".join(LETTERS[i] for i in indices)


def matching(assignment: Sequence[int]) -> str:
    return ", ".join(f"{LETTERS[i]}={j + 1}" for i, j in enumerate(assignment))


NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def numbers_in(text: str) -> list[float]:
    return [float(x) for x in NUMBER.findall(text)]


def number_text(x: float) -> str:
    """A number as plain digits (never an exponent, which scorers read as two numbers)."""
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.6f}".rstrip("0").rstrip(".")


def gold_response(key: Mapping[str, Any], form: str) -> str:
    """A response the key marks correct, in the form the response format asks for."""
    if form == "number" and key.get("answer_value") is not None:
        return number_text(float(key["answer_value"]))
    if form in ("options", "order") and key.get("answer_indices") is not None:
        return letters(key["answer_indices"])
    if form == "matching" and key.get("answer_indices") is not None:
        return matching(key["answer_indices"])
    if form == "option" and key.get("answer_index") is not None:
        return LETTERS[int(key["answer_index"])]
    return str(key.get("answer", ""))


def wrong_responses(key: Mapping[str, Any], form: str, rng: random.Random) -> list[str]:
    """Responses meant to be wrong, in a seeded order (the scorer decides which are)."""
    options = list(key.get("options") or [])
    n = len(options)
    out: list[str] = []
    if form == "number" and key.get("answer_value") is not None:
        v = float(key["answer_value"])
        scoring = key.get("scoring") or {}
        tol = max(float(scoring.get("abs_tol", 0) or 0), float(scoring.get("rel_tol", 0) or 0) * abs(v))
        step = max(1.0, math.ceil(2 * tol + 1))
        out = [number_text(v + step), number_text(v - step), number_text(v * 3 + 50)]
        rng.shuffle(out)
    elif form == "option" and n:
        out = [LETTERS[i] for i in range(n) if i != key.get("answer_index")]
        rng.shuffle(out)
    elif form in ("options", "order", "matching") and n:
        truth = list(key.get("answer_indices") or [])
        if form == "options":
            subsets = [list(c) for r in range(1, n + 1) for c in itertools.combinations(range(n), r)]
            rng.shuffle(subsets)
            out = [letters(s) for s in subsets[:24] if set(s) != set(truth)]
        elif form == "order":
            orders = [list(p) for p in itertools.islice(itertools.permutations(range(n)), 120)]
            rng.shuffle(orders)
            out = [letters(p) for p in orders[:24] if p != truth]
        else:
            targets = len(key.get("targets") or []) or n
            shifts = [[(j + s) % targets for j in truth] for s in range(1, targets)]
            rng.shuffle(shifts)
            out = [matching(s) for s in shifts]
    else:
        out = [str(o) for o in options if str(o) != str(key.get("answer"))]
        rng.shuffle(out)
    return out + ["(no answer)"]
