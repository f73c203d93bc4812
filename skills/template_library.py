"""Finding, reading and validating expert templates.

A template reference is a stable label (``builtin:tabletop/visibility_yesno.yaml`` or
``dir:<absolute path>`` for a user's folder) so that built-in template ids do not depend on
where forge is installed.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forge.errors import DefinitionError
from forge.vocabulary import CAPABILITIES, QUESTION_TYPES


class TemplateFile(BaseModel):
    """Schema of a template YAML file."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    version: int = 1
    capability: str
    question_type: str
    scope: str = Field(pattern=r"^(view|scene)$")
    slots: dict[str, Any]
    answer_rule: dict[str, Any]
    admission: dict[str, Any] = Field(default_factory=dict)
    visibility: dict[str, Any] = Field(default_factory=dict, description="where each slot must be seen: views, "
                                                                         "pixels, truncation (see admission)")
    options: dict[str, Any] = Field(default_factory=dict)
    realizations: list[str] = Field(min_length=1)
    media: dict[str, Any]
    scoring: dict[str, Any]
    max_per_evidence: int = Field(2, ge=1, le=50)


def builtin_root() -> Path:
    return Path(str(importlib.resources.files("forge_templates")))


def template_refs(families: list[str], extra_dirs: list[Path]) -> dict[str, tuple[str, Path]]:
    """Template id -> (stable label, path) for the source's families plus the user's folders."""
    found: dict[str, tuple[str, Path]] = {}
    for family in families:
        root = builtin_root() / family
        if not root.is_dir():
            raise DefinitionError(f"{root}: template family {family!r} not found")
        for path in sorted(root.glob("*.yaml")):
            if path.stem in found:
                raise DefinitionError(f"{path}: template id {path.stem!r} is defined twice")
            found[path.stem] = (f"builtin:{family}/{path.name}", path)
    for d in extra_dirs:
        if not d.is_dir():
            raise DefinitionError(f"{d}: template folder not found")
        for path in sorted(d.glob("*.yaml")):
            found[path.stem] = (f"dir:{path.resolve()}", path)
    return found


def resolve_label(label: str) -> Path:
    if label.startswith("builtin:"):
        return builtin_root() / label.split(":", 1)[1]
    if label.startswith("dir:"):
        return Path(label.split(":", 1)[1])
    raise DefinitionError(f"cannot resolve template reference {label!r}")


def read_template(path: Path) -> TemplateFile:
    try:
        raw = yaml.safe_load(path.read_text())
        tpl = TemplateFile.model_validate(raw)
    except FileNotFoundError:
        raise DefinitionError(f"{path}: template file not found") from None
    except yaml.YAMLError as exc:
        raise DefinitionError(f"{path}: YAML syntax error: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        raise DefinitionError(f"{path}: invalid template: {field}: {first['msg']}") from None
    if tpl.id != path.stem:
        raise DefinitionError(f"{path}: template id {tpl.id!r} must match the file name {path.stem!r}")
    if tpl.capability not in CAPABILITIES:
        raise DefinitionError(f"{path}: unknown capability {tpl.capability!r}")
    if tpl.question_type not in QUESTION_TYPES:
        raise DefinitionError(f"{path}: unknown question type {tpl.question_type!r}")
    return tpl
