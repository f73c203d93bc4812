"""Resource descriptors: which sources and simulators exist, what they offer, which skills
collect and structure them. Sources are added as resources, never as engine special cases."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forge.errors import DefinitionError


class ReferentRules(BaseModel):
    """What a person needs to make out an object in a source's views (checked per named object)."""

    model_config = ConfigDict(extra="forbid")
    min_visible_share: float | None = Field(None, ge=0, le=1, description="share of the object's whole projection "
                                                                         "that must show (not hidden by others)")
    min_contrast: float | None = Field(None, ge=0, description="CIELAB distance from the pixels around it")
    max_truncation: float | None = Field(None, ge=0, le=1, description="share of its projected box outside the image")
    min_pixels: dict[str, int] = Field(default_factory=dict, description="pixels to recognise each category "
                                                                         "('default' for the rest)")
    look_alike: list[list[str]] = Field(default_factory=list, description="groups of categories a person cannot "
                                        "tell apart in these views (plain blocks of like proportions): an object "
                                        "may not be named where one of its colour and a look-alike kind is in view")


class ResourceDescriptor(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str
    description: str
    simulator: str | None = None
    requires: list[str] = Field(default_factory=list)
    track: str
    fields: dict[str, str]
    operations: dict[str, str]
    workflow: dict[str, str]
    templates: list[str] = Field(description="template families (folders of the built-in library) this source serves")
    licence: dict[str, Any] = Field(default_factory=lambda: {"redistribute": True},
                                    description="whether collected pixels may be copied into a package, and why")
    scale: dict[str, str] = Field(description="parameter: the plan skill's unit index; field: the source's unit count")
    conventions: dict[str, Any] = Field(default_factory=dict, description="what this source's scenes take as given, "
                                        "stated to the model where a key relies on it: convention id -> text, or "
                                        "{text, body, min_pixels} when a static body must be in view for it to hold "
                                        "(a scale reference)")
    referents: ReferentRules | None = Field(None, description="what a person needs to make out an object a "
                                            "question names")
    items_per_view: float | None = Field(None, gt=0, description="items one view is expected to yield across "
                                         "the source's templates, after admission and the gates: sizes the first "
                                         "collection (top-ups follow the yield measured on the build)")

    def available(self) -> tuple[bool, str]:
        from forge.skills import module_available

        for module in self.requires:
            found, why = module_available(module)
            if not found:
                return False, f"missing Python module {module!r} ({why})"
        return True, "ok"


@lru_cache(maxsize=1)
def descriptors() -> dict[str, ResourceDescriptor]:
    return {kind: d for kind, (d, _path) in _read_descriptors().items()}


def descriptor_files() -> dict[str, str]:
    """Stable label -> path of every descriptor: what a skill reading descriptors depends on."""
    return {f"descriptor:{kind}": str(path) for kind, (_d, path) in _read_descriptors().items()}


@lru_cache(maxsize=1)
def _read_descriptors() -> dict[str, tuple[ResourceDescriptor, Path]]:
    from forge.registry import entries

    out: dict[str, tuple[ResourceDescriptor, Path]] = {}
    for path in sorted(p for root in entries("resource_dir").values() for p in Path(root).glob("*.yaml")):
        raw = yaml.safe_load(path.read_text())
        if not isinstance(raw, dict) or "kind" not in raw or "workflow" not in raw:
            continue  # data files such as object catalogues live beside descriptors
        if isinstance(raw.get("templates"), str):
            raw["templates"] = [raw["templates"]]
        try:
            d = ResourceDescriptor.model_validate(raw)
        except ValidationError as exc:
            raise DefinitionError(f"{path}: invalid resource descriptor: {exc}") from None
        out[d.kind] = (d, path)
    return out


def descriptor(kind: str) -> ResourceDescriptor:
    try:
        return descriptors()[kind]
    except KeyError:
        raise DefinitionError(f"unknown resource kind {kind!r}; known: {sorted(descriptors())}") from None


def describe() -> list[dict[str, Any]]:
    rows = []
    for d in descriptors().values():
        ok, why = d.available()
        rows.append({"kind": d.kind, "track": d.track, "simulator": d.simulator, "available": ok,
                     "reason": why, "description": " ".join(d.description.split()),
                     "operations": sorted(d.operations), "fields": sorted(d.fields), "templates": d.templates,
                     "licence": d.licence})
    return rows
