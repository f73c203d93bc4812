"""Resolving a REF from the command line to stored artifacts: an artifact id (or a unique
prefix of one), a template id, a skill name, or a stage (S1-S5)."""

from __future__ import annotations

from forge.errors import UnknownReferenceError
from forge.skills import STAGES
from forge.store import Store
from forge.tracks import item_types


def resolve(store: Store, ref: str, *, item_only: bool = False) -> list[str]:
    if not item_only and ref in STAGES:
        rows = store.execute("SELECT a.id FROM artifacts a JOIN skill_runs r ON a.run_key = r.run_key "
                             "WHERE r.stage = ?", [ref]).fetchall()
        return _nonempty(ref, [r[0] for r in rows])
    if not item_only:
        rows = store.execute("SELECT id FROM artifacts WHERE skill = ?", [ref]).fetchall()
        if rows:
            return [r[0] for r in rows]
        rows = store.execute("SELECT id FROM artifacts WHERE type = 'Template' AND "
                             "json_extract_string(content, '$.id') = ?", [ref]).fetchall()
        if rows:
            return [r[0] for r in rows]
    if len(ref) < 6:
        raise UnknownReferenceError(f"REF {ref!r} matches no stage, skill or template, and is too short for an artifact id prefix")
    matches = store.find_artifacts(ref)
    if item_only:
        released = item_types()
        matches = [m for m in matches if m[1] in released]
    if len(matches) > 1:
        raise UnknownReferenceError(f"REF {ref!r} is ambiguous: {len(matches)} artifacts start with it")
    return _nonempty(ref, [m[0] for m in matches])


def _nonempty(ref: str, ids: list[str]) -> list[str]:
    if not ids:
        raise UnknownReferenceError(f"REF {ref!r} matches nothing in this store")
    return ids


def forced_scope(store: Store, roots: list[str]) -> tuple[set[str], set[str]]:
    """(run keys that produced the roots or their descendants, those artifact ids).

    An invocation is forced when it produced one of them or consumes one of them, so a
    consumer that happened to emit nothing last time runs again too.
    """
    ids = set(roots) | store.descendants(roots)
    return set(store.artifact_column(ids, "run_key").values()), ids
