"""The store hands back the table blocks DuckDB caches, and stays as it was otherwise."""

from __future__ import annotations

from pathlib import Path

from forge.store import Store


def _cached_mb(store: Store) -> float:
    row = store.one("SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag = 'BASE_TABLE'")
    return float(row[0]) / 2**20


def test_release_memory_hands_back_cached_blocks_and_keeps_the_limit(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    try:
        # Text that compresses little (about 160 MB in the file), written to the file and read back.
        store.execute("CREATE TABLE filler AS SELECT i, repeat(md5(i::VARCHAR), 6) AS text FROM range(1500000) t(i)")
        store.execute("CHECKPOINT")
        expected = store.one("SELECT count(*), sum(length(text)) FROM filler")
        limit = store.one("SELECT current_setting('memory_limit')")[0]
        before = _cached_mb(store)
        assert before > 120, before
        store.release_memory()
        after = _cached_mb(store)
        assert after <= 64 and after < before / 2, (before, after)
        assert store.one("SELECT current_setting('memory_limit')")[0] == limit
        assert store.one("SELECT count(*), sum(length(text)) FROM filler") == expected  # read again from the file
    finally:
        store.close()
