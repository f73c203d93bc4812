"""The store's DuckDB database: its schema, how a connection to it is opened, and what a refused
open or write means."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from forge.errors import StoreBusyError, StoreError

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR, value VARCHAR);
CREATE TABLE IF NOT EXISTS artifacts (
    id VARCHAR, type VARCHAR, run_key VARCHAR, skill VARCHAR, output_key VARCHAR,
    content VARCHAR, metadata VARCHAR, status VARCHAR, contract_version VARCHAR,
    created_at TIMESTAMP);
CREATE TABLE IF NOT EXISTS edges (parent VARCHAR, child VARCHAR, role VARCHAR);
CREATE TABLE IF NOT EXISTS skill_runs (
    run_key VARCHAR, skill VARCHAR, stage VARCHAR, code_version VARCHAR, module_version VARCHAR,
    data_files VARCHAR, params VARCHAR, inputs VARCHAR, outputs VARCHAR,
    started_at TIMESTAMP, ended_at TIMESTAMP, status VARCHAR, error VARCHAR, build_id VARCHAR, fault_tag VARCHAR);
CREATE TABLE IF NOT EXISTS verifications (
    artifact_id VARCHAR, requirement_id VARCHAR, contract_version VARCHAR, verification VARCHAR,
    severity VARCHAR, passed BOOLEAN, backend VARCHAR, diagnostics VARCHAR, checked_at TIMESTAMP);
CREATE TABLE IF NOT EXISTS gate_decisions (
    build_id VARCHAR, gate VARCHAR, subject_id VARCHAR, subject_type VARCHAR, template VARCHAR,
    decision VARCHAR, details VARCHAR, decided_at TIMESTAMP);
CREATE TABLE IF NOT EXISTS builds (
    build_id VARCHAR, intent_path VARCHAR, intent_hash VARCHAR, started_at TIMESTAMP,
    ended_at TIMESTAMP, status VARCHAR, summary VARCHAR);
CREATE TABLE IF NOT EXISTS build_runs (build_id VARCHAR, run_key VARCHAR, executed BOOLEAN);
ALTER TABLE skill_runs ADD COLUMN IF NOT EXISTS fault_tag VARCHAR;
ALTER TABLE skill_runs ADD COLUMN IF NOT EXISTS blobs VARCHAR;
ALTER TABLE skill_runs ADD COLUMN IF NOT EXISTS seed_key VARCHAR;
CREATE TABLE IF NOT EXISTS diagnoses (
    build_id VARCHAR, round INTEGER, artifact_id VARCHAR, artifact_type VARCHAR, requirement VARCHAR,
    category VARCHAR, cause VARCHAR, producer VARCHAR, template VARCHAR, operator VARCHAR, attempt INTEGER,
    root VARCHAR, grp VARCHAR, detail VARCHAR, diagnosed_at TIMESTAMP);
ALTER TABLE diagnoses ADD COLUMN IF NOT EXISTS scope VARCHAR;
CREATE TABLE IF NOT EXISTS gate_memo (key VARCHAR, value VARCHAR);
CREATE TABLE IF NOT EXISTS repairs (
    build_id VARCHAR, round INTEGER, operator VARCHAR, violated VARCHAR, priors VARCHAR, new VARCHAR,
    rebuilt VARCHAR, status VARCHAR, error VARCHAR, seconds DOUBLE, repaired_at TIMESTAMP);
"""


def open_database(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Connect to the store's database; a failure says which of lock, permission or damage it is."""
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        text = str(exc)
        if "lock" in text.lower():
            holder = re.search(r"PID (\d+)", text)
            who = f" (process {holder.group(1)})" if holder else ""
            if read_only:  # a reader is refused at once while a build writes
                raise StoreBusyError(f"{path}: another forge process{who} is writing to the store (a build); it "
                                     "cannot be read until that process ends",
                                     hint="run this again when the build has finished") from None
            raise StoreBusyError(f"{path}: another forge process{who} has the store open; a build needs it alone",
                                 hint="run this again when that process has ended") from None
        if "permission denied" in text.lower() or "operation not permitted" in text.lower():
            mode = "read" if read_only else "write"
            raise StoreError(f"{path}: cannot {mode} the store (permission denied)",
                             hint="readers need read access to the folder; a build needs write access") from None
        if "read-only" in text.lower():
            raise StoreError(f"{path}: the store is on a read-only file system; a build needs to write to it",
                             hint="pass --store DIR on a writable disk") from None
        raise damaged_store(path, exc) from None
    except duckdb.Error as exc:
        raise damaged_store(path, exc) from None


# What the operating system says when it refuses a write (not damage): a folder without write
# permission, an immutable folder or file (chattr +i), a read-only mount.
_REFUSED_WRITES = ("operation not permitted", "permission denied", "read-only file system")


def damaged_store(path: Path | None, exc: BaseException) -> StoreError:
    first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    where = f"{path}: " if path is not None else ""
    refused = next((r for r in _REFUSED_WRITES if r in first.lower()), None)
    if refused is not None:
        named = re.search(r'"([^"]+)"', first)
        target = f" ({named.group(1)})" if named else ""
        return StoreError(f"{where}the system refuses to write to the store{target}: {refused}; nothing in it is "
                          "damaged", hint="a build writes to the store folder and its files: make the folder "
                                          "writable (chattr -i for an immutable one), or pass --store DIR on a "
                                          "writable disk")
    return StoreError(f"{where}the store database is damaged and cannot be read ({first})",
                      hint="`forge fsck --store DIR --repair` sets a damaged write-ahead log aside; if the database "
                           "itself is damaged, move the store folder away and build again (the intent and data "
                           "rebuild it)")
