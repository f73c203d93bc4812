"""Built-in solvers: deterministic, offline baselines that answer items without a model server.

Every one is *simulated*: its responses are computed here, not by a model, and every output
that carries them says so. They answer the items a model would see (``items.jsonl`` rows, plus
each item's answer form); only a solver registered with ``reads_key=True`` is also given the
answer key, and its label says it reads it.

    random           a uniform guess: one option, a subset, an order, a matching, a number, or
                     a free value through its question type's ``guess``
    prior            the most frequent answer position the package publishes (composition.json),
                     a typical number for numeric items, one fixed ``guess`` per question type
                     for free values; no item's answer is read
    text             a text-only heuristic: the option sharing most words with the question,
                     the longest one on a tie; the first number the question mentions

A solver with no way to give an item's free value (no ``guess`` declared, or text for any free
value) abstains: the item is left out of its replies, and reports count abstentions apart.
    oracle-noisy     simulated from the answer key: correct except on a set share of each
                     capability's items (``oracle-noisy:0.2``, ``oracle-noisy:0.2,depth_order=0.5``),
                     which it answers wrong; reads the key

Names take an argument after a colon (``random:7`` seeds the guess). ``solver(spec)`` builds
one; ``register`` adds another (gate E's panel uses the same registry).
"""

from __future__ import annotations

import random
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from forge.errors import UsageError
from forge.keys import digest
from forge.registry import register as add, view
from forge.evaluation.responses import (LETTERS, number_text, letters, matching, numbers_in, gold_response,
                                        wrong_responses)


# Gate E's default simulated panel: three baselines and eight evidence readers from 5% to 60%
# wrong. The readers draw their wrong items in one shared order, so a reader with a higher rate is
# wrong where a better one is and elsewhere too, as weaker models tend to be.
READER_ERROR_RATES = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6)
DEFAULT_PANEL = ("builtin:random", "builtin:prior", "builtin:text",
                 *(f"builtin:oracle-noisy:{r:g}" for r in READER_ERROR_RATES))

# How an answer is given, by the scoring protocol's name (what each built-in protocol parses).
PROTOCOL_FORMS = {"exact_choice": "option", "yes_no": "option", "interval": "option", "set_match": "options",
                  "ordered_list": "order", "matching": "matching", "numeric": "number"}


def answer_form(protocol: str | None, question_type: str | None = None) -> str:
    """option, options, order, matching, number or value (any other protocol's free value)."""
    if protocol in PROTOCOL_FORMS:
        return PROTOCOL_FORMS[protocol]
    if question_type:
        try:
            from forge.vocabulary import answer_form as registered

            return registered(question_type)
        except Exception:  # no plugin registers it here: a free value
            pass
    return "value"


@dataclass(frozen=True)
class SolverContext:
    """What a solver may use besides the items. ``keys`` and ``score`` are given only to solvers
    that read the key (``reads_key``)."""

    seed: int = 0
    composition: Mapping[str, Any] = field(default_factory=dict)  # the package's published composition
    keys: Mapping[str, Mapping[str, Any]] | None = None
    score: Callable[[str, str], float] | None = None  # (item id, response) -> the package scorer's score
    # Where solvers keep what depends only on the item (and the key and scorer): the panel's
    # solvers share it, as evidence readers with one seed share their right and wrong replies.
    memo: dict[Any, Any] = field(default_factory=dict)


class Solver(Protocol):
    name: str  # canonical, with its argument: ``oracle-noisy:0.2``
    label: str  # what every output shows beside its results
    reads_key: bool

    def answer(self, items: Sequence[Mapping[str, Any]], context: SolverContext) -> dict[str, str]:
        """A response per item id. Each item is an ``items.jsonl`` row plus ``form``. An item
        left out is one the solver abstains on (a free value it has no way to give)."""
        ...


def _guesser(item: Mapping[str, Any]) -> Callable[[Mapping[str, Any], random.Random], str] | None:
    """The item's question type's own uniform guess (``QuestionType.guess``), if it declares one."""
    try:
        from forge.vocabulary import question_types

        qt = question_types().get(str(item.get("question_type")))
    except Exception:  # no registry here (a package scored on its own): no guess
        return None
    return getattr(qt, "guess", None)


@dataclass(frozen=True)
class SolverInfo:
    name: str
    summary: str
    reads_key: bool
    make: Callable[[str | None], Solver]


SOLVERS: Mapping[str, SolverInfo] = view("solver")


def register(name: str, summary: str, *, reads_key: bool = False) -> Callable:
    """Register a solver factory ``make(argument or None) -> Solver`` under ``name``."""
    def wrap(make: Callable[[str | None], Solver]) -> Callable[[str | None], Solver]:
        if name in SOLVERS and SOLVERS[name].make is not make:
            raise ValueError(f"built-in solver {name!r} is registered twice")
        if name not in SOLVERS:
            add("solver", name, SolverInfo(name, summary, reads_key, make), origin=make.__module__)
        return make
    return wrap


def solver(spec: str) -> Solver:
    """The solver named by ``spec`` (``random``, ``oracle-noisy:0.2``...)."""
    name, _, arg = spec.partition(":")
    info = SOLVERS.get(name)
    if info is None:
        raise UsageError(f"builtin:{spec}: no such built-in solver; choose one of "
                         f"{', '.join(sorted(SOLVERS))}")
    try:
        return info.make(arg or None)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"builtin:{spec}: {exc}") from None


def names() -> list[str]:
    return sorted(SOLVERS)


# -- helpers ----------------------------------------------------------------------------------


def _rng(seed: int, *parts: Any) -> random.Random:
    return random.Random(int(digest(seed, *parts, length=16), 16))


def _seed(arg: str | None) -> int:
    if arg is None:
        return 0
    if not re.fullmatch(r"-?\d+", arg):
        raise ValueError(f"the argument is a seed (an integer), not {arg!r}")
    return int(arg)


_WORD = re.compile(r"[a-z0-9]+")


def _text(item: Mapping[str, Any]) -> str:
    return f"{item.get('question', '')} {' '.join(map(str, item.get('options') or []))}"


# -- random -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RandomSolver:
    """A uniform guess. A number is drawn from 0 to twice the largest number the item mentions,
    or from 0 to 10 when it mentions none."""

    seed: int = 0
    reads_key: bool = False

    @property
    def name(self) -> str:
        return "random" if self.seed == 0 else f"random:{self.seed}"

    label = "simulated: uniform random guess"

    def answer(self, items: Sequence[Mapping[str, Any]], context: SolverContext) -> dict[str, str]:
        out, memo = {}, context.memo
        for it in items:  # a guess depends on the item alone
            key = ("random", self.seed, it["id"])
            if key not in memo:
                memo[key] = self._one(it, _rng(self.seed, "random", it["id"]))
            if memo[key] is not None:
                out[it["id"]] = memo[key]
        return out

    @staticmethod
    def _one(item: Mapping[str, Any], rng: random.Random) -> str | None:
        form, n = item["form"], len(item.get("options") or [])
        if form == "value" and not n:  # a free value: the question type's own guess, else abstain
            guess = _guesser(item)
            return guess(item, rng) if guess is not None else None
        if form == "number":
            top = max((abs(x) for x in numbers_in(_text(item))), default=5.0) * 2
            return number_text(round(rng.uniform(0, top))) if top >= 2 else number_text(round(rng.uniform(0, top), 2))
        if not n:
            return ""
        if form == "options":
            chosen = [i for i in range(n) if rng.random() < 0.5] or [rng.randrange(n)]
            return letters(chosen)
        if form == "order":
            order = list(range(n))
            rng.shuffle(order)
            return letters(order)
        if form == "matching":
            targets = len(item.get("targets") or []) or n
            picks = list(range(targets))
            rng.shuffle(picks)
            return matching([picks[i % targets] for i in range(n)])
        if form == "value":
            return str(item["options"][rng.randrange(n)])
        return LETTERS[rng.randrange(n)]


@register("random", "a uniform random guess")
def _make_random(arg: str | None) -> Solver:
    return RandomSolver(_seed(arg))


# -- prior ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PriorSolver:
    """Always the same answer position: the one the package's published composition counts most
    often among the item's options (``answer_positions``, over every template; position A when
    it publishes none). Every option of a set or an order in list order; a matching as listed.
    A number: the median of every number the package's numeric items mention, else 1."""

    positions: Mapping[int, int] | None = None  # answer position -> count (default: the composition's)
    reads_key: bool = False
    name: str = "prior"
    label: str = "simulated: answer-position prior"

    def answer(self, items: Sequence[Mapping[str, Any]], context: SolverContext) -> dict[str, str]:
        counts = Counter(self.positions) if self.positions is not None else self._published(context.composition)
        mentioned = [x for it in items if it["form"] == "number" for x in numbers_in(_text(it))]
        typical = statistics.median(mentioned) if mentioned else 1.0
        out = {}
        for it in items:
            form, n = it["form"], len(it.get("options") or [])
            if form == "value" and not n:  # one fixed guess per question type, else abstain
                guess = _guesser(it)
                if guess is not None:
                    out[it["id"]] = guess(it, _rng(0, "prior", str(it.get("question_type"))))
            elif form == "number" or not n:
                out[it["id"]] = number_text(typical) if form == "number" else ""
            elif form in ("options", "order"):
                out[it["id"]] = letters(range(n))
            elif form == "matching":
                out[it["id"]] = matching([i % max(1, len(it.get("targets") or [])) for i in range(n)])
            else:
                best = max(range(n), key=lambda i: (counts.get(i, 0), -i))
                out[it["id"]] = LETTERS[best] if form == "option" else str(it["options"][best])
        return out

    @staticmethod
    def _published(composition: Mapping[str, Any]) -> Counter:
        counts: Counter = Counter()
        for per_template in (composition.get("answer_positions") or {}).values():
            for pos, n in (per_template or {}).items():
                if re.fullmatch(r"\d+", str(pos)):
                    counts[int(pos)] += int(n)
        return counts


@register("prior", "the most frequent published answer position; a typical number")
def _make_prior(arg: str | None) -> Solver:
    if arg is not None:
        raise ValueError("prior takes no argument")
    return PriorSolver()


# -- text only --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextSolver:
    """Reads the words only: the option sharing the most words with the question (the longest
    on a tie, then the first); for a set, every option sharing a word (else the best one); for an
    order, options by that preference; a matching by shared words; the first number the question
    mentions (else 1)."""

    reads_key: bool = False
    name: str = "text"
    label: str = "simulated: text-only heuristic (no images)"

    def answer(self, items: Sequence[Mapping[str, Any]], context: SolverContext) -> dict[str, str]:
        out, memo = {}, context.memo
        for it in items:  # a reading of the item's words alone
            key = ("text", it["id"])
            if key not in memo:
                memo[key] = self._one(it)
            if memo[key] is not None:
                out[it["id"]] = memo[key]
        return out

    @staticmethod
    def _one(item: Mapping[str, Any]) -> str | None:
        form, options = item["form"], [str(o) for o in item.get("options") or []]
        question = set(_WORD.findall(str(item.get("question", "")).lower()))
        if form == "value" and not options:
            return None  # the words give no free value: it abstains
        if form == "number" or not options:
            found = numbers_in(str(item.get("question", "")))
            return number_text(found[0]) if found else ("1" if form == "number" else "")

        def pref(i: int) -> tuple[int, int, int]:
            words = set(_WORD.findall(options[i].lower()))
            return (len(words & question), len(options[i]), -i)

        ranked = sorted(range(len(options)), key=pref, reverse=True)
        if form == "options":
            sharing = [i for i in range(len(options)) if pref(i)[0] > 0]
            return letters(sharing or ranked[:1])
        if form == "order":
            return letters(ranked)
        if form == "matching":
            targets = [str(t) for t in item.get("targets") or []]
            if not targets:
                return matching(range(len(options)))
            out = []
            for o in options:
                words = set(_WORD.findall(o.lower()))
                out.append(max(range(len(targets)), key=lambda j: (len(words & set(_WORD.findall(targets[j].lower()))),
                                                                   -j)))
            return matching(out)
        return LETTERS[ranked[0]] if form == "option" else options[ranked[0]]


@register("text", "a text-only heuristic: word overlap, then length")
def _make_text(arg: str | None) -> Solver:
    if arg is not None:
        raise ValueError("text takes no argument")
    return TextSolver()


# -- evidence reading, simulated from the key ---------------------------------------------------


def _rates(arg: str | None) -> tuple[float, dict[str, float]]:
    if not arg:
        raise ValueError("oracle-noisy needs an error rate: oracle-noisy:0.2 or oracle-noisy:0.2,depth_order=0.5")
    default, per = None, {}
    for part in arg.split(","):
        part = part.strip()
        cap, eq, value = part.rpartition("=")
        try:
            rate = float(value)
        except ValueError:
            raise ValueError(f"{part!r} is not a rate (a number from 0 to 1)") from None
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"the error rate {rate:g} is not between 0 and 1")
        if eq:
            per[cap.strip()] = rate
        elif default is None:
            default = rate
        else:
            raise ValueError("give one default rate, then capability=rate pairs")
    return (0.0 if default is None else default), per


@dataclass(frozen=True)
class NoisyOracle:
    """Answers from the key, wrong on exactly round(rate x n) of each capability's n items (the
    items are picked by a seeded hash of their ids), so its accuracy per capability is 1 - rate
    up to rounding. Simulated: it reads the answer key."""

    rate: float
    per_capability: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0
    reads_key: bool = True

    @property
    def name(self) -> str:
        parts = [f"{self.rate:g}"] + [f"{c}={r:g}" for c, r in sorted(self.per_capability.items())]
        return "oracle-noisy:" + ",".join(parts)

    @property
    def label(self) -> str:
        return "simulated: reads the answer key, wrong at set per-capability rates"

    def rate_for(self, capability: str) -> float:
        return self.per_capability.get(capability, self.rate)

    def answer(self, items: Sequence[Mapping[str, Any]], context: SolverContext) -> dict[str, str]:
        if context.keys is None:
            raise ValueError(f"{self.name} reads the answer key, and none was given")
        by_cap: dict[str, list[Mapping[str, Any]]] = {}
        for it in items:
            by_cap.setdefault(str(it.get("capability")), []).append(it)
        wrong: set[str] = set()
        for cap, group in by_cap.items():
            order = sorted(group, key=lambda it: self._rank(it["id"], context.memo))
            wrong |= {it["id"] for it in order[:round(self.rate_for(cap) * len(group))]}
        return {it["id"]: self._reply(it, context, it["id"] in wrong) for it in items}

    def _rank(self, item_id: Any, memo: dict[Any, Any]) -> str:
        """Where the item stands in the seed's order of wrong items (shared by the readers)."""
        memo_key = ("oracle-noisy-rank", self.seed, item_id)
        if memo_key not in memo:
            memo[memo_key] = digest(self.seed, "oracle-noisy", item_id)
        return memo[memo_key]

    def _reply(self, it: Mapping[str, Any], context: SolverContext, wrong: bool) -> str:
        """The item's right or wrong reply; the same for every reader with this seed."""
        memo_key = ("oracle-noisy", self.seed, it["id"], wrong)
        found = context.memo.get(memo_key)
        if found is not None:
            return found
        key, form = context.keys[it["id"]], it["form"]  # type: ignore[index]
        if not wrong:
            reply = gold_response(key, form)
            if context.score is not None and context.score(it["id"], reply) < 1.0:
                alt = str(key.get("answer", ""))  # a protocol that reads the answer text
                reply = alt if context.score(it["id"], alt) > context.score(it["id"], reply) else reply
        else:
            rng = _rng(self.seed, "oracle-wrong", it["id"])
            candidates = wrong_responses(key, form, rng)
            guess = _guesser(it) if form == "value" and not key.get("options") else None
            if guess is not None:  # wrong free values are the type's own guesses, not unreadable text
                candidates = [guess(it, rng) for _ in range(12)] + candidates
            if context.score is not None:
                candidates = [c for c in candidates if context.score(it["id"], c) == 0.0] or candidates[-1:]
            reply = candidates[0]
        context.memo[memo_key] = reply
        return reply


@register("oracle-noisy", "simulated evidence reader: the key, wrong at set per-capability rates",
          reads_key=True)
def _make_oracle(arg: str | None) -> Solver:
    default, per = _rates(arg)
    return NoisyOracle(default, per)
