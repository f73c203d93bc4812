"""The planner: compose a typed workflow (a networkx DiGraph of skills) from an intent.

Each consumer's input types must be produced upstream and each skill's preconditions must
hold; otherwise composition fails before anything runs, naming both skills and both types.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forge.errors import CompositionError, DefinitionError
from forge.executor import WorkflowNode
from forge.intent import LoadedIntent
from forge.resources import descriptor
from forge.skills import STAGES, SkillRegistry
from forge.tracks import track

if TYPE_CHECKING:
    import networkx as nx


@dataclass
class Workflow:
    nodes: list[WorkflowNode]
    graph: nx.DiGraph

    def node(self, role: str) -> WorkflowNode:
        for n in self.nodes:
            if n.role == role:
                return n
        raise DefinitionError(f"the workflow has no role {role!r}; roles: {[n.role for n in self.nodes]}")

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


def source_role(role: str, index: int) -> str:
    return role if index == 0 else f"{role}@{index}"


def compose(loaded: LoadedIntent, registry: SkillRegistry) -> Workflow:
    """The intent's track's roles filled with skills: a source's roles once per source (named
    ``role`` for the first and ``role@i`` for source i) from its descriptor, the others from the
    track's defaults, or from the sources' descriptors where they name a skill for a track role
    (the skills that read what the source structures); ``intent.skills`` overrides either."""
    intent = loaded.intent
    spec_of = track(intent.track)
    kinds = [s.kind for s in intent.sources]
    twice = sorted({k for k in kinds if kinds.count(k) > 1})
    if twice:
        raise CompositionError(f"intent field sources: kind {twice[0]!r} is listed {kinds.count(twice[0])} times; "
                               "give each kind once (its section takes every setting)")
    unknown_roles = set(intent.skills) - set(spec_of.roles)
    if unknown_roles:
        raise CompositionError(f"intent field skills: unknown roles {sorted(unknown_roles)}; roles are {list(spec_of.roles)}")
    spec_of.check_intent(loaded)
    nodes = []
    for role in spec_of.roles:
        if role in spec_of.source_roles:
            for index, source in enumerate(intent.sources):
                desc = descriptor(source.kind)
                if desc.track != intent.track:
                    raise CompositionError(f"resource {source.kind!r} serves track {desc.track!r}, "
                                           f"the intent asks for {intent.track!r}")
                spec = registry.get({**desc.workflow, **intent.skills}[role])
                nodes.append(WorkflowNode(source_role(role, index), spec, {}, source=index))
            continue
        spec = registry.get({**spec_of.defaults, **_source_defaults(intent, role), **intent.skills}[role])
        nodes.append(WorkflowNode(role, spec, spec_of.node_params(role, loaded), spec_of.node_fanout(role, loaded)))
    return validate(nodes)


def _source_defaults(intent: Any, role: str) -> dict[str, str]:
    """The skill the sources' descriptors name for a track role; two that differ cannot share a build."""
    named = {s.kind: descriptor(s.kind).workflow[role] for s in intent.sources if role in descriptor(s.kind).workflow}
    if len(set(named.values())) > 1:
        raise CompositionError(f"sources {sorted(named)} need different skills for role {role!r} "
                               f"({sorted(set(named.values()))}); build them as separate intents")
    return {role: next(iter(named.values()))} if named else {}


def validate(nodes: list[WorkflowNode]) -> Workflow:
    """Wire nodes by type; raise :class:`CompositionError` on any mismatch.

    A node of one source takes its inputs from producers of the same source or shared ones; a
    shared node takes them from every producer of the type (one synthesis stage for all sources)."""
    import networkx as nx  # imported when a build composes its workflow, not by every command

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


def intent_folders(loaded: LoadedIntent) -> list[Path]:
    """The folders the intent's sources read (their FOLDERS fields), resolved from the intent."""
    return [loaded.resolve(getattr(s, f)) for s in loaded.intent.sources for f in type(s).FOLDERS if getattr(s, f, None)]


def folder_listing(roots: list[Path]) -> str:
    """A digest of every file under the roots: relative path, size and modification time."""
    from forge.keys import digest

    from forge.paths import list_files

    entries = []
    for root in roots:
        if root.is_dir():
            entries += [(str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
                        for p in list_files(root, recursive=True, what="data root")]
    return digest(entries)


def blueprint_params(loaded: LoadedIntent) -> dict[str, Any]:
    """What a track's blueprint node is given: the resolved construction (folder sources arrive
    resolved, see LoadedIntent.construction), the listing of the folders its sources read (a
    file added or replaced re-plans the units instead of reusing a stale plan) and who chose the
    capabilities when a model did."""
    params: dict[str, Any] = {"intent": loaded.construction}
    folders = intent_folders(loaded)
    if folders:
        params["folder_listing"] = folder_listing(folders)
    if loaded.chosen_by:
        params["chosen_by"] = loaded.chosen_by
    return params


def template_file_fanout(loaded: LoadedIntent) -> list[dict[str, Any]]:
    """One template invocation per template file of the sources' families plus the intent's folders."""
    from forge.registry import lookup

    families = sorted({f for s in loaded.intent.sources for f in descriptor(s.kind).templates})
    refs = lookup("template_library", "builtin")(families, [loaded.resolve(d) for d in loaded.intent.templates_dirs])
    return [{"template": name, "label": label, "path": str(path)} for name, (label, path) in sorted(refs.items())]


def available_templates(loaded: LoadedIntent) -> list[dict[str, Any]]:
    """Every readable template the intent's sources and template folders offer."""
    from forge.registry import lookup

    families = sorted({f for s in loaded.intent.sources for f in descriptor(s.kind).templates})
    return lookup("template_catalogue", "builtin")(families, [loaded.resolve(d) for d in loaded.intent.templates_dirs])


def extra_contract_dirs(loaded: LoadedIntent) -> list[Path]:
    return [loaded.resolve(d) for d in loaded.intent.contracts]
