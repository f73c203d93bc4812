"""LIBERO tasks matched against robosuite's own object models and forge's manipulation goals.

A task maps when every fixture is the table, every object is a thing robosuite 1.5.2 ships a model
of, every object starts in a box on the table, and every goal fact is one the manipulation
verifier can check: ``On(object, table region)`` becomes ``in_region`` and ``On(a, b)`` for two
mapped objects becomes ``stacked``. Anything else makes the task :class:`Unmappable`, with one
reason per fault, each naming the instance, category or predicate at fault.

Run ``python -m forge_resources.libero.mapping ../shared/data/libero/bddl`` for a survey table.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forge_resources.libero.bddl import BddlError, Connective, LiberoProblem, Node, Predicate, conjuncts, parse_bddl

# LIBERO category -> class in robosuite.models.objects that is the same kind of thing.
CATEGORY_TO_ROBOSUITE: dict[str, str] = {
    "milk": "MilkObject",  # both a milk carton
    # robosuite's BottleObject is a plain glass bottle; a wine bottle is a glass bottle.
    "wine_bottle": "BottleObject",
}
# Left out on purpose, though something in robosuite looks alike:
#   plate            PlateWithHoleObject is a square peg-in-hole plate, not a dish
#   akita_black_bowl, white_bowl   robosuite has no bowl (BreadObject is a loaf)
#   alphabet_soup, tomato_sauce    food tins; CanObject is a Coke drink can
#   orange_juice     a juice carton; MilkObject is a milk carton
#   cookies          a biscuit box; CerealObject is a cereal box
#   butter, cream_cheese, chocolate_pudding   branded packs; BoxObject is a bare primitive block
#   basket           robosuite's Bin is a four-walled container built from boxes, not a basket

# Categories LIBERO uses for the table the scene stands on; regions on it are table boxes.
TABLE_CATEGORIES = frozenset({"table", "kitchen_table", "living_room_table", "study_table"})
# Surfaces other than a table: robosuite has a floor, but the verifier's regions are table boxes.
SURFACES = frozenset({"floor"})


@dataclass(frozen=True)
class Fault:
    """Why a task cannot map: ``kind`` is fixture, object, predicate, connective, init or region;
    ``key`` is what a survey counts it under (a category or predicate name)."""

    kind: str
    key: str
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class MappedTask:
    file: str
    language: str
    objects: dict[str, str]  # instance -> robosuite class name
    placements: dict[str, list[tuple[float, float, float, float]]]  # instance -> table boxes it starts in
    goal: list[dict[str, Any]]


@dataclass(frozen=True)
class Unmappable:
    file: str
    faults: tuple[Fault, ...]

    @property
    def reasons(self) -> list[str]:
        return [f.text for f in self.faults]


def map_problem(problem: LiberoProblem) -> MappedTask | Unmappable:
    """The robosuite version of a task, or every reason there is none."""
    faults: list[Fault] = []
    for name, category in problem.fixtures.items():
        if category in SURFACES:
            faults.append(Fault("fixture", category, f"fixture {name} ({category}) is not a table; "
                                                     "in_region boxes lie on the table"))
        elif category not in TABLE_CATEGORIES:
            faults.append(Fault("fixture", category, f"fixture {name} ({category}) has no robosuite asset"))
    for name, category in problem.objects.items():
        if category not in CATEGORY_TO_ROBOSUITE:
            faults.append(Fault("object", category, f"object {name} ({category}) has no robosuite asset"))
    mapped = {n: CATEGORY_TO_ROBOSUITE[c] for n, c in problem.objects.items() if c in CATEGORY_TO_ROBOSUITE}

    placements: dict[str, list[tuple[float, float, float, float]]] = {}
    placed: set[str] = set()
    for fact in conjuncts(problem.init):
        if isinstance(fact, Predicate) and fact.name == "On" and len(fact.args) == 2:
            placed.add(fact.args[0])
        box = _table_placement(problem, fact)
        if box is None:
            why = " (objects start in boxes on the table)" if _key(fact) == "On" else ""
            faults.append(Fault("init", _key(fact), f"initial fact {fact} cannot be set up here{why}"))
        elif box[0] in mapped:
            placements[box[0]] = list(box[1])
        # a placement of an unmapped fixture or object on the table is covered by that one's fault
    for name in mapped:
        if name not in placed:
            faults.append(Fault("init", "unplaced", f"object {name} has no starting place"))

    goals: list[dict[str, Any]] = []
    for fact in conjuncts(problem.goal):
        goal, fault = _goal(problem, fact, mapped)
        if fault:
            faults.append(fault)
        elif goal:
            goals.append(goal)
    if faults:
        return Unmappable(problem.file, tuple(faults))
    return MappedTask(problem.file, problem.language, mapped, placements, goals)


def _key(fact: Node) -> str:
    return fact.name if isinstance(fact, Predicate) else fact.op


def _table_regions(problem: LiberoProblem, reference: str) -> tuple[tuple[float, float, float, float], ...] | None:
    """The boxes of a region on the table, or None when ``reference`` is not such a region."""
    if not problem.is_region(reference):
        return None
    region = problem.region(reference)
    if problem.fixtures.get(region.target) not in TABLE_CATEGORIES:
        return None
    return region.ranges


def _table_placement(problem: LiberoProblem, fact: Node) -> tuple[str, tuple] | None:
    """(instance, boxes) for ``On(instance, table region with boxes)``, else None."""
    if not (isinstance(fact, Predicate) and fact.name == "On" and len(fact.args) == 2):
        return None
    boxes = _table_regions(problem, fact.args[1])
    return (fact.args[0], boxes) if boxes else None


def _goal(problem: LiberoProblem, fact: Node, mapped: dict[str, str]) -> tuple[dict[str, Any] | None, Fault | None]:
    """One goal fact as a verifier goal, or the fault that stops it; (None, None) when the fact
    is fine but its object is unmapped (that object is a fault already)."""
    if isinstance(fact, Connective):
        return None, Fault("connective", fact.op, f"goal {fact} has no physical verifier here")
    no_verifier = Fault("predicate", fact.name, f"predicate {fact} has no physical verifier here")
    if fact.name != "On" or len(fact.args) != 2:
        return None, no_verifier
    obj, place = fact.args
    if obj in problem.fixtures:
        return None, no_verifier
    boxes = _table_regions(problem, place)
    if boxes is not None:
        if len(boxes) != 1:
            return None, Fault("region", place, f"region {place} has {len(boxes)} boxes; in_region takes one")
        return ({"kind": "in_region", "object": obj, "region": list(boxes[0])} if obj in mapped else None), None
    bottom = problem.resolve(place)[0] if problem.is_region(place) else place  # on an object's region is on it
    if bottom not in problem.objects:
        return None, no_verifier
    if obj in mapped and bottom in mapped:
        return {"kind": "stacked", "top": obj, "bottom": bottom}, None
    return None, None


def survey(root: str | Path) -> dict[str, Any]:
    """Every ``*.bddl`` under ``root`` parsed and mapped. Reason counters count files (a category
    with three instances in one file counts once there)."""
    out: dict[str, Any] = {
        "parsed": 0, "mapped": 0, "unmappable": 0, "failed": {},
        "reasons": {kind: Counter() for kind in ("object", "fixture", "predicate", "connective", "init", "region")},
        "suites": {}, "mapped_files": [],
    }
    for path in sorted(Path(root).rglob("*.bddl")):
        suite = out["suites"].setdefault(path.parent.name, {"parsed": 0, "mapped": 0, "unmappable": 0})
        try:
            problem = parse_bddl(path)
        except BddlError as exc:
            out["failed"][str(path)] = str(exc)
            continue
        out["parsed"] += 1
        suite["parsed"] += 1
        result = map_problem(problem)
        if isinstance(result, MappedTask):
            out["mapped"] += 1
            suite["mapped"] += 1
            out["mapped_files"].append(f"{problem.suite}/{problem.file}")
            continue
        out["unmappable"] += 1
        suite["unmappable"] += 1
        for kind, key in {(f.kind, f.key) for f in result.faults}:
            out["reasons"][kind][key] += 1
    return out


def format_survey(result: dict[str, Any]) -> str:
    """The survey as plain-text tables."""
    lines = [f"parsed {result['parsed']}   mapped {result['mapped']}   unmappable {result['unmappable']}"
             f"   failed to parse {len(result['failed'])}", "",
             f"{'suite':<16}{'parsed':>8}{'mapped':>8}{'unmappable':>12}"]
    for suite, counts in sorted(result["suites"].items()):
        lines.append(f"{suite:<16}{counts['parsed']:>8}{counts['mapped']:>8}{counts['unmappable']:>12}")
    titles = {"object": "object categories without a robosuite asset", "fixture": "fixtures other than the table",
              "predicate": "goal predicates without a verifier", "connective": "goal connectives without a verifier",
              "init": "initial facts that cannot be set up", "region": "table regions of several boxes"}
    for kind, title in titles.items():
        counter = result["reasons"][kind]
        if counter:
            lines += ["", f"{title} (files)"] + [f"  {key:<32}{n:>5}" for key, n in counter.most_common()]
    for path, error in result["failed"].items():
        lines.append(f"failed: {error}")
    if result["mapped_files"]:
        lines += ["", "mapped:"] + [f"  {f}" for f in result["mapped_files"]]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m forge_resources.libero.mapping BDDL_FOLDER", file=sys.stderr)
        return 2
    if not Path(argv[0]).is_dir():
        print(f"{argv[0]}: no such folder", file=sys.stderr)
        return 2
    print(format_survey(survey(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
