"""Evidence-blind solvers: answer an item from its text alone, never its media, or (one of
them) from where its markers are drawn, never the pixels under them.

If any of them beats chance on a template by more than the allowed margin, the template's
items carry a shortcut: an answer prior, an option text, the kind of object the question
names, a typical number, words that give the answer away, or markers whose placement or size
does. Learned solvers are cross-fitted
(two folds by item id), so a solver never sees the item it answers.

A solver with no preference between options does not guess: it gives all of its equally
preferred responses and scores their mean. A solver that has learned nothing then scores
exactly chance, so what lifts a solver above chance is a shortcut, not the luck of a guess.
Responses are scored by the package's own scorer, so every question type is covered.
"""

from __future__ import annotations

import itertools
import math
import re
import string
from collections import Counter
from functools import lru_cache
from collections.abc import Mapping
from typing import Callable

from forge.registry import register, view
from forge_skills.oe.types import OEItem
from forge_skills.oe.verify.blind_chance import (Response, _form, _key, _sampled_chance, binomial_tail, chance,
                                                 expected_score)

Solver = Callable[[list[tuple[str, OEItem]]], dict[str, Response]]
LETTERS = string.ascii_uppercase
MAX_TIED_ORDERS = 120
BOW_MIN_MARGIN = 1.5  # log-odds a bag-of-words preference must clear to count as one
BOW_MIN_COUNT = 3  # features seen fewer times than this in training carry no weight
# A learned preference counts when the training fold shows it clearly: the preferred answer's
# rate (or count) beats the next one's by this many standard errors. Weaker ones are ties.
MIN_Z = 2.0
MIN_SUPPORT = 4  # training examples a rate needs before it can be preferred
LENGTH_RATIO, LENGTH_GAP = 1.25, 4  # the longest option stands out: 25% and 4 characters longer


def _fold(item_id: str) -> int:
    return int(item_id[:8], 16) % 2


def _cross_fit(items: list[tuple[str, OEItem]], learn: Callable, apply: Callable) -> dict[str, Response]:
    out: dict[str, Response] = {}
    for fold in (0, 1):
        model = learn([it for iid, it in items if _fold(iid) != fold])
        for iid, it in items:
            if _fold(iid) == fold:
                out[iid] = apply(model, it)
    return out


def _top(scored: dict, eps: float = 1e-12) -> list:
    """The keys sharing the highest score."""
    if not scored:
        return []
    best = max(scored.values())
    return [k for k, v in scored.items() if v >= best - eps]


# -- responses expressed against an item's options ---------------------------------------------


def _as_response(it: OEItem, answer: str) -> str | None:
    """A remembered answer text, expressed against this item's options."""
    form = _form(it)
    if form in ("number", "value"):
        return answer
    values = it.values()
    if form == "matching":
        pairs = dict(p.split(" -> ") for p in answer.split("; "))
        if set(pairs) != set(values) or not all(t in it.targets for t in pairs.values()):
            return None
        return ", ".join(f"{LETTERS[i]}={it.targets.index(pairs[v]) + 1}" for i, v in enumerate(values))
    if form in ("order", "options"):
        sep = " > " if form == "order" else ", "
        parts = answer.split(sep)
        return ", ".join(LETTERS[values.index(p)] for p in parts) if all(p in values for p in parts) else None
    return LETTERS[values.index(answer)] if answer in values else None


def _option_response(it: OEItem, scores: list[float]) -> Response:
    """What a solver that scores each option gives: the best option(s) for one-answer types,
    the options scoring above one half for multiple choice, the options by score for ordered
    lists. Ties become a list of responses."""
    form = _form(it)
    if form not in ("option", "options", "order") or not scores:
        return None
    if form == "options":
        picked = [i for i, s in enumerate(scores) if s > 0.5]
        if picked:
            return ", ".join(LETTERS[i] for i in picked)
        best = _top(dict(enumerate(scores)))
        return [LETTERS[i] for i in best]
    if form == "order":
        groups = [list(g) for _, g in itertools.groupby(sorted(range(len(scores)), key=lambda i: -scores[i]),
                                                       key=lambda i: round(scores[i], 12))]
        orders = [list(itertools.chain(*p)) for p in itertools.islice(
            itertools.product(*[itertools.permutations(g) for g in groups]), MAX_TIED_ORDERS)]
        out = [", ".join(LETTERS[i] for i in o) for o in orders]
        return out[0] if len(out) == 1 else out
    best = _top(dict(enumerate(scores)))
    return LETTERS[best[0]] if len(best) == 1 else [LETTERS[i] for i in best]


# -- priors over answers and positions ---------------------------------------------------------


def _clear_counts(counts: dict) -> list:
    """The keys a count prefers clearly (a sign test of the top against the next), else all."""
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    if len(ranked) < 2:
        return [k for k, _ in ranked]
    (top, c1), (_, c2) = ranked[0], ranked[1]
    return [top] if c1 + c2 and (c1 - c2) / math.sqrt(c1 + c2) >= MIN_Z else [k for k, _ in ranked]


def answer_prior(items):
    """The answer most often correct on the other fold (among those this item offers)."""
    def apply(counts: Counter, it: OEItem) -> Response:
        offered = {a: c for a, c in counts.items() if _as_response(it, a) is not None}
        if _form(it) == "option" and it.options:
            offered.update({v: offered.get(v, 0) for v in it.values() if _as_response(it, v) is not None})
        responses = [_as_response(it, a) for a in _clear_counts(offered)]
        return responses[0] if len(responses) == 1 else (responses or None)
    return _cross_fit(items, lambda train: Counter(it.answer for it in train), apply)


def position_prior(items):
    """The answer position(s) most often correct on the other fold."""
    def position(it: OEItem):
        return tuple(it.answer_indices) if it.answer_indices else it.answer_index

    def as_response(pos, it: OEItem) -> str | None:
        idx = pos if isinstance(pos, tuple) else (pos,)
        if pos is None:
            return None
        if _form(it) == "matching":
            ok = len(idx) == len(it.options) and all(j < len(it.targets) for j in idx)
            return ", ".join(f"{LETTERS[i]}={j + 1}" for i, j in enumerate(idx)) if ok else None
        return ", ".join(LETTERS[i] for i in idx) if all(i < len(it.options) for i in idx) else None

    def apply(counts: Counter, it: OEItem) -> Response:
        offered = {p: c for p, c in counts.items() if as_response(p, it) is not None}
        responses = [as_response(p, it) for p in _clear_counts(offered)]
        return responses[0] if len(responses) == 1 else (responses or None)
    return _cross_fit(items, lambda train: Counter(position(it) for it in train), apply)


# -- surface heuristics ---------------------------------------------------------------------------


def _words(s: str) -> set[str]:
    return set(re.findall(r"[a-z]+", s.lower()))


def _heuristic(key: Callable[[OEItem, int], float], stands_out: Callable[[float, float], bool]):
    """Pick the option whose key is highest, when it stands out from the next; else a tie."""
    def pick(it: OEItem) -> Response:
        keys = [key(it, i) for i in range(len(it.options))]
        ranked = sorted(keys, reverse=True)
        if len(ranked) > 1 and not stands_out(ranked[0], ranked[1]):
            return [LETTERS[i] for i in range(len(keys))]
        return _option_response(it, keys)

    def solver(items):
        return {iid: (pick(it) if _form(it) == "option" and it.options else None) for iid, it in items}
    return solver


def _longer(a: float, b: float) -> bool:
    return abs(a) >= LENGTH_RATIO * abs(b) and abs(a) - abs(b) >= LENGTH_GAP


longest_option = _heuristic(lambda it, i: len(it.options[i]), _longer)
shortest_option = _heuristic(lambda it, i: -len(it.options[i]), lambda a, b: _longer(b, a))
question_overlap = _heuristic(lambda it, i: len(_words(it.options[i]) & _words(it.question)),
                              lambda a, b: a >= b + 1)


# -- what the text says the objects are --------------------------------------------------------


@lru_cache(maxsize=1)
def _appearance_words() -> frozenset[str]:
    """Colour words: a name's colour tells which object is meant, its category what kind it is."""
    from forge.registry import lookup

    return frozenset(lookup("vocabulary", "colours"))


def abstract(text: str) -> str:
    """The text with colour words removed: what it says about the kinds of objects only."""
    words = re.findall(r"[a-z0-9]+|[^a-z0-9\s]", text.lower())
    return " ".join(w for w in words if w not in _appearance_words())


def kinds_named(text: str) -> str:
    """The kinds of objects a text names: the word after each colour word ("the red domino" ->
    "domino"); the colour-free text where no object is named by colour ("ships")."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    colours = _appearance_words()
    kinds = sorted({b for a, b in zip(words, words[1:]) if a in colours and b not in colours})
    return " ".join(kinds) if kinds else abstract(text)


def _correct_values(it: OEItem) -> list[str]:
    """Option texts that are correct (in order, for ordered lists)."""
    values = it.values()
    if it.answer_indices is not None and _form(it) in ("options", "order"):
        return [values[i] for i in it.answer_indices]
    if it.answer_index is not None:
        return [values[it.answer_index]]
    return []


def _rate_solver(key_of: Callable[[str, str], tuple]):
    """Cross-fitted: how often an option with this key was correct on the other fold (for
    ordered lists: how early it came)."""
    def learn(train: list[OEItem]) -> tuple[Counter, Counter]:
        hits: Counter = Counter()
        seen: Counter = Counter()
        for it in train:
            values, correct = it.values(), _correct_values(it)
            for v in values:
                k = key_of(it.question, v)
                seen[k] += 1
                if _form(it) == "order":
                    hits[k] += (len(values) - 1 - correct.index(v)) / max(1, len(values) - 1) if v in correct else 0
                else:
                    hits[k] += v in correct
        return hits, seen

    def apply(model: tuple[Counter, Counter], it: OEItem) -> Response:
        hits, seen = model
        keys = [key_of(it.question, v) for v in it.values()]
        rates = [(hits[k] + 0.5) / (seen[k] + 1.0) for k in keys]
        counts = [seen[k] for k in keys]
        if _form(it) == "options":  # each option on its own: clearly above or below one half
            return _option_response(it, [r if n >= MIN_SUPPORT and abs(r - 0.5) / math.sqrt(0.25 / n) >= MIN_Z
                                         else 0.5 for r, n in zip(rates, counts)])
        return _option_response(it, _clear_rates(rates, counts))

    def solver(items):
        return _cross_fit(items, learn, apply)
    return solver


def _clear_rates(rates: list[float], seen: list[int]) -> list[float]:
    """Rates with the unclear ones tied: an option keeps its rate only when it beats every
    lower one by MIN_Z standard errors on enough examples; the rest share the lowest rate."""
    order = sorted(range(len(rates)), key=lambda i: -rates[i])
    out = [0.0] * len(rates)
    for rank, i in enumerate(order[:-1]):  # keep the ranks that are clear, from the top down
        j = order[rank + 1]
        pooled = (rates[i] * seen[i] + rates[j] * seen[j]) / max(1, seen[i] + seen[j])
        se = math.sqrt(max(pooled * (1 - pooled), 1e-6) * (1 / max(1, seen[i]) + 1 / max(1, seen[j])))
        if seen[i] < MIN_SUPPORT or (rates[i] - rates[j]) / se < MIN_Z:
            break
        out[i] = float(len(rates) - rank)
    return out


# The answer given only the kinds of objects the question and the option name ("the mug" ->
# "upright", "ships" -> "yes"): colour words are dropped, so the objects of a category pool.
category_prior = _rate_solver(lambda q, v: (kinds_named(q), abstract(v)))
# How often each option text was the answer, whatever the question.
option_frequency = _rate_solver(lambda q, v: (v,))


def _median(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2]


def constant_number(items):
    """One number for every numeric item: the other fold's median answer, scored under each
    item's own tolerance."""
    def learn(train: list[OEItem]) -> float | None:
        values = [it.answer_value for it in train if it.answer_value is not None]
        return _median(values) if values else None

    def apply(median: float | None, it: OEItem) -> Response:
        return None if median is None or _form(it) != "number" else f"{median:g}"
    return _cross_fit(items, learn, apply)


def category_number(items):
    """For numeric items: the other fold's median answer to questions about the same kinds of
    objects (the overall median where there is none)."""
    def learn(train: list[OEItem]) -> dict[str, float]:
        groups: dict[str, list[float]] = {}
        for it in train:
            if it.answer_value is not None:
                groups.setdefault(kinds_named(it.question), []).append(it.answer_value)
                groups.setdefault("", []).append(it.answer_value)
        return {k: _median(v) for k, v in groups.items()}

    def apply(medians: dict[str, float], it: OEItem) -> Response:
        if _form(it) != "number":
            return None
        value = medians.get(kinds_named(it.question), medians.get(""))
        return None if value is None else f"{value:g}"
    return _cross_fit(items, learn, apply)


def bag_of_words(items):
    """Naive Bayes over the words of each option and their pairs with the question's words,
    trained on the other fold to tell correct options from wrong ones. Preferences weaker than
    ``BOW_MIN_MARGIN`` log-odds count as ties."""
    def features(q: str, v: str) -> set[str]:
        qw, vw = set(abstract(q).split()), set(abstract(v).split()) or {"<empty>"}
        return {f"o:{w}" for w in vw} | {f"q:{a}|o:{b}" for a in qw for b in vw}

    def learn(train: list[OEItem]) -> tuple[dict[bool, Counter], Counter]:
        counts: dict[bool, Counter] = {True: Counter(), False: Counter()}
        totals: Counter = Counter()
        for it in train:
            if _form(it) not in ("option", "options", "order"):
                continue
            correct = _correct_values(it)
            for v in it.values():
                counts[v in correct].update(features(it.question, v))
                totals[v in correct] += 1
        return counts, totals

    def apply(model, it: OEItem) -> Response:
        counts, totals = model
        if _form(it) not in ("option", "options", "order") or not it.options or not totals[True] or not totals[False]:
            return None

        def logit(v: str) -> float:
            out = 0.0
            for f in features(it.question, v):
                if counts[True][f] + counts[False][f] < BOW_MIN_COUNT:
                    continue
                out += math.log((counts[True][f] + 1.0) / (totals[True] + 2.0)) - \
                    math.log((counts[False][f] + 1.0) / (totals[False] + 2.0))
            return out
        raw = [logit(v) for v in it.values()]
        # Only clear preferences count: logits within the margin of the best are tied with it.
        best = max(raw)
        scores = [1.0 if r >= best - BOW_MIN_MARGIN else 0.0 for r in raw]
        if _form(it) == "options":
            scores = [0.9 if r > BOW_MIN_MARGIN else (0.1 if r < -BOW_MIN_MARGIN else 0.5) for r in raw]
            if all(s == 0.5 for s in scores):
                return [LETTERS[i] for i in range(len(raw))]
        if _form(it) == "order":
            scores = [round(r / BOW_MIN_MARGIN) for r in raw]
        return _option_response(it, scores)
    return _cross_fit(items, learn, apply)


# -- what the markers alone show ----------------------------------------------------------------

MARKER_FEATURES = ("x", "y", "r")


def _marked_options(it: OEItem) -> list[dict] | None:
    """The marker of each option, when the options are marker labels."""
    marks = {m["label"]: m for m in it.markers}
    if _form(it) != "option" or not it.options or not all(o in marks for o in it.options):
        return None
    return [marks[o] for o in it.options]


def _clearly_above(hits: float, n: int, base: float) -> bool:
    return n >= MIN_SUPPORT and 0 < base < 1 and (hits / n - base) / math.sqrt(base * (1 - base) / n) >= MIN_Z


def marker_geometry(items):
    """Reads the markers only: where each is drawn (centre, ring size) and its label, never a
    pixel. For label options it learns, on the other fold, whether the answer is the marker
    furthest left, right, up, down, or with the largest or smallest ring; for a question about
    one marker (yes or no), a threshold on its position or size. A rule counts only when it
    clearly beats the base rate in training; otherwise every option ties."""
    def option_rule(train: list[OEItem]):
        best, best_acc, n, base = None, 0.0, 0, 0.0
        for feature in MARKER_FEATURES:
            for pick in (max, min):
                hits = total = 0.0
                chance_sum = 0.0
                for it in train:
                    marks = _marked_options(it)
                    if marks is None or it.answer_index is None:
                        continue
                    values = [m[feature] for m in marks]
                    top = [i for i, v in enumerate(values) if v == pick(values)]
                    hits += (it.answer_index in top) / len(top)
                    total += 1
                    chance_sum += 1 / len(marks)
                if total and hits / total > best_acc:
                    best, best_acc, n, base = (feature, pick), hits / total, int(total), chance_sum / total
        return best if best and _clearly_above(best_acc * n, n, base) else None

    def single_rule(train: list[OEItem]):
        rows = [(it.markers[0], it.answer) for it in train if len(it.markers) == 1 and _form(it) == "option"]
        answers = sorted({a for _, a in rows})
        if len(answers) != 2:
            return None
        base = max(sum(a == x for _, a in rows) for x in answers) / len(rows)
        best, best_hits = None, 0
        for feature in MARKER_FEATURES:
            ordered = sorted(rows, key=lambda r: r[0][feature])
            first = sum(a == answers[0] for _, a in ordered)  # answers[0] above every threshold so far
            below_first = 0
            for k in range(1, len(ordered)):  # threshold between ordered[k - 1] and ordered[k]
                below_first += ordered[k - 1][1] == answers[0]
                lo, hi = ordered[k - 1][0][feature], ordered[k][0][feature]
                if lo == hi:
                    continue
                above_first = first - below_first
                # above the threshold answers[0], below answers[1]; or the other way round
                for above, hits in ((answers[0], above_first + (k - below_first)),
                                    (answers[1], (len(ordered) - k - above_first) + below_first)):
                    if hits > best_hits:
                        other = answers[1] if above == answers[0] else answers[0]
                        best, best_hits = (feature, (lo + hi) / 2, above, other), hits
        return best if best and _clearly_above(best_hits, len(rows), base) else None

    def learn(train: list[OEItem]):
        return option_rule(train), single_rule(train)

    def apply(model, it: OEItem) -> Response:
        by_option, by_threshold = model
        marks = _marked_options(it)
        if marks is not None:
            if by_option is None:
                return [LETTERS[i] for i in range(len(marks))]
            feature, pick = by_option
            values = [m[feature] for m in marks]
            return [LETTERS[i] for i, v in enumerate(values) if v == pick(values)]
        if len(it.markers) == 1 and _form(it) == "option" and it.options:
            if by_threshold is None:
                return [LETTERS[i] for i in range(len(it.options))]
            feature, t, above, below = by_threshold
            guess = above if it.markers[0][feature] > t else below
            response = _as_response(it, guess)
            return response if response is not None else [LETTERS[i] for i in range(len(it.options))]
        return None
    return _cross_fit(items, learn, apply)


# The built-in blind solvers, each registered as ``blind_solver:<name>``; SOLVERS is every
# registered one (a question type's own solvers come with the question type).
_BUILTIN = {"answer_prior": answer_prior, "position_prior": position_prior, "longest_option": longest_option,
            "shortest_option": shortest_option, "question_overlap": question_overlap,
            "category_prior": category_prior, "option_frequency": option_frequency,
            "constant_number": constant_number, "category_number": category_number, "bag_of_words": bag_of_words,
            "marker_geometry": marker_geometry}
for _name, _solver in _BUILTIN.items():
    register("blind_solver", _name, _solver)
SOLVERS: Mapping[str, Solver] = view("blind_solver")


def solvers_for(items: list[tuple[str, OEItem]]) -> dict[str, Solver]:
    """The generic solvers plus those the items' question types bring."""
    from forge.vocabulary import question_types

    registered = question_types()
    out = dict(SOLVERS)
    for qt_name in sorted({it.question_type for _, it in items}):
        qt = registered.get(qt_name)
        for name, solver in (qt.solvers if qt else {}).items():
            out[f"{qt_name}.{name}"] = solver
    return out


# -- chance and the test -------------------------------------------------------------------------


def blind_report(items: list[tuple[str, OEItem]]) -> dict:
    """Accuracy of every blind solver on these items, against chance."""
    from forge.registry import lookup

    score_item = lookup("scorer", "oe")
    n = len(items)
    sampled = _sampled_chance(items, score_item)
    by_type: dict[str, list[OEItem]] = {}
    for _, it in items:
        by_type.setdefault(it.question_type, []).append(it)
    base = sum(chance(it, sampled.get(it.question_type, 0.0), by_type[it.question_type]) for _, it in items) / n \
        if n else 0.0
    accuracies = {}
    for name, solver in solvers_for(items).items():
        preds = solver(items)
        accuracies[name] = sum(expected_score(score_item, _key(it), preds.get(iid)) for iid, it in items) / n if n else 0.0
    best = max(accuracies, key=accuracies.get) if accuracies else None
    best_acc = accuracies.get(best, 0.0) if best else 0.0
    # Bonferroni over the solvers: the best of several solvers is tested, not one.
    p_value = min(1.0, binomial_tail(math.ceil(best_acc * n - 1e-9), n, base) * len(accuracies)) if n else 1.0
    return {"items": n, "chance": base, "accuracies": accuracies, "best_solver": best,
            "best_accuracy": best_acc, "excess": best_acc - base, "p_value": p_value}
