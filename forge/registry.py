"""One registry for what plugins provide, named ``kind:name``.

Plugins are the modules of the ``forge.skills`` entry-point group (the built-in skills are one
of them). Importing a plugin registers its skills (``@skill``), contract checks (``@check``),
fault mutators and answer rules, and, through :func:`register`, everything else the engine
looks up by kind: the item scorer and its vocabularies, template libraries, re-verifiers,
contract and resource folders. The engine names no plugin: it asks the registry.
"""

from __future__ import annotations

import inspect
from importlib.metadata import entry_points
from typing import Any

from forge.errors import DefinitionError

PLUGIN_GROUP = "forge.skills"

_ENTRIES: dict[tuple[str, str], tuple[Any, str]] = {}
_BY_KIND: dict[str, dict[str, Any]] = {}  # entries() per kind, dropped on every registration
_LOADED = False


def register(kind: str, name: str, obj: Any, origin: str | None = None) -> Any:
    """Register ``obj`` as ``kind:name``. Registering the same object twice is harmless; another
    object under a taken name is an error naming both origins."""
    origin = origin or _caller_module()
    key = (kind, name)
    if key in _ENTRIES and _ENTRIES[key][0] is not obj:
        raise DefinitionError(f"{kind}:{name} is registered twice: by {_ENTRIES[key][1]} and by {origin}")
    _ENTRIES[key] = (obj, origin)
    _BY_KIND.pop(kind, None)
    return obj


def lookup(kind: str, name: str) -> Any:
    """The object registered as ``kind:name`` (plugins are loaded first)."""
    load_plugins()
    try:
        return _ENTRIES[(kind, name)][0]
    except KeyError:
        known = names(kind)
        raise DefinitionError(f"nothing is registered as {kind}:{name}; "
                              f"{kind} entries: {known or 'none (is a plugin missing?)'}") from None


def entries(kind: str) -> dict[str, Any]:
    """Every object registered under ``kind``, by name, in the order they were registered (the
    built-in plugin first)."""
    load_plugins()
    found = _BY_KIND.get(kind)
    if found is None:
        found = _BY_KIND[kind] = {n: obj for (k, n), (obj, _) in _ENTRIES.items() if k == kind}
    return found


def origin(kind: str, name: str) -> str:
    """The module that registered ``kind:name``."""
    load_plugins()
    return _ENTRIES[(kind, name)][1]


def registered_code(kind: str, name: str) -> dict[str, str]:
    """The source files ``kind:name`` runs, as code labels -> paths
    (``code answer_rule:<rule> <package>.<module>``): what a skill or check that looks it up
    counts among the files it reads, so editing it is a change of their code version."""
    from forge.codeversion import component_files

    obj, by = _ENTRIES[(kind, name)] if (kind, name) in _ENTRIES else (lookup(kind, name), origin(kind, name))
    return component_files(f"{kind}:{name}", obj, by)


def names(kind: str) -> list[str]:
    return sorted(n for (k, n) in _ENTRIES if k == kind)


def load_plugins() -> None:
    """Import every module of the plugin entry-point group, once per process."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True  # set first: a plugin that looks something up while loading must not recurse
    from forge.codeversion import register_project_package

    import sys

    for ep in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: (e.name != "builtin", e.name)):
        module = ep.value.split(":")[0]
        register_project_package(module)  # before it loads: versions may be read while it does
        fresh = module not in sys.modules
        before = len(_ENTRIES)
        try:
            loaded = ep.load()
        except DefinitionError:
            raise
        except Exception as exc:
            raise DefinitionError(f"plugin {ep.name!r} ({ep.value}) failed to load: {exc}") from None
        if fresh and len(_ENTRIES) == before:
            # Another module of the same name ahead of the plugin on the path (a package folder
            # named like it, in the working folder) loads instead, and the plugin's parts vanish.
            found = sys.modules.get(module) or loaded
            where = getattr(found, "__file__", None) or ", ".join(map(str, getattr(found, "__path__", []))) \
                or "an unknown place"
            raise DefinitionError(f"plugin {ep.name!r} ({ep.value}) registered nothing: the module {module!r} "
                                  f"was loaded from {where}, which is not the plugin",
                                  hint=f"another module named {module!r} comes first on the Python path (a "
                                       "folder of that name in the working folder?); rename or move it")


def plugin_modules() -> dict[str, str]:
    """The top-level import name of every plugin -> the plugin's entry-point name."""
    return {ep.value.split(":")[0].split(".")[0]: ep.name for ep in entry_points(group=PLUGIN_GROUP)}


def _caller_module() -> str:
    frame = inspect.currentframe()
    try:
        outer = frame.f_back.f_back if frame and frame.f_back else None
        return outer.f_globals.get("__name__", "?") if outer else "?"
    finally:
        del frame
