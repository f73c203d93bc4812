"""The planner: compose a typed workflow (a networkx DiGraph of skills) from an intent.

Each consumer's input types must be produced upstream and each skill's preconditions must
hold; otherwise composition fails before anything runs, naming both skills and both types.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from forge.errors import CompositionError
from forge.executor import WorkflowNode
from forge.intent import LoadedIntent
from forge.resources import descriptor
from forge.skills import STAGES, SkillRegistry

# The OE track's roles in order; a resource descriptor supplies plan/collect/structure.
OE_ROLES = ("blueprint", "plan", "collect", "structure", "template", "bind", "realize", "package")
OE_DEFAULTS = {
    "blueprint": "blueprint.from_intent",
    "template": "synthesize.load_template",
    "bind": "synthesize.bind_template",
    "realize": "synthesize.realize_item",
    "package": "package.oe_package",
}


@dataclass
class Workflow:
    nodes: list[WorkflowNode]
    graph: nx.DiGraph

    def node(self, role: str) -> WorkflowNode:
        for n in self.nodes:
            if n.role == role:
                return n
        raise KeyError(role)

    def by_stage(self, stage: str) -> list[WorkflowNode]:
        return [n for n in self.nodes if n.stage == stage]

    def source_node(self, role: str, index: int) -> WorkflowNode:
        """The node that fills ``role`` for source ``index``."""
        return self.node(source_role(role, index))

    @property
    def sources(self) -> int:
        return 1 + max((n.source or 0 for n in self.nodes), default=0)

    def describe(self) -> list[dict[str, Any]]:
        return [{"role": n.role, "skill": n.skill.name, "stage": n.stage,
                 "inputs": {i.name: ("list[" + i.type + "]" if i.many else i.type) for i in n.skill.inputs},
                 "output": n.skill.output} for n in self.nodes]


# Roles each source fills with its own skills (named ``role`` for the first source and
# ``role@i`` for source i); the others are shared by every source.
SOURCE_ROLES = ("plan", "collect", "structure")


def source_role(role: str, index: int) -> str:
    return role if index == 0 else f"{role}@{index}"


def compose(loaded: LoadedIntent, registry: SkillRegistry) -> Workflow:
    intent = loaded.intent
    kinds = [s.kind for s in intent.sources]
    twice = sorted({k for k in kinds if kinds.count(k) > 1})
    if twice:
        raise CompositionError(f"intent field sources: kind {twice[0]!r} is listed {kinds.count(twice[0])} times; "
                               "give each kind once (its section takes every setting)")
    unknown_roles = set(intent.skills) - set(OE_ROLES)
    if unknown_roles:
        raise CompositionError(f"intent field skills: unknown roles {sorted(unknown_roles)}; roles are {list(OE_ROLES)}")
    check_compatibility(loaded)
    nodes = []
    for role in OE_ROLES:
        if role in SOURCE_ROLES:
            for index, source in enumerate(intent.sources):
                desc = descriptor(source.kind)
                if desc.track != intent.track:
                    raise CompositionError(f"resource {source.kind!r} serves track {desc.track!r}, "
                                           f"the intent asks for {intent.track!r}")
                spec = registry.get({**desc.workflow, **intent.skills}[role])
                nodes.append(WorkflowNode(source_role(role, index), spec, {}, source=index))
            continue
        spec = registry.get({**OE_DEFAULTS, **intent.skills}[role])
        fanout = template_fanout(loaded) if role == "template" else None
        nodes.append(WorkflowNode(role, spec, _node_params(role, loaded), fanout))
    return validate(nodes)


def validate(nodes: list[WorkflowNode]) -> Workflow:
    """Wire nodes by type; raise :class:`CompositionError` on any mismatch.

    A node of one source takes its inputs from producers of the same source or shared ones; a
    shared node takes them from every producer of the type (one synthesis stage for all sources)."""
    graph = nx.DiGraph()
    produced: dict[str, list[WorkflowNode]] = {}
    chain: dict[int | None, WorkflowNode] = {}  # the last node of each source's chain (None: shared)
    for node in nodes:
        spec = node.skill
        graph.add_node(node.role, skill=spec.name, stage=spec.stage, output=spec.output, source=node.source)
        previous = chain.get(node.source) or chain.get(None)
        if previous is not None and STAGES.index(spec.stage) < STAGES.index(previous.stage):
            raise CompositionError(
                f"skill {spec.name!r} (role {node.role}, stage {spec.stage}) cannot follow "
                f"{previous.skill.name!r} (stage {previous.stage}): stages must not go backwards"
            )
        for inp in spec.inputs:
            producers = [p for p in produced.get(inp.type, []) if node.source is None or p.source in (None, node.source)]
            if not producers:
                upstream = previous.skill if previous else None
                offered = ", ".join(f"{n.skill.name} -> {n.skill.output}" for ns in produced.values() for n in ns) or "nothing"
                raise CompositionError(
                    f"skill {spec.name!r} (role {node.role}) needs {inp.type} for parameter {inp.name!r}, "
                    + (f"but upstream skill {upstream.name!r} produces {upstream.output}" if upstream else
                       "but it is the first skill in the workflow")
                    + f"; the workflow so far offers: {offered}"
                )
            for producer in producers:
                graph.add_edge(producer.role, node.role, type=inp.type, parameter=inp.name)
        spec.check_requirements()
        produced.setdefault(spec.output, []).append(node)
        chain[node.source] = node
        if node.source is None:
            chain = {None: node}  # a shared node joins every chain
    if not nx.is_directed_acyclic_graph(graph):
        raise CompositionError("the workflow has a cycle")
    order = list(nx.topological_sort(graph))
    ordered = sorted(nodes, key=lambda n: (STAGES.index(n.stage), order.index(n.role)))
    return Workflow(ordered, graph)


def _node_params(role: str, loaded: LoadedIntent) -> dict[str, Any]:
    if role == "blueprint":
        # Folder sources are read relative to the intent; simulated ones do not depend on where it lies.
        # A folder's listing (names, sizes, modification times) is part of the blueprint's identity,
        # so adding or replacing a file re-plans the units instead of reusing a stale plan.
        folders = [getattr(s, f) for s in loaded.intent.sources for f in type(s).FOLDERS if getattr(s, f, None)]
        if not folders:
            return {"intent": loaded.raw}
        return {"intent": loaded.raw, "base_dir": str(loaded.path.parent),
                "folder_listing": folder_listing([loaded.resolve(f) for f in folders])}
    return {}


def folder_listing(roots: list[Path]) -> str:
    """A digest of every file under the roots: relative path, size and modification time."""
    from forge.keys import digest

    entries = []
    for root in roots:
        if root.is_dir():
            entries += [(str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
                        for p in sorted(root.rglob("*")) if p.is_file()]
    return digest(entries)


def template_fanout(loaded: LoadedIntent) -> list[dict[str, Any]]:
    """One parameter set per template file of the source's family plus the user's folders."""
    from forge.registry import lookup

    template_refs = lookup("template_library", "builtin")

    families = sorted({f for s in loaded.intent.sources for f in descriptor(s.kind).templates})
    extra = [loaded.resolve(d) for d in loaded.intent.templates_dirs]
    refs = template_refs(families, extra)
    return [{"template": name, "label": label} for name, (label, _path) in sorted(refs.items())]


def available_templates(loaded: LoadedIntent) -> list[dict[str, Any]]:
    """Every readable template the intent's sources and template folders offer."""
    from forge.registry import lookup

    families = sorted({f for s in loaded.intent.sources for f in descriptor(s.kind).templates})
    return lookup("template_catalogue", "builtin")(families, [loaded.resolve(d) for d in loaded.intent.templates_dirs])


def check_compatibility(loaded: LoadedIntent) -> None:
    """Every asked capability and question type has a template of the intent's sources that
    pairs it with an asked counterpart, before anything runs; the message lists what would."""
    oe = loaded.intent.oe
    rows = available_templates(loaded)
    kinds = ", ".join(sorted({s.kind for s in loaded.intent.sources}))
    if oe.templates != "all":
        known = {r["id"] for r in rows}
        missing = [t for t in oe.templates if t not in known]
        if missing:
            raise CompositionError(f"intent field oe.templates: no template {missing} for source {kinds}; "
                                   f"available: {sorted(known)}")
        rows = [r for r in rows if r["id"] in oe.templates]
    problems = []
    for cap in oe.capabilities:
        if cap in _unavailable(loaded):
            continue
        pairs = {r["question_type"] for r in rows if r["capability"] == cap}
        if not pairs & set(oe.question_types):
            problems.append(f"capability {cap!r}: " + (f"its templates for {kinds} ask {sorted(pairs)} "
                                                        f"(none of oe.question_types)" if pairs
                                                        else f"no template for {kinds}"))
    for qt in oe.question_types:
        pairs = {r["capability"] for r in rows if r["question_type"] == qt}
        if not pairs & set(oe.capabilities):
            problems.append(f"question type {qt!r}: " + (f"its templates for {kinds} test {sorted(pairs)} "
                                                          f"(none of oe.capabilities)" if pairs
                                                          else f"no template for {kinds}"))
    if problems:
        offered = sorted({(r["capability"], r["question_type"]) for r in rows})
        raise CompositionError(
            f"{loaded.path}: the intent asks for what no template of its sources gives:\n  " + "\n  ".join(problems)
            + "\n  compatible (capability, question type) pairs: "
            + ", ".join(f"{c}/{q}" for c, q in offered),
            hint="choose among the compatible pairs, or add a template (intent field templates_dirs); "
                 "`forge templates` lists them")


def _unavailable(loaded: LoadedIntent) -> set[str]:
    return {c for s in loaded.intent.sources for c in s.unavailable(list(loaded.intent.oe.capabilities))}


def extra_contract_dirs(loaded: LoadedIntent) -> list[Path]:
    return [loaded.resolve(d) for d in loaded.intent.contracts]
