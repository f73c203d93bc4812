"""A temporary workspace for benchmark builds: the example intent resized, with an editable
copy of the template library (so a one-template edit can be timed)."""

from __future__ import annotations

import resource
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from forge.build import BuildOptions
from forge_skills.template_library import builtin_root

ROOT = Path(__file__).resolve().parents[1]


def prepare(items: int, workers: int, prefix: str, *, copy_templates: bool = True) -> tuple[Path, Path, BuildOptions]:
    """(work folder, intent path, build options) for ``items`` items of the example intent."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    intent: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "tabletop_spatial.yaml").read_text())
    intent["oe"]["items"] = items
    if copy_templates:
        intent["templates_dirs"] = ["templates"]
        shutil.copytree(builtin_root() / "tabletop", work / "templates")
    path = work / "intent.yaml"
    path.write_text(yaml.safe_dump(intent, sort_keys=False))
    return work, path, BuildOptions(store_dir=work / "store", out_dir=work / "out", workers=workers, progress=False)


def peak_memory_mb() -> tuple[float, float]:
    """Peak resident memory of this process and of its largest child (MB)."""
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
