"""``forge verify PACKAGE``: is a released package intact, and are its answers right?

Checksums first (every file the manifest lists, with its SHA-256; files it does not list), then,
when the store the package was built in is at hand, every answer re-derived by the track's
re-verifier from a snapshot of the store (the database is closed again before the slow part, so
a build on the same store is never blocked). Damage is reported per file and per item; nothing
raises on it.

Every number the package reports (its evaluation report) is then recomputed from the package's own
records by the registered recomputers.

Exit codes: 0 intact (and every item valid when re-verified), 1 damage or invalid items found,
2 not a package or a usage error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from forge.errors import UsageError
from forge.keys import file_digest
from forge.tracks import default_track


def check_files(package: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """(the manifest, or None when it cannot be read; every file problem found)."""
    manifest_path = package / "manifest.json"
    if not package.is_dir() or not manifest_path.exists():
        raise UsageError(f"{package}: not a package (no manifest.json)")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        files = dict(manifest["files"])
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        return None, [f"manifest.json: damaged, cannot be read ({type(exc).__name__})"]
    problems = []
    for rel, digest in sorted(files.items()):
        path = package / rel
        if not path.is_file():
            problems.append(f"{rel}: missing")
            continue
        try:
            if file_digest(str(path)) != digest:
                problems.append(f"{rel}: checksum differs from the manifest (the file was changed or damaged)")
        except OSError as exc:
            problems.append(f"{rel}: cannot be read ({exc.strerror or exc})")
    listed = set(files) | {"manifest.json"}
    for path in sorted(p for p in package.rglob("*") if p.is_file()):
        rel = str(path.relative_to(package))
        # What people add beside the released files: a review page, evaluation records.
        if rel not in listed and "__pycache__" not in rel and rel != "review.html" and not rel.startswith(".eval/"):
            problems.append(f"{rel}: not listed in the manifest")
    return manifest, problems


def verify_package(package: Path, store_dir: Path | None,
                   progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """The full check; ``store_dir`` None checks the files only."""
    from forge.registry import lookup
    from forge.store import DB_NAME, Store

    manifest, problems = check_files(package)
    report: dict[str, Any] = {"package": str(package), "file_problems": problems, "reverified": False,
                              "metric_problems": recomputed_metrics(package) if manifest is not None else []}
    if store_dir is None or manifest is None:
        report["note"] = ("answers not re-verified: " + ("the manifest cannot be read" if manifest is None else
                          "no store given (pass --store DIR or --intent FILE)"))
        report["ok"] = not problems and not report["metric_problems"]
        return report
    if not (store_dir / DB_NAME).exists():
        raise UsageError(f"{store_dir}: no forge store there; pass --store DIR (the store the package was built "
                         "in) or --intent FILE (a build keeps its store in .forge/ beside the intent)")
    reverify = lookup("reverifier", manifest.get("track", default_track()))
    ids = _item_ids(package)
    with Store(store_dir, read_only=True) as store:
        snapshot = store.snapshot(ids)
    result = reverify(snapshot, package, progress)
    report.update({k: v for k, v in result.items() if k != "file_problems"})
    report["file_problems"] = problems + [p for p in result.get("file_problems", []) if p not in problems]
    report["reverified"] = True
    report["ok"] = not report["file_problems"] and not result["invalid"] and not report["metric_problems"]
    return report


def recomputed_metrics(package: Path) -> list[str]:
    """What the registered recomputers (``package_metrics``) find wrong with the numbers the
    package reports: each recomputes them from the package's own records."""
    from forge.registry import entries

    return [p for recompute in entries("package_metrics").values() for p in recompute(package)]


def _item_ids(package: Path) -> list[str]:
    out = []
    try:
        lines = (package / "items.jsonl").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            out.append(row["id"])
    return out
