"""Trajectory EQA over an episode: what a trajectory records, the true answer of a query over it,
a reply's form, what an agent's log answers, and how a reply is scored."""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable
from functools import cached_property
from typing import Any

from forge_resources.household.catalog import flags
from forge_skills.ie.episodes import Episode, held_sequence, states
from forge_skills.scoring.scorer import parse as parse_response
from forge_skills.scoring.scorer import score_item

LETTERS = string.ascii_uppercase
HAND = "the robot's hand"
NOTHING = "nothing"
NONE_OF_THESE = "none of these"
# state property -> (words, capability flag, test on an EQA view)
PROPERTIES: dict[str, tuple[str, str, Callable[[dict[str, Any]], bool]]] = {
    "clean": ("clean", "dirtyable", lambda v: not v["isDirty"]),
    "hot": ("hot", "", lambda v: v["temperature"] == "Hot"),
    "cold": ("cold", "", lambda v: v["temperature"] == "Cold"),
    "sliced": ("sliced", "sliceable", lambda v: v["isSliced"]),
    "on": ("switched on", "toggleable", lambda v: v["isToggled"]),
    "cooked": ("cooked", "cookable", lambda v: v["isCooked"]),
    "filled": ("filled with a liquid", "canFillWithLiquid", lambda v: v["fillLiquid"] is not None),
}


VISIBLE_KEYS = ("id", "task_id", "question", "question_type", "options", "response_format", "state", "kind", "query")


class Trajectory:
    """An episode's logged states, read for questions: views, held objects, labels."""

    def __init__(self, episode: Episode) -> None:
        self.episode = episode
        self.views = states(episode)
        self.held = held_sequence(episode)
        self.n = len(episode.steps)
        self.static = {o["objectId"]: o for o in [*episode.initial, *episode.final]}

    @cached_property
    def labels(self) -> dict[str, str]:
        """Object id -> its name in questions and options: the type when the episode has one
        object of that type, else the id."""
        types: dict[str, set[str]] = {}
        for v in self.views:
            for oid, entry in v.items():
                types.setdefault(entry["objectType"], set()).add(oid)
        return {oid: (kind if len(ids) == 1 else oid) for kind, ids in types.items() for oid in ids}

    def name(self, oid: str) -> str:
        label = self.labels[oid]
        return f"the {label}" if label != oid else label

    def flag(self, oid: str, flag: str) -> bool:
        record = self.static.get(oid)
        if record is not None:
            return bool(record.get(flag))
        return flag in flags(self.view(self.n)[oid]["objectType"])  # a piece cut and gone again: by its type

    def view(self, t: int) -> dict[str, dict[str, Any]]:
        return self.views[t]

    def present(self, t: int) -> list[str]:
        return [oid for oid, v in self.views[t].items() if v["present"]]

    def location(self, oid: str, t: int) -> str | None:
        """What holds the object at ``t``: a receptacle's label, the hand, or None."""
        v = self.views[t].get(oid)
        if v is None or not v["present"]:
            return None
        if v["parent"] is not None:
            return self.labels[v["parent"]]
        return HAND if self.held[t] == oid else None

    def pickups(self) -> list[tuple[int, str]]:
        """(step, object) for every step after which the hand holds something it did not before."""
        return [(t, self.held[t]) for t in range(1, self.n + 1)
                if self.held[t] is not None and self.held[t] != self.held[t - 1]]

    def moved(self) -> list[str]:
        """Objects present at both ends that end in a different place (the hand is a place)."""
        return sorted(oid for oid in set(self.present(0)) & set(self.present(self.n))
                      if self.location(oid, 0) != self.location(oid, self.n))

    def valid_steps(self) -> list[int]:
        """Steps (1-based) of valid actions, the first time each action text occurs."""
        seen, out = set(), []
        for s in self.episode.steps:
            if s.valid and s.text not in seen:
                seen.add(s.text)
                out.append(s.index)
        return out


def truth(query: dict[str, Any], tr: Trajectory) -> Any:
    """The answer to a query, from the logged states: an option text, a list of option texts
    (a set for ``open_set``/``contents``, an order for the orderings) or a number."""
    kind, t = query["kind"], query.get("t", 0)
    if kind == "location":
        return tr.location(query["object"], t)
    if kind == "open":
        return "yes" if tr.view(t)[query["object"]]["isOpen"] else "no"
    if kind == "on":
        return "yes" if tr.view(t)[query["object"]]["isToggled"] else "no"
    if kind == "state":
        return "yes" if PROPERTIES[query["property"]][2](tr.view(t)[query["object"]]) else "no"
    if kind == "count_in":
        v = tr.view(t)
        return sum(1 for e in v.values() if e["present"] and e["parent"] == query["receptacle"])
    if kind == "held":
        held = tr.held[t]
        return tr.labels[held] if held is not None else NOTHING
    if kind == "first_pickup":
        picks = tr.pickups()
        return tr.labels[picks[0][1]] if picks else NOTHING
    if kind == "pickup_order":
        first: dict[str, int] = {}
        for step, oid in tr.pickups():
            first.setdefault(oid, step)
        return [tr.labels[o] for o in sorted(query["objects"], key=lambda o: first[o])]
    if kind == "pickups":
        return len(tr.pickups())
    if kind == "moved":
        return len(tr.moved())
    if kind == "action_order":
        texts = {s.index: s.text for s in tr.episode.steps}
        return [texts[i] for i in sorted(query["steps"])]
    if kind == "open_set":
        v = tr.view(t)
        hits = [tr.labels[o] for o in query["objects"] if v[o]["isOpen"]]
        return hits or [NONE_OF_THESE]
    if kind == "contents":
        v = tr.view(t)
        hits = [tr.labels[o] for o in query["objects"] if v[o]["present"] and v[o]["parent"] == query["receptacle"]]
        return hits or [NONE_OF_THESE]
    raise ValueError(f"unknown EQA query kind {kind!r}")


def response(question: dict[str, Any], value: Any) -> str:
    """A value as the response the question's format asks for (letters, yes/no, a number)."""
    qtype, options = question["question_type"], question.get("options") or []
    if qtype == "numeric":
        return f"{value:g}" if isinstance(value, float) else str(value)
    if qtype in ("single_choice", "yes_no"):
        return LETTERS[options.index(value)] if qtype == "single_choice" else str(value)
    return ", ".join(LETTERS[options.index(v)] for v in value)


def answer_from_log(questions: Iterable[dict[str, Any]], episode: Episode) -> list[str]:
    """The right response to each question, read from the episode's logged states (by its world)."""
    from forge_skills.ie.world import world

    return world(episode.environment).answer_from_log(list(questions), episode)


def household_answer_from_log(questions: list[dict[str, Any]], episode: Episode) -> list[str]:
    """A household episode's answers, from its logged object states."""
    tr = Trajectory(episode)
    return [response(q, truth(q["query"], tr)) for q in questions]


def visible(question: dict[str, Any]) -> dict[str, Any]:
    """What an agent is shown of a question (never the answer)."""
    return {k: question[k] for k in VISIBLE_KEYS if k in question}


def score(question: dict[str, Any], reply: str | None, scorer: Any = None) -> tuple[bool, bool, str | None]:
    """(valid, correct, the reading scored) of a reply, read as ``forge eval`` reads OE replies
    (the first reading the scorer parses) and scored by ``scorer`` (a module with ``parse`` and
    ``score_item``; default: the OE scorer packages ship)."""
    from forge.evaluation.prompt import read_reply

    parse = scorer.parse if scorer is not None else parse_response
    score_fn = scorer.score_item if scorer is not None else score_item
    reading, _ = read_reply("" if reply is None else str(reply), lambda text: parse(question, text))
    if reading is None:
        return False, False, None
    return True, float(score_fn(question, reading)) == 1.0, reading
