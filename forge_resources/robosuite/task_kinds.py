"""Manipulation task kinds: the goal each asks (physical outcomes on body names), the scripted
reference solver that reaches it with the high-level actions, and the negative controls that
must not.

Goals are those of :mod:`.outcomes`: lifted above the table, stacked and let go, in a bin and let
go, a nut around its peg. A hard task asks two such outcomes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from forge_resources.household.protocol import Action
from forge_resources.robosuite.things import THINGS, Thing


@dataclass(frozen=True)
class Subgoal:
    kind: str  # lifted, stacked, in_bin, on_peg
    object: Thing
    place: Thing | None = None

    def goal(self) -> dict[str, Any]:
        if self.kind == "lifted":
            return {"kind": "lifted", "object": self.object.body}
        if self.kind == "stacked":
            return {"kind": "stacked", "top": self.object.body, "bottom": self.place.body}
        if self.kind == "in_bin":
            return {"kind": "in_bin", "object": self.object.body, "bin": self.place.body}
        return {"kind": "on_peg", "object": self.object.body, "peg": self.place.body}

    def names(self) -> dict[str, str]:
        return {"object": self.object.name, **({"place": self.place.name} if self.place else {})}

    def plan(self) -> list[Action]:
        """Grasp the object from above, then lift it or place it."""
        steps = [Action("MoveAbove", (self.object.name,)), Action("Descend", (self.object.name,)), Action("Grasp")]
        if self.kind == "lifted":
            return steps + [Action("Lift")]
        return steps + [Action("Lift"), Action("PlaceAt", (self.place.name,))]


def things(env_name: str) -> dict[str, Thing]:
    return {t.name: t for t in THINGS[env_name]}


def goal_of(subgoals: list[Subgoal]) -> dict[str, Any]:
    """One outcome, or all of them."""
    goals = [s.goal() for s in subgoals]
    return goals[0] if len(goals) == 1 else {"kind": "all", "goals": goals}


def reference_plan(subgoals: list[Subgoal]) -> list[Action]:
    return [a for s in subgoals for a in s.plan()]


def cut_control(plan: list[Action]) -> list[Action]:
    """The reference without its last phase: the final lift or placement of a high-level plan;
    for a recorded demonstration (end-effector deltas), everything from its last change of the
    gripper command on (the final grasp-and-lift, or the release onto the other cube)."""
    if plan and all(a.name == "MoveDelta" for a in plan):
        grip = [float(a.args[6]) > 0 for a in plan]
        last = max((i for i in range(1, len(grip)) if grip[i] != grip[i - 1]), default=len(plan) - 1)
        return plan[:last]
    return plan[:-1]


# The goal each recorded demonstration pursues, in the names of the things (PickPlace's four
# objects in their quarters of the bin have no template, so its demos are not used).
DEMO_OUTCOMES: dict[str, list[dict[str, str]]] = {
    "Lift": [{"kind": "lifted", "object": "cube"}],
    "Stack": [{"kind": "stacked", "object": "red cube", "place": "green cube"}],
    "NutAssembly": [{"kind": "on_peg", "object": "square nut", "place": "square peg"},
                    {"kind": "on_peg", "object": "round nut", "place": "round peg"}],
}


def wrong_target_control(subgoals: list[Subgoal], env_name: str) -> list[Action] | None:
    """The reference acting on the wrong thing: the last subgoal's object swapped for another
    object of the scene (or, with two objects, the roles of object and place exchanged), else
    its place swapped for another place of the same kind (the other nut's peg, when both nuts
    are asked). None when the scene has no other."""
    last = subgoals[-1]
    named = set()
    for s in subgoals:
        named |= {s.object.name} | ({s.place.name} if s.place else set())
    others = [t for t in THINGS[env_name] if t.kind == "object" and t.name not in named]
    if others:
        wrong = Subgoal(last.kind, others[0], last.place)
    elif last.place is not None and last.place.kind == "object":
        wrong = Subgoal(last.kind, last.place, last.object)
    else:
        # another place of the kind, one no subgoal names if there is one
        places = sorted((t for t in THINGS[env_name] if last.place and t.kind == last.place.kind
                         and t.name != last.place.name), key=lambda t: t.name in named)
        if not places:
            return None
        wrong = Subgoal(last.kind, last.object, places[0])
    return reference_plan(subgoals[:-1] + [wrong])
