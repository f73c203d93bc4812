"""The model layer's tables in the forge store, and their bulk insert."""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from forge.store import Store

COLUMNS: dict[str, tuple[str, ...]] = {
    # One row per cached answer: its key, who asked it for what, the model id the server reported.
    "model_responses": ("key", "role", "stage", "artifact", "model", "base_url", "model_reported", "prompt_hash",
                        "output_mode", "content", "output", "tokens_in", "tokens_out", "seconds", "requests",
                        "build_id", "created_at"),
    # One row per question a role was asked: answered by a model, the cache, or a built-in backend.
    "model_usage": ("build_id", "role", "stage", "artifact", "source", "model", "requests", "tokens_in",
                    "tokens_out", "seconds", "error", "asked_at"),
}

_DDL = """
CREATE TABLE IF NOT EXISTS model_responses (
    key VARCHAR, role VARCHAR, stage VARCHAR, artifact VARCHAR, model VARCHAR, base_url VARCHAR,
    model_reported VARCHAR, prompt_hash VARCHAR, output_mode VARCHAR, content VARCHAR, output VARCHAR,
    tokens_in BIGINT, tokens_out BIGINT, seconds DOUBLE, requests INTEGER, build_id VARCHAR,
    created_at TIMESTAMP);
CREATE TABLE IF NOT EXISTS model_usage (
    build_id VARCHAR, role VARCHAR, stage VARCHAR, artifact VARCHAR, source VARCHAR, model VARCHAR,
    requests INTEGER, tokens_in BIGINT, tokens_out BIGINT, seconds DOUBLE, error VARCHAR, asked_at TIMESTAMP);
"""


def ensure_tables(store: Store) -> None:
    if not store.read_only:
        store.execute(_DDL)


def has_table(store: Store, table: str) -> bool:
    return store.one("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table])[0] > 0


def insert(store: Store, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert rows in one statement (an Arrow table), not a row at a time."""
    if not rows:
        return
    cols = COLUMNS[table]
    view = f"_{table}_rows"
    store.con.register(view, pa.table({c: [r[i] for r in rows] for i, c in enumerate(cols)}))
    try:
        store.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(cols)} FROM {view}")
    finally:
        store.con.unregister(view)
