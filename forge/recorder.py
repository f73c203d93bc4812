"""The driver-side recorder: contracts on every output, and the rows a run adds to the store.

Backends hand back outputs; the recorder gives each its id (run key, output key), checks it
against its contract, and collects artifacts, lineage edges, verifications and the run itself
in a batch the driver writes in bulk. Runs found again in the store are counted and, when their
contract changed since, checked again without executing anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from forge.artifact_types import ArtifactContent
from forge.backends import Executed
from forge.codeversion import data_identity
from forge.contracts import CheckContext, CheckResult, ContractBook, decide
from forge.invocation import Invocation
from forge.keys import canonical_json, digest
from forge.store import Batch, Store, now


@dataclass
class NodeResult:
    """What one batch of invocations yielded."""

    verified: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    executed: int = 0
    failed: int = 0
    reused: int = 0
    created: int = 0
    reverified: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def merge(self, other: "NodeResult") -> None:
        self.verified += other.verified
        self.rejected += other.rejected
        for name in ("executed", "failed", "reused", "created", "reverified", "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.errors += other.errors


class Recorder:
    def __init__(self, store: Store, contracts: ContractBook, build_id: str, driver: Any, *, faults: Any = None,
                 checks_enabled: bool = True) -> None:
        self.store = store
        self.contracts = contracts
        self.build_id = build_id
        self.driver = driver  # loads artifacts (and remembers new ones) for checks and fault plans
        self.faults = faults  # testing seam: a FaultPlan applied to first productions, never to repairs
        self.checks_enabled = checks_enabled  # ablation: contracts off until the final stage
        self.seen: set[str] = set()  # artifacts already counted in this build (loops revisit nodes)
        self.executed: set[str] = set()  # run keys executed in this build

    def fault_tag(self, skill: str) -> str:
        return (self.faults.key_for(skill) or "") if self.faults is not None else ""

    def check(self, aid: str, content: ArtifactContent) -> list[CheckResult]:
        """Run the artifact's contract (nothing, when contracts are ablated)."""
        if not self.checks_enabled:
            return []
        return self.contracts.evaluate(aid, content, CheckContext(aid, self.driver.load, self.store))

    def reuse(self, done: list[Invocation], memo: dict[str, dict[str, Any]], result: NodeResult) -> None:
        """Count stored outputs of runs found again; re-check those whose contract changed since."""
        out_ids = [oid for inv in done for oid in memo[inv.run_key]["outputs"]]
        statuses = self.store.artifact_statuses(out_ids)
        people = self.store.human_rejected(out_ids)  # a person's verdict outlives contract re-checks
        batch = Batch()
        stale_contract: list[str] = []
        for inv in done:
            batch.add("build_runs", (self.build_id, inv.run_key, False))
        for oid in out_ids:
            type_name, status, cversion = statuses.get(oid, (None, "missing", None))
            if type_name is None:
                continue
            if oid not in self.seen:
                result.reused += 1
                self.seen.add(oid)
            if cversion != self.contracts.version(type_name) and oid not in people:
                stale_contract.append(oid)
            elif status == "verified" and oid not in people:
                result.verified.append(oid)
            else:
                result.rejected.append(oid)
        if stale_contract:
            # The contract changed since these were checked: check them again, keep the content.
            self.driver.preload(stale_contract)
            ts = now()
            for oid in stale_contract:
                content = self.driver.load(oid)
                checks = self.check(oid, content)
                status = decide(checks)
                batch.verdicts[oid] = (status, self.contracts.version(content.TYPE))
                for c in checks:
                    batch.add("verifications", verification_row(c, self.contracts.version(content.TYPE), ts))
                (result.verified if status == "verified" else result.rejected).append(oid)
                result.reverified += 1
        self.store.write(batch)

    def record(self, done: Executed, forced: set[str], batch: Batch, result: NodeResult) -> None:
        """Check each output against its contract and add it, its edges, verdicts and the run to ``batch``."""
        inv, outputs, error = done.inv, done.outputs, done.error
        spec = inv.node.skill
        if error is None and self.faults is not None and inv.repair is None:
            outputs = self.faults.apply(inv, outputs, self.driver)
        result.executed += 1
        self.executed.add(inv.run_key)
        out_ids = []
        if error is None:
            ts = now()
            cversion = self.contracts.version(spec.output)
            for out in outputs:
                fault = out.metadata.get("fault")
                # A planted defect gets its own id, so clean artifacts keep theirs.
                aid = digest(inv.run_key, out.key, *([f"fault:{fault}"] if fault else []), length=32)
                out_ids.append(aid)
                payload = canonical_json(out.content.model_dump(mode="json"))
                # Downstream sees exactly what a later build would load from the store.
                out.content = type(out.content).model_validate_json(payload)
                if spec.keep_outputs:
                    self.driver.remember(aid, out.content)
                prior = None
                if inv.repair:
                    prior = inv.repair.get("priors", {}).get(out.key) or inv.repair.get("prior")
                    root = inv.repair.get("roots", {}).get(out.key) or inv.repair.get("root") or prior
                    out.metadata = {**out.metadata, "repair": {
                        "operator": inv.repair["operator"], "violated": inv.repair["violated"], "prior": prior,
                        "attempt": inv.repair["attempt"], "root": root}}
                checks = self.check(aid, out.content)
                status = decide(checks)
                if inv.run_key in forced:
                    batch.replace_artifacts.add(aid)
                batch.add("artifacts", (aid, spec.output, inv.run_key, spec.name, out.key, payload,
                                        json.dumps(out.metadata), status, cversion, ts))
                for role, parent in inv.inputs.items():
                    for p in parent if isinstance(parent, list) else [parent]:
                        batch.add("edges", (p, aid, role))
                if prior:
                    batch.add("edges", (prior, aid, "repairs"))
                for c in checks:
                    batch.add("verifications", verification_row(c, cversion, ts))
                (result.verified if status == "verified" else result.rejected).append(aid)
                result.created += 1
                self.seen.add(aid)
        else:
            result.failed += 1
            result.errors.append(error)
        if inv.run_key in forced:
            batch.replace_runs.add(inv.run_key)
            batch.replace_artifacts.update(out_ids)
        batch.add("skill_runs", (
            inv.run_key, spec.name, spec.stage, digest(inv.module_version, data_identity(inv.data_files)),
            inv.module_version,
            json.dumps(inv.data_files), canonical_json(inv.params), canonical_json(inv.inputs), json.dumps(out_ids),
            done.started, done.ended, "ok" if error is None else "error", error, self.build_id,
            self.fault_tag(spec.name) if inv.repair is None else "",
            json.dumps(sorted(set(done.blobs))) if done.blobs else None, inv.seed_key,
        ))
        batch.add("build_runs", (self.build_id, inv.run_key, True))


def verification_row(c: CheckResult, cversion: str, ts) -> tuple:
    return (c.artifact_id, str(c.requirement), cversion, c.verification, c.severity, c.passed, c.backend,
            c.diagnostics, ts)
