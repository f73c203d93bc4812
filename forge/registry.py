"""One registry for what plugins provide, named ``kind:name``.

Plugins are the modules of the ``forge.skills`` entry-point group (the built-in skills are one
of them). Importing a plugin registers its skills (``@skill``), contract checks (``@check``),
fault mutators, answer rules and artifact types, and, through :func:`register`, everything else
the engine looks up by kind: tracks, source kinds, the item scorer and its vocabularies,
template libraries, re-verifiers, contract and resource folders. The kinds are a closed set
(:data:`KINDS`), each with the form of what it holds; the per-kind tables modules keep
(``CHECKS``, ``MUTATORS``, ``ARTIFACT_TYPES``, the skill registry, the solvers) are views over
this one (:func:`view`). The engine names no plugin: it asks the registry.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from forge.errors import DefinitionError

PLUGIN_GROUP = "forge.skills"


def _is(*types: type) -> Callable[[Any], bool]:
    return lambda obj: isinstance(obj, types)


_CALLABLE = callable
_CLASS = _is(type)
_ANY: Callable[[Any], bool] = lambda obj: obj is not None

# kind -> (what an entry is, whether an object is of that form). Registering under any other
# kind is an error: a misspelt kind would otherwise register something nobody looks up.
KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "skill": ("a typed skill (forge.skills.SkillSpec)", _ANY),
    "check": ("a contract predicate fn(content, ctx, **args)", _CALLABLE),
    "fault_mutator": ("a planted fault fn(content, FaultContext)", _CALLABLE),
    "artifact_type": ("an ArtifactContent subclass", _CLASS),
    "solver": ("a built-in panel member (forge.evaluation.solvers.SolverInfo)", _ANY),
    "track": ("a track (forge.tracks.Track)", _ANY),
    "source_kind": ("a source section model (a pydantic class)", _CLASS),
    "capability": ("a capability", _ANY),
    "question_type": ("a question type", _ANY),
    "answer_rule": ("an answer rule", _ANY),
    "blind_solver": ("a blind solver of gate C1: fn(items) -> responses, never reading the media", _CALLABLE),
    "rule_reverifier": ("an answer rule's independent re-verifier", _CALLABLE),
    "scoring_protocol": ("a scoring protocol module (parse, score)", _is(ModuleType)),
    "scorer": ("an item scorer", _CALLABLE),
    "vocabulary": ("a set of words", _is(frozenset, set, tuple, list)),
    "template_library": ("template files by family", _CALLABLE),
    "template_catalogue": ("the readable templates of families and folders", _CALLABLE),
    "template_dir": ("a folder of template files", _is(Path)),
    "contract_dir": ("a folder of contract files", _is(Path)),
    "resource_dir": ("a folder of resource descriptors", _is(Path)),
    "reverifier": ("a package re-verifier of one track", _CALLABLE),
    "package_evaluator": ("a package evaluator of one track (a module)", _ANY),
    "package_metrics": ("a package's metric re-check", _CALLABLE),
    "package_report": ("a package report writer", _CALLABLE),
    "episode_panel": ("gate E's agent panel for packages of tasks (episode_responses, episode_metrics)",
                      _is(ModuleType)),
    "ie_world": ("an interactive world (forge_skills.ie.world.IEWorld)", _ANY),
    "ie_source_setup": ("an IE source's setup step", _CALLABLE),
}

_ENTRIES: dict[tuple[str, str], tuple[Any, str]] = {}
_BY_KIND: dict[str, dict[str, Any]] = {}  # entries() per kind, dropped on every registration
_LOADED = False


def register(kind: str, name: str, obj: Any, origin: str | None = None, *, replace: bool = False) -> Any:
    """Register ``obj`` as ``kind:name``. Registering the same object twice is harmless; another
    object under a taken name is an error naming both origins, unless ``replace`` (a module
    loaded again registers its new objects under its old names)."""
    origin = origin or _caller_module()
    if kind not in KINDS:
        raise DefinitionError(f"{origin}: {kind!r} is not a registry kind; kinds: {', '.join(sorted(KINDS))}")
    what, fits = KINDS[kind]
    if not fits(obj):
        raise DefinitionError(f"{origin}: {kind}:{name} must be {what}, not {type(obj).__name__}")
    key = (kind, name)
    if key in _ENTRIES and _ENTRIES[key][0] is not obj and not replace:
        raise DefinitionError(f"{kind}:{name} is registered twice: by {_ENTRIES[key][1]} and by {origin}")
    _ENTRIES[key] = (obj, origin)
    _BY_KIND.pop(kind, None)
    return obj


class _KindView(Mapping):
    """A live, read-only view of one kind's entries by name, in registration order. Reading it
    does not load plugins (modules read their own kind's entries while plugins load)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def _entries(self) -> dict[str, Any]:
        found = _BY_KIND.get(self.kind)
        if found is None:
            found = _BY_KIND[self.kind] = {n: obj for (k, n), (obj, _) in _ENTRIES.items() if k == self.kind}
        return found

    def __getitem__(self, name: str) -> Any:
        return _ENTRIES[(self.kind, name)][0]

    def __contains__(self, name: object) -> bool:
        return (self.kind, name) in _ENTRIES

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries()))

    def __len__(self) -> int:
        return len(self._entries())

    def __repr__(self) -> str:
        return f"<registry view {self.kind}: {len(self)} entries>"


def view(kind: str) -> Mapping[str, Any]:
    """The entries of ``kind`` as a live read-only mapping (see :class:`_KindView`)."""
    if kind not in KINDS:
        raise DefinitionError(f"{kind!r} is not a registry kind")
    return _KindView(kind)


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
    return dict(_KindView(kind)._entries())


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
