"""LIBERO's 130 tasks from the installed ``libero`` extra: initial states read without torch,
assets found where the asset packages put them, floor robots on a mount robosuite 1.5 accepts
(every task instantiated, settled and rendered: ``test_tasks.py``)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from forge.errors import DefinitionError
from forge_resources.libero import runtime

WHY = runtime.missing()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")
SUITE_SIZES = {"libero_spatial": 10, "libero_object": 10, "libero_goal": 10, "libero_10": 10, "libero_90": 90}
CAMERAS = ("agentview", "robot0_eye_in_hand")
FLOOR_TASK = ("libero_90", "LIVING_ROOM_SCENE1_pick_up_the_ketchup_and_put_it_in_the_basket")


def test_every_tasks_initial_states_are_read_without_torch_or_a_config_in_home(tmp_path):
    """All 130 tasks with their 50 initial states each, in a process that never imports torch,
    and LIBERO's import-time config written to a folder of forge's, not the user's home."""
    code = ("import json, sys\n"
            "from forge_resources.libero import runtime as rt\n"
            "rt.prepare()\n"
            "shapes = {s: {t: list(rt.init_states(s, t).shape) for t in rt.tasks(s)} for s in rt.SUITES}\n"
            "print(json.dumps({'shapes': shapes, 'torch': 'torch' in sys.modules}))\n")
    env = {k: v for k, v in os.environ.items() if k != "LIBERO_CONFIG_PATH"} | {"HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["torch"] is False
    assert {s: len(t) for s, t in result["shapes"].items()} == SUITE_SIZES
    assert all(shape[0] == 50 and shape[1] > 0 for tasks in result["shapes"].values() for shape in tasks.values())
    assert not (tmp_path / ".libero").exists()


def test_an_initial_state_file_holding_anything_but_arrays_is_refused(tmp_path):
    path = tmp_path / "evil.pruned_init"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps(os.getcwd))  # a callable, not an array
    with pytest.raises(DefinitionError, match="evil.pruned_init: not a LIBERO initial-state file"):
        runtime.read_init_states(path)
    good = tmp_path / "good.pruned_init"
    with zipfile.ZipFile(good, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps(np.arange(6, dtype=np.float64).reshape(2, 3)))
    assert runtime.read_init_states(good).tolist() == [[0, 1, 2], [3, 4, 5]]


def test_an_unknown_suite_or_task_is_named():
    with pytest.raises(DefinitionError, match="unknown LIBERO suite 'libero_100'"):
        runtime.tasks("libero_100")
    with pytest.raises(DefinitionError, match="suite 'libero_goal' has no task 'fly_to_the_moon'"):
        runtime.init_states("libero_goal", "fly_to_the_moon")


def _survey(suite: str, task: str) -> dict[str, dict[str, int]]:
    """Instantiate, restore the first initial state, settle, render each camera: pixels of
    each BDDL object and fixture per camera, with LIBERO's success check on the settled state."""
    env = runtime.make_env(suite, task)
    r = None
    try:
        env.set_init_state(runtime.init_states(suite, task)[0])
        runtime.settle(env)
        r = runtime.renderer(env, 128, 128)
        things = runtime.thing_geoms(env)
        seen: dict[str, dict[str, int]] = {}
        for cam in CAMERAS:
            rgb, depth, geom = runtime.render(env, r, cam)
            assert rgb.shape == (128, 128, 3) and rgb.std() > 10, f"{task}: camera {cam} shows a flat image"
            assert 0.01 < float(depth.min()) < float(depth.max()) < 50, f"{task}: camera {cam} depth out of range"
            seen[cam] = {name: int(np.isin(geom, ids).sum()) for name, ids in things.items()}
        seen["success"] = {"libero": int(bool(env.check_success()))}
        return seen
    finally:
        if r is not None:
            r.close()
        env.close()


def test_a_floor_task_stands_on_a_mount_robosuite_accepts_and_shows_its_objects():
    """A living-room task puts the robot on the floor: without forge's mount it does not build
    under robosuite 1.5. Built, its basket and groceries are in the agent's view."""
    seen = _survey(*FLOOR_TASK)
    assert seen["agentview"]["basket_1"] > 100 and seen["agentview"]["ketchup_1"] > 20
    assert seen["success"]["libero"] == 0


def test_a_process_rendering_robosuite_scenes_and_libero_tasks_exits_cleanly():
    """A LIBERO task built after a robosuite scene renderer opens no EGL context of robosuite's
    own, whose exit handler would end the display before the scene renderers are freed."""
    code = ("from forge_resources.robosuite.manipulation import _shared_scenes\n"
            "_shared_scenes().renderer('Lift', 64, 64)\n"
            "from forge_resources.libero import runtime as rt\n"
            "env = rt.make_env(*" + repr(FLOOR_TASK) + ")\n"
            "r = rt.renderer(env, 64, 64)\n"
            "rt.render(env, r, 'agentview')\n"
            "r.close()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Exception ignored" not in out.stderr and "EGLError" not in out.stderr, out.stderr[-2000:]
