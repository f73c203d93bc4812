"""Finding, reading and validating expert templates.

A template reference is a stable label (``builtin:tabletop/visibility_yesno.yaml``, a plugin's
``<library>:<family>/<file>``, or ``dir:<folder name>/<file>`` for a folder of the intent's) so
that template ids, and every binding and item drawn from them, do not depend on where forge,
the project or its template folders lie; the file's path travels beside the label as a location
parameter. Libraries are folders of families, registered as ``template_dir:<library>``.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forge.errors import DefinitionError
from forge.paths import list_files
from forge.yamlfile import TEMPLATE_LIMITS, read_yaml
from forge.vocabulary import capabilities, question_types


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
    assumptions: dict[str, str] = Field(default_factory=dict, description="conventions the key relies on (see "
                                        "conventions.py) -> the sentence stating each, or 'source' for the "
                                        "source's own statement")
    media: dict[str, Any]
    scoring: dict[str, Any]
    max_per_evidence: int = Field(2, ge=1, le=50)


def builtin_root() -> Path:
    return Path(str(importlib.resources.files("forge_templates")))


def libraries() -> dict[str, Path]:
    from forge.registry import entries

    return {name: Path(root) for name, root in entries("template_dir").items()}


def template_refs(families: list[str], extra_dirs: list[Path]) -> dict[str, tuple[str, Path]]:
    """Template id -> (stable label, path) for the source's families plus the user's folders."""
    found: dict[str, tuple[str, Path]] = {}
    libs = libraries()
    for family in families:
        homes = [(lib, root / family) for lib, root in libs.items() if (root / family).is_dir()]
        if not homes:
            raise DefinitionError(f"template family {family!r} is in no template library "
                                  f"({', '.join(f'{n}: {r}' for n, r in libs.items())})")
        for lib, root in homes:
            for path in sorted(root.glob("*.yaml")):
                if path.stem in found:
                    raise DefinitionError(f"{path}: template id {path.stem!r} is defined twice "
                                          f"(also {found[path.stem][1]})")
                found[path.stem] = (f"{lib}:{family}/{path.name}", path)
    for d in extra_dirs:
        if not d.is_dir():
            raise DefinitionError(f"{d}: template folder not found")
        for path in list_files(d, "*.yaml", what="template folder"):
            found[path.stem] = (f"dir:{d.name}/{path.relative_to(d).as_posix()}", path)
    return found


def template_path(params: dict[str, Any]) -> Path:
    """Where a template invocation's file is: its location parameter, else its library label."""
    return Path(params["path"]) if params.get("path") else resolve_label(params["label"])


def resolve_label(label: str) -> Path:
    lib, _, rest = label.partition(":")
    if lib == "dir":
        if Path(rest).is_absolute():  # a label written before folder labels were made relative
            return Path(rest)
        raise DefinitionError(f"template reference {label!r} is in an intent's folder: its path must be given")
    libs = libraries()
    if lib in libs:
        return libs[lib] / rest
    raise DefinitionError(f"cannot resolve template reference {label!r}: no template library {lib!r} "
                          f"(libraries: {sorted(libs)})")


def read_template(path: Path) -> TemplateFile:
    if not path.is_file():
        raise DefinitionError(f"{path}: template file not found")
    raw = read_yaml(path, TEMPLATE_LIMITS, what="template", error=DefinitionError).data
    try:
        tpl = TemplateFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        raise DefinitionError(f"{path}: invalid template: {field}: {first['msg']}") from None
    if tpl.id != path.stem:
        raise DefinitionError(f"{path}: template id {tpl.id!r} must match the file name {path.stem!r}")
    if tpl.capability not in capabilities():
        raise DefinitionError(f"{path}: unknown capability {tpl.capability!r}")
    if tpl.question_type not in question_types():
        raise DefinitionError(f"{path}: unknown question type {tpl.question_type!r}")
    return tpl


def template_code(tpl: TemplateFile) -> dict[str, str]:
    """The registered code a template's items depend on, as code labels -> source files: its answer
    rule and that rule's re-verifier, its question type (solvers, chance, key checks) and the
    scoring protocol the question type names when a plugin registers it (built-in protocols are
    the scorer's own, which the package and the contracts import)."""
    from forge.registry import entries, registered_code

    files: dict[str, str] = {}
    rule = tpl.answer_rule.get("rule")
    for kind, name in (("answer_rule", rule), ("rule_reverifier", rule), ("question_type", tpl.question_type)):
        if isinstance(name, str) and name in entries(kind):
            files.update(registered_code(kind, name))
    protocol = getattr(entries("question_type").get(tpl.question_type), "protocol", None)
    if isinstance(protocol, str) and protocol in entries("scoring_protocol"):
        files.update(registered_code("scoring_protocol", protocol))
    return files


def template_catalogue(families: list[str], extra_dirs: list[Path]) -> list[dict[str, Any]]:
    """What each readable template offers: id, capability, question type, where it comes from.
    Templates that cannot be read are left out here; the build reports them when it loads them."""
    rows = []
    for tid, (label, path) in sorted(template_refs(families, extra_dirs).items()):
        try:
            tpl = read_template(path)
        except DefinitionError:
            continue
        rows.append({"id": tid, "capability": tpl.capability, "question_type": tpl.question_type,
                     "label": label, "family": label.split(":", 1)[1].split("/")[0] if not label.startswith("dir:")
                     else str(path.parent), "path": str(path)})
    return rows
