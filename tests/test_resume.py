"""A build killed with SIGKILL at any point completes when run again, with identical output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import write_intent


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
    for marker, delay in (("S2 data collection", 0.8), ("benchmark synthesis: items", 0.4), ("S5", 0.0)):
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
