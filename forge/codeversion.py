"""Computed code versions.

A skill's code version is a hash of its module's source, of the project modules that module
imports (transitively), and of the data files an invocation reads. The engine package
``forge`` is deliberately excluded (see ``ENGINE_FORMAT_VERSION``): editing the engine does not
rebuild every artifact; bumping the format version does.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from functools import lru_cache
from pathlib import Path

from forge.keys import bytes_digest, digest, file_digest

# Top-level packages whose modules count as project code for code versions: every plugin's
# (registered as plugins load) and the packages they name.
PROJECT_PACKAGES: set[str] = set()


def register_project_package(name: str) -> None:
    """Plugins call this (via the registry) so their own modules are tracked too."""
    PROJECT_PACKAGES.add(name.split(".")[0])


@lru_cache(maxsize=None)
def _module_file(name: str) -> str | None:
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None) if module else None
    if path is None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        path = spec.origin if spec else None
    if path is None or not path.endswith(".py"):
        return None
    return path


def _imports(path: str, module_name: str) -> set[str]:
    tree = ast.parse(Path(path).read_bytes())
    package = module_name if path.endswith("__init__.py") else module_name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1] if node.level > 1 else base
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{alias.name}" for alias in node.names)
    return {m for m in found if m.split(".")[0] in PROJECT_PACKAGES}


@lru_cache(maxsize=None)
def module_closure(module_name: str) -> tuple[tuple[str, str], ...]:
    """(module, source hash) for the module and every project module it imports, sorted."""
    seen: dict[str, str] = {}
    stack = [module_name]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        path = _module_file(name)
        if path is None:
            continue
        seen[name] = file_digest(path)
        stack.extend(_imports(path, name) - seen.keys())
    return tuple(sorted(seen.items()))


def module_version(module_name: str) -> str:
    return digest(module_closure(module_name))


def data_files_version(files: dict[str, str]) -> dict[str, dict[str, str]]:
    """For each data file an invocation reads (stable label -> path): its path and hash.

    Identity uses only label and hash, so moving a checkout does not rebuild anything.
    A missing file hashes as 'missing'.
    """
    out: dict[str, dict[str, str]] = {}
    for label, path in sorted(files.items()):
        try:
            h = file_digest(path)
        except (FileNotFoundError, IsADirectoryError):
            h = "missing"
        out[label] = {"path": str(path), "hash": h}
    return out


def data_identity(data_files: dict[str, dict[str, str]]) -> dict[str, str]:
    return {label: entry["hash"] for label, entry in data_files.items()}


def clear_caches() -> None:
    """Forget cached module hashes (tests that edit skill sources in one process use this)."""
    _module_file.cache_clear()
    module_closure.cache_clear()


__all__ = ["module_version", "data_files_version", "data_identity", "register_project_package", "clear_caches", "bytes_digest"]
