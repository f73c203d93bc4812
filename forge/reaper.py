"""A watchdog that ends a driver's helper processes when the driver dies, however it dies.

A local Ray cluster is a tree of processes under the driver (the GCS, the raylet, its agents,
the actors); when the driver is killed, some of them notice only after a minute or more. The
reaper runs in its own session, keeps a record of every process descending from the driver
(with its start time, so a reused pid is never touched) and, once the driver is gone, kills the
ones still alive. SIGUSR1 asks it to do so at once (the driver shut its cluster down and wants no
stragglers). Linux only (it reads ``/proc``); elsewhere it does nothing.

    python -m forge.reaper DRIVER_PID
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL_S = 0.5


def start_reaper() -> subprocess.Popen | None:
    """Start a reaper for this process; None where there is no ``/proc``."""
    if not Path("/proc/self/stat").exists():
        return None
    return subprocess.Popen([sys.executable, "-m", "forge.reaper", str(os.getpid())], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of ``pid``, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every living process under ``root``: pid -> start time."""
    parents: dict[int, int] = {}
    starts: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            found = _stat(int(name))
            if found is not None:
                parents[int(name)], starts[int(name)] = found
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    out: dict[int, int] = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        out[pid] = starts[pid]
        stack.extend(children.get(pid, []))
    return out


def watch(driver: int) -> None:
    me = os.getpid()
    driver_start = (_stat(driver) or (0, 0))[1]
    known: dict[int, int] = {}
    asked = []
    signal.signal(signal.SIGUSR1, lambda *_: asked.append(True))
    while not asked:
        now = _stat(driver)
        if now is None or now[1] != driver_start:
            break
        known.update({pid: start for pid, start in descendants(driver).items() if pid != me})
        time.sleep(POLL_S)
    for pid, start in known.items():
        state = _stat(pid)
        if state is not None and state[1] == start:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


if __name__ == "__main__":
    watch(int(sys.argv[1]))
