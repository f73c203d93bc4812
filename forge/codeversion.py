"""Computed code versions.

A skill's code version is a hash of its module's source, of the project modules that module
imports (transitively), and of the data files an invocation reads. The engine package
``forge`` is deliberately excluded (see ``ENGINE_FORMAT_VERSION``): editing the engine does not
rebuild every artifact; bumping the format version does.

Code a skill finds through the registry rather than by importing it (a plugin's answer rule,
question type or scoring protocol) is outside that closure: an invocation names it among the
files it reads (``forge.registry.registered_code``, labels starting ``code ``), so editing it reruns the
invocation and ``forge status`` names the component.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import types
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

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


CODE_LABEL = "code "  # data-file labels that name registered code, not data


def component_files(label: str, obj: Any, origin: str) -> dict[str, str]:
    """The source files a registered object runs, as data-file labels -> paths: the project modules
    defining it and the functions it holds (with the project modules they import), and the module
    that registered it (``origin``). Each label is ``code <label> <module>``."""
    modules = {m for root in sorted(_defining_modules(obj)) for m, _ in module_closure(root)}
    modules.add(origin)
    files = {}
    for module in sorted(modules):
        path = _module_file(module)
        if path is not None and module.split(".")[0] in PROJECT_PACKAGES:
            files[f"{CODE_LABEL}{label} {module}"] = path
    return files


def code_label_file(label: str, recorded: str) -> str:
    """Where a ``code`` label's module is now (a moved plugin is not a change); other labels keep
    their recorded path."""
    if not label.startswith(CODE_LABEL):
        return recorded
    return _module_file(label.rsplit(" ", 1)[-1]) or recorded


def _defining_modules(obj: Any, depth: int = 2) -> set[str]:
    """Project modules that define ``obj``: a module itself, a function's or class's module and
    the functions its closure wraps (a rule built by a factory), or for an instance its class and
    the functions its fields hold (a question type's solvers and chance)."""
    found: set[str] = set()
    if isinstance(obj, types.ModuleType):
        found.add(obj.__name__)
    elif isinstance(obj, partial):
        found |= _defining_modules(obj.func, depth)
    elif isinstance(obj, (types.FunctionType, types.MethodType, type)):
        found.add(obj.__module__)
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                inner = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if depth and callable(inner):
                found |= _defining_modules(inner, depth - 1)
    elif isinstance(obj, (dict, list, tuple)):  # a table of functions (a world's checks)
        for value in (obj.values() if isinstance(obj, dict) else obj):
            if callable(value):
                found |= _defining_modules(value, depth)
    elif depth:
        found.add(type(obj).__module__)
        fields = vars(obj).values() if hasattr(obj, "__dict__") else ()
        for value in fields:
            for inner in (value.values() if isinstance(value, dict) else (value,)):
                if callable(inner):
                    found |= _defining_modules(inner, depth - 1)
    return {m for m in found if m and m.split(".")[0] in PROJECT_PACKAGES}


def clear_caches() -> None:
    """Forget cached module hashes (tests that edit skill sources in one process use this)."""
    _module_file.cache_clear()
    module_closure.cache_clear()


__all__ = ["module_version", "data_files_version", "data_identity", "register_project_package", "clear_caches",
           "bytes_digest", "component_files", "code_label_file", "CODE_LABEL"]
