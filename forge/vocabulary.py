"""The shared vocabulary: capabilities and question types, as plugins register them.

Intents, blueprints and templates speak these names; an unknown name is an intent error. The
engine defines what a capability and a question type are, never which exist: the built-in
plugin registers the usual ones, other plugins add theirs (``capability:<name>``,
``question_type:<name>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from forge.registry import entries, lookup

# How an answer is given, which decides how blind solvers respond and what chance is:
# one option, a set of options, an order of options, a target per option, one number, or any
# other value the question type's scoring protocol parses (a vector of numbers, a box, ...).
AnswerForm = Literal["option", "options", "order", "matching", "number", "value"]


@dataclass(frozen=True)
class Capability:
    name: str
    description: str
    # Phrases of an intent's free text that ask for it, matched as whole words, case-insensitively;
    # a trailing * matches any ending.
    phrases: tuple[str, ...] = ()


@dataclass(frozen=True)
class QuestionType:
    name: str
    description: str
    answer_form: AnswerForm
    protocol: str  # the scoring protocol its items are scored by
    option_kinds: tuple[str, ...]  # template option kinds it can be presented with
    response_format: str  # the instruction shown to the model
    # Answers are one displayed option whose text the balance gate can even out.
    balanced: bool = False
    # Blind solvers for this type's items, besides the generic ones: ``solver(items) -> {id: response}``.
    solvers: dict[str, Callable[..., dict[str, Any]]] = field(default_factory=dict)
    # A response the key scores 1 and some it scores 0, for the contract that runs the scorer.
    gold_response: Callable[[Any], str | None] | None = None
    wrong_responses: Callable[[Any], list[str]] | None = None
    # Chance accuracy of one item, ``chance(item, population)`` with the template's items of this
    # type (None: derived from the answer form, a free value from the template's own answers).
    chance: Callable[[Any, list[Any]], float] | None = None
    # A uniform guess in the response format, ``guess(item row, random.Random) -> str``, for the
    # built-in baselines (random, prior) on a free-valued answer; without it they abstain on
    # this type's items, and every report counts the abstentions apart from invalid replies.
    guess: Callable[[Any, Any], str] | None = None
    # Metrics its scoring protocol reports beside the score (``secondary(key, response)`` in the
    # protocol module); the package scorer averages each over the items reporting it.
    metrics: tuple[str, ...] = ()


def capabilities() -> dict[str, Capability]:
    return entries("capability")


def question_types() -> dict[str, QuestionType]:
    return entries("question_type")


def question_type(name: str) -> QuestionType:
    return lookup("question_type", name)


def answer_form(name: str) -> str:
    """The answer form of a question type ('value' for one no plugin registers)."""
    qt = question_types().get(name)
    return qt.answer_form if qt else "value"
