"""A build killed with SIGKILL at any point completes when run again, with identical output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import SMALL_INTENT, write_intent


def _start(intent, store, out):
    return subprocess.Popen([sys.executable, "-m", "forge.cli", "build", str(intent), "--store", str(store),
                             "--out", str(out), "--workers", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _kill_when(proc, marker: str, delay: float) -> bool:
    """SIGKILL the whole build (workers included) ``delay`` s after ``marker`` appears."""
    for line in proc.stderr:
        if marker in line:
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
    proc.wait()
    return False


@pytest.mark.slow
def test_kill_9_then_rerun_gives_identical_package(tmp_path, built):
    intent = write_intent(tmp_path)
    store, out = tmp_path / "store", tmp_path / "out"
    for marker, delay in (("S2 data collection", 0.8), ("S4 grey batch", 0.4), ("S5", 0.0)):
        proc = _start(intent, store, out)
        killed = _kill_when(proc, marker, delay)
        assert killed, f"the build finished before {marker!r}"
    final = subprocess.run([sys.executable, "-m", "forge.cli", "build", str(intent), "--store", str(store),
                            "--out", str(out), "--json"], capture_output=True, text=True)
    assert final.returncode == 0, final.stderr
    summary = json.loads(final.stdout)
    assert summary["artifacts_reused"] > 0
    ref = json.loads((built["package"] / "manifest.json").read_text())
    got = json.loads((out / built["package"].name / "manifest.json").read_text())
    assert got["files"] == ref["files"]
    assert (out / built["package"].name / "manifest.json").read_bytes() == (built["package"] / "manifest.json").read_bytes()
    assert not list(out.glob(".tmp-*"))


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (read from /proc)."""
    out = []
    for stat in os.listdir("/proc"):
        if stat.isdigit():
            try:
                fields = open(f"/proc/{stat}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(stat))
    return out


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table from /proc")
def test_sigkill_of_a_build_leaves_no_worker_running(tmp_path):
    """Only the driver is killed (not its process group, as a user's kill -9 does): its pool
    workers must exit by themselves."""
    intent = write_intent(tmp_path, oe={**SMALL_INTENT["oe"], "items": 400})
    proc = subprocess.Popen([sys.executable, "-m", "forge.cli", "build", str(intent), "--store", str(tmp_path / "store"),
                             "--out", str(tmp_path / "out"), "--workers", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    workers: list[int] = []
    for line in proc.stderr:
        if "S2 data collection" in line:
            deadline = time.time() + 30
            # Spawned workers are python processes (the resource tracker is one too: it exits by itself).
            while len(workers) < 2 and time.time() < deadline:
                workers = [c for c in _children(proc.pid) if "python" in open(f"/proc/{c}/cmdline").read().lower()]
                time.sleep(0.2)
            break
    assert len(workers) >= 2, "the build started no worker pool"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 10
    while any(_alive(w) for w in workers) and time.time() < deadline:
        time.sleep(0.2)
    survivors = [w for w in workers if _alive(w)]
    for w in survivors:  # leave the machine clean even when the test fails
        os.kill(w, signal.SIGKILL)
    assert not survivors, f"workers {survivors} outlived their build"
