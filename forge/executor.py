"""Running skills for one build: find stored runs, hand the rest to a backend, record what
comes back.

The executor is the driver: it keeps the loaded artifacts, plans invocations (identity in
``forge.invocation``), reuses every run already stored with status ``ok``, lets a backend
(``forge.backends``: inline, or a process pool whose workers exit with their driver) execute
the others, and has the recorder (``forge.recorder``) check each output against its contract
and write it in bulk. Only ``verified`` artifacts are handed downstream.
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Callable, Iterable

from forge.artifact_types import ArtifactContent, content_type
from forge.backends import Backend, InlineBackend, ProcessPoolBackend, run_inline
from forge.contracts import CheckResult, ContractBook
from forge.errors import SkillExecutionError
from forge.invocation import Invocation, InvocationMaker, WorkflowNode, make_invocation
from forge.recorder import NodeResult, Recorder, verification_row
from forge.store import Batch, Store

__all__ = ["Executor", "Invocation", "NodeResult", "WorkflowNode", "verification_row"]

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
        executor: str = "local",
    ) -> None:
        self.store = store
        self.build_id = build_id
        self.force = force
        self.workers = max(1, workers)
        self.progress = progress
        self._cache: dict[str, ArtifactContent] = {}
        self.recorder = Recorder(store, contracts, build_id, self, faults=faults, checks_enabled=checks_enabled)
        self.inline: Backend = InlineBackend(store, self.load)
        self.pool: Backend | None = None  # started on first parallel work
        self.executor_kind = executor  # "local" (a process pool), "ray" or "ray://ADDRESS"
        self.blobs_recreated: list[str] = []  # damaged or missing blobs made again from their runs

    # The recorder holds what the contracts and fault plan need; these keep the executor's surface.
    @property
    def contracts(self) -> ContractBook:
        return self.recorder.contracts

    @property
    def faults(self) -> Any:
        return self.recorder.faults

    @property
    def checks_enabled(self) -> bool:
        return self.recorder.checks_enabled

    @checks_enabled.setter
    def checks_enabled(self, value: bool) -> None:
        self.recorder.checks_enabled = value

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None

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

    def holds(self, artifact_id: str) -> bool:
        """Whether the artifact is in the driver's memory (a load reads no store)."""
        return artifact_id in self._cache

    def forget(self, ids: Iterable[str] | None = None) -> None:
        """Drop loaded artifacts, ``ids`` or all of them (a later load reads the store again): a
        step over the whole package needs the memory more than the cache does."""
        if ids is None:
            self._cache.clear()
        else:
            for aid in ids:
                self._cache.pop(aid, None)

    def remember(self, aid: str, content: ArtifactContent) -> None:
        """An artifact just produced, as a later build would load it from the store."""
        self._cache[aid] = content

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
        make = InvocationMaker(node)
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
                out.append(make(inputs, {**node.params, **extra}, repair=repair))
        return out

    def invocation(self, node: WorkflowNode, inputs: dict[str, Any], params: dict[str, Any], *,
                   repair: dict[str, Any] | None = None, module_version: str | None = None,
                   seed_key: str | None = None) -> Invocation:
        """One invocation of ``node`` on explicit inputs (the repair loop builds its own)."""
        return make_invocation(node, inputs, params, repair=repair, module_version=module_version, seed_key=seed_key)

    # -- running --------------------------------------------------------------------------

    def run(self, invocations: list[Invocation], *, label: str | None = None) -> NodeResult:
        result = NodeResult()
        t0 = time.perf_counter()
        if not invocations:
            return result
        rec = self.recorder
        # A forced invocation runs once per build, even when the loop revisits its node.
        forced = {inv.run_key for inv in invocations
                  if self.force and inv.run_key not in rec.executed and self.force(inv)}
        memo = self.store.runs_by_key(inv.run_key for inv in invocations if inv.run_key not in forced)
        # A run made under another fault plan (or none) is not this run: execute it again.
        tag = rec.fault_tag(invocations[0].node.skill.name)
        stale = {k for k, r in memo.items() if (r.get("fault_tag") or "") != tag}
        forced |= stale
        memo = {k: r for k, r in memo.items() if k not in stale}
        # An invocation that already failed in this build is not retried when the loop comes back.
        todo = [inv for inv in invocations if inv.run_key not in memo and inv.run_key not in rec.executed]
        done = [inv for inv in invocations if inv.run_key in memo]
        task = self.progress.task(label or invocations[0].node.role, total=len(invocations)) if self.progress else None

        rec.reuse(done, memo, result)
        if task:
            task.advance(len(done))

        batch = Batch()
        last_flush = time.perf_counter()
        # One bulk read for all inputs instead of a query per invocation.
        self.preload([a for inv in todo for a in inv.input_ids])
        todo = self._by_affinity(todo)
        for done in self._backend_for(todo).execute(todo):
            if done.blob_error is not None and self.recreate_blob(done.blob_error):
                done = run_inline(done.inv, self.store, self.load)  # once, with the blob made again
            rec.record(done, forced, batch, result)
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

    def _by_affinity(self, todo: list[Invocation]) -> list[Invocation]:
        """Invocations sharing an affinity key next to each other (stable otherwise): results are
        recorded by run key, so the order changes no output."""
        spec = todo[0].node.skill if todo else None
        if spec is None or spec.affinity is None:
            return todo

        def key(inv: Invocation) -> str:
            return spec.affinity(**{k: ([self.load(a) for a in v] if isinstance(v, list) else self.load(v))
                                    for k, v in inv.inputs.items()})

        keys = {inv.run_key: key(inv) for inv in todo}
        return sorted(todo, key=lambda inv: keys[inv.run_key])

    def recreate_blob(self, digest: str) -> bool:
        """Make a damaged or missing blob again by re-running the skill run that wrote it."""
        from forge.integrity import recreate_blob

        ok = recreate_blob(self.store, digest, self.load)
        if ok:
            self.blobs_recreated.append(digest)
        return ok

    def _backend_for(self, todo: list[Invocation]) -> Backend:
        """Worker processes for skills that declare themselves parallel, when there is more than
        one invocation and more than one worker, and enough invocations to be worth starting the
        workers (the skill's ``pool_from``) unless they are running; the driver process otherwise."""
        spec = todo[0].node.skill if todo else None
        local = not self.executor_kind.startswith("ray")
        if spec is None or not spec.parallel or (local and (self.workers <= 1 or len(todo) <= 1)):
            return self.inline
        if local and self.pool is None and len(todo) < spec.pool_from:
            return self.inline
        if self.pool is None:
            if self.executor_kind.startswith("ray"):
                from forge.ray_backend import RayBackend

                address = self.executor_kind if "://" in self.executor_kind else None
                self.pool = RayBackend(str(self.store.root), self.workers, self.load, address)
            else:
                self.pool = ProcessPoolBackend(str(self.store.root), self.workers, self.load)
        return self.pool

    def check(self, aid: str, content: ArtifactContent) -> list[CheckResult]:
        """Run the artifact's contract (nothing, when contracts are ablated)."""
        return self.recorder.check(aid, content)
