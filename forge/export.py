"""Writing a package artifact to ``packages_out/<name>-<version>/``, atomically.

The files are assembled in a temporary sibling folder and renamed into place, so a reader
never sees a half-written package; an existing package whose checksums already match is
left untouched.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from forge.artifact_types import Package
from forge.keys import file_digest
from forge.store import BlobStore


def package_dir(out_root: Path, pkg: Package) -> Path:
    return out_root / f"{pkg.name}-{pkg.version}"


def is_current(target: Path, pkg: Package) -> bool:
    manifest = target / "manifest.json"
    if not manifest.exists():
        return False
    try:
        listed = json.loads(manifest.read_text())["files"]
    except (ValueError, KeyError):
        return False
    if file_digest(str(manifest)) != pkg.files["manifest.json"]:
        return False
    return all((target / p).exists() and file_digest(str(target / p)) == h for p, h in listed.items())


def _listed(target: Path) -> dict[str, str]:
    """Files and digests the package already at ``target`` lists (empty when there is none)."""
    try:
        return dict(json.loads((target / "manifest.json").read_text())["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def export(blobs: BlobStore, pkg: Package, out_root: Path) -> tuple[Path, bool]:
    """Materialize ``pkg``; returns (path, whether anything was written)."""
    out_root.mkdir(parents=True, exist_ok=True)
    target = package_dir(out_root, pkg)
    if is_current(target, pkg):
        return target, False
    for stale in out_root.glob(f".tmp-{target.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = out_root / f".tmp-{target.name}-{os.getpid()}"
    previous = _listed(target)
    for rel, digest in sorted(pkg.files.items()):
        dest = tmp / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        source = blobs.blob_path(digest)
        # A file the previous version of this package already holds with the same digest is
        # linked from it (the old folder goes away after the swap). Never linked from the
        # store: editing a released file must not alter the store's blobs.
        old_file = target / rel
        if previous.get(rel) == digest and old_file.is_file() and old_file.stat().st_size == source.stat().st_size:
            try:
                os.link(old_file, dest)
                continue
            except OSError:
                pass
        shutil.copyfile(source, dest)
    old = out_root / f".old-{target.name}-{os.getpid()}"
    if target.exists():
        os.replace(target, old)
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)
    return target, True


def verify_package(target: Path) -> list[str]:
    """Re-check a written package: every listed file exists with its checksum."""
    problems = []
    manifest = json.loads((target / "manifest.json").read_text())
    for rel, digest in manifest["files"].items():
        path = target / rel
        if not path.exists():
            problems.append(f"{rel}: missing")
        elif file_digest(str(path)) != digest:
            problems.append(f"{rel}: checksum differs")
    return problems
