"""Trajectory-grounded EQA: questions about an episode's initial, intermediate and final states.

After an episode, :func:`questions_for` asks (by default) 15 questions about it, five about the
initial state, five about the trajectory and five about the final state (a group short of
candidates is filled from the others); within a group the kinds below take turns, starting at a
kind drawn per task. Every question is an answer-key row in the OE format, so
the OE scorer (``score_item(key, response)``) scores it:

========================  ===============  =====================================================
kind                      question type    asks
========================  ===============  =====================================================
location (t=0, k, end)    single_choice    what an object was in or on (or the robot's hand)
open (t=0, k)             yes_no           whether an openable object was open
on (t=0)                  yes_no           whether a toggleable object was on
count_in (t=0)            numeric          how many objects were directly in a receptacle
held (t=k, end)           single_choice    what the robot held after action k / at the end
first_pickup              single_choice    which object the robot picked up first
pickup_order              ordered_list     the order in which objects were first picked up
pickups                   numeric          how many times the robot picked something up
action_order              ordered_list     the order of some of the robot's valid actions
open_set (end)            multiple_choice  which of some openable objects are open at the end
contents (end)            multiple_choice  which of some objects are in a receptacle at the end
state (end)               yes_no           clean / hot / cold / sliced / on / cooked / filled
moved                     numeric          how many objects ended somewhere other than they began
========================  ===============  =====================================================

Keys come from the logged states only (:func:`forge_skills.ie.episodes.states`, the held
sequence and the logged actions), never from the environment. The questions are asked of the
agent's *own* episode: questions about the initial state are the same for every agent, but
which action ``k`` a question names, which objects moved, and every intermediate and final
answer follow that agent's trajectory, so two agents' keys differ there. Choices (objects,
distractors, option order) are deterministic: seeded by the task id and a function of the
episode. Objects are named by type where the type has one instance in the episode, otherwise by
object id; distractors are other objects of the scene, receptacles that can hold the object first.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from forge_resources.household.catalog import ALFRED_RECEPTACLES, BASE_TYPE
from forge_resources.household.goals import Verifier
from forge_skills.ie.episodes import Episode
from forge_skills.ie.spec import TaskSpec
from forge_skills.ie.trajectory_answers import HAND, NONE_OF_THESE, NOTHING, PROPERTIES, Trajectory, truth

QUESTIONS = 15
GROUPS = ("initial", "intermediate", "final")
# question type -> (scoring protocol, response format), as the OE vocabulary has them
QUESTION_TYPES = {
    "single_choice": ("exact_choice", "Answer with the letter of the correct option."),
    "yes_no": ("yes_no", "Answer with yes or no."),
    "numeric": ("numeric", "Answer with a single number."),
    "multiple_choice": ("set_match", "Answer with the letters of all correct options, separated by commas."),
    "ordered_list": ("ordered_list", "Answer with the letters of the options in order, separated by commas."),
}


# -- what the log says ---------------------------------------------------------------------


# -- making questions ----------------------------------------------------------------------


def _key(kind: str, group: str, qtype: str, text: str, query: dict[str, Any], options: list[str],
         value: Any) -> dict[str, Any]:
    protocol, fmt = QUESTION_TYPES[qtype]
    key: dict[str, Any] = {"question": text, "question_type": qtype, "kind": kind, "state": group, "query": query,
                           "options": options, "response_format": fmt, "scoring": {"protocol": protocol}}
    if qtype == "numeric":
        key.update(answer=str(value), answer_value=float(value))
        key["scoring"]["abs_tol"] = 0.0
    elif qtype in ("single_choice", "yes_no"):
        key.update(answer=value, answer_index=options.index(value))
    elif qtype == "multiple_choice":
        key.update(answer=", ".join(value), answer_indices=sorted(options.index(v) for v in value))
    else:
        key.update(answer=", ".join(value), answer_indices=[options.index(v) for v in value])
    return key


class _Maker:
    """Candidate questions by group and kind, each kind in its own seeded order."""

    def __init__(self, task: TaskSpec, tr: Trajectory) -> None:
        self.task, self.tr = task, tr
        self.focus = _focus(task, tr)

    def rng(self, kind: str) -> random.Random:
        return random.Random(f"eqa:{self.task.task_id}:{kind}")

    def ordered(self, ids: Iterable[str], kind: str) -> list[str]:
        """Focus objects first, each part in a seeded order."""
        ids = sorted(set(ids))
        rng = self.rng(kind)
        first = [o for o in ids if o in self.focus]
        rest = [o for o in ids if o not in self.focus]
        rng.shuffle(first)
        rng.shuffle(rest)
        return first + rest

    def choice(self, kind: str, group: str, text: str, query: dict[str, Any], right: str, pool: list[str],
               extra: tuple[str, ...] = ()) -> dict[str, Any] | None:
        rng = self.rng(f"{kind}:{text}")
        others = [p for p in dict.fromkeys([*pool, *extra]) if p != right]
        if len(others) < 2:
            return None
        picked = others[:3] if len(others) <= 3 else others[:2] + rng.sample(others[2:], 1)
        options = [right, *picked]
        rng.shuffle(options)
        return _key(kind, group, "single_choice", text, query, options, right)

    def yes_no(self, kind: str, group: str, text: str, query: dict[str, Any]) -> dict[str, Any]:
        return _key(kind, group, "yes_no", text, query, ["yes", "no"], truth(query, self.tr))

    def balanced(self, questions: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
        """Yes/no questions with "yes" and "no" keys taking turns (a seeded one first), so that a
        constant answer does not score well; the order within each answer is kept."""
        yes = [q for q in questions if q["answer"] == "yes"]
        no = [q for q in questions if q["answer"] == "no"]
        first, second = (yes, no) if self.rng(f"balance:{kind}").random() < 0.5 else (no, yes)
        out = []
        for i in range(max(len(yes), len(no))):
            out += [q[i] for q in (first, second) if i < len(q)]
        return out

    # -- pools of names for distractors
    def receptacles_for(self, oid: str, t: int) -> list[str]:
        """Receptacle labels present at ``t``: those that can hold the object first, seeded."""
        tr = self.tr
        kind = tr.view(t)[oid]["objectType"]
        kind = BASE_TYPE.get(kind, kind)
        recs = [r for r in tr.present(t) if r != oid and tr.flag(r, "receptacle")]
        fit = [r for r in recs if kind in ALFRED_RECEPTACLES.get(tr.view(t)[r]["objectType"], ())]
        rng = self.rng(f"receptacles:{oid}:{t}")
        rest = sorted(set(recs) - set(fit))
        fit = sorted(fit)
        rng.shuffle(fit)
        rng.shuffle(rest)
        return list(dict.fromkeys(tr.labels[r] for r in fit + rest))

    def pickupables(self, t: int, kind: str) -> list[str]:
        return [self.tr.labels[o] for o in self.ordered((o for o in self.tr.present(t)
                                                         if self.tr.flag(o, "pickupable")), kind)]

    # -- the groups
    def initial(self) -> dict[str, list[dict[str, Any]]]:
        tr, out = self.tr, {}
        out["location"] = [q for oid in self.ordered((o for o in tr.present(0) if tr.flag(o, "pickupable")
                                                      and tr.location(o, 0) not in (None, HAND)), "init-loc")[:8]
                           if (q := self.choice("location", "initial", f"At the start of the episode, what was "
                                                f"{tr.name(oid)} in or on?", {"kind": "location", "object": oid,
                                                                               "t": 0},
                                                tr.location(oid, 0), self.receptacles_for(oid, 0)))]
        out["open"] = self.balanced([
            self.yes_no("open", "initial", f"At the start of the episode, was {tr.name(oid)} open?",
                        {"kind": "open", "object": oid, "t": 0})
            for oid in self.ordered((o for o in tr.present(0) if tr.flag(o, "openable")), "init-open")], "init-open")
        out["on"] = self.balanced([
            self.yes_no("on", "initial", f"At the start of the episode, was {tr.name(oid)} switched on?",
                        {"kind": "on", "object": oid, "t": 0})
            for oid in self.ordered((o for o in tr.present(0) if tr.flag(o, "toggleable")), "init-on")], "init-on")
        holders = [r for r in tr.present(0) if tr.flag(r, "receptacle")
                   and any(v["parent"] == r for v in tr.view(0).values())]
        out["count_in"] = [_key("count_in", "initial", "numeric", f"At the start of the episode, how many objects "
                                f"were directly in or on {tr.name(rid)}?", q, [], truth(q, tr))
                           for rid in self.ordered(holders, "init-count")[:8]
                           for q in [{"kind": "count_in", "receptacle": rid, "t": 0}]]
        return out

    def intermediate(self) -> dict[str, list[dict[str, Any]]]:
        tr, out = self.tr, {}
        steps = list(range(1, tr.n)) or list(range(1, tr.n + 1))  # strictly inside the trajectory when it can
        texts = {s.index: s.text for s in tr.episode.steps}

        def after(k: int) -> str:
            return f"Right after action {k} ({texts[k]})"

        if steps:
            rng = self.rng("held-steps")
            picks = sorted(rng.sample(steps, min(4, len(steps))))
            held_pool = list(dict.fromkeys([*(tr.labels[h] for h in tr.held if h), *self.pickupables(0, "held")]))
            out["held"] = [q for k in picks
                           if (q := self.choice("held", "intermediate", f"{after(k)}, what was the robot holding?",
                                                {"kind": "held", "t": k}, truth({"kind": "held", "t": k}, tr),
                                                held_pool, (NOTHING,)))]
            moved = [o for o in tr.present(0) if len({tr.location(o, t) for t in range(tr.n + 1)}) > 1]
            locs = []
            for oid in self.ordered(moved, "mid-loc")[:4]:
                k = self.rng(f"mid-loc:{oid}").choice(steps)
                where = tr.location(oid, k)
                if where is None:
                    continue
                q = self.choice("location", "intermediate", f"{after(k)}, what was {tr.name(oid)} in or on?",
                                {"kind": "location", "object": oid, "t": k}, where, self.receptacles_for(oid, k),
                                (HAND,))
                if q:
                    locs.append(q)
            out["location"] = locs
            changed = [o for o in tr.present(0) if tr.flag(o, "openable")
                       and len({tr.view(t)[o]["isOpen"] for t in range(tr.n + 1)}) > 1]
            openables = changed or [o for o in tr.present(0) if tr.flag(o, "openable") and o in self.focus]
            out["open"] = self.balanced([
                self.yes_no("open", "intermediate", f"{after(k)}, was {tr.name(oid)} open?",
                            {"kind": "open", "object": oid, "t": k})
                for oid in self.ordered(openables, "mid-open")[:6]
                for k in [self.rng(f"mid-open:{oid}").choice(steps)]], "mid-open")
        picks = tr.pickups()
        first = self.choice("first_pickup", "intermediate", "Which object did the robot pick up first?",
                            {"kind": "first_pickup"}, truth({"kind": "first_pickup"}, tr),
                            list(dict.fromkeys([*(tr.labels[o] for _, o in picks), *self.pickupables(0, "first")])),
                            (NOTHING,))
        out["first_pickup"] = [first] if first else []
        out["pickups"] = [_key("pickups", "intermediate", "numeric", "How many times did the robot pick up an "
                               "object during the episode?", {"kind": "pickups"}, [], len(picks))]
        distinct = list(dict.fromkeys(o for _, o in picks))
        out["pickup_order"] = []
        if len(distinct) >= 2:
            chosen = distinct[:4]
            options = [tr.labels[o] for o in chosen]
            self.rng("pickup-order").shuffle(options)
            q = {"kind": "pickup_order", "objects": chosen}
            out["pickup_order"] = [_key("pickup_order", "intermediate", "ordered_list", "Put these objects in the "
                                        "order in which the robot first picked them up.", q, options, truth(q, tr))]
        valid = tr.valid_steps()
        out["action_order"] = []
        if len(valid) >= 2:
            rng = self.rng("action-order")
            chosen = sorted(rng.sample(valid, min(4, len(valid))))
            q = {"kind": "action_order", "steps": chosen}
            options = truth(q, tr)[:]
            rng.shuffle(options)
            if len(set(options)) == len(options):
                out["action_order"] = [_key("action_order", "intermediate", "ordered_list", "Put these actions "
                                            "of the robot in the order it carried them out.", q, options,
                                            truth(q, tr))]
        return out

    def final(self) -> dict[str, list[dict[str, Any]]]:
        tr, out, n = self.tr, {}, self.tr.n
        movers = set(tr.moved())
        candidates = [o for o in tr.present(n) if tr.flag(o, "pickupable") and tr.location(o, n) is not None]
        ordered = [o for o in self.ordered(candidates, "final-loc") if o in movers] + \
                  [o for o in self.ordered(candidates, "final-loc") if o not in movers]
        out["location"] = [q for oid in ordered[:6]
                           if (q := self.choice("location", "final", f"At the end of the episode, what is "
                                                f"{tr.name(oid)} in or on?", {"kind": "location", "object": oid,
                                                                               "t": n},
                                                tr.location(oid, n), self.receptacles_for(oid, n), (HAND,)))]
        openables = self.ordered((o for o in tr.present(n) if tr.flag(o, "openable")), "final-open")
        out["open_set"] = []
        if len(openables) >= 2:
            chosen = openables[:4]
            q = {"kind": "open_set", "objects": chosen, "t": n}
            options = [tr.labels[o] for o in chosen] + [NONE_OF_THESE]
            out["open_set"] = [_key("open_set", "final", "multiple_choice", "Which of these objects are open at the "
                                    "end of the episode?", q, options, truth(q, tr))]
        holders = self.ordered((r for r in tr.present(n) if tr.flag(r, "receptacle") and r in self.focus),
                               "final-contents")
        contents = []
        for rid in holders[:2]:
            inside = [o for o, v in tr.view(n).items() if v["present"] and v["parent"] == rid
                      and tr.flag(o, "pickupable")]
            outside = [o for o in self.ordered(tr.present(n), f"contents:{rid}") if tr.flag(o, "pickupable")
                       and o not in inside]
            chosen = sorted(inside, key=lambda o: (o not in self.focus, o))[:2] + outside[:4 - min(2, len(inside))]
            if len(chosen) < 2:
                continue
            chosen = sorted(chosen)
            self.rng(f"contents-order:{rid}").shuffle(chosen)
            q = {"kind": "contents", "receptacle": rid, "objects": chosen, "t": n}
            options = [tr.labels[o] for o in chosen] + [NONE_OF_THESE]
            contents.append(_key("contents", "final", "multiple_choice", f"Which of these objects are directly in "
                                 f"or on {tr.name(rid)} at the end of the episode?", q, options, truth(q, tr)))
        out["contents"] = contents
        states_ = []
        for oid in self.ordered((o for o in tr.present(n) if o in self.focus), "final-state"):
            for prop, (words, flag, _) in PROPERTIES.items():
                if flag and not tr.flag(oid, flag):
                    continue
                if not flag and not tr.flag(oid, "pickupable"):
                    continue
                q = {"kind": "state", "object": oid, "property": prop, "t": n}
                states_.append(self.yes_no("state", "final", f"At the end of the episode, is {tr.name(oid)} "
                                           f"{words}?", q))
        self.rng("final-state-pick").shuffle(states_)
        out["state"] = self.balanced(states_, "final-state")
        out["held"] = [q for q in [self.choice("held", "final", "At the end of the episode, what is the robot "
                                               "holding?", {"kind": "held", "t": n},
                                               truth({"kind": "held", "t": n}, tr),
                                               list(dict.fromkeys([*(tr.labels[h] for h in tr.held if h),
                                                                   *self.pickupables(n, "final-held")])),
                                               (NOTHING,))] if q]
        out["moved"] = [_key("moved", "final", "numeric", "How many objects ended the episode in a different place "
                             "(receptacle, or the robot's hand) from where they started?", {"kind": "moved"}, [],
                             len(movers))]
        return out


def _focus(task: TaskSpec, tr: Trajectory) -> set[str]:
    """Objects the goal names, objects the agent acted on, and what held them."""
    verifier = Verifier.from_dict(task.verifier)
    selects = [s for p in verifier.predicates for s in (p.subject, p.inside, *p.contains) if s is not None]
    every = {oid: v for view_ in tr.views for oid, v in view_.items()}
    out = set()
    for oid, v in every.items():
        record = {"objectId": oid, "objectType": v["objectType"]}
        if any(s.value in oid if s.match == "id_contains" else s({**record, **{f: True for f in s.require}})
               for s in selects):
            out.add(oid)
    for step in tr.episode.steps:
        if step.valid and step.action:
            out |= {a for a in step.action.get("args", ()) if a in every}
    parents = {v["parent"] for view_ in tr.views for oid, v in view_.items() if oid in out and v["parent"]}
    return out | parents


def questions_for(task: TaskSpec, episode: Episode, count: int = QUESTIONS) -> list[dict[str, Any]]:
    """``count`` answer-key rows about ``episode`` (see the module docstring), ids ``<task>:q01``..."""
    tr = Trajectory(episode)
    maker = _Maker(task, tr)
    groups = {"initial": maker.initial(), "intermediate": maker.intermediate(), "final": maker.final()}
    quota = {g: count // len(GROUPS) + (1 if i < count % len(GROUPS) else 0) for i, g in enumerate(GROUPS)}
    chosen: list[dict[str, Any]] = []
    seen: set[str] = set()

    def draw(group: str, want: int) -> int:
        pools = [list(v) for v in groups[group].values() if v]
        if pools:  # kinds take turns from a seeded start, so every kind is asked across tasks
            turn = maker.rng(f"turn:{group}").randrange(len(pools))
            pools = pools[turn:] + pools[:turn]
        got = 0
        while got < want and any(pools):
            for pool in pools:
                while pool and got < want:
                    q = pool.pop(0)
                    if q["question"] not in seen:
                        seen.add(q["question"])
                        chosen.append(q)
                        got += 1
                        break
        groups[group] = {k: [q for q in v if q["question"] not in seen] for k, v in groups[group].items()}
        return got

    short = 0
    for g in GROUPS:
        short += quota[g] - draw(g, quota[g])
    for g in GROUPS:  # fill what a group lacked from the others
        if short <= 0:
            break
        short -= draw(g, short)
    order = {g: i for i, g in enumerate(GROUPS)}
    chosen.sort(key=lambda q: order[q["state"]])
    for i, q in enumerate(chosen, 1):
        q["id"] = f"{task.task_id}:q{i:02d}"
        q["task_id"] = task.task_id
    return chosen


