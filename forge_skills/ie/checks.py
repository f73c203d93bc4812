"""The IE gates as contract requirements on every task (``forge_contracts/ie_task.yaml``):

- B2 validity (deterministic): every object, state, action and goal variable resolves in the
  initial state; the instruction names exactly the goal's objects (normalized subgoal sets match)
  and no placeholder is left; each name it uses picks out one thing and none is an internal index
  ("bin 2"); the split agrees with the subtasks and the plan's length.
- C2 completion (execution): the reference plan satisfies the verifier on repeated executions
  from the restored state, no strict prefix does, and a wrong-object and a wrong-receptacle
  control do not.
- D2 initial state (execution): restoring gives the stored state back, also after an episode ran.
"""

from __future__ import annotations

import json
import re
from typing import Any

from forge.contracts import CheckContext, Outcome, check
from forge_resources.household import HouseholdEnv
from forge_resources.household.goals import Verifier, evaluate
from forge_resources.household.protocol import Action
from forge_skills.ie.synthesis import goal_targets, split_of, subgoal_count
from forge_skills.ie.templates import natural, plural
from forge_skills.ie.types import IETask

REPEATS = 3  # executions of the reference plan C2 asks to agree
RELEVANT_FIELDS = ("parentReceptacles", "isOpen", "isToggled", "isDirty", "isSliced", "isCooked", "temperature",
                   "isPickedUp")


class Unrestorable(Exception):
    """The task's initial state cannot be restored: D2's to report, not the other gates'."""


def _state(task: IETask, ctx: CheckContext) -> dict[str, Any]:
    try:
        return json.loads(ctx.store.get_blob(task.initial_state))
    except Exception as exc:  # missing, damaged or not JSON
        raise Unrestorable(str(exc)) from None


def _env(task: IETask, ctx: CheckContext) -> HouseholdEnv:
    env = HouseholdEnv()
    try:
        env.set_state(_state(task, ctx))
    except Unrestorable:
        raise
    except Exception as exc:
        raise Unrestorable(f"{type(exc).__name__}: {exc}") from None
    return env


HOUSEHOLD_CHECKS: dict[str, Any] = {}  # the household world's version of each check (filled below)


def per_world(name: str):
    """A task is checked by its world's own version of the check (``IEWorld.checks``); the
    decorated function is the household world's."""
    import functools

    from forge_skills.ie.world import world

    def decorate(fn):
        HOUSEHOLD_CHECKS[name] = fn

        @functools.wraps(fn)
        def run(task: IETask, ctx: CheckContext, **args: Any) -> Outcome:
            return world(task.environment).checks[name](task, ctx, **args)
        return run
    return decorate


def restorable(fn):
    """A B2/C2 check that cannot restore the state leaves it to D2 (one failure, one cause)."""
    import functools

    @functools.wraps(fn)
    def run(task: IETask, ctx: CheckContext, **args: Any) -> Outcome:
        try:
            return fn(task, ctx, **args)
        except Unrestorable as exc:
            return Outcome(True, f"not checked: the initial state does not restore ({exc}); see D2")
    return run


# -- B2 ---------------------------------------------------------------------------------------

@check("ie_variables_resolve", consults=("ie_world",))
@per_world("ie_variables_resolve")
@restorable
def variables_resolve(task: IETask, ctx: CheckContext) -> Outcome:
    """Every goal type and every plan argument is an object of the initial state (or a piece a
    planned slice makes); every planned action is in the action interface."""
    env = _env(task, ctx)
    types = {o["objectType"] for o in env.objects()}
    ids = set(env.world.dyn)
    known = {a["name"] for a in task.action_interface.get("actions", [])}
    problems = []
    for kind in sorted(goal_targets(task.goal)):
        if kind not in types and not (kind.endswith("Sliced") and kind[:-6] in types):
            problems.append(f"goal names {kind}, which the scene lacks")
    for step in task.reference_plan:
        if step["name"] not in known:
            problems.append(f"action {step['name']} is not in the action interface")
        for arg in step.get("args", []):
            if "|" in arg and arg not in ids and "Sliced" not in arg and "loc|" not in arg:
                problems.append(f"plan names {arg}, which the scene lacks")
    try:
        Verifier.from_dict(task.verifier)
    except (KeyError, TypeError, ValueError) as exc:
        problems.append(f"the verifier cannot be read: {exc}")
    return Outcome(not problems, "; ".join(problems[:4]))


# Objects an instruction may name that a task uses but its goal does not: the tools of its kind.
TOOLS = {"pick_heat_then_place_in_recep": {"Microwave"}, "pick_cool_then_place_in_recep": {"Fridge"},
         "pick_clean_then_place_in_recep": {"SinkBasin", "Sink", "Faucet"}, "slice": {"Knife", "ButterKnife"}}


def mentioned(text: str, candidates: set[str]) -> list[set[str]]:
    """The object names the text uses, each as the set of types going by that name ("sink" is a
    Sink or a SinkBasin); where names overlap ("toilet paper" and "toilet") the longest wins."""
    lowered = text.lower()
    spans: list[tuple[int, int, str]] = []
    for kind in candidates:
        for words in {natural(kind).lower(), plural(natural(kind)).lower()}:
            for m in re.finditer(r"(?<![a-z])" + re.escape(words) + r"(?![a-z])", lowered):
                spans.append((m.start(), m.end(), kind))
    kept: list[tuple[int, int, set[str]]] = []
    for start, end, kind in sorted(spans, key=lambda s: (-(s[1] - s[0]), s[0])):
        same = next((k for k in kept if k[0] == start and k[1] == end), None)
        if same is not None:
            same[2].add(kind)
        elif not any(start < e and s < end for s, e, _ in kept):
            kept.append((start, end, {kind}))
    return [names for _, _, names in sorted(kept, key=lambda k: k[0])]


def instruction_texts(task: IETask) -> list[str]:
    """The macro instruction and its steps."""
    return [task.instruction.get("macro", "")] + list(task.instruction.get("micro") or [])


# A word followed by a number ("bin 2", "peg1", "object 3", "countertop 2"): an index a model or
# a scene dump gives a thing, which nothing the agent sees shows. Instructions carry no other
# numbers, so any such pair is one.
INDEXED = re.compile(r"\b[a-z]+[ _-]?\d+\b", re.IGNORECASE)


def indexed(text: str) -> list[str]:
    """The internal indices the text names things by."""
    return INDEXED.findall(text)


def _placeholder(text: str) -> bool:
    return not text.strip() or bool(re.search(r"[{}]|\bTODO\b|\.\.\.", text))


@check("ie_instruction_complete")
def instruction_complete(task: IETask, ctx: CheckContext) -> Outcome:
    """The instruction is written out: no placeholder, no empty step."""
    bad = [t for t in instruction_texts(task) if _placeholder(t)]
    return Outcome(not bad, f"placeholder instruction: {bad[0]!r}" if bad else "")


@check("ie_instruction_matches_goal", consults=("ie_world",))
@per_world("ie_instruction_matches_goal")
@restorable
def instruction_matches_goal(task: IETask, ctx: CheckContext) -> Outcome:
    """The instruction names the goal's objects and no other object of the scene (an unfinished
    instruction is B2-4's to report)."""
    macro = task.instruction.get("macro", "")
    if _placeholder(macro):
        return Outcome(True, "not checked: the instruction is unfinished (B2-4)")
    env = _env(task, ctx)
    wanted = goal_targets(task.goal)
    tools = TOOLS.get(task.task_type, set())
    scene_types = {o["objectType"] for o in env.objects()} | wanted
    names = [n for n in mentioned(macro, scene_types) if not (n & tools and not n & wanted)]
    extra = [sorted(n) for n in names if not n & wanted]
    missing = sorted(t for t in wanted if not any(t in n for n in names))
    if extra or missing:
        return Outcome(False, f"instruction names {[sorted(n) for n in names]}, the goal {sorted(wanted)}"
                              + (f" (not in the goal: {extra})" if extra else "")
                              + (f" (not named: {missing})" if missing else ""))
    return Outcome(True, "")


@check("ie_names_unambiguous", consults=("ie_world",))
@per_world("ie_names_unambiguous")
@restorable
def names_unambiguous(task: IETask, ctx: CheckContext) -> Outcome:
    """No instruction text names a thing by an internal index, and each name it uses for a goal
    object picks out one of the goal's object types (household goals range over types: any
    countertop will do, so "the countertop" is not ambiguous among several)."""
    env = _env(task, ctx)
    wanted = goal_targets(task.goal)
    scene_types = {o["objectType"] for o in env.objects()} | wanted
    problems = []
    for text in instruction_texts(task):
        problems += [f"{p!r} is an internal index ({text!r})" for p in indexed(text)]
        problems += [f"one name stands for {sorted(n & wanted)} ({text!r})"
                     for n in mentioned(text, scene_types) if len(n & wanted) > 1]
    return Outcome(not problems, f"task {task.task_id}: " + "; ".join(problems[:4]) if problems else "")


@check("ie_split_consistent", consults=("ie_world",))
@per_world("ie_split_consistent")
def split_consistent(task: IETask, ctx: CheckContext) -> Outcome:
    """The split follows from the number of subtasks and the reference plan's length."""
    want = split_of(subgoal_count(task.goal), len(task.reference_plan))
    ok = task.split == want and task.subtasks == subgoal_count(task.goal)
    return Outcome(ok, "" if ok else f"split {task.split!r} with {task.subtasks} subtasks; the goal and plan give "
                                     f"{want!r} with {subgoal_count(task.goal)}")


# -- C2 ---------------------------------------------------------------------------------------

def _run(env: HouseholdEnv, verifier: Verifier, steps: list[dict[str, Any]]) -> tuple[bool, list[bool], str]:
    """(every step valid, the verifier after each step, the first refusal)."""
    after = []
    for step in steps:
        result = env.step(Action.from_dict(step))
        if not result.valid:
            return False, after, result.message
        after.append(evaluate(verifier, env.objects())[0])
    return True, after, ""


@check("ie_reference_completes", consults=("ie_world",))
@per_world("ie_reference_completes")
@restorable
def reference_completes(task: IETask, ctx: CheckContext) -> Outcome:
    """The reference plan reaches the verifier on every one of several executions from the
    restored state, with the same final state each time; no strict prefix does."""
    verifier = Verifier.from_dict(task.verifier)
    state = _env(task, ctx).get_state()
    finals = []
    for _ in range(REPEATS):
        env = HouseholdEnv()
        env.set_state(state)
        ok, after, refused = _run(env, verifier, task.reference_plan)
        if not ok:
            return Outcome(False, f"non-executable: a planned step was refused ({refused})")
        if not after or not after[-1]:
            return Outcome(False, "the reference plan ends without satisfying the verifier")
        if any(after[:-1]):
            return Outcome(False, f"a strict prefix of {after.index(True) + 1} steps already satisfies the verifier")
        finals.append(json.dumps(env.get_state()["world"], sort_keys=True))
    if len(set(finals)) != 1:
        return Outcome(False, "repeated executions ended in different states")
    return Outcome(True, "")


@check("ie_controls_fail", consults=("ie_world",))
@per_world("ie_controls_fail")
@restorable
def controls_fail(task: IETask, ctx: CheckContext) -> Outcome:
    """A wrong-object control (the plan acting on another object type) and a wrong-receptacle
    control (the last placement into another receptacle) do not satisfy the verifier."""
    verifier = Verifier.from_dict(task.verifier)
    env = _env(task, ctx)
    state = env.get_state()
    targets = goal_targets(task.goal)
    problems = []
    for label, steps in (("wrong object", _swap_object(env, task.reference_plan, targets)),
                         ("wrong receptacle", _swap_receptacle(env, task.reference_plan, targets))):
        if steps is None:
            continue
        env.set_state(state)
        ok, after, _ = _run(env, verifier, steps)
        if after and after[-1] and ok:
            problems.append(f"the {label} control satisfies the verifier")
    return Outcome(not problems, "; ".join(problems))


_STATE_VERBS = {"OpenObject": "openable", "ToggleObjectOn": "toggleable", "SliceObject": "sliceable"}


def _swap_object(env: HouseholdEnv, steps: list[dict[str, Any]], targets: set[str]) -> list[dict[str, Any]] | None:
    """The plan with its first goal object (the first picked up, else the first whose state it
    changes) replaced by an object of another type that allows the same."""
    world = env.world
    first = next((s for s in steps if s["name"] == "PickupObject" or s["name"] in _STATE_VERBS), None)
    if first is None:
        return None
    picked = first["args"][0]
    flag = "pickupable" if first["name"] == "PickupObject" else _STATE_VERBS[first["name"]]
    other = next((o for o in world.order if world.exists(o) and world.can(o, flag)
                  and world.type_of(o) not in targets and world.type_of(o) != world.type_of(picked)), None)
    if other is None:
        return None
    return [{**s, "args": [other if a == picked else a for a in s.get("args", [])]} for s in steps]


def _swap_receptacle(env: HouseholdEnv, steps: list[dict[str, Any]], targets: set[str]) -> list[dict[str, Any]] | None:
    """The plan with its last placement going into a receptacle of another type."""
    world = env.world
    last = max((i for i, s in enumerate(steps) if s["name"] == "PutObject"), default=None)
    if last is None:
        return None
    into = steps[last]["args"][1]
    other = next((o for o in world.order if world.exists(o) and world.can(o, "receptacle")
                  and not world.can(o, "pickupable") and world.type_of(o) not in targets
                  and world.type_of(o) != world.type_of(into)), None)
    if other is None:
        return None
    out = [dict(s) for s in steps]
    out[last] = {**steps[last], "args": [steps[last]["args"][0], other]}
    return out


# -- D2 ---------------------------------------------------------------------------------------

@check("ie_state_restores", consults=("ie_world",))
@per_world("ie_state_restores")
def state_restores(task: IETask, ctx: CheckContext) -> Outcome:
    """Restoring the stored initial state gives it back exactly, also after the reference
    episode ran; the objects the goal names keep their task-relevant fields."""
    try:
        state = _state(task, ctx)
        env = HouseholdEnv()
        env.set_state(state)
    except Exception as exc:
        return Outcome(False, f"restore failure: the initial state cannot be restored ({str(exc)[:160]})")
    if env.get_state() != state:
        return Outcome(False, "restore failure: the restored state differs from the stored one")
    before = _relevant(env, task)
    for step in task.reference_plan:
        env.step(Action.from_dict(step))
    env.set_state(state)
    if env.get_state() != state or _relevant(env, task) != before:
        return Outcome(False, "restore failure: after an episode the state does not come back")
    return Outcome(True, "")


def _relevant(env: HouseholdEnv, task: IETask) -> list[tuple]:
    targets = goal_targets(task.goal)
    return sorted((o["objectId"], *(json.dumps(o.get(f), sort_keys=True) for f in RELEVANT_FIELDS))
                  for o in env.objects() if o["objectType"] in targets)
