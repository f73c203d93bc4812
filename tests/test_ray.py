"""The Ray executor: the same artifact ids and a byte-identical package as the local pool, the
driver alone writes the store, and a killed driver leaves no Ray process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from forge.store import Store

from conftest import run_build, write_intent

ray = pytest.importorskip("ray", reason="the Ray extra is not installed (pip install -e '.[ray]')")

pytestmark = pytest.mark.slow


def _ray_processes() -> set[int]:
    out = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ")
            except OSError:
                continue
            if b"ray::" in cmd or b"raylet" in cmd or b"gcs_server" in cmd:
                out.add(int(pid))
    return out


def test_ray_gives_the_local_pools_ids_and_package(built, tmp_path):
    intent = write_intent(tmp_path)
    summary = run_build(intent, tmp_path / "store", tmp_path / "out", workers=2, executor="ray")
    ref = json.loads((built["package"] / "manifest.json").read_text())
    got_path = tmp_path / "out" / built["package"].name / "manifest.json"
    assert got_path.read_bytes() == (built["package"] / "manifest.json").read_bytes()
    assert json.loads(got_path.read_text())["files"] == ref["files"]
    with Store(tmp_path / "store", read_only=True) as mine, Store(built["store"], read_only=True) as theirs:
        ids = {r[0] for r in mine.execute("SELECT id FROM artifacts WHERE type = 'SourceRecord'").fetchall()}
        ref_ids = {r[0] for r in theirs.execute("SELECT id FROM artifacts WHERE type = 'SourceRecord'").fetchall()}
    assert ids == ref_ids and summary["skills_failed"] == 0
    assert not ray.is_initialized()  # the build shut the cluster it started


def test_a_killed_ray_driver_leaves_no_ray_process(tmp_path):
    before = _ray_processes()
    intent = write_intent(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "forge.cli", "build", str(intent), "--store", str(tmp_path / "s"),
                             "--out", str(tmp_path / "o"), "--executor", "ray", "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    for line in proc.stderr:
        if "S2 collect.render_scene" in line or "S3" in line:
            break
    time.sleep(2.0)
    started = _ray_processes() - before
    assert started, "the build started no Ray process"
    os.kill(proc.pid, signal.SIGKILL)  # the driver only, as a crash would
    proc.wait()
    deadline = time.time() + 60
    while time.time() < deadline and (_ray_processes() - before):
        time.sleep(1.0)
    assert not (_ray_processes() - before), "Ray processes outlived their driver"
