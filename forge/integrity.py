"""Store integrity: re-making damaged blobs from their provenance, and ``forge fsck``.

A blob is re-made by running the skill run that wrote it again, on the same inputs, parameters
and seed: skills are deterministic, so the bytes come back with their digest. Runs record the
blobs they write (``skill_runs.blobs``); for runs recorded before that, the first artifact whose
content names the digest leads to its run. Nothing is ever patched by hand: what provenance
cannot re-make is reported (and, under ``--repair``, removed when nothing refers to it).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from forge.artifact_types import ArtifactContent
from forge.store import Store
from forge.errors import BlobError

Loader = Callable[[str], ArtifactContent]
MAX_DEPTH = 4  # a producer whose own input blobs are damaged re-makes those first, this deep


def producing_run(store: Store, digest: str) -> dict[str, Any] | None:
    """The stored run that wrote blob ``digest``: skill, params, inputs, seed."""
    row = store.one("SELECT run_key, skill, params, inputs, seed_key FROM skill_runs WHERE status = 'ok' "
                    "AND blobs LIKE ? ORDER BY started_at LIMIT 1", [f"%{digest}%"])
    if row is None:
        row = store.one("SELECT r.run_key, r.skill, r.params, r.inputs, r.seed_key FROM artifacts a "
                        "JOIN skill_runs r ON a.run_key = r.run_key WHERE r.status = 'ok' AND a.content LIKE ? "
                        "ORDER BY a.created_at LIMIT 1", [f"%{digest}%"])
    if row is None:
        return None
    return {"run_key": row[0], "skill": row[1], "params": json.loads(row[2]), "inputs": json.loads(row[3]),
            "seed_key": row[4]}


def recreate_blob(store: Store, digest: str, load: Loader, *, depth: int = 0) -> bool:
    """Run the producer of ``digest`` again; True when the blob is intact afterwards."""
    from forge.skills import SkillContext, discover

    if store.has_blob(digest):
        return True
    run = producing_run(store, digest)
    if run is None or depth > MAX_DEPTH:
        return False
    try:
        spec = discover().get(run["skill"])
    except Exception:
        return False
    for _ in range(MAX_DEPTH):
        try:
            contents = {k: ([load(a) for a in v] if isinstance(v, list) else load(v)) for k, v in run["inputs"].items()}
            ctx = SkillContext(spec, run["params"], run["seed_key"] or run["run_key"], store, run["inputs"], loader=load)
            spec.fn(ctx, **contents)
            break
        except BlobError as exc:  # an input blob of the producer is damaged too: re-make it first
            if exc.digest == digest or not recreate_blob(store, exc.digest, load, depth=depth + 1):
                return False
        except Exception:
            return False
    return store.has_blob(digest)


def store_loader(store: Store) -> Loader:
    from forge.artifact_types import content_type

    cache: dict[str, ArtifactContent] = {}

    def load(aid: str) -> ArtifactContent:
        if aid not in cache:
            art = store.artifacts([aid]).get(aid)
            if art is None:
                raise KeyError(f"artifact {aid} is not in the store")
            cache[aid] = content_type(art.type).model_validate(art.content)
        return cache[aid]
    return load


@dataclass
class Finding:
    kind: str  # interrupted_build, temp_file, damaged_blob, missing_blob, orphan_blob, orphan_rows, ...
    subject: str
    detail: str
    repaired: bool = False


def fsck(store: Store, *, repair: bool = False, progress: Callable[[str], None] | None = None) -> list[Finding]:
    """Check the store; with ``repair``, fix what provenance allows. The caller holds the store
    open for writing, so no build is running: a build still recorded ``running`` was interrupted."""
    say = progress or (lambda _msg: None)
    findings: list[Finding] = []
    load = store_loader(store)

    for build_id, started in store.execute(
            "SELECT build_id, started_at FROM builds WHERE status = 'running' ORDER BY started_at").fetchall():
        f = Finding("interrupted_build", build_id, f"started {started}, never finished")
        if repair:
            store.mark_interrupted(build_id)
            f.repaired = True
        findings.append(f)

    say("checking blob files")
    blobs_dir = store.root / "blobs"
    referenced = referenced_blobs(store)
    present: set[str] = set()
    for folder in sorted(p for p in blobs_dir.iterdir() if p.is_dir()) if blobs_dir.is_dir() else []:
        for path in sorted(folder.iterdir()):
            if path.name.startswith(".tmp-"):
                f = Finding("temp_file", str(path), "left by a write that did not finish")
                if repair:
                    path.unlink(missing_ok=True)
                    f.repaired = True
                findings.append(f)
                continue
            present.add(path.name)
            if store.has_blob(path.name):
                continue
            if path.name not in referenced:
                f = Finding("orphan_blob", path.name, "damaged, and no run or artifact refers to it")
                if repair:
                    path.unlink(missing_ok=True)
                    f.repaired = True
                findings.append(f)
                continue
            findings.append(Finding("damaged_blob", path.name, f"bytes do not match the digest ({path})"))

    say("checking referenced blobs")
    findings += [Finding("missing_blob", digest, "a run or package refers to it, the file is gone")
                 for digest in sorted(referenced - present)]
    if repair:
        # Found first, re-made after: re-running one producer re-makes its other blobs too, which
        # a check made after it would no longer count as damaged (nor as repaired).
        for f in findings:
            if f.kind in ("damaged_blob", "missing_blob"):
                f.repaired = recreate_blob(store, f.subject, load)
                if not f.repaired:
                    f.detail += "; its producing run could not re-make it"

    say("checking rows")
    for kind, count_sql, delete_sql in ORPHAN_QUERIES:
        n = store.one(count_sql)[0]
        if n:
            f = Finding(kind, f"{n} rows", ORPHAN_DETAIL[kind])
            if repair:
                store.execute(delete_sql)
                f.repaired = True
            findings.append(f)
    return findings


def referenced_blobs(store: Store) -> set[str]:
    """Blob digests that recorded runs wrote and released packages list."""
    out: set[str] = set()
    for (blobs,) in store.execute("SELECT blobs FROM skill_runs WHERE status = 'ok' AND blobs IS NOT NULL").fetchall():
        out.update(json.loads(blobs))
    for (content,) in store.execute("SELECT content FROM artifacts WHERE type = 'Package'").fetchall():
        pkg = json.loads(content)
        out.update(pkg.get("files", {}).values())
    return out


# Rows that point at nothing: they can only mislead a later build (an artifact row without its
# run is never found again, and its re-made twin would be stored beside it).
ORPHAN_QUERIES = [
    ("orphan_verifications",
     "SELECT count(*) FROM verifications v WHERE NOT EXISTS (SELECT 1 FROM artifacts a WHERE a.id = v.artifact_id)",
     "DELETE FROM verifications WHERE artifact_id NOT IN (SELECT id FROM artifacts)"),
    ("dangling_edges",
     "SELECT count(*) FROM edges e WHERE NOT EXISTS (SELECT 1 FROM artifacts a WHERE a.id = e.child) "
     "OR NOT EXISTS (SELECT 1 FROM artifacts a WHERE a.id = e.parent)",
     "DELETE FROM edges WHERE child NOT IN (SELECT id FROM artifacts) OR parent NOT IN (SELECT id FROM artifacts)"),
    ("artifacts_without_run",
     "SELECT count(*) FROM artifacts a WHERE NOT EXISTS (SELECT 1 FROM skill_runs r WHERE r.run_key = a.run_key)",
     "DELETE FROM artifacts WHERE run_key NOT IN (SELECT run_key FROM skill_runs)"),
    ("orphan_build_runs",
     "SELECT count(*) FROM build_runs b WHERE NOT EXISTS (SELECT 1 FROM builds x WHERE x.build_id = b.build_id)",
     "DELETE FROM build_runs WHERE build_id NOT IN (SELECT build_id FROM builds)"),
]
ORPHAN_DETAIL = {
    "orphan_verifications": "verification records of artifacts that are not in the store",
    "dangling_edges": "lineage edges to or from artifacts that are not in the store",
    "artifacts_without_run": "artifacts whose skill run is not recorded (the next build makes them again)",
    "orphan_build_runs": "build membership rows of builds that are not recorded",
}


def summarize(findings: list[Finding]) -> dict[str, Any]:
    kinds: dict[str, dict[str, int]] = {}
    for f in findings:
        row = kinds.setdefault(f.kind, {"found": 0, "repaired": 0})
        row["found"] += 1
        row["repaired"] += int(f.repaired)
    return {"findings": [asdict(f) for f in findings], "kinds": kinds,
            "unrepaired": sum(1 for f in findings if not f.repaired)}


def remove_stale_temp(folder: Path, prefix: str) -> None:
    """Remove ``<prefix><pid>`` temporary folders or files whose process is gone."""
    if not folder.is_dir():
        return
    import shutil

    for path in folder.glob(f"{prefix}*"):
        pid = path.name[len(prefix):].rsplit("-", 1)[-1]
        if pid.isdigit() and _alive(int(pid)):
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def set_wal_aside(wal: Path) -> str:
    """Move a damaged write-ahead log aside so the database opens at its last checkpoint. The
    transactions it held are lost; the next build re-runs what they recorded."""
    import time

    aside = wal.with_name(f"{wal.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
    os.replace(wal, aside)
    return f"the write-ahead log could not be replayed; moved it to {aside.name} (the next build re-runs what it held)"
