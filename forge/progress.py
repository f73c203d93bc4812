"""Progress display: rich bars on a terminal, plain lines otherwise (logs, CI, --json)."""

from __future__ import annotations

import sys
import time
from typing import Any


class PlainTask:
    def __init__(self, label: str, total: int, stream) -> None:
        self.label, self.total, self.stream = label, total, stream
        self.done = 0
        self.t0 = time.perf_counter()

    def advance(self, n: int = 1) -> None:
        self.done += n

    def finish(self) -> None:
        print(f"  {self.label:<34} {self.done}/{self.total}  {time.perf_counter() - self.t0:.1f}s",
              file=self.stream, flush=True)


class RichTask:
    def __init__(self, progress: Any, label: str, total: int) -> None:
        self.progress = progress
        self.id = progress.add_task(label, total=total)

    def advance(self, n: int = 1) -> None:
        self.progress.advance(self.id, n)

    def finish(self) -> None:
        self.progress.update(self.id, completed=self.progress.tasks[self.id].total)


class Progress:
    """Hands out one task per workflow node; prints stage headers."""

    def __init__(self, *, enabled: bool = True, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.rich = None
        if enabled and self.stream.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn

            self.rich = RichProgress(TextColumn("{task.description:<34}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), transient=False)
            self.rich.start()

    def stage(self, name: str) -> None:
        if not self.enabled:
            return
        if self.rich:
            self.rich.console.print(f"[bold]{name}[/bold]")
        else:
            print(name, file=self.stream, flush=True)

    def task(self, label: str, total: int):
        if not self.enabled:
            return None
        if self.rich:
            return RichTask(self.rich, label, total)
        return PlainTask(label, total, self.stream)

    def close(self) -> None:
        if self.rich:
            self.rich.stop()
            self.rich = None
