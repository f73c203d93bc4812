"""A reference planner: weighted A* over the backend's grounded actions toward a verifier.

Only actions on goal-relevant objects are expanded: the objects the verifier's predicates range
over, the tools their derived states need (a Microwave to heat, a Fridge to cool, a SinkBasin and
Faucet to clean, a knife to slice) and the closed receptacles around any of them. The heuristic
counts the actions each unmet predicate still needs, roughly; the search is bounded by
``max_expansions`` and fails with the best progress it reached.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Any

from forge.errors import SkillExecutionError

from . import actions as act
from .backend import HouseholdEnv
from .catalog import CUTTERS, LIQUIDS, SLICED_TYPE
from .goals import Predicate, Verifier, evaluate
from .protocol import Action
from .world import World

TOOLS = {"heated": {"Microwave"}, "cooled": {"Fridge"}, "cleaned": {"SinkBasin", "Faucet"},
         ("temperature", "Hot"): {"Microwave", "Toaster", "StoveBurner", "StoveKnob"},
         ("temperature", "Cold"): {"Fridge"}}
TEST_COST = {"heated": 4, "cooled": 4, "cleaned": 4, "isSliced": 3, "isPickedUp": 2}
_VERBS = ("PickupObject", "OpenObject", "CloseObject", "ToggleObjectOn", "ToggleObjectOff", "SliceObject",
          "CleanObject", "DirtyObject", "EmptyLiquidFromObject", "BreakObject")


class PlanNotFound(SkillExecutionError):
    """The search ended without reaching the goal."""


@dataclass(frozen=True)
class _Focus:
    types: frozenset[str]          # object types worth acting on
    verbs: frozenset[str]          # state-changing verbs the goal can need


def _focus(verifier: Verifier, world: World) -> _Focus:
    meta = world.metadata()
    types: set[str] = set()
    verbs = {"PickupObject", "OpenObject"}
    for pred in verifier.predicates:
        for sel in (pred.subject, pred.inside, *pred.contains):
            if sel is None:
                continue
            types |= {o["objectType"] for o in meta if sel(o)}
            for whole, piece in SLICED_TYPE.items():  # pieces not cut yet: their whole is relevant
                if sel.value in (piece, whole) or (sel.match == "id_contains" and sel.value in piece):
                    types |= {whole, piece}
        for test in pred.tests:
            types |= TOOLS.get(test.field, set()) | TOOLS.get((test.field, test.value), set())
            if test.field == "cooled" or (test.field == "isOpen" and not test.value):
                verbs.add("CloseObject")
            verbs |= {"heated": {"ToggleObjectOn"}, "cleaned": {"ToggleObjectOn"},
                      "isToggled": {"ToggleObjectOn" if test.value else "ToggleObjectOff"},
                      "isDirty": {"DirtyObject" if test.value else "CleanObject"},
                      "isBroken": {"BreakObject"}, "fillLiquid": {"FillObjectWithLiquid", "EmptyLiquidFromObject"},
                      "isSliced": {"SliceObject"}, "temperature": {"ToggleObjectOn"}}.get(test.field, set())
    if any("Sliced" in t for t in types) or "SliceObject" in verbs:  # pieces are cut with a knife
        types |= CUTTERS
        verbs.add("SliceObject")
    # what switches a relevant object (a StoveKnob its StoveBurner) is relevant too
    chosen = {m["objectId"] for m in meta if m["objectType"] in types}
    types |= {o["objectType"] for o in meta if chosen & set(o.get("controlledObjects") or ())}
    return _Focus(frozenset(types), frozenset(verbs))


def _relevant(world: World, focus: _Focus) -> set[str]:
    if "relevant" not in world.memo:
        core = {o for o in world.order if world.exists(o) and world.type_of(o) in focus.types}
        world.memo["relevant"] = core | {anc for o in core for anc in world.ancestors(o) if world.can(anc, "openable")}
    return world.memo["relevant"]


def _successors(world: World, focus: _Focus, agent: int, last: Action | None) -> list[Action]:
    relevant = _relevant(world, focus)
    held = world.agents[agent].held
    out: list[Action] = []
    if last is None or last.name not in act.NAVIGATION:
        out += [Action("GotoObject", (o,), agent) for o in sorted(relevant) if world.holder(o) is None]
    for oid in sorted(relevant):
        if not world.in_reach(agent, oid):
            continue
        out += [Action(v, (oid,), agent) for v in _VERBS if v in focus.verbs]
        if "FillObjectWithLiquid" in focus.verbs:
            out += [Action("FillObjectWithLiquid", (oid, liquid), agent) for liquid in LIQUIDS]
        if held is not None and oid != held:
            out.append(Action("PutObject", (held, oid), agent))
    if held is not None and held not in relevant:
        out.append(Action("DropObject", (held,), agent))
    return out


def _predicate_cost(pred: Predicate, objs: list[dict[str, Any]], by_id: dict[str, dict[str, Any]]) -> int:
    receptacles = {o["objectId"] for o in objs if pred.inside and pred.inside(o)}
    costs = []
    for x in objs:
        if not pred.subject(x):
            continue
        cost = sum(TEST_COST.get(t.field, 1) for t in pred.tests if not t(x))
        held_ids = [by_id[c] for c in x.get("receptacleObjectIds") or () if c in by_id]
        cost += 4 * sum(1 for sel in pred.contains if not any(sel(h) for h in held_ids))
        if pred.inside and not receptacles & set(x.get("parentReceptacles") or ()):
            cost += 2 if x.get("isPickedUp") else 4
        costs.append(cost)
    costs.sort()
    costs += [5 + (4 if pred.inside else 0)] * max(0, pred.count - len(costs))
    return sum(costs[:pred.count])


def _view(world: World, focus: _Focus, agent: int) -> list[dict[str, Any]]:
    ids = {o for o in world.order if world.type_of(o) in focus.types}
    ids |= {c for o in list(ids) for c in world.children(o)}
    return world.metadata(agent, only=ids)


def _key(world: World, focus: _Focus) -> tuple:
    """World state with each agent's pose reduced to what it can reach: two spots that reach
    the same relevant objects are one state."""
    relevant = _relevant(world, focus)
    agents = tuple((frozenset(o for o in relevant if world.in_reach(i, o)), a.held)
                   for i, a in enumerate(world.agents))
    return tuple((k, tuple(v.values())) for k, v in world.dyn.items()), agents


def plan(env: HouseholdEnv, verifier: Verifier, *, agent: int = 0, max_expansions: int = 4000,
         weight: float = 2.0) -> list[Action]:
    """Actions from the environment's current state to one satisfying ``verifier``."""
    start = env._world().copy()
    rules = start.scene.rules
    focus = _focus(verifier, start)
    counter = itertools.count()

    def score(world: World) -> tuple[bool, float, int]:
        objs = _view(world, focus, agent)
        ok, progress, _ = evaluate(verifier, objs)
        by_id = {o["objectId"]: o for o in objs}
        return ok, progress, 0 if ok else sum(_predicate_cost(p, objs, by_id) for p in verifier.predicates)

    ok, best_progress, h = score(start)
    if ok:
        return []
    frontier = [(weight * h, next(counter), 0, start, (), None)]
    seen = {_key(start, focus)}
    expanded = 0
    while frontier and expanded < max_expansions:
        _, _, g, world, path, last = heapq.heappop(frontier)
        expanded += 1
        for action in _successors(world, focus, agent, last):
            if act.check(world, action, rules)[0] != "ok":
                continue
            child = world.copy()
            act.execute(child, action, rules)
            key = _key(child, focus)
            if key in seen:
                continue
            seen.add(key)
            ok, progress, h = score(child)
            best_progress = max(best_progress, progress)
            if ok:
                return [*path, action]
            heapq.heappush(frontier, (g + 1 + weight * h, next(counter), g + 1, child, (*path, action), action))
    why = "the reachable states ran out" if not frontier else f"{max_expansions} expansions were spent"
    raise PlanNotFound(f"no plan to {verifier.source or 'the goal'}: {why} (best progress {best_progress:.2f})",
                       hint="raise max_expansions, or check that the goal's objects exist in the scene")
