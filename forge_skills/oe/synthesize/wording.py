"""Grammatical agreement in realized questions: a quantifier or article and the noun it goes
with agree in number ("at least one ship", "how many ships"), and "a"/"an" fit the sound of the
next word ("an orange mug")."""

from __future__ import annotations

import re

from forge_skills.oe.structure.appearance import NAMES as COLOUR_WORDS

SINGULAR_CUES = ("at least one", "is there a", "is there an", "a", "an", "one", "each", "every", "single", "another",
                 "this", "that")
PLURAL_CUES = ("how many", "are there", "several", "many", "two", "three", "four", "five", "these", "those", "all",
               "both", "multiple", "number of")
VOWEL_SOUND = re.compile(r"^(?:[aeiou](?!ni|nu|se|sa)|hour|honest)", re.I)  # "an orange", "a unit", "a user"


def agreement_problems(text: str, singulars: set[str], plurals: set[str]) -> list[str]:
    """Disagreements in ``text`` between number cues and the known nouns that follow them."""
    problems = []
    lowered = text.lower()
    adjective = rf"(?:(?:{'|'.join(COLOUR_WORDS)})\s+)?"
    for nouns, cues, want in ((plurals, SINGULAR_CUES, "singular"), (singulars, PLURAL_CUES, "plural")):
        wrong = sorted(n for n in nouns if n not in (plurals if want == "plural" else singulars))
        if not wrong:
            continue
        noun = "|".join(re.escape(n) for n in sorted(wrong, key=len, reverse=True))
        cue = "|".join(re.escape(c) for c in sorted(cues, key=len, reverse=True))
        for m in re.finditer(rf"\b({cue})\s+{adjective}({noun})\b", lowered):
            problems.append(f"'{m.group(0)}': {m.group(1)!r} needs a {want} noun")
    # Articles in lower case only: a capital "A" is as often a marker label ("A and B").
    for m in re.finditer(r"\b(a|an|An)\s+([a-z]+)", text):
        article, word = m.group(1).lower(), m.group(2)
        if (article == "a") == bool(VOWEL_SOUND.match(word)):
            problems.append(f"'{m.group(0)}': use {'an' if article == 'a' else 'a'}")
    return problems
