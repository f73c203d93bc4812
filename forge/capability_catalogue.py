"""The capability catalogue: which words in an intent's free text ask for which capability.

Researchers describe what they want to evaluate in their own words ("can the robot tell what
is inside the drawer, in what order things appeared while it walked"); each registered
capability lists the phrases that ask for it, and the catalogue reports which phrase chose
each one, so the choice can be checked and overridden by listing capabilities explicitly.
"""

from __future__ import annotations

import re
from functools import lru_cache

from forge.vocabulary import capabilities


def catalogue() -> dict[str, tuple[str, ...]]:
    """Capability -> its phrases, in registry order."""
    return {name: cap.phrases for name, cap in capabilities().items()}


def _pattern(phrase: str) -> re.Pattern[str]:
    body = re.escape(phrase.rstrip("*")).replace(r"\ ", r"\s+")
    return re.compile(r"\b" + body + (r"\w*" if phrase.endswith("*") else r"\b"), re.I)


@lru_cache(maxsize=None)
def _compiled(phrase: str) -> re.Pattern[str]:
    return _pattern(phrase)


def capabilities_from_text(text: str) -> dict[str, list[str]]:
    """Capability -> the phrases of ``text`` that ask for it."""
    found: dict[str, list[str]] = {}
    for cap, phrases in catalogue().items():
        hits = []
        for phrase in phrases:
            hits += [m.group(0).lower() for m in _compiled(phrase).finditer(text)]
        if hits:
            found[cap] = sorted(set(hits))
    return found
