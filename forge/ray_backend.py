"""A backend on Ray: long-lived actors run the parallel skills (collection, rendering), each
holding its simulator between invocations (``forge.skills.held``).

``--executor ray`` starts a local cluster (``ray.init(num_cpus=N)``); ``--executor
ray://HOST:PORT`` joins a running one through Ray Client. Actors write blobs into the store
folder, so it must be one the cluster's machines share with the driver; the driver alone writes
the database. Results come back in submission order, so a build gives the same artifact ids
and the same package on Ray as on the local pool. Ray is an optional extra
(``pip install -e ".[ray]"``).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

from forge.artifact_types import ArtifactContent, content_type
from forge.backends import Executed, describe_failure
from forge.errors import PrerequisiteError
from forge.invocation import Invocation
from forge.skills import Output
from forge.store import now


def import_ray():
    try:
        import ray
    except ImportError:
        raise PrerequisiteError("the Ray executor needs the `ray` package, which is not installed here",
                                hint='pip install -e ".[ray]"') from None
    return ray


class SkillActor:
    """One Ray actor: runs invocations one at a time in its own process, keeping what skills
    hold (a simulator client) from one to the next."""

    def run(self, skill_name: str, params: dict[str, Any], seed_key: str, store_root: str,
            payload: dict[str, Any], input_ids: dict[str, Any]) -> tuple:
        from forge.backends import worker_execute
        from forge.errors import BlobError

        try:
            raw, blobs = worker_execute(skill_name, params, seed_key, store_root, payload, input_ids)
            return ("ok", raw, blobs)
        except Exception as exc:  # crosses back as data: the driver records it as the run's error
            import traceback

            tb = traceback.extract_tb(exc.__traceback__)
            where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
            return ("error", type(exc).__name__, str(exc), where, exc.digest if isinstance(exc, BlobError) else None)

    def pid(self) -> int:
        return os.getpid()


class RayBackend:
    name = "ray"

    def __init__(self, store_root: str, workers: int, load: Callable[[str], ArtifactContent],
                 address: str | None = None) -> None:
        self.store_root = os.path.abspath(store_root)
        self.workers = max(1, workers)
        self.load = load
        self.address = address
        self._actors: list[Any] = []
        self._started_cluster = False
        self._reaper = None

    def _start(self) -> None:
        ray = import_ray()
        if not ray.is_initialized():
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            # Ray runs its workers at niceness 15; here they are the build's workers, so they run
            # at the priority the local pool's do.
            os.environ.setdefault("RAY_worker_niceness", "0")
            if self.address:
                ray.init(address=self.address, log_to_driver=False, configure_logging=False)
            else:
                from forge.reaper import start_reaper

                # The cluster's processes end with the driver, however the driver ends.
                self._reaper = start_reaper()
                ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
                self._started_cluster = True
        actor = ray.remote(num_cpus=1)(SkillActor)
        self._actors = [actor.remote() for _ in range(self.workers)]

    def execute(self, todo: list[Invocation]) -> Iterator[Executed]:
        if not self._actors:
            self._start()
        ray = import_ray()
        from ray.util import ActorPool

        pool = ActorPool(self._actors)
        started = now()
        args = []
        for inv in todo:
            payload = {k: ([self._typed(a) for a in v] if isinstance(v, list) else self._typed(v))
                       for k, v in inv.inputs.items()}
            args.append((inv.node.skill.name, inv.params, inv.seed_key or inv.run_key, self.store_root, payload,
                         inv.inputs))
        results = pool.map(lambda actor, a: actor.run.remote(*a), args)
        for inv, result in zip(todo, results):
            if result[0] == "ok":
                outputs = [Output(content_type(t).model_validate(c), k, m) for t, c, k, m in result[1]]
                yield Executed(inv, outputs, None, started, now(), result[2])
            else:
                _, kind, message, where, digest = result
                yield Executed(inv, [], describe_failure(inv, kind, message, where), started, now(), blob_error=digest)
            started = now()
        del ray

    def _typed(self, aid: str) -> tuple[str, dict[str, Any]]:
        content = self.load(aid)
        return content.TYPE, content.model_dump(mode="json")

    def close(self) -> None:
        if not self._actors:
            return
        ray = import_ray()
        for actor in self._actors:
            try:
                ray.kill(actor)
            except Exception:  # already gone with its node
                pass
        self._actors = []
        if self._started_cluster:
            ray.shutdown()
            self._started_cluster = False
        if self._reaper is not None:
            import signal

            self._reaper.send_signal(signal.SIGUSR1)  # stragglers of the shut-down cluster go now
            self._reaper.wait(timeout=30)
            self._reaper = None
