"""A temporary workspace for benchmark builds: the example intent resized, with an editable
copy of the template library (so a one-template edit can be timed)."""

from __future__ import annotations

import resource
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import yaml

from forge.build import BuildOptions
from forge_skills.synthesize.templates import builtin_root

ROOT = Path(__file__).resolve().parents[1]


def prepare(items: int, workers: int, prefix: str, *, copy_templates: bool = True,
            example: str = "tabletop_spatial") -> tuple[Path, Path, BuildOptions]:
    """(work folder, intent path, build options) for ``items`` items of an example intent."""
    from forge.resources import descriptor

    work = Path(tempfile.mkdtemp(prefix=prefix))
    intent: dict[str, Any] = yaml.safe_load((ROOT / "examples" / f"{example}.yaml").read_text())
    intent["oe"]["items"] = items
    for src in intent["sources"]:
        if "root" in src:
            src["root"] = str((ROOT / "examples" / src["root"]).resolve())
    if copy_templates:  # an editable copy of the source's template families
        intent["templates_dirs"] = ["templates"]
        (work / "templates").mkdir()
        for family in descriptor(intent["sources"][0]["kind"]).templates:
            for f in (builtin_root() / family).glob("*.yaml"):
                shutil.copy(f, work / "templates" / f.name)
    path = work / "intent.yaml"
    path.write_text(yaml.safe_dump(intent, sort_keys=False))
    return work, path, BuildOptions(store_dir=work / "store", out_dir=work / "out", workers=workers, progress=False)


FOLDER_FIELDS = ("root", "data_root", "demos")  # source fields holding folders relative to the example


def example_intent(example: str, prefix: str, edit: Callable[[dict[str, Any]], None]) -> tuple[Path, Path]:
    """(work folder, intent path): an example intent with its source folders made absolute and
    ``edit`` applied, written into a fresh temporary folder."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    intent: dict[str, Any] = yaml.safe_load((ROOT / "examples" / f"{example}.yaml").read_text())
    for src in intent["sources"]:
        for key in FOLDER_FIELDS:
            if key in src:
                src[key] = str((ROOT / "examples" / src[key]).resolve())
    edit(intent)
    path = work / "intent.yaml"
    path.write_text(yaml.safe_dump(intent, sort_keys=False))
    return work, path


def peak_memory_mb() -> tuple[float, float]:
    """Peak resident memory of this process and of its largest child (MB)."""
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
