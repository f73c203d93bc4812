"""Writing a package artifact to ``packages_out/<name>-<version>/``, atomically.

The files are assembled in a temporary sibling folder and renamed into place, so a reader
never sees a half-written package; an existing package whose checksums already match is
left untouched.

Beside the package, ``.<name>-<version>.files`` records each file's checksum with its size,
inode and change times as the export left it. A file whose stat still matches is not read
again to learn its checksum (a 10,000-item package holds half a gigabyte of media); any change
to it, even one that restores its modification time, changes its ctime and has it re-read.
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from forge.artifact_types import Package
from forge.errors import StoreError
from forge.integrity import remove_stale_temp
from forge.keys import file_digest
from forge.errors import BlobError
from forge.blobs import BlobStore


# Not released files but kept across a new version of the package: evaluation records, a review page.
KEPT_BESIDE = (".eval", "review.html")


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
    known = _recorded(target)
    if _digest(target, "manifest.json", known) != pkg.files["manifest.json"]:
        return False
    return all((target / p).exists() and _digest(target, p, known) == h for p, h in listed.items())


def _record_path(target: Path) -> Path:
    return target.parent / f".{target.name}.files"


def _stat(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def _recorded(target: Path) -> dict[str, list[Any]]:
    """rel -> [checksum, size, inode, mtime, ctime] as the last export left the package (empty
    when there is no readable record)."""
    try:
        files = json.loads(_record_path(target).read_text())["files"]
        return {rel: v for rel, v in files.items() if isinstance(v, list) and len(v) == 5}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _digest(target: Path, rel: str, known: dict[str, list[Any]]) -> str:
    """A package file's checksum: the recorded one while its stat is unchanged, else read."""
    path = target / rel
    entry = known.get(rel)
    if entry is not None:
        try:
            if _stat(path) == entry[1:]:
                return str(entry[0])
        except OSError:
            pass
    return file_digest(str(path))


def _write_record(target: Path, pkg: Package) -> None:
    """Record what the package's files are now (each was checked against its checksum as it landed)."""
    record = _record_path(target)
    tmp = record.with_name(record.name + f".{os.getpid()}")
    try:
        tmp.write_text(json.dumps({"files": {rel: [h, *_stat(target / rel)] for rel, h in sorted(pkg.files.items())}}))
        os.replace(tmp, record)
    except OSError:  # without it the next export reads the files again: slower, never wrong
        tmp.unlink(missing_ok=True)


def _listed(target: Path) -> dict[str, str]:
    """Files and digests the package already at ``target`` lists (empty when there is none)."""
    try:
        return dict(json.loads((target / "manifest.json").read_text())["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def export(blobs: BlobStore, pkg: Package, out_root: Path,
           recreate: Callable[[str], bool] | None = None) -> tuple[Path, bool]:
    """Materialize ``pkg``; returns (path, whether anything was written).

    Every file is checked against its digest as it lands in the package (a damaged blob is made
    again with ``recreate`` when given, else refused: never shipped). One export at a time per
    package folder (a lock file beside it); temporary folders of exports that died are removed."""
    try:
        out_root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"{out_root}: cannot create the package folder ({exc.strerror or exc})",
                         hint="pass --out DIR on a writable disk") from None
    target = package_dir(out_root, pkg)
    with _exclusive(out_root / f".{target.name}.lock"):
        if is_current(target, pkg):
            if not _record_path(target).exists():
                _write_record(target, pkg)
            return target, False
        remove_stale_temp(out_root, f".tmp-{target.name}-")
        remove_stale_temp(out_root, f".old-{target.name}-")
        tmp = out_root / f".tmp-{target.name}-{os.getpid()}"
        try:
            _assemble(blobs, pkg, target, tmp, recreate)
            old = out_root / f".old-{target.name}-{os.getpid()}"
            for kept in KEPT_BESIDE:  # what people added beside the released files stays with the package
                if (target / kept).exists() and not (tmp / kept).exists():
                    os.replace(target / kept, tmp / kept)
            if target.exists():
                os.replace(target, old)
            _record_path(target).unlink(missing_ok=True)  # the files it describes are about to go
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
            _write_record(target, pkg)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise StoreError(f"{target}: cannot write the package ({exc.strerror or exc})",
                             hint="check the output folder's permissions and free space") from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target, True


def _assemble(blobs: BlobStore, pkg: Package, target: Path, tmp: Path,
              recreate: Callable[[str], bool] | None) -> None:
    previous, known = _listed(target), _recorded(target)
    for rel, digest in sorted(pkg.files.items()):
        dest = tmp / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        # A file the previous version of this package holds intact is linked from it (the old
        # folder goes away after the swap). Never linked from the store: editing a released
        # file must not alter the store's blobs.
        old_file = target / rel
        if previous.get(rel) == digest and old_file.is_file() and _digest(target, rel, known) == digest:
            try:
                os.link(old_file, dest)
                continue
            except OSError:
                pass
        # The copy is hashed: a damaged or missing blob is made again from its run, or refused.
        if not _copy_checked(blobs, digest, dest) and not (recreate and recreate(digest)
                                                            and _copy_checked(blobs, digest, dest)):
            blobs.get_blob(digest)  # raises BlobError: missing or damaged, with its path
            raise BlobError(digest, "changed while it was copied into the package", blobs.blob_path(digest))


def _copy_checked(blobs: BlobStore, digest: str, dest: Path) -> bool:
    try:
        shutil.copyfile(blobs.blob_path(digest), dest)
    except FileNotFoundError:
        return False
    return file_digest(str(dest)) == digest


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    import fcntl

    with open(lock_path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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
