"""A temporary workspace for benchmark builds: the example intent resized, with an editable
copy of the template library (so a one-template edit can be timed)."""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import yaml

from forge.build import BuildOptions
from forge_skills.oe.synthesize.templates import builtin_root

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


class _WorkerPeaks:
    """The peak resident memory (VmHWM) of this process's Python worker processes, read from
    /proc twice a second while they live (a process's peak stays in VmHWM until it exits, so a
    worker is measured exactly unless it lives under half a second).

    ``RUSAGE_CHILDREN`` would also count a helper command a library starts (numpy runs ``lscpu``
    when scipy is first imported): its forked child briefly maps the whole parent, so its peak
    is the parent's size at that moment, not a worker's."""

    def __init__(self) -> None:
        self.peak_kb = 0
        self._lock = threading.Lock()
        self.available = Path("/proc/self/status").is_file()
        if self.available:
            threading.Thread(target=self._run, name="worker-memory", daemon=True).start()

    def _run(self) -> None:
        me, python = str(os.getpid()), os.path.realpath(sys.executable)
        while True:
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit():
                    self._read(entry, me, python)
            time.sleep(0.5)

    def _read(self, proc: Path, parent: str, python: str) -> None:
        try:
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[1] != parent:
                return
            if os.path.realpath(proc / "exe") != python:
                return
            for line in (proc / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    with self._lock:
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))
        except (OSError, IndexError, ValueError):  # the process ended while being read
            pass


_WORKERS = _WorkerPeaks()


def peak_memory_mb() -> tuple[float, float]:
    """Peak resident memory of this process and of its largest worker process (MB)."""
    if _WORKERS.available:
        children = _WORKERS.peak_kb / 1024
    else:  # no /proc: every child process, helpers included
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, children
