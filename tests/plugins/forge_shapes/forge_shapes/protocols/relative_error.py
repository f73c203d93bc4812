"""Scoring protocol ``relative_error``: the answer is a vector of numbers (the key's ``answer``,
numbers separated by commas); a response is correct when ``|r - t| / |t| <= rel_tol``
(Euclidean norms). Standard library only: packages ship this file beside their scorer."""

from __future__ import annotations

import math
import re

NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def vector(text: object) -> list[float] | None:
    if text is None:
        return None
    if isinstance(text, (list, tuple)):
        try:
            return [float(v) for v in text]
        except (TypeError, ValueError):
            return None
    found = NUMBER.findall(str(text))
    return [float(v) for v in found] or None


def parse(key: dict, response: object) -> list[float] | None:
    """The response's numbers, when there are as many as the answer has."""
    got, truth = vector(response), vector(key["answer"])
    return got if got is not None and truth is not None and len(got) == len(truth) else None


def relative_error(got: list[float], truth: list[float]) -> float:
    norm = math.sqrt(sum(t * t for t in truth))
    diff = math.sqrt(sum((g - t) ** 2 for g, t in zip(got, truth)))
    return diff / norm if norm > 0 else (0.0 if diff == 0 else math.inf)


def score(key: dict, response: object) -> float:
    got = parse(key, response)
    if got is None:
        return 0.0
    return 1.0 if relative_error(got, vector(key["answer"])) <= float(key["scoring"].get("rel_tol", 0.0)) + 1e-9 else 0.0


def secondary(key: dict, response: object) -> dict:
    """The relative error itself, beside the 0/1 score (items with an unreadable reply have none:
    the report says over how many items the mean is taken)."""
    got = parse(key, response)
    return {} if got is None else {"relative_error": relative_error(got, vector(key["answer"]))}
