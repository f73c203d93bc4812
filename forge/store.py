"""The store: one DuckDB file per store folder, with content-addressed blobs beside it.

Layout of a store folder::

    forge.duckdb        artifacts, edges, skill runs, verifications, gate decisions, builds
    blobs/ab/<sha256>   PNG media and HDF5 arrays, addressed by the hash of their bytes

The DuckDB file is the single source of truth. Writes go in bulk (Arrow tables), one
transaction per batch, so a build killed at any point leaves a consistent store.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

import duckdb
import pyarrow as pa

from forge import ENGINE_FORMAT_VERSION
from forge.errors import StoreBusyError, StoreError
from forge.blobs import BlobStore, StoreSnapshot
from forge.database import SCHEMA, damaged_store, open_database

DB_NAME = "forge.duckdb"
RELEASED_CACHE = "64MB"  # what DuckDB may keep while releasing its cache (see Store.release_memory)


_COLUMNS: dict[str, list[str]] = {
    "artifacts": ["id", "type", "run_key", "skill", "output_key", "content", "metadata", "status",
                  "contract_version", "created_at"],
    "edges": ["parent", "child", "role"],
    "skill_runs": ["run_key", "skill", "stage", "code_version", "module_version", "data_files", "params",
                   "inputs", "outputs", "started_at", "ended_at", "status", "error", "build_id", "fault_tag", "blobs",
                   "seed_key"],
    "verifications": ["artifact_id", "requirement_id", "contract_version", "verification", "severity",
                      "passed", "backend", "diagnostics", "checked_at"],
    "gate_decisions": ["build_id", "gate", "subject_id", "subject_type", "template", "decision", "details",
                       "decided_at"],
    "build_runs": ["build_id", "run_key", "executed"],
    "diagnoses": ["build_id", "round", "artifact_id", "artifact_type", "requirement", "category", "cause", "producer",
                  "template", "operator", "attempt", "root", "grp", "detail", "diagnosed_at", "scope"],
    "repairs": ["build_id", "round", "operator", "violated", "priors", "new", "rebuilt", "status", "error",
                "seconds", "repaired_at"],
}


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


@dataclass
class StoredArtifact:
    id: str
    type: str
    run_key: str
    skill: str
    content: dict[str, Any]
    status: str
    contract_version: str | None


@dataclass
class Batch:
    """Rows collected for one transaction."""

    rows: dict[str, list[tuple]] = field(default_factory=lambda: {t: [] for t in _COLUMNS})
    replace_artifacts: set[str] = field(default_factory=set)
    replace_runs: set[str] = field(default_factory=set)
    # Verdicts changed on stored artifacts: id -> (status, contract version); their old
    # verification rows are dropped and the new ones come in ``rows``.
    verdicts: dict[str, tuple[str, str]] = field(default_factory=dict)

    def add(self, table: str, row: tuple) -> None:
        self.rows[table].append(row)

    def __len__(self) -> int:
        return sum(len(v) for v in self.rows.values())


class Store(BlobStore):
    """A forge store folder. Open one per process; DuckDB allows a single writer."""

    def __init__(self, root: str | Path, *, read_only: bool = False, wait_s: float = 0.0) -> None:
        """``wait_s``: how long to wait for another process (a reader finishing) to release the store."""
        self.root = Path(root)
        self.read_only = read_only
        if read_only and not (self.root / DB_NAME).exists():
            raise StoreError(f"{self.root}: no forge store here (missing {DB_NAME}); run `forge build` first")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            (self.root / "blobs").mkdir(exist_ok=True)
        except PermissionError:
            raise StoreError(f"{self.root}: cannot create the store folder (permission denied)") from None
        except OSError as exc:
            raise StoreError(f"{self.root}: cannot create the store folder ({exc.strerror or exc})") from None
        self.written, self._intact = [], set()
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.con = open_database(self.root / DB_NAME, read_only)
                break
            except StoreBusyError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.25)
        if not read_only:
            try:
                self.con.execute(SCHEMA)
                self._check_format()
            except duckdb.Error as exc:
                self.con.close()
                raise damaged_store(self.root / DB_NAME, exc) from None

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        if not self.read_only:  # closing writes the last changes into the file: room for that
            with contextlib.suppress(duckdb.Error):  # a connection already closed, or broken
                self.release_memory()
        self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_format(self) -> None:
        row = self.one("SELECT value FROM meta WHERE key = 'engine_format'")
        if row is None:
            self.con.execute("INSERT INTO meta VALUES ('engine_format', ?)", [ENGINE_FORMAT_VERSION])
        elif row[0] != ENGINE_FORMAT_VERSION:
            # Artifact ids include the engine format, so old rows are simply never matched again.
            self.con.execute("UPDATE meta SET value = ? WHERE key = 'engine_format'", [ENGINE_FORMAT_VERSION])

    # -- bulk writes ----------------------------------------------------------------------

    def write(self, batch: Batch) -> None:
        """Write one batch in a single transaction."""
        if not len(batch) and not batch.replace_artifacts and not batch.verdicts:
            return
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            if batch.replace_artifacts:
                ids = pa.table({"id": sorted(batch.replace_artifacts)})
                con.register("_replace_ids", ids)
                con.execute("DELETE FROM artifacts WHERE id IN (SELECT id FROM _replace_ids)")
                con.execute("DELETE FROM verifications WHERE artifact_id IN (SELECT id FROM _replace_ids)")
                con.execute("DELETE FROM edges WHERE child IN (SELECT id FROM _replace_ids)")
                con.unregister("_replace_ids")
            if batch.replace_runs:
                keys = pa.table({"k": sorted(batch.replace_runs)})
                con.register("_replace_runs", keys)
                con.execute("DELETE FROM skill_runs WHERE run_key IN (SELECT k FROM _replace_runs)")
                con.unregister("_replace_runs")
            if batch.verdicts:
                ids = sorted(batch.verdicts)
                con.register("_verdicts", pa.table({"id": ids, "status": [batch.verdicts[i][0] for i in ids],
                                                    "cv": [batch.verdicts[i][1] for i in ids]}))
                con.execute("DELETE FROM verifications WHERE artifact_id IN (SELECT id FROM _verdicts)")
                con.execute("UPDATE artifacts SET status = v.status, contract_version = v.cv FROM _verdicts v "
                            "WHERE artifacts.id = v.id")
                con.unregister("_verdicts")
            for table, rows in batch.rows.items():
                if rows:
                    self._insert(table, rows)
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise

    def _insert(self, table: str, rows: list[tuple]) -> None:
        cols = _COLUMNS[table]
        data = pa.table({c: [r[i] for r in rows] for i, c in enumerate(cols)})
        self.con.register("_rows", data)
        self.con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(cols)} FROM _rows")
        self.con.unregister("_rows")

    def execute(self, sql: str, params: list[Any] | None = None) -> duckdb.DuckDBPyConnection:
        return self.con.execute(sql, params or [])

    def release_memory(self) -> None:
        """Hand back the table blocks DuckDB keeps after reading them; they are read from the file
        again when needed. DuckDB keeps them up to its memory limit (most of the machine's memory):
        200 MB at 10,000 items by the end of a build. A build hands them back where it needs the
        room more (the assessment, the final write at close) and keeps them elsewhere: reading
        them again costs a stage that queries the store throughout about a second. Lowering the
        limit evicts them; the limit then returns to DuckDB's default (the store sets none; the
        limit it reports is rounded, so it cannot be set back from that)."""
        try:
            self.con.execute(f"SET memory_limit = '{RELEASED_CACHE}'")
        except duckdb.Error:
            pass  # more than that is in use (pinned): nothing is lost by keeping it
        finally:
            self.con.execute("RESET memory_limit")

    def one(self, sql: str, params: list[Any] | None = None) -> tuple | None:
        """The first row, reading the result to its end (DuckDB wants results finished)."""
        rows = self.con.execute(sql, params or []).fetchall()
        return rows[0] if rows else None

    # -- reads ----------------------------------------------------------------------------

    def _ids_query(self, sql: str, ids: Iterable[str]) -> list[tuple]:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        self.con.register("_ids", pa.table({"id": ids}))
        try:
            return self.con.execute(sql).fetchall()
        finally:
            self.con.unregister("_ids")

    ARTIFACT_COLUMNS = ("type", "run_key", "skill", "output_key", "content", "metadata", "status",
                        "contract_version", "created_at")

    def artifact_columns(self, ids: Iterable[str], *names: str) -> dict[str, tuple]:
        """Chosen columns of the ``artifacts`` rows with these ids (``id -> (values...)``)."""
        bad = [n for n in names if n not in self.ARTIFACT_COLUMNS]
        if bad or not names:
            raise StoreError(f"artifact columns are {list(self.ARTIFACT_COLUMNS)}, not {bad or 'none'}")
        rows = self._ids_query(f"SELECT id, {', '.join(names)} FROM artifacts WHERE id IN (SELECT id FROM _ids)", ids)
        return {r[0]: tuple(r[1:]) for r in rows}

    def artifact_column(self, ids: Iterable[str], name: str) -> dict[str, Any]:
        """One column of the ``artifacts`` rows with these ids (``id -> value``)."""
        return {aid: values[0] for aid, values in self.artifact_columns(ids, name).items()}

    def blocking_failures(self, ids: Iterable[str]) -> list[tuple[str, str, str | None]]:
        """(artifact id, requirement id, diagnostics) of every failed blocking requirement of these
        artifacts, deterministic checks before model-assisted ones, then by requirement."""
        return self._ids_query(
            "SELECT artifact_id, requirement_id, diagnostics FROM verifications WHERE artifact_id IN (SELECT id FROM _ids) "
            "AND NOT passed AND severity = 'blocking' ORDER BY artifact_id, verification = 'model-assisted', requirement_id",
            ids)

    def runs_by_key(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        rows = self._ids_query(
            "SELECT run_key, skill, status, outputs, code_version, fault_tag FROM skill_runs "
            "WHERE run_key IN (SELECT id FROM _ids) AND status = 'ok'",
            keys,
        )
        return {r[0]: {"skill": r[1], "status": r[2], "outputs": json.loads(r[3]), "code_version": r[4],
                       "fault_tag": r[5]} for r in rows}

    def artifacts(self, ids: Iterable[str]) -> dict[str, StoredArtifact]:
        rows = self._ids_query(
            "SELECT id, type, run_key, skill, content, status, contract_version FROM artifacts "
            "WHERE id IN (SELECT id FROM _ids)",
            ids,
        )
        return {
            r[0]: StoredArtifact(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6]) for r in rows
        }

    def memo_get(self, keys: Iterable[str]) -> dict[str, Any]:
        """Stored results of pure gate computations (keyed by a digest of their inputs)."""
        rows = self._ids_query("SELECT key, value FROM gate_memo WHERE key IN (SELECT id FROM _ids)", keys)
        return {k: json.loads(v) for k, v in rows}

    def memo_put(self, entries: dict[str, Any]) -> None:
        if entries:
            known = set(self.memo_get(entries))
            rows = [(k, json.dumps(v, sort_keys=True)) for k, v in entries.items() if k not in known]
            if rows:
                self.con.executemany("INSERT INTO gate_memo VALUES (?, ?)", rows)

    def fields(self, ids: Iterable[str], paths: dict[str, str]) -> dict[str, dict[str, str | None]]:
        """Selected JSON fields of artifacts' content (``name -> JSON path``), without loading them."""
        # One extraction with a list of paths parses each document once (a call per path parses it
        # once per path: several times slower over thousands of bindings).
        listed = "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths.values()) + "]"
        rows = self._ids_query(f"SELECT id, json_extract_string(content, {listed}) FROM artifacts "
                               "WHERE id IN (SELECT id FROM _ids)", ids)
        return {r[0]: dict(zip(paths, r[1])) for r in rows}

    def artifact_statuses(self, ids: Iterable[str]) -> dict[str, tuple[str, str, str | None]]:
        rows = self._ids_query(
            "SELECT id, type, status, contract_version FROM artifacts WHERE id IN (SELECT id FROM _ids)", ids
        )
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    def reject(self, ids: Iterable[str]) -> None:
        """Mark artifacts rejected (a person found them wrong): the next build repairs them."""
        self._ids_query("UPDATE artifacts SET status = 'rejected' WHERE id IN (SELECT id FROM _ids) RETURNING id", ids)

    def human_rejected(self, ids: Iterable[str]) -> set[str]:
        """Artifacts whose latest human verdict failed them."""
        rows = self._ids_query(
            "SELECT artifact_id, passed FROM verifications WHERE verification = 'human' AND artifact_id IN "
            "(SELECT id FROM _ids) ORDER BY checked_at", ids)
        latest = {aid: ok for aid, ok in rows}
        return {aid for aid, ok in latest.items() if not ok}

    def human_verdicts(self) -> list[dict[str, Any]]:
        """Every human verification record: item, verdict, reviewer, time."""
        out = []
        for aid, diag in self.execute("SELECT artifact_id, diagnostics FROM verifications WHERE verification = "
                                      "'human' ORDER BY checked_at").fetchall():
            d = json.loads(diag or "{}")
            out.append({"artifact_id": aid, "verdict": d.get("verdict"), "reviewer": d.get("reviewer"),
                        "reviewed_at": d.get("reviewed_at"), "note": d.get("note", ""), "trivial": d.get("trivial")})
        return out

    def snapshot(self, ids: Iterable[str]) -> "StoreSnapshot":
        """These artifacts and their whole lineage, read now, with the store's blobs: a reader
        works from it after closing the database, so it never holds the store a build needs."""
        ids = set(ids)
        wanted = ids | self.ancestors(ids)
        return StoreSnapshot(self.root, self.artifact_column(wanted, "content"))

    def find_artifacts(self, prefix: str) -> list[tuple[str, str]]:
        return self.con.execute(
            "SELECT id, type FROM artifacts WHERE starts_with(id, ?) ORDER BY id", [prefix]
        ).fetchall()

    def parents(self, ids: Iterable[str]) -> list[tuple[str, str, str]]:
        return self._ids_query("SELECT parent, child, role FROM edges WHERE child IN (SELECT id FROM _ids)", ids)

    def children(self, ids: Iterable[str]) -> list[tuple[str, str, str]]:
        return self._ids_query("SELECT parent, child, role FROM edges WHERE parent IN (SELECT id FROM _ids)", ids)

    def descendants(self, roots: Iterable[str]) -> set[str]:
        seen: set[str] = set()
        frontier = set(roots)
        while frontier:
            kids = {c for _, c, _ in self.children(frontier)} - seen
            seen |= kids
            frontier = kids
        return seen

    def ancestors(self, roots: Iterable[str]) -> set[str]:
        seen: set[str] = set()
        frontier = set(roots)
        while frontier:
            ups = {p for p, _, _ in self.parents(frontier)} - seen
            seen |= ups
            frontier = ups
        return seen

    def verifications(self, ids: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
        rows = self._ids_query(
            "SELECT artifact_id, requirement_id, contract_version, verification, severity, passed, backend, "
            "diagnostics FROM verifications WHERE artifact_id IN (SELECT id FROM _ids) "
            "ORDER BY artifact_id, requirement_id",
            ids,
        )
        out: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            out.setdefault(r[0], []).append({
                "requirement": r[1], "contract_version": r[2], "verification": r[3], "severity": r[4],
                "passed": r[5], "backend": r[6], "diagnostics": r[7],
            })
        return out

    def runs_for_artifacts(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        rows = self._ids_query(
            "SELECT a.id, r.run_key, r.skill, r.stage, r.code_version, r.module_version, r.data_files, r.params, "
            "r.inputs, r.started_at, r.ended_at, r.status FROM artifacts a JOIN skill_runs r ON a.run_key = r.run_key "
            "WHERE a.id IN (SELECT id FROM _ids)",
            ids,
        )
        return {
            r[0]: {
                "run_key": r[1], "skill": r[2], "stage": r[3], "code_version": r[4], "module_version": r[5],
                "data_files": json.loads(r[6]), "params": json.loads(r[7]), "inputs": json.loads(r[8]),
                "started_at": str(r[9]), "ended_at": str(r[10]), "status": r[11],
            }
            for r in rows
        }

    def gate_decisions_for(self, ids: Iterable[str], build_id: str | None = None) -> dict[str, list[dict[str, Any]]]:
        build_id = build_id or self.last_build_id()
        rows = self._ids_query(
            f"SELECT subject_id, gate, decision, details, template FROM gate_decisions "
            f"WHERE subject_id IN (SELECT id FROM _ids) AND build_id = '{build_id}' ORDER BY gate",
            ids,
        ) if build_id else []
        out: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            out.setdefault(r[0], []).append({"gate": r[1], "decision": r[2], "details": json.loads(r[3]), "template": r[4]})
        return out

    # -- builds ---------------------------------------------------------------------------

    def begin_build(self, build_id: str, intent_path: str, intent_hash: str) -> None:
        self.con.execute(
            "INSERT INTO builds VALUES (?, ?, ?, ?, NULL, 'running', NULL)", [build_id, intent_path, intent_hash, now()]
        )

    def interrupted_builds(self) -> list[str]:
        """Builds recorded as running. Called by the writer, which holds the store's lock: no
        other build can be running, so these ended without finishing (killed, crashed)."""
        return [r[0] for r in self.con.execute("SELECT build_id FROM builds WHERE status = 'running'").fetchall()]

    def mark_interrupted(self, build_id: str) -> None:
        self.con.execute("UPDATE builds SET status = 'failed', ended_at = coalesce(ended_at, ?), summary = ? "
                         "WHERE build_id = ?", [now(), json.dumps({"error": "interrupted: the build process ended "
                                                                   "before it finished"}), build_id])

    def end_build(self, build_id: str, status: str, summary: dict[str, Any]) -> None:
        self.con.execute(
            "UPDATE builds SET ended_at = ?, status = ?, summary = ? WHERE build_id = ?",
            [now(), status, json.dumps(summary), build_id],
        )

    def last_build_id(self, *, completed: bool = True) -> str | None:
        where = "WHERE status = 'ok'" if completed else ""
        row = self.one(f"SELECT build_id FROM builds {where} ORDER BY started_at DESC LIMIT 1")
        return row[0] if row else None

    def build_run_keys(self, build_id: str) -> list[str]:
        return [r[0] for r in self.con.execute("SELECT run_key FROM build_runs WHERE build_id = ?", [build_id]).fetchall()]

    def iter_table(self, sql: str, params: list[Any] | None = None) -> Iterator[tuple]:
        yield from self.con.execute(sql, params or []).fetchall()


