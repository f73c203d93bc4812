"""The ``eval_responses`` table: one row per (package, model, item), written in bulk.

A row is written once its response is scored; a run that stops (a crash, an unreachable
server) leaves the rows of the items it finished, and the next run asks only the others. The
row is keyed by the package digest (of its manifest, which lists every file's checksum), the
model key (endpoint, model and sampling parameters, or the built-in solver and its argument)
and the item id.
"""

from __future__ import annotations

import json
from dataclasses import astuple, dataclass
from datetime import datetime
from typing import Any, Iterable

import pyarrow as pa

from forge.store import Store

COLUMNS = ("package", "package_digest", "model", "model_key", "model_reported", "simulated", "item_id",
           "capability", "question_type", "response", "answer", "parsed", "valid", "score", "metrics", "source",
           "seconds", "tokens_in", "tokens_out", "run_id", "answered_at")

_DDL = """
CREATE TABLE IF NOT EXISTS eval_responses (
    package VARCHAR, package_digest VARCHAR, model VARCHAR, model_key VARCHAR, model_reported VARCHAR,
    simulated BOOLEAN, item_id VARCHAR, capability VARCHAR, question_type VARCHAR, response VARCHAR,
    answer VARCHAR, parsed VARCHAR, valid BOOLEAN, score DOUBLE, metrics VARCHAR, source VARCHAR,
    seconds DOUBLE, tokens_in BIGINT, tokens_out BIGINT, run_id VARCHAR, answered_at TIMESTAMP);
"""


@dataclass(frozen=True)
class EvalRow:
    package: str  # name-version
    package_digest: str
    model: str  # the spec as given, canonical: builtin:NAME or BASE_URL@MODEL
    model_key: str
    model_reported: str  # the model id the server reported; builtin:NAME for a built-in solver
    simulated: bool  # a built-in solver's response, not a model's
    item_id: str
    capability: str | None
    question_type: str | None
    response: str | None  # the reply as received; None: the solver abstained
    answer: str | None  # the reading of it the package's scorer parsed; None when none did
    parsed: str | None  # what the scorer parsed it to, as JSON; None: invalid
    valid: bool
    score: float
    metrics: str  # the scorer's extra metrics for the item, as JSON
    source: str  # model, cache or builtin
    seconds: float
    tokens_in: int
    tokens_out: int
    run_id: str
    answered_at: datetime

    def metric_values(self) -> dict[str, Any]:
        return json.loads(self.metrics or "{}")


def ensure_table(store: Store) -> None:
    if not store.read_only:
        store.execute(_DDL)


def has_table(store: Store) -> bool:
    return store.one("SELECT count(*) FROM information_schema.tables WHERE table_name = 'eval_responses'")[0] > 0


def stored(store: Store, package_digest: str, model_key: str) -> dict[str, EvalRow]:
    """The rows already written for this package and model, by item id."""
    if not has_table(store):
        return {}
    rows = store.execute(f"SELECT {', '.join(COLUMNS)} FROM eval_responses WHERE package_digest = ? AND "
                         "model_key = ? ORDER BY answered_at", [package_digest, model_key]).fetchall()
    return {r[6]: EvalRow(*r) for r in rows}


def write(store: Store, rows: Iterable[EvalRow]) -> None:
    """Insert rows in one transaction and one statement (an Arrow table)."""
    data = [astuple(r) for r in rows]
    if not data:
        return
    table = pa.table({c: [r[i] for r in data] for i, c in enumerate(COLUMNS)})
    store.con.register("_eval_rows", table)
    store.execute("BEGIN TRANSACTION")
    try:
        store.execute("DELETE FROM eval_responses WHERE EXISTS (SELECT 1 FROM _eval_rows r WHERE "
                      "r.package_digest = eval_responses.package_digest AND r.model_key = eval_responses.model_key "
                      "AND r.item_id = eval_responses.item_id)")
        store.execute(f"INSERT INTO eval_responses ({', '.join(COLUMNS)}) SELECT {', '.join(COLUMNS)} FROM _eval_rows")
        store.execute("COMMIT")
    except Exception:
        store.execute("ROLLBACK")
        raise
    finally:
        store.con.unregister("_eval_rows")
