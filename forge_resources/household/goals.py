"""Goals and the verifiers compiled from them.

A verifier is data: a list of predicate records over AI2-THOR object metadata, never code.
:func:`evaluate` reads nothing but that metadata, so it judges a live THOR's terminal state
as well as the backend's. Three goal forms compile to it:

* ALFRED's ``pddl_params`` for its seven task types, condition for condition as ALFRED's
  ``env/tasks.py`` counts them (``goal_conditions_met``): objects found by ``name in objectId``
  with a truthy property, exactly as its ``get_objects_with_name_and_prop`` does;
* subtasks ``(object, state, receptacle)`` with a completion mode, all or any;
* ``object_states`` entries of ``tasks_goal_states.json`` (type, state, receptacleObjectTypes).

Cleaned, heated and cooled are read from ALFRED's bookkeeping flags (``isCleaned``,
``isHeated``, ``isCooled``) where the metadata carries them, as ALFRED's environment tracks
them; bare THOR metadata falls back to ``isDirty``, ``temperature`` and ``isCooked``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .catalog import BASE_TYPE

Match = Literal["type", "base_type", "id_contains"]
Mode = Literal["all", "any"]
TASK_TYPES = ("pick_and_place_simple", "pick_two_obj_and_place", "look_at_obj_in_light",
              "pick_clean_then_place_in_recep", "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
              "pick_and_place_with_movable_recep")
DERIVED = ("cleaned", "heated", "cooled")


@dataclass(frozen=True)
class Select:
    """Which objects a predicate ranges over: by exact type, by type counting a slice as its
    whole (``base_type``), or ALFRED's way (``id_contains``); ``require`` lists fields that must
    be truthy (ALFRED asks for ``pickupable`` targets and ``receptacle`` parents)."""

    value: str
    match: Match = "type"
    require: tuple[str, ...] = ()

    def __call__(self, obj: dict[str, Any]) -> bool:
        kind = obj.get("objectType", "")
        if self.match == "id_contains":
            hit = self.value in obj.get("objectId", "")
        elif self.match == "base_type":
            hit = kind == self.value or BASE_TYPE.get(kind) == self.value
        else:
            hit = kind == self.value
        return hit and all(obj.get(flag) for flag in self.require)


@dataclass(frozen=True)
class Test:
    """A state test: a metadata field equal to a value, or a derived state (cleaned, heated, cooled)."""

    field: str
    value: Any = True

    def __call__(self, obj: dict[str, Any]) -> bool:
        if self.field in DERIVED:
            return _derived(self.field, obj) == bool(self.value)
        return obj.get(self.field) == self.value


@dataclass(frozen=True)
class Predicate:
    """At least ``count`` distinct subjects pass every test, sit in a receptacle matching
    ``inside`` (listed in its ``receptacleObjectIds``, or naming it in ``parentReceptacles`` when
    ``inside_via_parent``) and hold an object matching each of ``contains``. With
    ``same_receptacle`` the subjects must share one receptacle."""

    id: str
    subject: Select
    tests: tuple[Test, ...] = ()
    inside: Select | None = None
    inside_via_parent: bool = False
    contains: tuple[Select, ...] = ()
    count: int = 1
    same_receptacle: bool = False
    description: str = ""


@dataclass(frozen=True)
class Verifier:
    predicates: tuple[Predicate, ...]
    mode: Mode = "all"
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verifier:
        def select(d: dict[str, Any] | None) -> Select | None:
            return None if d is None else Select(d["value"], d.get("match", "type"), tuple(d.get("require", ())))

        preds = tuple(Predicate(
            id=p["id"], subject=select(p["subject"]), tests=tuple(Test(t["field"], t["value"]) for t in p["tests"]),
            inside=select(p.get("inside")), inside_via_parent=p.get("inside_via_parent", False),
            contains=tuple(select(c) for c in p.get("contains", ())), count=p.get("count", 1),
            same_receptacle=p.get("same_receptacle", False), description=p.get("description", ""))
            for p in data["predicates"])
        return cls(preds, data.get("mode", "all"), data.get("source", ""))


@dataclass(frozen=True)
class Goal:
    """ALFRED's ``pddl_params`` and task type."""

    task_type: str
    object_target: str
    parent_target: str = ""
    toggle_target: str = ""
    mrecep_target: str = ""
    object_sliced: bool = False

    @classmethod
    def from_trial(cls, trial: dict[str, Any]) -> Goal:
        params = trial["pddl_params"]
        return cls(trial["task_type"], params["object_target"], params.get("parent_target") or "",
                   params.get("toggle_target") or "", params.get("mrecep_target") or "",
                   bool(params.get("object_sliced")))

    def subtasks(self) -> tuple[Subtask, ...]:
        """The goal as subtasks (all must hold)."""
        target = self.object_target + ("Sliced" if self.object_sliced else "")
        state = {"pick_clean_then_place_in_recep": {"cleaned": True}, "pick_heat_then_place_in_recep": {"heated": True},
                 "pick_cool_then_place_in_recep": {"cooled": True}}.get(self.task_type, {})
        if self.task_type == "look_at_obj_in_light":
            return (Subtask(target, {"isPickedUp": True}), Subtask(self.toggle_target, {"isToggled": True, "visible": True}))
        if self.task_type == "pick_and_place_with_movable_recep":
            return (Subtask(target, {}, self.mrecep_target), Subtask(self.mrecep_target, {}, self.parent_target))
        if self.task_type == "pick_two_obj_and_place":
            return (Subtask(target, state, self.parent_target), Subtask(target, state, self.parent_target))
        return (Subtask(target, state, self.parent_target),)


@dataclass(frozen=True)
class Subtask:
    """One goal condition on an object type: a state and/or a receptacle it must be in, and
    (optionally) types it must hold."""

    object: str
    state: dict[str, Any] = field(default_factory=dict)
    receptacle: str = ""
    contains: tuple[str, ...] = ()


def _derived(name: str, obj: dict[str, Any]) -> bool:
    if name == "cleaned":
        return bool(obj["isCleaned"]) if "isCleaned" in obj else not obj.get("isDirty", False)
    if name == "heated":
        return bool(obj["isHeated"]) if "isHeated" in obj else (obj.get("temperature") == "Hot" or bool(obj.get("isCooked")))
    return bool(obj["isCooled"]) if "isCooled" in obj else obj.get("temperature") == "Cold"


# ---- compilation
def compile_goal(goal: Goal) -> Verifier:
    """ALFRED's goal conditions for ``goal.task_type``, as predicate records."""
    if goal.task_type not in TASK_TYPES:
        raise ValueError(f"unknown ALFRED task type {goal.task_type!r}; known: {', '.join(TASK_TYPES)}")
    sliced = goal.object_sliced
    obj_name = goal.object_target + ("Sliced" if sliced else "")
    obj = Select(obj_name, "id_contains", ("pickupable",))
    parent = Select(goal.parent_target, "id_contains", ("receptacle",))
    two = goal.task_type == "pick_two_obj_and_place"
    preds: list[Predicate] = []
    if sliced:  # ALFRED: pickupables named like the target whose id says Sliced
        preds.append(Predicate("sliced", obj, count=2 if two else 1,
                               description=f"{2 if two else 1} {obj_name} piece(s) exist"))
    kind = goal.task_type
    if kind == "pick_and_place_simple":
        preds.append(Predicate("in_place", obj, inside=parent, description=f"a {obj_name} in a {goal.parent_target}"))
    elif two:
        preds.append(Predicate("in_place", obj, inside=parent, count=2, same_receptacle=True,
                               description=f"two {obj_name} in one {goal.parent_target}"))
    elif kind == "look_at_obj_in_light":
        lamp = Select(goal.toggle_target, "id_contains", ("toggleable",))
        preds += [Predicate("holding", obj, (Test("isPickedUp"),), description=f"a {obj_name} is held"),
                  Predicate("light_on", lamp, (Test("isToggled"), Test("visible")),
                            description=f"a {goal.toggle_target} is on and visible")]
    elif kind == "pick_and_place_with_movable_recep":
        mrecep = Select(goal.mrecep_target, "id_contains", ("pickupable",))
        preds += [Predicate("object_in_mrecep", obj, inside=mrecep, description=f"a {obj_name} in a {goal.mrecep_target}"),
                  Predicate("mrecep_in_place", mrecep, inside=parent,
                            description=f"a {goal.mrecep_target} in a {goal.parent_target}"),
                  Predicate("stack_in_place", mrecep, inside=parent, inside_via_parent=True, contains=(obj,),
                            description=f"a {goal.mrecep_target} holding a {obj_name} in a {goal.parent_target}")]
    else:
        state = {"pick_clean_then_place_in_recep": "cleaned", "pick_heat_then_place_in_recep": "heated",
                 "pick_cool_then_place_in_recep": "cooled"}[kind]
        preds += [Predicate("in_place", obj, inside=parent, description=f"a {obj_name} in a {goal.parent_target}"),
                  Predicate(state, obj, (Test(state),), description=f"a {obj_name} was {state}"),
                  Predicate(f"{state}_in_place", obj, (Test(state),), inside=parent,
                            description=f"a {state} {obj_name} in a {goal.parent_target}")]
    return Verifier(tuple(preds), "all", f"alfred:{kind}")


def compile_subtasks(subtasks: tuple[Subtask, ...] | list[Subtask], mode: Mode = "all",
                     source: str = "subtasks") -> Verifier:
    """One predicate per subtask; a slice counts as its whole object type."""
    preds = []
    for i, sub in enumerate(subtasks):
        tests = tuple(Test("isSliced" if k == "sliced" else k, v) for k, v in sub.state.items())
        words = [f"{k}={v}" for k, v in sub.state.items()]
        if sub.receptacle:
            words.append(f"in a {sub.receptacle}")
        if sub.contains:
            words.append("holding " + ", ".join(sub.contains))
        preds.append(Predicate(
            f"subtask_{i}", Select(sub.object, "base_type"), tests,
            inside=Select(sub.receptacle, "base_type") if sub.receptacle else None,
            contains=tuple(Select(c, "base_type") for c in sub.contains),
            description=f"a {sub.object}: " + (", ".join(words) or "exists")))
    return Verifier(tuple(preds), mode, source)


def compile_object_states(entries: list[dict[str, Any]], source: str = "tasks_goal_states") -> Verifier:
    """``object_states`` entries: each an object type with a state and the types it must hold."""
    subtasks = [Subtask(e["objectType"], dict(e.get("state") or {}), "", tuple(e.get("receptacleObjectTypes") or ()))
                for e in entries]
    return compile_subtasks(subtasks, "all", source)


# ---- evaluation
def _achieved(pred: Predicate, objects: list[dict[str, Any]], by_id: dict[str, dict[str, Any]]) -> int:
    receptacles = [o for o in objects if pred.inside(o)] if pred.inside else []
    groups: dict[str, set[str]] = {}
    passing: set[str] = set()
    for obj in objects:
        if not pred.subject(obj) or not all(t(obj) for t in pred.tests):
            continue
        held = [by_id[c] for c in obj.get("receptacleObjectIds") or () if c in by_id]
        if not all(any(sel(h) for h in held) for sel in pred.contains):
            continue
        if pred.inside is None:
            passing.add(obj["objectId"])
            continue
        parents = set(obj.get("parentReceptacles") or ())
        for rec in receptacles:
            inside = rec["objectId"] in parents if pred.inside_via_parent \
                else obj["objectId"] in (rec.get("receptacleObjectIds") or ())
            if inside:
                passing.add(obj["objectId"])
                groups.setdefault(rec["objectId"], set()).add(obj["objectId"])
    if pred.same_receptacle:
        return max((len(g) for g in groups.values()), default=0)
    return len(passing)


def evaluate(verifier: Verifier, objects: list[dict[str, Any]]) -> tuple[bool, float, list[str]]:
    """``(success, progress, unmet)`` on AI2-THOR object metadata. Progress counts conditions as
    ALFRED does: a predicate needing ``count`` objects contributes ``min(found, count)`` of ``count``."""
    by_id = {o["objectId"]: o for o in objects}
    scores, unmet = [], []
    for pred in verifier.predicates:
        found = _achieved(pred, objects, by_id)
        scores.append((min(found, pred.count), pred.count))
        if found < pred.count:
            unmet.append(f"{pred.id}: {pred.description} ({found}/{pred.count})")
    if not scores:
        return True, 1.0, []
    if verifier.mode == "any":
        return len(unmet) < len(scores), max(s / n for s, n in scores), unmet
    return not unmet, sum(s for s, _ in scores) / sum(n for _, n in scores), unmet
