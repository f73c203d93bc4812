"""The stage graph: a build's workflow executed as a LangGraph ``StateGraph``.

The planner's workflow decides the graph: one graph node per workflow node (a source's roles
once per source), in the workflow's order, which follows its typed edges. A track adds what is
not a skill: steps between the roles (its gates, its repair loop) and routes, conditional edges
that send the build back (more evidence, repair) or on. Each node returns artifact ids, never
payloads; the store stays the source of truth, so a killed build resumes by running again and
finding every stored run.

A track's runner subclasses :class:`WorkflowRunner` and overrides what its roles need beyond
running their skill (``handlers``), declares its ``steps`` and ``routes``, and reports its own
counters.
"""

from __future__ import annotations

import operator
import time
from dataclasses import dataclass
from typing import Annotated, Any, Callable, TypedDict

from forge.errors import ContractError, DefinitionError, SkillExecutionError
from forge.executor import NodeResult, WorkflowNode
from forge.skills import STAGE_NAMES
from forge.tracks import BuildContext


def _merge(a: dict, b: dict) -> dict:
    return {**a, **b}


class BuildState(TypedDict, total=False):
    ids: Annotated[dict[str, list[str]], _merge]  # artifact type -> verified ids handed downstream
    source_ids: Annotated[dict[str, dict[str, list[str]]], _merge]  # source index -> type -> its own ids
    stage_seconds: Annotated[dict[str, float], _merge]
    notes: Annotated[list[str], operator.add]
    units: dict[str, int]  # source index -> units (scenes, images, ...) it is to give
    collected: dict[str, int]  # source index -> units the current downstream artifacts were made from
    topups: int  # how many times a route sent the build back for more units


@dataclass(frozen=True)
class Step:
    """A node the track adds to its workflow's roles: a gate, a repair round. ``after``: the
    role or step it follows; None for a step reached only by a route, which then continues at
    ``then``."""

    name: str
    stage: str
    title: str
    after: str | None = None
    then: str | None = None


@dataclass(frozen=True)
class Route:
    """A conditional edge after a role or step: ``choose`` names the node to go to, or returns
    None for the next one in order. ``targets``: every name it may return."""

    after: str
    choose: Callable[[BuildState], str | None]
    targets: tuple[str, ...]


Handler = Callable[[WorkflowNode, BuildState], dict[str, Any]]


def base_role(role: str) -> str:
    """The role a node fills, without its source suffix ('collect@1' -> 'collect')."""
    return role.split("@", 1)[0]


class WorkflowRunner:
    """Runs a workflow's nodes through the stage graph; subclasses add the track's logic."""

    steps: tuple[Step, ...] = ()
    stage_titles: dict[str, str] = {}
    recursion_limit = 120

    def __init__(self, ctx: BuildContext) -> None:
        self.ctx = ctx
        self.workflow = ctx.workflow
        self.executor = ctx.executor
        self.store = ctx.store
        self.progress = ctx.progress
        self.results: dict[str, NodeResult] = {}
        self._stage_shown: str | None = None

    # -- what a track overrides -----------------------------------------------------------

    def handlers(self) -> dict[str, Handler]:
        """Base role -> how its nodes run, for roles that need more than ``run_role``."""
        return {}

    def step_handlers(self) -> dict[str, Callable[[BuildState], dict[str, Any]]]:
        """Step name -> what it does."""
        return {}

    def routes(self) -> list[Route]:
        return []

    def initial_state(self) -> BuildState:
        return {"ids": {}, "source_ids": {}, "stage_seconds": {}, "notes": [], "units": {}, "collected": {},
                "topups": 0}

    # -- running ----------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        return self.compile().invoke(self.initial_state(), {"recursion_limit": self.recursion_limit})

    def run_node(self, role: str, available: dict[str, list[str]], *, only: set[str] | None = None,
                 label: str | None = None) -> NodeResult:
        """Run the node of ``role`` over the artifacts available per type (``only``: just the
        invocations reading one of these ids)."""
        node = self.workflow.node(role)
        invs = self.executor.invocations(node, available)
        if only is not None:
            invs = [i for i in invs if set(i.input_ids) & only]
        result = self.executor.run(invs, label=label or f"{node.stage} {node.skill.name}")
        self.results.setdefault(role, NodeResult()).merge(result)
        if invs and not result.verified and result.errors:
            raise SkillExecutionError(result.errors[0])
        return result

    def require(self, role: str, result: NodeResult, what: str) -> None:
        """Stop the build when a node produced nothing usable, naming the contract at fault."""
        if result.verified:
            return
        if result.rejected:
            failed = self.store.blocking_failures(result.rejected[:1])
            detail = "; ".join(f"{r}: {d}" for _, r, d in failed) or "see `forge audit`"
            raise ContractError(f"every {what} failed its contract (e.g. {result.rejected[0][:12]}: {detail})")
        raise SkillExecutionError(f"role {role!r} produced no {what}")

    def available(self, node: WorkflowNode, state: BuildState) -> dict[str, list[str]]:
        """What a node may read: every shared id, a source's own ids in place of all sources'."""
        ids = dict(state.get("ids") or {})
        if node.source is not None:
            ids.update((state.get("source_ids") or {}).get(str(node.source), {}))
        return ids

    def unit_fanout(self, node: WorkflowNode, parameter: str, count: int) -> list[dict[str, Any]]:
        """One parameter set per unit of a source's plan node. A plan skill whose parameters
        declare ``source_index`` is told which of the intent's sources it plans for, so it reads
        that source's own section (two sources of one kind, or a plugin's kind reusing a built-in
        plan) and each source's units are its own invocations."""
        fields = getattr(node.skill.params_model, "model_fields", {})
        own = {"source_index": node.source} if "source_index" in fields and node.source is not None else {}
        return [{parameter: k, **own} for k in range(count)]

    def run_role(self, node: WorkflowNode, state: BuildState, what: str | None = None) -> dict[str, Any]:
        """The default handler: run the node, require output, hand its verified ids on (a
        source's node also under its own source)."""
        result = self.run_node(node.role, self.available(node, state))
        self.require(node.role, result, what or node.skill.output)
        return self.hand_on(node, state, result.verified)

    def hand_on(self, node: WorkflowNode, state: BuildState, verified: list[str]) -> dict[str, Any]:
        """The state update giving ``verified`` (the node's outputs) to the nodes downstream."""
        out_type = node.skill.output
        if node.source is None:
            return {"ids": {out_type: verified}}
        per_source = dict(state.get("source_ids") or {})
        per_source[str(node.source)] = {**per_source.get(str(node.source), {}), out_type: verified}
        union = [a for i in sorted(per_source, key=int) for a in per_source[i].get(out_type, [])]
        return {"ids": {out_type: union}, "source_ids": {str(node.source): per_source[str(node.source)]}}

    # -- the graph --------------------------------------------------------------------------

    def sequence(self) -> list[str]:
        """Graph nodes in order: the workflow's nodes, each step after the node it follows."""
        order = [n.role for n in self.workflow.nodes]
        names = set(order) | {s.name for s in self.steps}
        for step in self.steps:
            if step.after is None:
                continue
            if step.after not in names:
                raise DefinitionError(f"step {step.name!r} follows {step.after!r}, which is neither a role of the "
                                      f"workflow nor a step; roles: {order}")
            # After the last node of that role (all sources' nodes of a role run first).
            at = max(i for i, name in enumerate(order) if base_role(name) == step.after or name == step.after)
            order.insert(at + 1, step.name)
        return order

    def compile(self):
        # LangGraph (with LangSmith behind it) is imported when a build runs, not by every command.
        from langgraph.graph import END, START, StateGraph

        graph = StateGraph(BuildState)
        order = self.sequence()
        handlers = self.handlers()
        step_handlers = self.step_handlers()
        steps = {s.name: s for s in self.steps}
        detached = [s.name for s in self.steps if s.after is None]
        for name in order + detached:
            if name in steps:
                fn = step_handlers.get(name)
                if fn is None:
                    raise DefinitionError(f"step {name!r} has no handler")
                graph.add_node(name, self._timed_step(steps[name], fn))
            else:
                node = self.workflow.node(name)
                handler = handlers.get(base_role(name), self.run_role)
                graph.add_node(name, self._timed_node(node, handler))
        routes = {r.after: r for r in self.routes()}
        graph.add_edge(START, order[0])
        for name in order + detached:
            if name in order:
                at = order.index(name)
                following = order[at + 1] if at + 1 < len(order) else END
            else:
                following = steps[name].then or END
            route = routes.get(name) or routes.get(base_role(name))
            if route is None:
                graph.add_edge(name, following)
                continue
            targets = {t: self._first(t, order) for t in route.targets}
            targets["next"] = following

            def choose(state: BuildState, _r: Route = route) -> str:
                return _r.choose(state) or "next"

            graph.add_conditional_edges(name, choose, targets)
        return graph.compile()

    @staticmethod
    def _first(target: str, order: list[str]) -> str:
        """The graph node a route to ``target`` enters: a step, or the first node of a role."""
        for name in order:
            if name == target or base_role(name) == target:
                return name
        return target  # a step reached only by routes

    def _show_stage(self, stage: str, title: str | None = None) -> None:
        if title is not None:
            self.progress.stage(f"{stage} {title}")
            self._stage_shown = None
        elif stage != self._stage_shown:
            self.progress.stage(f"{stage} {self.stage_titles.get(stage, STAGE_NAMES.get(stage, ''))}")
            self._stage_shown = stage

    def _timed(self, stage: str, fn: Callable[[BuildState], dict[str, Any]], state: BuildState) -> dict[str, Any]:
        t0 = time.perf_counter()
        update = fn(state)
        seconds = dict(state.get("stage_seconds") or {})
        seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - t0
        update["stage_seconds"] = {stage: seconds[stage]}
        return update

    def _timed_node(self, node: WorkflowNode, handler: Handler):
        def run(state: BuildState) -> dict[str, Any]:
            self._show_stage(node.stage)
            return self._timed(node.stage, lambda s: handler(node, s), state)
        return run

    def _timed_step(self, step: Step, fn: Callable[[BuildState], dict[str, Any]]):
        def run(state: BuildState) -> dict[str, Any]:
            self._show_stage(step.stage, step.title)
            return self._timed(step.stage, fn, state)
        return run
