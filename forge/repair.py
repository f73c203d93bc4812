"""Diagnosis and provenance-guided repair (the backward loop).

For every failed requirement or gate, a :class:`Diagnosis` names the violated requirement,
its failure category, the earliest artifact that made it unsatisfiable, and the operator
with the smallest sufficient scope. Operators, smallest first:

    local_field_repair -> template_rebinding -> candidate_resynthesis
    -> skill_reexecution -> upstream_rollback -> final_rejection

The same symptom in several artifacts of one producer escalates to one re-execution of that
producer. Invariants the engine enforces: requirements and gate thresholds are never touched
(their digest is checked before and after every round); evidence is only ever rebuilt by
its registered producing skill, never edited; every new version records the violated
requirement, the operator and its prior version (an edge ``repairs``), and passes the same
contracts and gates as a new artifact; only the repaired artifact's descendants are rebuilt;
each lineage has a repair budget, after which it is rejected with its records kept.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from forge.errors import ForgeError
from forge.executor import Executor, NodeResult, WorkflowNode
from forge.keys import digest
from forge.review import HUMAN_REQUIREMENT
from forge.store import Batch, Store, now

OPERATORS = ("local_field_repair", "template_rebinding", "candidate_resynthesis", "skill_reexecution",
             "upstream_rollback", "final_rejection")

# Failure category -> (operator, escalation operator for a repeated symptom of one producer): the
# engine's own categories. A track adds the routes of its requirements' categories
# (Track.repair_routes); a category no route names ends its lineage (final_rejection).
ROUTES: dict[str, tuple[str, str | None]] = {
    "invalid_evidence": ("upstream_rollback", None),
    "invalid_source": ("upstream_rollback", None),
    # A person's verdict: an ambiguous item is realized anew from its binding; one a person
    # found wrong ends its lineage (its evidence disagrees with what the picture shows).
    "human_ambiguous": ("candidate_resynthesis", None),
    "human_wrong": ("final_rejection", None),
}

SCOPES = {
    "local_field_repair": "the {type} alone (one field re-derived from evidence)",
    "template_rebinding": "a new binding on the same evidence, then its item",
    "candidate_resynthesis": "a new item from the same verified binding",
    "skill_reexecution": "the producing skill's invocation(s) for this symptom, then their descendants",
    "upstream_rollback": "the {type} rebuilt from its verified parent, then only its descendants",
    "final_rejection": "none: the lineage is terminated and its records kept",
}

def invariant_digest(contracts: Any, gates: dict[str, Any]) -> str:
    """What repairs may never change: every contract's version and the gate settings."""
    return digest(sorted((t, contracts.version(t)) for t in contracts.contracts), gates)


class RepairInvariantError(ForgeError):
    """A repair tried to do what repairs may never do."""


@dataclass
class Diagnosis:
    artifact: str
    type: str
    requirement: str
    category: str
    cause: str
    producer: str
    template: str
    operator: str
    attempt: int
    root: str
    detail: str = ""
    group: str = ""

    @property
    def scope(self) -> str:
        """The smallest reconstruction scope the operator implies."""
        return SCOPES.get(self.operator, "").format(type=self.type)


@dataclass
class RepairRecord:
    operator: str
    diagnoses: list[Diagnosis]
    new: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)
    status: str = "pending"
    seconds: float = 0.0
    error: str = ""
    written: bool = False


@dataclass
class RepairSettings:
    budget: int = 2
    escalate_after: int = 3


class RepairLoop:
    """One instance per build; ``round`` is called by the stage graph until nothing is pending."""

    def __init__(self, store: Store, executor: Executor, workflow: Any, settings: RepairSettings,
                 build_id: str, gates: dict[str, Any], *, skills: dict[str, str] | None = None,
                 routes: dict[str, tuple[str, str | None]] | None = None,
                 gate_categories: dict[str, str] | None = None) -> None:
        self.store = store
        self.executor = executor
        self.workflow = workflow
        # The track's skills for each operator step: local_field_item, local_field_binding, rebind, resynthesize_item.
        self.skills = skills or {}
        # Failure category -> operators: the engine's, and those the track adds for its own categories.
        self.routes = {**ROUTES, **(routes or {})}
        # Gates whose verdict falls on the item itself -> its failure category.
        self.gate_categories = dict(gate_categories or {})
        self.nodes: dict[str, WorkflowNode] = {n.role: n for n in workflow.nodes}
        # What sources' own skills produce is registered evidence: never edited, only rebuilt by its producer.
        self.evidence_types = {n.skill.output for n in workflow.nodes if n.source is not None}
        # What the final node gathers is the track's item type.
        self.item_type = next((i.type for n in reversed(workflow.nodes) for i in n.skill.inputs if i.many), "")
        self.settings = settings
        self.build_id = build_id
        self.gates = gates
        self.guard = invariant_digest(executor.contracts, gates)  # checked after every round
        self.handled: set[str] = set()
        self.records: list[RepairRecord] = []
        self.rounds = 0

    # -- diagnosis ------------------------------------------------------------------------

    def diagnose(self, failures: dict[str, tuple[str, str]]) -> list[Diagnosis]:
        """``failures``: artifact id -> (requirement or gate, detail). Ids already handled are skipped."""
        todo = {a: f for a, f in failures.items() if a not in self.handled}
        if not todo:
            return []
        arts = self.store.artifacts(todo)
        runs = self.store.runs_for_artifacts(todo)
        meta = self.store.artifact_column(todo, "metadata")
        out = []
        for aid, (req, detail) in sorted(todo.items()):
            art = arts[aid]
            category = self._category(req, detail)
            prior = json.loads(meta.get(aid) or "{}").get("repair", {})
            attempt = int(prior.get("attempt", 0)) + 1
            operator = self.routes.get(category, ("final_rejection", None))[0]
            if attempt > self.settings.budget:
                operator, detail = "final_rejection", f"repair budget of {self.settings.budget} spent; {detail}"
            out.append(Diagnosis(
                artifact=aid, type=art.type, requirement=req, category=category,
                # A gate's or a person's verdict falls on the item itself: no lineage to search.
                cause=aid if req in self.gate_categories or req == HUMAN_REQUIREMENT else self._cause(aid),
                producer=runs.get(aid, {}).get("skill", art.skill), template=str(art.content.get("template", "")),
                operator=operator, attempt=attempt, root=prior.get("root", aid), detail=detail,
            ))
        return self._escalate(out)

    def _category(self, requirement: str, detail: str) -> str:
        if requirement in self.gate_categories:
            return self.gate_categories[requirement]
        if requirement == HUMAN_REQUIREMENT:
            verdict = json.loads(detail or "{}").get("verdict")
            return "human_wrong" if verdict == "wrong" else "human_ambiguous"
        return self.executor.contracts.category(requirement)

    def _cause(self, aid: str) -> str:
        """The earliest artifact of the lineage that fails its own contract (else ``aid``)."""
        lineage = [aid, *self.store.ancestors([aid])]
        statuses = self.store.artifact_statuses(lineage)
        bad = [a for a in lineage if statuses.get(a, ("", "verified", None))[1] == "rejected"]
        order = [n.skill.output for n in self.workflow.nodes]  # upstream first, as the workflow runs
        bad.sort(key=lambda a: order.index(statuses[a][0]) if statuses[a][0] in order else 99)
        return bad[0] if bad else aid

    def _escalate(self, diags: list[Diagnosis]) -> list[Diagnosis]:
        groups: dict[tuple[str, str, str], list[Diagnosis]] = {}
        for d in diags:
            groups.setdefault((d.category, d.producer, d.template), []).append(d)
        for (category, producer, template), members in groups.items():
            escalation = self.routes.get(category, (None, None))[1]
            live = [d for d in members if d.operator != "final_rejection"]
            if escalation and len(live) >= self.settings.escalate_after and all(d.attempt == 1 for d in live):
                gid = digest(category, producer, template, sorted(d.artifact for d in live), length=12)
                for d in live:
                    d.operator, d.group = escalation, gid
        return diags

    # -- one round ------------------------------------------------------------------------

    def round(self, failures: dict[str, tuple[str, str]], context: dict[str, list[str]]) -> dict[str, Any]:
        """Diagnose and repair; returns new verified items and the artifacts they replace.
        ``context``: what the workflow's nodes below a repaired artifact take besides it (the
        verified templates, by type)."""
        self.rounds += 1
        diags = self.diagnose(failures)
        self.handled |= {d.artifact for d in diags}
        new_items: list[str] = []
        replaced: list[str] = []
        by_op: dict[tuple[str, str], list[Diagnosis]] = {}
        for d in diags:
            by_op.setdefault((d.operator, d.group or d.artifact), []).append(d)
        for (operator, _), members in sorted(by_op.items()):
            t0 = time.perf_counter()
            rec = RepairRecord(operator, members)
            try:
                produced = self._apply(operator, members)
                rec.new = self._replacements(produced.verified + produced.rejected)
                fresh = [a for a in produced.verified if a in set(rec.new)]
                items, rebuilt = self._rebuild_descendants(fresh, context, {
                    "operator": f"rebuild after {operator}", "violated": sorted({d.requirement for d in members}),
                    "attempt": max(d.attempt for d in members), "root": members[0].root})
                rec.rebuilt = rec.new + rebuilt
                new_items += items
                replaced += [d.artifact for d in members]
                rec.status = "rejected" if operator == "final_rejection" else ("rebuilt" if produced.verified else "failed")
                if produced.errors:
                    rec.error = produced.errors[0]
            except _Reject as exc:
                rec.status, rec.error = "rejected", str(exc)
            rec.seconds = time.perf_counter() - t0
            self.records.append(rec)
        self._write(diags)
        if invariant_digest(self.executor.contracts, self.gates) != self.guard:
            raise RepairInvariantError("a repair changed a requirement or a gate threshold")
        return {"items": new_items, "replaced": replaced, "diagnoses": len(diags)}

    def _apply(self, operator: str, members: list[Diagnosis]) -> NodeResult:
        ex = self.executor
        if operator == "final_rejection":
            raise _Reject("; ".join(sorted({d.detail or d.requirement for d in members}))[:500])
        if operator in ("skill_reexecution", "upstream_rollback"):
            return ex.run(self._reinvoke(operator, members), label=f"repair {operator}")
        invs = []
        for d in members:
            info = {"operator": operator, "violated": d.requirement, "prior": d.artifact, "attempt": d.attempt,
                    "root": d.root}
            if operator == "local_field_repair":
                if d.type in self.evidence_types:
                    raise RepairInvariantError(f"{d.type} {d.artifact[:12]}: evidence is never edited in place")
                if d.type == self.item_type:
                    invs.append(self._operator(self._skill("local_field_item"), {"item": d.artifact}, d, info))
                else:
                    invs.append(self._operator(self._skill("local_field_binding"), {"binding": d.artifact}, d, info))
            elif operator == "template_rebinding":
                invs.append(self._operator(self._skill("rebind"), {"binding": d.artifact}, d, info))
            elif operator == "candidate_resynthesis":
                if d.type != self.item_type:
                    # A new item of a binding that failed its own contract carries the fault on.
                    raise _Reject(f"{d.requirement}: {d.detail or 'failed'}; a new realization of it would "
                                  "carry the fault")
                binding = ex.load(d.artifact).binding
                invs.append(self._operator(self._skill("resynthesize_item"), {"binding": binding}, d, info))
        return ex.run(invs, label=f"repair {operator}")

    def _replacements(self, ids: list[str]) -> list[str]:
        """New versions that replace a failed artifact (a re-executed producer also re-emits
        outputs that never failed; those are not repairs and are not rebuilt below)."""
        rows = list(self.store.artifact_column(ids, "metadata").items())
        keep = {aid for aid, meta in rows if json.loads(meta or "{}").get("repair", {}).get("prior")}
        return [a for a in ids if a in keep]

    def _operator(self, skill_name: str, inputs: dict[str, str], d: Diagnosis, info: dict[str, Any]):
        from forge.skills import REGISTRY

        node = WorkflowNode(skill_name, REGISTRY.get(skill_name), {})
        return self.executor.invocation(node, inputs, {"attempt": d.attempt}, repair=info)

    def _reinvoke(self, operator: str, members: list[Diagnosis]) -> list:
        """Re-run each producing invocation once, on its recorded verified inputs and parameters.

        Outputs are linked to the failed artifacts they replace by output key.
        """
        ids = [d.artifact for d in members]
        runs = self.store.runs_for_artifacts(ids)
        keys = self.store.artifact_column(ids, "output_key")
        per_run: dict[str, list[Diagnosis]] = {}
        for d in members:
            per_run.setdefault(runs[d.artifact]["run_key"], []).append(d)
        invs = []
        for run_key, ds in sorted(per_run.items()):
            run = runs[ds[0].artifact]
            node = next((n for n in self.nodes.values() if n.skill.name == run["skill"]), None)
            if node is None:
                raise _Reject(f"producer {run['skill']} is not part of this workflow")
            parents = [a for v in run["inputs"].values() for a in (v if isinstance(v, list) else [v])]
            statuses = self.store.artifact_statuses(parents)
            if any(statuses.get(p, ("", "missing", None))[1] != "verified" for p in parents):
                raise _Reject("the producer's inputs are not all verified; nothing admissible to rebuild from")
            info = {"operator": operator, "violated": sorted({d.requirement for d in ds}),
                    "attempt": max(d.attempt for d in ds), "group": ds[0].group,
                    "priors": {keys[d.artifact]: d.artifact for d in ds},
                    "roots": {keys[d.artifact]: d.root for d in ds}}
            invs.append(self.executor.invocation(node, run["inputs"], run["params"], repair=info, seed_key=run_key))
        return invs

    def _rebuild_descendants(self, new_ids: list[str], context: dict[str, list[str]],
                             info: dict[str, Any]) -> tuple[list[str], list[str]]:
        """Run the workflow below freshly repaired artifacts; returns (new items, all rebuilt ids).

        These invocations belong to the repair (recorded as such on every output), so they are
        not first productions."""
        ex = self.executor
        ex.preload(new_ids)
        fresh: dict[str, list[str]] = {}
        for aid in new_ids:
            fresh.setdefault(ex.load(aid).TYPE, []).append(aid)
        rebuilt: list[str] = []
        items = list(fresh.get(self.item_type, []))
        # Walk the workflow graph in topological order: every node that consumes a fresh type runs on the
        # fresh artifacts (and the context), and what it makes is fresh for the nodes below. Nodes
        # that gather a whole type (the package) are left to the stage loop.
        import networkx as nx

        by_role = {n.role: n for n in self.workflow.nodes}
        for role in nx.topological_sort(self.workflow.graph):
            node = by_role[role]
            inputs = node.skill.inputs
            if any(i.many for i in inputs) or not any(i.type in fresh for i in inputs):
                continue
            available = {**context, **{i.type: fresh[i.type] for i in inputs if i.type in fresh}}
            if any(i.type not in available for i in inputs):
                continue
            r = ex.run(ex.invocations(node, available, repair=info), label=f"repair rebuild {node.role}")
            made = [a for a in r.verified + r.rejected if a not in rebuilt]
            rebuilt += made
            out = fresh.setdefault(node.skill.output, [])
            out += [a for a in r.verified if a not in out]
            if node.skill.output == self.item_type:
                items += [a for a in r.verified if a not in items]
        return items, rebuilt

    def _skill(self, step: str) -> str:
        try:
            return self.skills[step]
        except KeyError:
            raise _Reject(f"the track names no skill for the repair step {step!r}") from None

    def _write(self, diags: list[Diagnosis]) -> None:
        batch = Batch()
        ts = now()
        for d in diags:
            batch.add("diagnoses", (self.build_id, self.rounds, d.artifact, d.type, d.requirement, d.category,
                                    d.cause, d.producer, d.template, d.operator, d.attempt, d.root, d.group,
                                    d.detail[:1000], ts, d.scope))
        for rec in self.records:
            if rec.written:
                continue
            rec.written = True
            batch.add("repairs", (self.build_id, self.rounds, rec.operator,
                                  json.dumps(sorted({d.requirement for d in rec.diagnoses})),
                                  json.dumps([d.artifact for d in rec.diagnoses]), json.dumps(rec.new),
                                  json.dumps(rec.rebuilt), rec.status, rec.error[:1000], rec.seconds, ts))
        self.store.write(batch)

    # -- reporting ------------------------------------------------------------------------

    def summary(self, released: set[str], verified_before: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for op in OPERATORS:
            recs = [r for r in self.records if r.operator == op]
            if not recs:
                continue
            succeeded = sum(1 for r in recs if any(a in released for a in r.new + r.rebuilt))
            out[op] = {"repairs": len(recs), "artifacts": sum(len(r.diagnoses) for r in recs),
                       "succeeded": succeeded, "rebuilt": sum(len(r.rebuilt) for r in recs),
                       "seconds": round(sum(r.seconds for r in recs), 3)}
        rebuilt = sum(len(r.rebuilt) for r in self.records)
        return {"operators": out, "rounds": self.rounds, "artifacts_rebuilt": rebuilt,
                "artifacts_kept": verified_before, "guard": self.guard}


class _Reject(Exception):
    pass
