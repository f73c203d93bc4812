"""Content-addressed blob files of a store: PNG images, HDF5 arrays and memo entries, each read
back only when its bytes match their address."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from forge.errors import BlobError, StoreError
from forge.keys import bytes_digest, file_digest

_UMASK = os.umask(0)  # read once (setting is the only way to read it) and put back
os.umask(_UMASK)


class BlobStore:
    """Content-addressed files under ``<root>/blobs``; safe to use from worker processes.

    Every read checks the bytes against their address: a damaged or missing blob raises
    :class:`BlobError` (naming the digest), never hands on wrong bytes. Writing a blob whose
    file exists but is damaged writes it again, so re-running its producer repairs it.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        (self.root / "blobs").mkdir(parents=True, exist_ok=True)
        self.written: list[str] = []  # digests put through this object (a skill run's blobs)
        self._intact: set[str] = set()  # digests whose file was read whole and matched in this process

    # -- blobs ----------------------------------------------------------------------------

    def blob_path(self, digest: str) -> Path:
        return self.root / "blobs" / digest[:2] / digest

    def put_blob(self, data: bytes) -> str:
        digest = bytes_digest(data)
        path = self.blob_path(digest)
        self.written.append(digest)
        if not self.has_blob(digest):
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                os.fchmod(fd, 0o666 & ~_UMASK)  # readable as any other file (mkstemp makes 0600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            self._intact.add(digest)
        return digest

    def get_blob(self, digest: str) -> bytes:
        path = self.blob_path(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise BlobError(digest, "missing", path) from None
        except OSError as exc:
            raise BlobError(digest, f"unreadable ({exc.strerror or exc})", path) from None
        if digest not in self._intact:
            if bytes_digest(data) != digest:
                raise BlobError(digest, "damaged (its bytes no longer match their digest)", path)
            self._intact.add(digest)
        return data

    def has_blob(self, digest: str) -> bool:
        """Whether the blob is present and intact."""
        if digest in self._intact:
            return True
        path = self.blob_path(digest)
        try:
            intact = file_digest(str(path)) == digest
        except OSError:
            return False
        if intact:
            self._intact.add(digest)
        return intact

    # -- memos: results of pure computations, by a digest of their inputs --------------------

    def memo_path(self, key: str) -> Path:
        return self.root / "memo" / key

    def get_memo(self, key: str) -> bytes | None:
        """A memo written by :meth:`put_memo`, or None. A memo is a cache: a reader must give
        the same results without it, so a missing, unreadable or damaged one is no error."""
        try:
            stored = self.memo_path(key).read_bytes()
        except OSError:
            return None
        check, _, data = stored.partition(b"\n")  # the digest of what follows, then the memo
        return data if check.decode("ascii", "replace") == bytes_digest(data) else None

    def put_memo(self, key: str, data: bytes) -> None:
        """Write a memo at once in whole (a reader never sees part of one), after its digest."""
        data = bytes_digest(data).encode() + b"\n" + data
        path = self.memo_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            os.fchmod(fd, 0o666 & ~_UMASK)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def put_png(self, rgb: np.ndarray) -> str:
        from PIL import Image

        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(rgb)).save(buf, format="PNG", compress_level=1)
        return self.put_blob(buf.getvalue())

    def get_image(self, digest: str) -> np.ndarray:
        from PIL import Image

        return np.asarray(Image.open(io.BytesIO(self.get_blob(digest))))

    def put_arrays(self, arrays: dict[str, np.ndarray]) -> str:
        """Store named arrays as one HDF5 blob; the address is the hash of the file bytes."""
        import h5py

        buf = io.BytesIO()
        with h5py.File(buf, "w", track_order=True) as f:
            for name in sorted(arrays):
                f.create_dataset(name, data=arrays[name], compression="gzip", compression_opts=1, track_times=False)
        return self.put_blob(buf.getvalue())

    def get_arrays(self, digest: str) -> dict[str, np.ndarray]:
        """The named arrays of an HDF5 blob, read-only. A scene's arrays are read by its
        structuring step and then by two checks: the last few read are kept (a few MB each)
        rather than inflated again, keyed by the blob file's state so a damaged one is read anew."""
        path = self.blob_path(digest)
        try:
            st = path.stat()
            key = (str(path), st.st_mtime_ns, st.st_size)
        except OSError:
            key = None  # get_blob names what is wrong with it
        found = _RECENT_ARRAYS.get(key) if key else None
        if found is not None:
            return dict(found)
        import h5py

        with h5py.File(io.BytesIO(self.get_blob(digest)), "r") as f:
            arrays = {name: f[name][()] for name in f.keys()}
        for a in arrays.values():
            a.flags.writeable = False
        if key is not None:
            if len(_RECENT_ARRAYS) >= _RECENT_ARRAYS_KEPT:
                _RECENT_ARRAYS.pop(next(iter(_RECENT_ARRAYS)))
            _RECENT_ARRAYS[key] = arrays
        return dict(arrays)


# (blob file, its modification time and size) -> arrays: a blob rewritten since is read again.
_RECENT_ARRAYS: dict[tuple[str, int, int], dict[str, np.ndarray]] = {}
_RECENT_ARRAYS_KEPT = 4


class StoreSnapshot(BlobStore):
    """Artifact contents read from a store (see :meth:`Store.snapshot`), plus its blobs."""

    def __init__(self, root: str | Path, contents: dict[str, str]) -> None:
        self.root = Path(root)
        self.written, self._intact = [], set()
        self._contents = contents

    def artifact_column(self, ids: Iterable[str], name: str) -> dict[str, Any]:
        if name != "content":
            raise StoreError(f"a store snapshot holds artifact contents only, not {name!r}")
        return {i: self._contents[i] for i in ids if i in self._contents}
