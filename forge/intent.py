"""The evaluation intent: ``intent.yaml`` parsed and validated into an :class:`Intent`.

Errors name the file, the field path and the line, and raise :class:`IntentError`
(exit code 2 in the CLI).
"""

from __future__ import annotations

import difflib
import re
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from forge.errors import IntentError
from forge.keys import digest
from forge.vocabulary import CAPABILITIES, QUESTION_TYPES


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ImageSize(_Strict):
    width: int = Field(320, ge=64, le=1920, description="image width in pixels")
    height: int = Field(240, ge=48, le=1080, description="image height in pixels")


class ObjectCount(_Strict):
    min: int = Field(4, ge=1, le=12)
    max: int = Field(8, ge=1, le=12)

    @model_validator(mode="after")
    def _ordered(self) -> "ObjectCount":
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        return self


class CountRange(_Strict):
    min: int = Field(1, ge=0, le=4)
    max: int = Field(2, ge=0, le=4)

    @model_validator(mode="after")
    def _ordered(self) -> "CountRange":
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        return self


class TabletopSource(_Strict):
    """pybullet tabletop scenes: an arm beside a table with objects on it."""

    kind: Literal["pybullet_tabletop"]
    scenes: int | None = Field(None, ge=1, le=5000, description="scene count; derived from items when absent")
    robot: Literal["panda", "kuka", "xarm"] = "panda"
    objects: ObjectCount = ObjectCount()
    views: int = Field(3, ge=2, le=6, description="camera views per scene")
    image: ImageSize = ImageSize()
    categories: list[str] | None = Field(None, description="object categories to draw from; all when absent")
    trays: CountRange = Field(default_factory=lambda: CountRange(min=0, max=1),
                                description="trays on the table, with objects put in them")
    lying_fraction: float = Field(0.0, ge=0.0, le=1.0, description="share of objects with an up axis dropped on their side")


class RoomSource(_Strict):
    """Room-scale household scenes in pybullet seen by a mobile robot or a quadruped along its path."""

    kind: Literal["pybullet_room"]
    scenes: int | None = Field(None, ge=1, le=5000, description="scene count; derived from items when absent")
    embodiment: Literal["husky", "laikago", "a1", "minitaur"] = "husky"
    objects: ObjectCount = ObjectCount(min=5, max=9)
    tables: CountRange = CountRange(min=1, max=2)
    trays: CountRange = CountRange(min=1, max=2)
    frames: int = Field(6, ge=2, le=8, description="frames along the camera path")
    max_turn_deg: float = Field(100.0, ge=0.0, le=150.0, description="largest total turn of the path (at least 40 degrees, or this when smaller)")
    lying_fraction: float = Field(0.4, ge=0.0, le=1.0, description="share of objects with an up axis dropped on their side")
    image: ImageSize = ImageSize()
    categories: list[str] | None = Field(None, description="object categories to draw from; all when absent")

    @property
    def views(self) -> int:
        return self.frames


class GroundSource(_Strict):
    """Ground layouts in pybullet seen from a drone (top-down) or a vehicle (forward, plus an overview)."""

    kind: Literal["pybullet_ground"]
    scenes: int | None = Field(None, ge=1, le=5000, description="scene count; derived from items when absent")
    embodiment: Literal["uav", "racecar"] = "uav"
    objects: ObjectCount = ObjectCount(min=6, max=10)
    frames: int = Field(4, ge=2, le=8, description="frames along the flight or drive")
    max_turn_deg: float = Field(40.0, ge=0.0, le=120.0)
    altitude_m: tuple[float, float] = Field((7.0, 9.0), description="drone altitude range in metres")
    image: ImageSize = ImageSize()
    categories: list[str] | None = Field(None, description="object categories to draw from; all when absent")

    @property
    def views(self) -> int:
        return self.frames + (1 if self.embodiment == "racecar" else 0)


class ImageFolderSource(_Strict):
    """Real images in a folder, read through an adapter that registers what it can."""

    kind: Literal["image_folder"]
    adapter: Literal["dota", "frames"]
    root: str = Field(description="dataset folder, relative to the intent file")
    tile: int = Field(600, ge=128, le=4096, description="DOTA: tile size in pixels (images are split like DOTA_devkit)")
    tile_overlap: int = Field(100, ge=0, le=1024)
    zoom: int = Field(0, ge=0, le=2048, description="DOTA: also cut square zoomed crops of this size whose border "
                                                    "cuts no box, so every object in them can be counted (0: none)")
    zooms_per_image: int = Field(6, ge=1, le=100)
    scenes: int | None = Field(None, ge=1, description="ignored: the folder decides the unit count")
    trust_label_completeness: bool = Field(
        False, description="treat the labels as exhaustive although the adapter cannot show it (DOTA's are not): "
                           "allows counts and absences from labels; off by default")
    media: Literal["auto", "copy", "reference"] = Field(
        "auto", description="copy pixels into the package, or only reference the dataset files; auto follows "
                            "the adapter's licence (DOTA images are never copied)")

    @property
    def views(self) -> int:
        return 1


Source = Annotated[Union[TabletopSource, RoomSource, GroundSource, ImageFolderSource], Field(discriminator="kind")]


class OESpec(_Strict):
    """What the Offline-EQA track should contain."""

    items: int = Field(2000, ge=1, le=200_000)
    focus: str | None = Field(None, description="what to evaluate, in free text; mapped to capabilities by the "
                                                "capability catalogue when `capabilities` is absent")
    capabilities: list[str] = Field(min_length=1, description="capabilities to cover; derived from `focus` when absent")
    question_types: list[str] = Field(min_length=1)
    templates: list[str] | Literal["all"] = "all"
    weights: dict[str, float] = Field(default_factory=dict, description="relative share of a capability's items "
                                                                       "(1 when absent), e.g. {counting: 0.5}")
    tolerance: float = Field(0.05, ge=0.0, le=1.0, description="allowed shortfall of each capability target, as a "
                                                               "fraction of the target, before composition is reported unmet")

    @model_validator(mode="after")
    def _weights_name_capabilities(self) -> "OESpec":
        unknown = sorted(set(self.weights) - set(self.capabilities))
        if unknown:
            raise ValueError(f"weights name capabilities the intent does not ask for: {unknown}")
        if any(w <= 0 for w in self.weights.values()):
            raise ValueError("weights must be positive")
        return self

    @model_validator(mode="before")
    @classmethod
    def _capabilities_from_focus(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("capabilities") and isinstance(data.get("focus"), str):
            from forge.capability_catalogue import capabilities_from_text

            found = capabilities_from_text(data["focus"])
            if not found:
                raise ValueError("focus names no capability the catalogue knows; list `capabilities` explicitly "
                                 f"(known: {sorted(CAPABILITIES)})")
            data = {**data, "capabilities": list(found)}
        return data

    @field_validator("capabilities")
    @classmethod
    def _known_capabilities(cls, value: list[str]) -> list[str]:
        unknown = [c for c in value if c not in CAPABILITIES]
        if unknown:
            raise ValueError(f"unknown capabilities {unknown}{did_you_mean(unknown, CAPABILITIES)}; "
                             f"known: {sorted(CAPABILITIES)}")
        return value

    @field_validator("question_types")
    @classmethod
    def _known_question_types(cls, value: list[str]) -> list[str]:
        unknown = [q for q in value if q not in QUESTION_TYPES]
        if unknown:
            raise ValueError(f"unknown question types {unknown}{did_you_mean(unknown, QUESTION_TYPES)}; "
                             f"known: {sorted(QUESTION_TYPES)}")
        return value


class GateSettings(_Strict):
    grey_batch: int = Field(6, ge=1, le=1000, description="items per template synthesized before full synthesis")
    grey_min_valid: float = Field(0.5, ge=0.0, le=1.0, description="valid fraction a grey batch needs")
    blind_margin: float = Field(0.05, ge=0.0, le=1.0, description="allowed blind accuracy above chance")
    blind_alpha: float = Field(0.05, gt=0.0, lt=1.0, description="significance of the blind excess (Bonferroni over the solvers)")
    min_blind_items: int = Field(8, ge=1, description="fewest items a template needs for the blind test (the exact binomial test guards small samples)")


class RepairPolicy(_Strict):
    budget: int = Field(2, ge=0, le=10, description="repair attempts per lineage before final rejection")
    escalate_after: int = Field(3, ge=2, description="same symptom in this many artifacts of one producer "
                                                     "escalates to one re-execution of the producer")


class Intent(_Strict):
    """A researcher's evaluation intent."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$", description="package name (lowercase slug)")
    version: str = Field("0.1.0", pattern=r"^[0-9]+(\.[0-9]+)*$")
    description: str = ""
    seed: int = 0
    track: Literal["oe"] = "oe"
    oe: OESpec
    sources: list[Source] = Field(min_length=1)
    gates: GateSettings = GateSettings()
    repair: RepairPolicy = RepairPolicy()
    contracts: list[str] = Field(default_factory=list, description="extra contract folders, relative to the intent")
    templates_dirs: list[str] = Field(default_factory=list, description="extra template folders, relative to the intent")
    skills: dict[str, str] = Field(default_factory=dict, description="role -> skill name overrides")


class LoadedIntent(BaseModel):
    """An intent together with where it came from."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    intent: Intent
    path: Path
    raw: dict[str, Any]

    @property
    def content_hash(self) -> str:
        return digest(self.raw)

    def resolve(self, relative: str) -> Path:
        return (self.path.parent / relative).resolve()


def load_intent(path: str | Path) -> LoadedIntent:
    """Read and validate ``path``; every failure is an :class:`IntentError` naming the field."""
    p = Path(path)
    if not p.exists():
        raise IntentError(f"{p}: intent file not found")
    if p.is_dir():
        raise IntentError(f"{p}: is a folder, expected an intent YAML file")
    text = p.read_text(encoding="utf-8", errors="replace")
    try:
        node = yaml.compose(text)
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark else str(p)
        problem = getattr(exc, "problem", None) or str(exc)
        raise IntentError(f"{where}: YAML syntax error: {problem}") from None
    if not isinstance(raw, dict):
        raise IntentError(f"{p}: expected a mapping at the top level, found {type(raw).__name__}")
    lines = _line_index(node)
    try:
        intent = Intent.model_validate(raw)
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
    named: list[tuple[tuple[Any, ...], str]] = [(("sources", i, "root"), s.root) for i, s in enumerate(loaded.intent.sources)
                                               if getattr(s, "root", None)]
    named += [(("templates_dirs", i), d) for i, d in enumerate(loaded.intent.templates_dirs)]
    named += [(("contracts", i), d) for i, d in enumerate(loaded.intent.contracts)]
    out = []
    for loc, given in named:
        folder = loaded.resolve(given)
        if not folder.is_dir():
            where = "" if Path(given).is_absolute() else f" (a relative path is read from the intent's folder, {loaded.path.parent})"
            field = ".".join(str(x) for x in loc)
            out.append(f"  {loaded.path}:{_nearest_line(loc, lines)}: {field}: folder {folder} not found{where}")
    return out


def intent_json_schema() -> dict[str, Any]:
    schema = Intent.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "forge intent"
    return schema


def _line_index(node: yaml.Node | None) -> dict[tuple[Any, ...], int]:
    """Map each field path to the 1-based line where it appears."""
    index: dict[tuple[Any, ...], int] = {}

    def walk(n: yaml.Node, path: tuple[Any, ...]) -> None:
        index[path] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            for key, value in n.value:
                k = key.value
                index[path + (k,)] = key.start_mark.line + 1
                walk(value, path + (k,))
                index[path + (k,)] = key.start_mark.line + 1
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                walk(item, path + (i,))

    if node is not None:
        walk(node, ())
    return index


def _format_validation(path: Path, exc: ValidationError, lines: dict[tuple[Any, ...], int]) -> str:
    out = [f"{path}: invalid intent ({exc.error_count()} error{'s' if exc.error_count() > 1 else ''})"]
    for err in exc.errors():
        # Drop discriminator tags pydantic inserts (e.g. 'pybullet_tabletop') from the path.
        loc = tuple(part for part in err["loc"] if not (isinstance(part, str) and part in _SOURCE_KINDS))
        field = ".".join(str(x) for x in loc) or "(top level)"
        line = _nearest_line(loc, lines)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field" + did_you_mean([str(loc[-1])], _fields_beside(loc))
        elif err["type"] == "missing":
            msg = "required field is missing"
        msg = re.sub(r"^Value error, ", "", msg)
        got = err.get("input")
        suffix = f" (got {got!r})" if err["type"] not in {"missing", "extra_forbidden"} and not isinstance(got, (dict, list)) else ""
        out.append(f"  {path}:{line}: {field}: {msg}{suffix}")
    return "\n".join(out)


_SOURCE_KINDS = {"pybullet_tabletop", "pybullet_room", "pybullet_ground", "image_folder"}


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
    models: list[type[BaseModel]] = [Intent]
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
