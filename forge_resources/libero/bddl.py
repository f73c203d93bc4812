"""LIBERO's BDDL task files read into frozen dataclasses.

A BDDL file is one s-expression, ``(define (problem NAME) (:domain ...) (:language ...) ...)``,
with sections for regions, fixtures, objects, objects of interest, the initial state and the goal.
Predicates keep BDDL's spelling (``On``, ``In``, ``Open``, ``Turnon``, ...); the connectives
``And``, ``Or`` and ``Not`` are recognised in any letter case. A predicate argument is either a
declared fixture or object, or a region reference ``<target>_<region name>`` that
:meth:`LiberoProblem.resolve` splits back into its owner and region.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Union

from forge.errors import DefinitionError

SExp = Union[str, list["SExp"]]

SECTIONS = ("domain", "language", "regions", "fixtures", "objects", "obj_of_interest", "init", "goal")
CONNECTIVES = {"and": "And", "or": "Or", "not": "Not"}
REGION_KEYS = ("target", "ranges", "yaw_rotation")


class BddlError(DefinitionError):
    """A BDDL file that cannot be read: the message names the file and what is wrong."""


@dataclass(frozen=True)
class Predicate:
    name: str
    args: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.name}({', '.join(self.args)})"


@dataclass(frozen=True)
class Connective:
    op: str  # "And", "Or" or "Not"
    parts: tuple["Node", ...]

    def __str__(self) -> str:
        return f"{self.op}({', '.join(str(p) for p in self.parts)})"


Node = Union[Predicate, Connective]


@dataclass(frozen=True)
class Region:
    name: str
    target: str
    ranges: tuple[tuple[float, float, float, float], ...] = ()  # (x0, y0, x1, y1) boxes
    yaw_rotation: tuple[tuple[float, float], ...] | None = None

    @property
    def reference(self) -> str:
        """The name predicates use for this region."""
        return f"{self.target}_{self.name}"


@dataclass(frozen=True)
class LiberoProblem:
    name: str
    suite: str
    file: str
    path: Path
    domain: str
    language: str
    regions: tuple[Region, ...]
    fixtures: dict[str, str]  # instance -> category
    objects: dict[str, str]  # instance -> category
    objects_of_interest: tuple[str, ...]
    init: Connective  # the initial facts, as one And
    goal: Node

    def category(self, instance: str) -> str:
        """The category of a declared fixture or object."""
        if instance in self.fixtures:
            return self.fixtures[instance]
        if instance in self.objects:
            return self.objects[instance]
        raise KeyError(f"{self.file}: {instance!r} is neither a fixture nor an object")

    def region(self, reference: str) -> Region:
        """The region a predicate argument such as ``main_table_plate_region`` names."""
        for region in self.regions:
            if region.reference == reference:
                return region
        raise KeyError(f"{self.file}: {reference!r} names no declared region")

    def resolve(self, reference: str) -> tuple[str, str]:
        """A region reference split into (owning fixture or object, region name). LIBERO's own
        files declare some regions on instances they never declare; predicates never use those."""
        region = self.region(reference)
        return region.target, region.name

    def is_region(self, reference: str) -> bool:
        return any(r.reference == reference for r in self.regions)


def conjuncts(node: Node) -> list[Node]:
    """The parts of a tree's top-level conjunction (nested Ands flattened); Or and Not stay whole."""
    if isinstance(node, Connective) and node.op == "And":
        return [leaf for part in node.parts for leaf in conjuncts(part)]
    return [node]


def predicates(node: Node) -> list[Predicate]:
    """Every predicate in a tree, in order, whatever connective holds it."""
    if isinstance(node, Predicate):
        return [node]
    return [leaf for part in node.parts for leaf in predicates(part)]


def read_sexp(text: str, source: str) -> list[SExp]:
    """The top-level forms of ``text``; ``;`` starts a comment. ``source`` names the text in errors."""
    stack: list[tuple[list[SExp], int]] = [([], 0)]
    for line_no, line in enumerate(text.splitlines(), start=1):
        line = line.split(";", 1)[0]
        for token in line.replace("(", " ( ").replace(")", " ) ").split():
            if token == "(":
                stack.append(([], line_no))
            elif token == ")":
                if len(stack) == 1:
                    raise BddlError(f"{source}: unbalanced parentheses: unexpected ')' on line {line_no}")
                form, _ = stack.pop()
                stack[-1][0].append(form)
            else:
                stack[-1][0].append(token)
    if len(stack) > 1:
        raise BddlError(f"{source}: unbalanced parentheses: '(' opened on line {stack[-1][1]} is never closed")
    return stack[0][0]


def parse_bddl(path: str | Path) -> LiberoProblem:
    """One BDDL file as a :class:`LiberoProblem`; the suite is the name of its folder."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BddlError(f"{path}: cannot be read ({exc})") from exc
    return parse_bddl_text(text, path)


def parse_bddl_text(text: str, path: Path) -> LiberoProblem:
    """BDDL text as a :class:`LiberoProblem`; ``path`` names it and gives its suite and file name."""
    return _Reader(path).problem(read_sexp(text, str(path)))


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, message: str) -> BddlError:
        return BddlError(f"{self.path}: {message}")

    def problem(self, forms: list[SExp]) -> LiberoProblem:
        if len(forms) != 1 or not isinstance(forms[0], list) or not forms[0] or forms[0][0] != "define":
            raise self.fail("expected a single (define (problem NAME) ...) form")
        define = forms[0]
        head = define[1] if len(define) > 1 else None
        if not (isinstance(head, list) and len(head) == 2 and head[0] == "problem" and isinstance(head[1], str)):
            raise self.fail("expected (problem NAME) after define")
        sections: dict[str, list[SExp]] = {}
        for form in define[2:]:
            if not (isinstance(form, list) and form and isinstance(form[0], str) and form[0].startswith(":")):
                raise self.fail(f"expected a (:section ...) form, got {_show(form)}")
            key = form[0][1:]
            if key not in SECTIONS:
                raise self.fail(f"unknown section :{key}")
            if key in sections:
                raise self.fail(f"section :{key} appears twice")
            sections[key] = form[1:]
        for key in ("language", "goal"):
            if key not in sections:
                raise self.fail(f"missing :{key}")

        fixtures = self.typed_names(sections.get("fixtures", []), "fixtures")
        objects = self.typed_names(sections.get("objects", []), "objects")
        both = sorted(set(fixtures) & set(objects))
        if both:
            raise self.fail(f"{', '.join(both)} declared both as fixture and object")
        entities = {**fixtures, **objects}
        regions = tuple(self.region(form) for form in sections.get("regions", []))
        references: set[str] = set()
        for region in regions:
            if region.reference in references:
                raise self.fail(f"region {region.reference} is declared twice")
            references.add(region.reference)

        interest = tuple(self.atoms(sections.get("obj_of_interest", []), "obj_of_interest"))
        init = Connective("And", tuple(self.node(form, ":init") for form in sections.get("init", [])))
        goal_forms = sections["goal"]
        if len(goal_forms) != 1:
            raise self.fail(f":goal must hold one formula, found {len(goal_forms)}")
        goal = self.node(goal_forms[0], ":goal")
        known = set(entities) | references
        for where, tree in ((":init", init), (":goal", goal)):
            for pred in predicates(tree):
                unknown = [a for a in pred.args if a not in known]
                if unknown:
                    raise self.fail(f"{where} {pred}: {unknown[0]} is neither a declared fixture, object nor region")
        for name in interest:
            if name not in known:
                raise self.fail(f":obj_of_interest names {name}, which is neither a declared instance nor region")

        domain = self.atoms(sections.get("domain", []), "domain")
        language = self.atoms(sections["language"], "language")
        return LiberoProblem(
            name=head[1], suite=self.path.parent.name, file=self.path.name, path=self.path,
            domain=" ".join(domain), language=" ".join(language), regions=regions,
            fixtures=fixtures, objects=objects, objects_of_interest=interest, init=init, goal=goal,
        )

    def atoms(self, forms: list[SExp], section: str) -> list[str]:
        for form in forms:
            if not isinstance(form, str):
                raise self.fail(f":{section} holds a list {_show(form)} where names were expected")
        return forms  # type: ignore[return-value]

    def typed_names(self, forms: list[SExp], section: str) -> dict[str, str]:
        """``a b - category c - other`` as {instance: category}."""
        tokens = self.atoms(forms, section)
        out: dict[str, str] = {}
        pending: list[str] = []
        i = 0
        while i < len(tokens):
            if tokens[i] == "-":
                if not pending or i + 1 >= len(tokens) or tokens[i + 1] == "-":
                    raise self.fail(f":{section}: '-' must sit between instance names and a category")
                for name in pending:
                    if name in out:
                        raise self.fail(f":{section}: {name} is declared twice")
                    out[name] = tokens[i + 1]
                pending = []
                i += 2
            else:
                pending.append(tokens[i])
                i += 1
        if pending:
            raise self.fail(f":{section}: {' '.join(pending)} has no '- category'")
        return out

    def region(self, form: SExp) -> Region:
        if not (isinstance(form, list) and form and isinstance(form[0], str)):
            raise self.fail(f":regions: expected (NAME (:target ...) ...), got {_show(form)}")
        name, attrs = form[0], {}
        for attr in form[1:]:
            if not (isinstance(attr, list) and attr and isinstance(attr[0], str) and attr[0].startswith(":")):
                raise self.fail(f"region {name}: expected (:key ...), got {_show(attr)}")
            key = attr[0][1:]
            if key not in REGION_KEYS:
                raise self.fail(f"region {name}: unknown attribute :{key}")
            attrs[key] = attr[1:]
        target = attrs.get("target")
        if not (target and len(target) == 1 and isinstance(target[0], str)):
            raise self.fail(f"region {name}: missing or malformed :target")
        ranges = self.boxes(name, "ranges", attrs.get("ranges"), 4)
        yaw = self.boxes(name, "yaw_rotation", attrs.get("yaw_rotation"), 2)
        return Region(name, target[0], ranges or (), yaw)  # type: ignore[arg-type]

    def boxes(self, region: str, key: str, body: list[SExp] | None, width: int) -> tuple[tuple[float, ...], ...] | None:
        """``(:ranges ((x0 y0 x1 y1) ...))``: one list of rows, each ``width`` numbers."""
        if body is None:
            return None
        if len(body) != 1 or not isinstance(body[0], list):
            raise self.fail(f"region {region}: :{key} must hold one list of rows")
        rows = []
        for row in body[0]:
            if not (isinstance(row, list) and len(row) == width and all(isinstance(v, str) for v in row)):
                raise self.fail(f"region {region}: each :{key} row must be {width} numbers, got {_show(row)}")
            try:
                rows.append(tuple(float(v) for v in row))  # type: ignore[arg-type]
            except ValueError:
                raise self.fail(f"region {region}: :{key} row {_show(row)} is not numeric") from None
        return tuple(rows)

    def node(self, form: SExp, where: str) -> Node:
        if not (isinstance(form, list) and form and isinstance(form[0], str)):
            raise self.fail(f"{where}: expected (Predicate args...), got {_show(form)}")
        head, rest = form[0], form[1:]
        op = CONNECTIVES.get(head.lower())
        if op:
            parts = tuple(self.node(part, where) for part in rest)
            if not parts or (op == "Not" and len(parts) != 1):
                raise self.fail(f"{where}: {head} needs {'one part' if op == 'Not' else 'parts'}")
            return Connective(op, parts)
        if not all(isinstance(a, str) for a in rest):
            raise self.fail(f"{where}: predicate {head} takes names, got {_show(form)}")
        return Predicate(head, tuple(rest))  # type: ignore[arg-type]


def _show(form: SExp) -> str:
    if isinstance(form, str):
        return form
    return "(" + " ".join(_show(f) for f in form) + ")"
