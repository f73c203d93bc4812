"""The evaluation intent: ``intent.yaml`` parsed and validated into an :class:`Intent`.

Errors name the file, the field path and the line, and raise :class:`IntentError`
(exit code 2 in the CLI).
"""

from __future__ import annotations

import difflib
import re
import typing
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Callable, Union

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator,
                      model_validator)

from forge.errors import DefinitionError, IntentError, UsageError
from forge.keys import digest
from forge.models.config import ModelRoles
from forge.paths import too_wide
from forge.sources import source_kinds
from forge.yamlfile import INTENT_LIMITS, read_yaml


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _default_panel() -> list[str]:
    from forge.evaluation.solvers import DEFAULT_PANEL  # imported when used: it brings the evaluation

    return list(DEFAULT_PANEL)


class GateSettings(_Strict):
    grey_batch: int = Field(6, ge=1, le=1000, description="items per template synthesized before full synthesis")
    grey_min_valid: float = Field(0.5, ge=0.0, le=1.0, description="valid fraction a grey batch needs")
    blind_margin: float = Field(0.05, ge=0.0, le=1.0, description="allowed blind accuracy above chance")
    blind_alpha: float = Field(0.05, gt=0.0, lt=1.0, description="significance of the blind excess (Bonferroni over the solvers)")
    min_blind_items: int = Field(8, ge=1, description="fewest items a template needs for the blind test (the exact binomial test guards small samples)")
    panel: list[str] = Field(default_factory=lambda: _default_panel(),
                             description="gate E's built-in panel (simulated solvers, builtin:NAME[:ARG]); the "
                                         "models of models.panel answer beside them")
    panel_agents: list[str] | None = Field(None, description="gate E's built-in agents for interactive tasks (default: "
                                                             "the track's: the reference, a random and a greedy agent)")
    irt_bootstrap: int = Field(1000, ge=0, le=100_000, description="gate F: model-bootstrap replicates of the IRT "
                                                                   "fit (0: none)")

    @field_validator("panel")
    @classmethod
    def _known_solvers(cls, value: list[str]) -> list[str]:
        from forge.evaluation.solvers import solver

        for spec in value:
            if not spec.startswith("builtin:"):
                raise ValueError(f"{spec!r}: the gate E panel lists built-in solvers (builtin:NAME[:ARG]); models "
                                 "go under models.panel")
            try:
                solver(spec[len("builtin:"):])
            except (ValueError, UsageError) as exc:
                raise ValueError(f"{spec!r}: {exc}") from None
        if len(set(value)) != len(value):
            raise ValueError("a solver is listed twice")
        return value


class RepairPolicy(_Strict):
    budget: int = Field(2, ge=0, le=10, description="repair attempts per lineage before final rejection")
    escalate_after: int = Field(3, ge=2, description="same symptom in this many artifacts of one producer "
                                                     "escalates to one re-execution of the producer")


class IntentBase(_Strict):
    """A researcher's evaluation intent (its ``sources`` are added from the registered source
    kinds, see :func:`intent_model`)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$", description="package name (lowercase slug)")
    version: str = Field("0.1.0", pattern=r"^[0-9]+(\.[0-9]+)*$")
    description: str = ""
    seed: int = 0
    gates: GateSettings = Field(default_factory=GateSettings)
    repair: RepairPolicy = RepairPolicy()
    contracts: list[str] = Field(default_factory=list, description="extra contract folders, relative to the intent")
    templates_dirs: list[str] = Field(default_factory=list, description="extra template folders, relative to the intent")
    skills: dict[str, str] = Field(default_factory=dict, description="role -> skill name overrides")
    models: ModelRoles = Field(default_factory=ModelRoles,
                               description="model roles on OpenAI-compatible endpoints (coordinator, synthesizer, "
                                           "verifier, panel, judges); a role left out runs on its built-in backend")

    @field_validator("name")
    @classmethod
    def _name_shadows_no_module(cls, value: str) -> str:
        """The package's Python module is the name with '-' as '_': one named like a plugin or a
        standard-library module would be imported in its place from the package folder."""
        import sys

        from forge.registry import plugin_modules

        module = value.replace("-", "_")
        plugins = {**plugin_modules(), "forge": "forge itself"}
        if module in plugins:
            raise ValueError(f"the package module {module!r} would have the import name of the plugin "
                             f"{plugins[module]!r} and hide it; choose another name")
        if module in sys.stdlib_module_names:
            raise ValueError(f"the package module {module!r} would have the name of Python's standard module "
                             f"{module!r} and hide it; choose another name")
        return value

    @model_validator(mode="after")
    def _track_has_its_section(self) -> "IntentBase":
        spec = _tracks().get(self.track)
        if spec is not None and spec.section and getattr(self, spec.section, None) is None:
            raise ValueError(f"track {self.track!r} needs its section {spec.section!r}")
        return self


def _tracks() -> dict[str, Any]:
    from forge.registry import entries

    return entries("track")


def _known_track(value: str) -> str:
    known = _tracks()
    if value not in known:
        raise ValueError(f"unknown track {value!r}{did_you_mean([value], known)}; known: {sorted(known)}")
    return value


@lru_cache(maxsize=1)
def intent_model() -> type[IntentBase]:
    """The intent schema: the fixed sections plus ``sources``, a list whose entries are told
    apart by ``kind`` and validated by that kind's registered schema."""
    kinds = tuple(source_kinds().values())
    if not kinds:
        raise DefinitionError("no source kind is registered (is the builtin plugin installed?)")
    member = kinds[0] if len(kinds) == 1 else Annotated[Union[kinds], Field(discriminator="kind")]
    tracks = _tracks()
    if not tracks:
        raise DefinitionError("no track is registered (is the builtin plugin installed?)")
    # Each track's own section; required when it is the only track that has one.
    sectioned = [t for t in tracks.values() if t.section]
    sections = {t.section: ((t.section_model, ...) if len(sectioned) == 1 else (t.section_model | None, None))
                for t in sectioned}
    return create_model("Intent", __base__=IntentBase,
                        track=(Annotated[str, AfterValidator(_known_track)],
                               Field(next(iter(tracks)), description=f"the track to build: {', '.join(tracks)}")),
                        **sections,
                        sources=(list[member], Field(min_length=1, description="where evidence comes from; "
                                                     "each entry is one registered source kind")))


class LoadedIntent(BaseModel):
    """An intent together with where it came from."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    intent: IntentBase
    path: Path
    raw: dict[str, Any]
    # Why each capability is in the intent when a model role chose it (capability -> reasons).
    chosen_by: dict[str, list[str]] = Field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        return digest(self.raw)

    @property
    def construction(self) -> dict[str, Any]:
        """The intent without its model roles: what the artifacts are built from. Which model
        fills a role reaches only the artifacts that role makes (a changed judge re-judges,
        nothing else is rebuilt). Source folders are resolved, so an intent copied elsewhere that
        names the same data builds the same artifacts, and one naming other data does not."""
        out = {k: v for k, v in self.raw.items() if k != "models"}
        if isinstance(out.get("sources"), list):
            out["sources"] = [self._located(entry, src) for entry, src in zip(out["sources"], self.intent.sources)]
        return out

    def _located(self, entry: Any, source: Any) -> Any:
        folders = {f: str(self.resolve(getattr(source, f))) for f in type(source).FOLDERS if getattr(source, f, None)}
        return {**entry, **folders} if isinstance(entry, dict) and folders else entry

    def resolve(self, relative: str) -> Path:
        return (self.path.parent / relative).resolve()


def read_intent(path: str | Path) -> dict[str, Any]:
    """The intent file's mapping, parsed (bounded) but not validated."""
    return read_intent_document(path).data


def read_intent_document(path: str | Path) -> Any:
    """The intent file parsed (bounded) with the line of every field, not validated: read once
    by a build, which decides its track from it and then validates it (``load_intent``)."""
    p = _intent_path(path)
    document = read_yaml(p, INTENT_LIMITS, what="intent")
    if not isinstance(document.data, dict):
        raise IntentError(f"{p}: expected a mapping at the top level, found {type(document.data).__name__}")
    return document


def _intent_path(path: str | Path) -> Path:
    p = Path(path)
    if not p.exists():
        raise IntentError(f"{p}: intent file not found")
    if p.is_dir():
        raise IntentError(f"{p}: is a folder, expected an intent YAML file")
    return p


def load_intent(path: str | Path, rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                document: Any = None) -> LoadedIntent:
    """Read and validate ``path``; every failure is an :class:`IntentError` naming the field.
    ``rewrite`` may change the parsed mapping before validation (a coordinator's proposal, a
    synthesizer's template folder); errors still name the file's lines. ``document``: the file as
    ``read_intent_document`` already parsed it."""
    p = _intent_path(path)
    document = document if document is not None else read_intent_document(p)
    raw, lines = document.data, document.lines
    if rewrite is not None:
        raw = rewrite(raw)
    try:
        intent = intent_model().model_validate(raw)
    except ValidationError as exc:
        raise IntentError(_format_validation(p, exc, lines)) from None
    loaded = LoadedIntent(intent=intent, path=p.resolve(), raw=raw)
    missing = _missing_folders(loaded, lines)
    if missing:
        raise IntentError(f"{p}: invalid intent ({len(missing)} error{'s' if len(missing) > 1 else ''})\n"
                          + "\n".join(missing))
    return loaded


def _missing_folders(loaded: LoadedIntent, lines: dict[tuple[Any, ...], int]) -> list[str]:
    """Folders the intent names (data roots, template and contract folders) that do not exist,
    checked before anything runs. A relative path is read from the intent's own folder, which
    is what breaks when an intent is copied away from its data."""
    named: list[tuple[tuple[Any, ...], str]] = [(("sources", i, f), getattr(s, f))
                                                for i, s in enumerate(loaded.intent.sources)
                                                for f in type(s).FOLDERS if getattr(s, f, None)]
    named += [(("templates_dirs", i), d) for i, d in enumerate(loaded.intent.templates_dirs)]
    named += [(("contracts", i), d) for i, d in enumerate(loaded.intent.contracts)]
    out = []
    for loc, given in named:
        folder = loaded.resolve(given)
        field = ".".join(str(x) for x in loc)
        at = f"  {loaded.path}:{_nearest_line(loc, lines)}: {field}"
        if not folder.is_dir():
            where = "" if Path(given).is_absolute() else f" (a relative path is read from the intent's folder, {loaded.path.parent})"
            out.append(f"{at}: folder {folder} not found{where}")
            continue
        if too_wide(folder):
            out.append(f"{at}: {given!r} resolves to {folder}, which is not a dataset folder; name the folder "
                       "that holds the data")
    return out


def intent_json_schema() -> dict[str, Any]:
    schema = intent_model().model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "forge intent"
    return schema


def _format_validation(path: Path, exc: ValidationError, lines: dict[tuple[Any, ...], int]) -> str:
    out = [f"{path}: invalid intent ({exc.error_count()} error{'s' if exc.error_count() > 1 else ''})"]
    for err in exc.errors():
        # Drop discriminator tags pydantic inserts (e.g. 'pybullet_tabletop') from the path.
        loc = tuple(part for part in err["loc"] if not (isinstance(part, str) and part in source_kinds()))
        field = ".".join(str(x) for x in loc) or "(top level)"
        line = _nearest_line(loc, lines)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field" + did_you_mean([str(loc[-1])], _fields_beside(loc))
        elif err["type"] == "missing":
            msg = "required field is missing"
        msg = re.sub(r"^Value error, ", "", msg)
        got = err.get("input")
        shown = repr(got) if len(repr(got)) <= 60 else repr(got)[:57] + "..."
        suffix = f" (got {shown})" if err["type"] not in {"missing", "extra_forbidden"} and not isinstance(got, (dict, list)) else ""
        out.append(f"  {path}:{line}: {field}: {msg}{suffix}")
    return "\n".join(out)


def did_you_mean(unknown: list[str], known: Any) -> str:
    """' (did you mean 'x'?)' for the closest known names of misspelled ones, or ''."""
    guesses = [m for u in unknown for m in difflib.get_close_matches(u, [str(k) for k in known], n=1, cutoff=0.7)]
    if not guesses:
        return ""
    return " (did you mean " + ", ".join(repr(g) for g in dict.fromkeys(guesses)) + "?)"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through lists, unions and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _fields_beside(loc: tuple[Any, ...]) -> set[str]:
    """The field names allowed where ``loc`` names an unknown one (its siblings in the schema)."""
    models: list[type[BaseModel]] = [intent_model()]
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        inner = [m for model in models if part in model.model_fields
                 for m in _models_in(model.model_fields[part].annotation)]
        models = inner or models  # a discriminator tag, not a field: stay on the union's models
    return {name for model in models for name in model.model_fields}


def _nearest_line(loc: tuple[Any, ...], lines: dict[tuple[Any, ...], int]) -> int:
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in lines:
            return lines[loc[:cut]]
    return 1
