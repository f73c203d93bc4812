"""One resumable evaluation run, whichever track's package it is: the store its rows go to (the
package's own ``.eval`` folder unless another is given), a run id, a model client made on first
use and closed with the run, and the report written beside the rows."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from forge.store import Store

EVAL_DIR = ".eval"  # beside the released files of a package; never listed in its manifest


@dataclass
class EvalOptions:
    store_dir: Path | None = None  # default: PACKAGE/.eval
    limit: int | None = None  # only the first N items (in items.jsonl order)
    batch: int | None = None  # items per batch (default: 4 x the role's concurrency)
    progress: Callable[[str, int, int], None] | None = None  # (model, done, total)
    media: bool = True  # attach the items' images (False: the text alone, for a text-only model)


@dataclass
class EvalSession:
    store: Store
    run_id: str
    client: Any = None  # the model client: the caller's, or one made by model_client()
    _own_client: bool = field(default=False, repr=False)

    def model_client(self) -> Any:
        """The run's model client, made on first use (answers are cached in the run's store)."""
        if self.client is None:
            from forge.models import ModelClient

            self.client = ModelClient(self.store, build_id=self.run_id, seed=0)
            self._own_client = True
        return self.client


def eval_dir(package: Path, store_dir: Path | None) -> Path:
    return Path(store_dir) if store_dir is not None else Path(package) / EVAL_DIR


@contextmanager
def evaluation_session(package: Path, options: EvalOptions, store: Store | None = None,
                       client: Any = None) -> Iterator[EvalSession]:
    """The run's store (opened here unless given) and client; both closed when the run ends."""
    own_store = store is None
    session = EvalSession(store or Store(eval_dir(package, options.store_dir), wait_s=10.0),
                          f"eval-{uuid.uuid4().hex[:12]}", client)
    try:
        yield session
    finally:
        if session._own_client:
            session.client.close()
        if own_store:
            session.store.close()


def report_path(package: Any, spec: Any, store_dir: Path | None) -> Path:
    """PACKAGE/.eval/<model>.json; with ``--store DIR``, DIR/reports/<package>/<model>.json."""
    if store_dir is None:
        return package.path / EVAL_DIR / f"{spec.slug}.json"
    return Path(store_dir) / "reports" / package.label / f"{spec.slug}.json"


def write_report(report: dict[str, Any], package: Any, spec: Any, options: EvalOptions) -> dict[str, Any]:
    """Write the report (atomically) where ``report_path`` says, and name the path in it."""
    path = report_path(package, spec, options.store_dir)
    report["report_path"] = str(path)
    write_json(path, report)
    return report


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
