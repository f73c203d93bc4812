"""Folders an intent names (data roots, template and contract folders), read within bounds.

A folder is listed without leaving it: a file or subfolder whose link resolves outside the
folder is refused (a template linked to ``/etc/passwd`` is never read), the filesystem root and
the user's home are refused as data roots, and a listing stops with a clear error past
``MAX_FILES`` entries instead of walking a whole disk. Unreadable subfolders are named, not
raised as tracebacks.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

from forge.errors import DefinitionError, ForgeError

MAX_FILES = 200_000


def too_wide(folder: Path) -> bool:
    """Whether ``folder`` is the filesystem root or the home folder itself: never a dataset."""
    resolved = folder.resolve()
    return resolved == Path(resolved.anchor) or resolved == Path.home().resolve()


def check_root(folder: Path, what: str, error: type[ForgeError] = DefinitionError) -> Path:
    """``folder`` resolved, refused when it is too wide to be a dataset folder."""
    resolved = folder.resolve()
    if too_wide(resolved):
        raise error(f"{what}: {folder} resolves to {resolved}, which is not a dataset folder; "
                    "name the folder that holds the data")
    return resolved


def list_files(folder: Path, pattern: str = "*", *, recursive: bool = False, what: str = "folder",
               max_files: int = MAX_FILES, error: type[ForgeError] = DefinitionError) -> list[Path]:
    """Files in ``folder`` (and below it when ``recursive``) whose names match ``pattern``,
    sorted, as paths under ``folder``. Links that lead outside the folder are refused."""
    root = check_root(folder, what, error)
    found: list[Path] = []
    seen = 0
    pending = [Path(folder)]
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except PermissionError:
            raise error(f"{what}: cannot read {current} (permission denied)") from None
        except OSError as exc:
            raise error(f"{what}: cannot read {current} ({exc.strerror or exc})") from None
        for entry in entries:
            seen += 1
            if seen > max_files:
                raise error(f"{what}: {folder} holds more than {max_files:,} entries; is it the right folder?")
            path = Path(entry.path)
            if entry.is_symlink():
                target = path.resolve()
                if target != root and root not in target.parents:
                    raise error(f"{what}: {path} links outside {folder}; links must stay inside the folder")
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir:
                if recursive:
                    pending.append(path)
            elif fnmatch.fnmatch(entry.name, pattern):
                found.append(path)
    return sorted(found)
