"""Backends run invocations and hand back their outputs; they never touch the database.

A backend gets invocations whose inputs the driver has loaded and yields, per invocation,
``(invocation, outputs, error, started, ended)``. Contracts and store writes stay with the
driver (see ``forge.recorder``), so a backend only decides where skill code runs: in the driver
process, or in worker processes that exit when their driver dies, however it dies.
"""

from __future__ import annotations

import itertools
import os
import time
import traceback
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol

from forge.artifact_types import ArtifactContent, content_type
from forge.errors import SkillExecutionError
from forge.invocation import Invocation
from forge.skills import Output, SkillContext, SkillSpec
from forge.store import now
from forge.errors import BlobError
from forge.blobs import BlobStore

IN_FLIGHT_PER_WORKER = 32  # invocations handed to the pool ahead of their results, per worker


@dataclass
class Executed:
    """What running one invocation gave: its outputs or its error, when it ran, the blobs it
    wrote and, when it failed on a missing or damaged blob, that blob's digest."""

    inv: Invocation
    outputs: list[Output]
    error: str | None
    started: Any
    ended: Any
    blobs: list[str] = field(default_factory=list)
    blob_error: str | None = None


class Backend(Protocol):
    name: str

    def execute(self, todo: list[Invocation]) -> Iterator[Executed]: ...

    def close(self) -> None: ...


class InlineBackend:
    """Runs invocations one after another in the driver process."""

    name = "inline"

    def __init__(self, store: Any, load: Callable[[str], ArtifactContent]) -> None:
        self.store = store
        self.load = load

    def execute(self, todo: list[Invocation]) -> Iterator[Executed]:
        for inv in todo:
            yield run_inline(inv, self.store, self.load)

    def close(self) -> None:
        pass


class ProcessPoolBackend:
    """Runs invocations in spawned worker processes; workers write blobs, never the database."""

    name = "process-pool"

    def __init__(self, store_root: str, workers: int, load: Callable[[str], ArtifactContent]) -> None:
        self.store_root = store_root
        self.workers = workers
        self.load = load
        self._pool: ProcessPoolExecutor | None = None

    def execute(self, todo: list[Invocation]) -> Iterator[Executed]:
        if self._pool is None:
            import multiprocessing

            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=exit_with_parent, initargs=(os.getpid(),))
        # A window of invocations in flight, not the whole batch: each waiting one holds its
        # inputs' content (eleven thousand items' bindings would hold a hundred megabytes).
        waiting = iter(todo)
        in_flight: deque[tuple[Invocation, Any, Future]] = deque()
        for inv in itertools.islice(waiting, max(2, self.workers * IN_FLIGHT_PER_WORKER)):
            in_flight.append(self._submit(inv))
        while in_flight:
            inv, started, fut = in_flight.popleft()
            following = next(waiting, None)
            if following is not None:
                in_flight.append(self._submit(following))
            try:
                raw, blobs = fut.result()
                outputs = [Output(content_type(t).model_validate(c), k, m) for t, c, k, m in raw]
                yield Executed(inv, outputs, None, started, now(), blobs)
            except Exception as exc:
                yield Executed(inv, [], describe_error(inv, exc), started, now(),
                               blob_error=exc.digest if isinstance(exc, BlobError) else None)

    def _submit(self, inv: Invocation) -> tuple[Invocation, Any, Future]:
        assert self._pool is not None
        payload = {k: ([self._typed(a) for a in v] if isinstance(v, list) else self._typed(v))
                   for k, v in inv.inputs.items()}
        return inv, now(), self._pool.submit(worker_execute, inv.node.skill.name, inv.params,
                                             inv.seed_key or inv.run_key, self.store_root, payload, inv.inputs)

    def _typed(self, aid: str) -> tuple[str, dict[str, Any]]:
        content = self.load(aid)
        return content.TYPE, content.model_dump(mode="json")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


def run_inline(inv: Invocation, store: Any, load: Callable[[str], ArtifactContent]) -> Executed:
    """Run one invocation in this process."""
    started = now()
    ctx = SkillContext(inv.node.skill, inv.params, inv.seed_key or inv.run_key, store, inv.inputs, loader=load)
    try:
        contents = {k: ([load(a) for a in v] if isinstance(v, list) else load(v)) for k, v in inv.inputs.items()}
        outputs = normalize_outputs(inv.node.skill, inv.node.skill.fn(ctx, **contents))
        return Executed(inv, outputs, None, started, now(), ctx.blobs)
    except Exception as exc:
        return Executed(inv, [], describe_error(inv, exc), started, now(),
                        blob_error=exc.digest if isinstance(exc, BlobError) else None)


def normalize_outputs(spec: SkillSpec, raw: Any) -> list[Output]:
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


def describe_error(inv: Invocation, exc: Exception) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    return describe_failure(inv, type(exc).__name__, str(exc), where)


def describe_failure(inv: Invocation, kind: str, message: str, where: str = "") -> str:
    inputs = ", ".join(f"{k}={v if isinstance(v, str) else f'[{len(v)} artifacts]'}" for k, v in inv.inputs.items())
    return f"skill {inv.node.skill.name!r} failed on ({inputs}): {kind}: {message}{where}"


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


def worker_execute(skill_name: str, params: dict[str, Any], run_key: str, store_root: str,
                   payload: dict[str, Any], input_ids: dict[str, Any]) -> tuple[list[tuple[str, dict, str, dict]], list[str]]:
    """Runs one invocation in a worker process; only blobs are written there, never the DB."""
    from forge.skills import discover

    spec = discover().get(skill_name)
    contents = {
        k: ([content_type(t).model_validate(c) for t, c in v] if isinstance(v, list)
            else content_type(v[0]).model_validate(v[1]))
        for k, v in payload.items()
    }
    ctx = SkillContext(spec, params, run_key, BlobStore(store_root), input_ids)
    outputs = normalize_outputs(spec, spec.fn(ctx, **contents))
    return [(o.content.TYPE, o.content.model_dump(mode="json"), o.key, o.metadata) for o in outputs], ctx.blobs
