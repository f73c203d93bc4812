"""Running skills: memoization, execution, contracts, and bulk writes to the store.

An :class:`Invocation` is one call of a skill on concrete input artifacts and parameters.
Its ``run_key`` hashes (engine format, skill, code version, parameters, input ids); each output
artifact's id hashes (run key, output key). A run key already stored with status ``ok`` is
reused without executing anything. Outputs are checked against their contract right after
they are produced; only ``verified`` artifacts are handed downstream.
"""

from __future__ import annotations

import itertools
import json
import os
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from forge import ENGINE_FORMAT_VERSION
from forge.artifact_types import ArtifactContent, content_type
from forge.codeversion import data_identity
from forge.contracts import CheckContext, CheckResult, ContractBook, decide
from forge.errors import SkillExecutionError
from forge.keys import canonical_json, digest
from forge.skills import Output, SkillContext, SkillSpec
from forge.store import Batch, BlobStore, Store, now


@dataclass
class WorkflowNode:
    """A skill placed in a build's workflow, with the parameters the planner gave it."""

    role: str
    skill: SkillSpec
    params: dict[str, Any]
    fanout: list[dict[str, Any]] | None = None  # one invocation per parameter set, per input combination
    source: int | None = None  # the intent source this node collects or structures (None: shared by all)

    @property
    def stage(self) -> str:
        return self.skill.stage


@dataclass
class Invocation:
    node: WorkflowNode
    inputs: dict[str, Any]  # parameter name -> artifact id, or list of ids
    params: dict[str, Any]
    run_key: str
    module_version: str
    data_files: dict[str, dict[str, str]]
    # Set for repair invocations: which repair this is. It enters the run key, so a repair
    # gives a new version instead of the stored one, and it is recorded on every output.
    repair: dict[str, Any] | None = None
    # Seeds the skill's RNG; a re-executed producer reuses its original run's seed.
    seed_key: str | None = None

    @property
    def input_ids(self) -> list[str]:
        out: list[str] = []
        for v in self.inputs.values():
            out.extend(v if isinstance(v, list) else [v])
        return out


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


ForcePredicate = Callable[[Invocation], bool]


class Executor:
    """Executes invocations against one store for one build."""

    FLUSH_EVERY_S = 2.0

    def __init__(
        self,
        store: Store,
        contracts: ContractBook,
        build_id: str,
        *,
        force: ForcePredicate | None = None,
        workers: int = 1,
        progress: Any = None,
        faults: Any = None,
        checks_enabled: bool = True,
    ) -> None:
        self.store = store
        self.contracts = contracts
        self.build_id = build_id
        self.force = force
        self.workers = max(1, workers)
        self.progress = progress
        self.faults = faults  # testing seam: a FaultPlan applied to first productions, never to repairs
        self.checks_enabled = checks_enabled  # ablation: contracts off until the final stage
        self._cache: dict[str, ArtifactContent] = {}
        self._types: dict[str, str] = {}
        self._pool: ProcessPoolExecutor | None = None
        self._seen: set[str] = set()  # artifacts already counted in this build (loops revisit nodes)
        self._executed: set[str] = set()  # run keys executed in this build

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    # -- loading --------------------------------------------------------------------------

    def load(self, artifact_id: str) -> ArtifactContent:
        if artifact_id not in self._cache:
            self.preload([artifact_id])
            if artifact_id not in self._cache:
                raise SkillExecutionError(f"artifact {artifact_id} is not in the store {self.store.root}")
        return self._cache[artifact_id]

    def preload(self, ids: list[str]) -> None:
        missing = [i for i in ids if i not in self._cache]
        for aid, art in self.store.artifacts(missing).items():
            self._cache[aid] = content_type(art.type).model_validate(art.content)
            self._types[aid] = art.type

    # -- planning invocations -------------------------------------------------------------

    def invocations(self, node: WorkflowNode, available: dict[str, list[str]], *,
                    repair: dict[str, Any] | None = None) -> list[Invocation]:
        """Every invocation of ``node`` over the artifacts available per type (``repair``: the
        repair these invocations rebuild descendants for)."""
        spec = node.skill
        singles = [i for i in spec.inputs if not i.many]
        domains = [sorted(available.get(i.type, [])) for i in singles]
        gathered = {i.name: sorted(available.get(i.type, [])) for i in spec.inputs if i.many}
        if spec.expand or spec.applies:
            self.preload([a for d in domains for a in d] + [a for v in gathered.values() for a in v])
        module_version = spec.module_version()
        out: list[Invocation] = []
        for combo in itertools.product(*domains):
            inputs: dict[str, Any] = {i.name: aid for i, aid in zip(singles, combo)}
            inputs.update(gathered)
            if spec.applies or spec.expand:
                contents = {k: ([self._cache[a] for a in v] if isinstance(v, list) else self._cache[v])
                            for k, v in inputs.items()}
            if spec.applies and not spec.applies(**contents):
                continue
            param_sets = spec.expand(**contents) if spec.expand else (node.fanout or [{}])
            for extra in param_sets:
                out.append(self.invocation(node, inputs, {**node.params, **extra}, module_version=module_version,
                                           repair=repair))
        return out

    def invocation(self, node: WorkflowNode, inputs: dict[str, Any], params: dict[str, Any], *,
                   repair: dict[str, Any] | None = None, module_version: str | None = None,
                   seed_key: str | None = None) -> Invocation:
        """One invocation of ``node`` on explicit inputs (the repair loop builds its own)."""
        spec = node.skill
        params = spec.validate_params(params)
        module_version = module_version or spec.module_version()
        data_files = spec.data_files(params)
        code_version = digest(module_version, data_identity(data_files))
        key_parts: list[Any] = [ENGINE_FORMAT_VERSION, spec.name, code_version, params, inputs]
        if repair:
            key_parts.append({"repair": repair})
        return Invocation(node, inputs, params, digest(*key_parts, length=32), module_version, data_files, repair,
                          seed_key)

    # -- running --------------------------------------------------------------------------

    def run(self, invocations: list[Invocation], *, label: str | None = None) -> NodeResult:
        result = NodeResult()
        t0 = time.perf_counter()
        if not invocations:
            return result
        # A forced invocation runs once per build, even when the loop revisits its node.
        forced = {inv.run_key for inv in invocations
                  if self.force and inv.run_key not in self._executed and self.force(inv)}
        memo = self.store.runs_by_key(inv.run_key for inv in invocations if inv.run_key not in forced)
        # A run made under another fault plan (or none) is not this run: execute it again.
        tag = self._fault_tag(invocations[0].node.skill.name)
        stale = {k for k, r in memo.items() if (r.get("fault_tag") or "") != tag}
        forced |= stale
        memo = {k: r for k, r in memo.items() if k not in stale}
        # An invocation that already failed in this build is not retried when the loop comes back.
        todo = [inv for inv in invocations if inv.run_key not in memo and inv.run_key not in self._executed]
        done = [inv for inv in invocations if inv.run_key in memo]
        task = self.progress.task(label or invocations[0].node.role, total=len(invocations)) if self.progress else None

        self._reuse(done, memo, result)
        if task:
            task.advance(len(done))

        batch = Batch()
        last_flush = time.perf_counter()
        for inv, outputs, error, started, ended in self._execute_all(todo):
            self._record(inv, outputs, error, started, ended, forced, batch, result)
            if task:
                task.advance(1)
            if time.perf_counter() - last_flush > self.FLUSH_EVERY_S:
                self.store.write(batch)
                batch = Batch()
                last_flush = time.perf_counter()
        self.store.write(batch)
        if task:
            task.finish()
        result.seconds = time.perf_counter() - t0
        return result

    def _fault_tag(self, skill: str) -> str:
        return (self.faults.key_for(skill) or "") if self.faults is not None else ""

    def check(self, aid: str, content: ArtifactContent) -> list[CheckResult]:
        """Run the artifact's contract (nothing, when contracts are ablated)."""
        if not self.checks_enabled:
            return []
        return self.contracts.evaluate(aid, content, CheckContext(aid, self.load, self.store))

    def _reuse(self, done: list[Invocation], memo: dict[str, dict[str, Any]], result: NodeResult) -> None:
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
            if oid not in self._seen:
                result.reused += 1
                self._seen.add(oid)
            if cversion != self.contracts.version(type_name) and oid not in people:
                stale_contract.append(oid)
            elif status == "verified" and oid not in people:
                result.verified.append(oid)
            else:
                result.rejected.append(oid)
        if stale_contract:
            # The contract changed since these were checked: check them again, keep the content.
            self.preload(stale_contract)
            ts = now()
            for oid in stale_contract:
                content = self._cache[oid]
                checks = self.check(oid, content)
                status = decide(checks)
                batch.verdicts[oid] = (status, self.contracts.version(content.TYPE))
                for c in checks:
                    batch.add("verifications", _verification_row(c, self.contracts.version(content.TYPE), ts))
                (result.verified if status == "verified" else result.rejected).append(oid)
                result.reverified += 1
        self.store.write(batch)

    def _execute_all(self, todo: list[Invocation]):
        spec = todo[0].node.skill if todo else None
        if spec is not None and spec.parallel and self.workers > 1 and len(todo) > 1:
            yield from self._execute_parallel(todo)
            return
        # One bulk read for all inputs instead of a query per invocation.
        self.preload([a for inv in todo for a in inv.input_ids])
        for inv in todo:
            yield (inv, *self._execute_one(inv))

    def _execute_one(self, inv: Invocation):
        started = now()
        try:
            contents = {k: ([self.load(a) for a in v] if isinstance(v, list) else self.load(v))
                        for k, v in inv.inputs.items()}
            ctx = SkillContext(inv.node.skill, inv.params, inv.seed_key or inv.run_key, self.store, inv.inputs,
                               loader=self.load)
            outputs = _normalize_outputs(inv.node.skill, inv.node.skill.fn(ctx, **contents))
            return outputs, None, started, now()
        except Exception as exc:
            return [], _describe_error(inv, exc), started, now()

    def _execute_parallel(self, todo: list[Invocation]):
        if self._pool is None:
            import multiprocessing

            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=exit_with_parent, initargs=(os.getpid(),))
        self.preload([a for inv in todo for a in inv.input_ids])
        futures = []
        for inv in todo:
            payload = {k: ([self._types_of(a) for a in v] if isinstance(v, list) else self._types_of(v))
                       for k, v in inv.inputs.items()}
            started = now()
            futures.append((inv, started, self._pool.submit(
                _worker_execute, inv.node.skill.name, inv.params, inv.seed_key or inv.run_key, str(self.store.root),
                payload, inv.inputs)))
        for inv, started, fut in futures:
            try:
                raw = fut.result()
                outputs = [Output(content_type(t).model_validate(c), k, m) for t, c, k, m in raw]
                yield inv, outputs, None, started, now()
            except Exception as exc:
                yield inv, [], _describe_error(inv, exc), started, now()

    def _types_of(self, aid: str) -> tuple[str, dict[str, Any]]:
        content = self._cache[aid]
        return content.TYPE, content.model_dump(mode="json")

    def _record(self, inv: Invocation, outputs: list[Output], error: str | None, started, ended,
                forced: set[str], batch: Batch, result: NodeResult) -> None:
        spec = inv.node.skill
        if error is None and self.faults is not None and inv.repair is None:
            outputs = self.faults.apply(inv, outputs, self)
        result.executed += 1
        self._executed.add(inv.run_key)
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
                self._cache[aid] = out.content
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
                    batch.add("verifications", _verification_row(c, cversion, ts))
                (result.verified if status == "verified" else result.rejected).append(aid)
                result.created += 1
                self._seen.add(aid)
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
            started, ended, "ok" if error is None else "error", error, self.build_id,
            self._fault_tag(spec.name) if inv.repair is None else "",
        ))
        batch.add("build_runs", (self.build_id, inv.run_key, True))


def _verification_row(c: CheckResult, cversion: str, ts) -> tuple:
    return (c.artifact_id, str(c.requirement), cversion, c.verification, c.severity, c.passed, c.backend,
            c.diagnostics, ts)


def _normalize_outputs(spec: SkillSpec, raw: Any) -> list[Output]:
    outputs: list[Output] = []
    for i, item in enumerate(raw or []):
        out = item if isinstance(item, Output) else Output(item, str(i))
        if out.content.TYPE != spec.output:
            raise SkillExecutionError(
                f"skill {spec.name!r} declared output {spec.output} but returned {out.content.TYPE}"
            )
        outputs.append(out)
    keys = [o.key for o in outputs]
    if len(set(keys)) != len(keys):
        raise SkillExecutionError(f"skill {spec.name!r} returned duplicate output keys")
    return outputs


def _describe_error(inv: Invocation, exc: Exception) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    inputs = ", ".join(f"{k}={v if isinstance(v, str) else f'[{len(v)} artifacts]'}" for k, v in inv.inputs.items())
    return f"skill {inv.node.skill.name!r} failed on ({inputs}): {type(exc).__name__}: {exc}{where}"


PARENT_POLL_S = 0.5


def exit_with_parent(parent_pid: int) -> None:
    """Pool worker initializer: exit as soon as the driver is gone, however it died. A worker
    holds both ends of its task queue, so it never sees end-of-file when the driver is killed
    and would otherwise wait for work forever."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _worker_execute(skill_name: str, params: dict[str, Any], run_key: str, store_root: str,
                    payload: dict[str, Any], input_ids: dict[str, Any]) -> list[tuple[str, dict, str, dict]]:
    """Runs one invocation in a worker process; only blobs are written there, never the DB."""
    from forge.skills import discover

    spec = discover().get(skill_name)
    contents = {
        k: ([content_type(t).model_validate(c) for t, c in v] if isinstance(v, list)
            else content_type(v[0]).model_validate(v[1]))
        for k, v in payload.items()
    }
    ctx = SkillContext(spec, params, run_key, BlobStore(store_root), input_ids)
    outputs = _normalize_outputs(spec, spec.fn(ctx, **contents))
    return [(o.content.TYPE, o.content.model_dump(mode="json"), o.key, o.metadata) for o in outputs]
