"""Real teleoperated Panda demonstrations (robosuite 1.0 HDF5 files) replayed on the installed
robosuite/MuJoCo: their recorded models load with assets mapped onto this machine's, every
state replays, forge's physical verifier agrees with robosuite's own success check, and no
early state passes it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

# Offscreen frames need EGL for MuJoCo and for PyOpenGL, set before anything imports MuJoCo.
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

pytest.importorskip("robosuite", reason="the robosuite extra is not installed (pip install -e '.[robosuite]')")
pytest.importorskip("h5py")

from forge_resources.robosuite.assets import AssetError, portable_model  # noqa: E402
from forge_resources.robosuite.demos import RecordedScene, find_demos  # noqa: E402
from forge_resources.robosuite.native import make_env, robosuite_success  # noqa: E402
from forge_resources.robosuite.outcomes import DEMO_GOALS, holds  # noqa: E402

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "robosuite_demos"
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"the real demos folder {DATA} is absent")
DEMOS = {d.env_name: d for d in find_demos(DATA)} if DATA.is_dir() else {}


def test_every_demo_file_is_read_with_its_model():
    assert set(DEMOS) == {"Door", "Lift", "NutAssembly", "PickPlace", "Stack", "Wipe"}
    for demo in DEMOS.values():
        assert len(demo) > 100 and demo.actions.shape[0] == len(demo) and demo.model_file.is_file()
        assert demo.env_info["robots"] == "Panda"


@pytest.mark.parametrize("env_name", sorted(DEMOS))
def test_each_demo_replays_every_state_on_its_recorded_model(env_name):
    scene = RecordedScene(DEMOS[env_name])
    # Assets recorded under another machine's paths were all found; the robot's split visual
    # meshes stand in as its collision meshes, and nothing is missing.
    assert scene.portable.stand_ins and all(v.endswith(".stl") for v in scene.portable.stand_ins.values())
    positions = []
    for i in range(0, len(scene.demo), 25):
        scene.set(i)
        positions.append(scene.data.xpos.copy())
        assert np.all(np.isfinite(scene.data.qpos)) and scene.data.time == scene.demo.states[i][0]
    assert not np.allclose(positions[0], positions[-1]), "the replay does not move anything"


@pytest.mark.parametrize("env_name", sorted(DEMO_GOALS))
def test_forge_verifier_agrees_with_robosuite_and_no_prefix_succeeds(env_name):
    demo = DEMOS[env_name]
    scene, env = RecordedScene(demo), make_env(env_name)
    goal = DEMO_GOALS[env_name]
    scene.set(-1)
    assert holds(goal, scene) and robosuite_success(scene, env)
    verdicts = []
    for i in range(len(demo)):
        scene.set(i)
        verdicts.append(holds(goal, scene))
    first = verdicts.index(True)
    assert first > 0.9 * len(demo), f"the goal holds at step {first} of {len(demo)}"
    for i in (0, len(demo) // 2, first - 1):  # prefixes fail for both
        scene.set(i)
        assert not holds(goal, scene) and not robosuite_success(scene, env), i


def test_a_replayed_frame_is_the_scene_not_noise():
    scene = RecordedScene(DEMOS["Lift"])
    scene.set(0)
    frame = scene.render("agentview", 320, 240).astype(float)
    assert frame.shape == (240, 320, 3) and frame.std() > 10
    # A picture is smooth where noise is not: neighbouring pixels mostly agree.
    assert np.mean(np.abs(np.diff(frame, axis=1))) < 8
    # The red cube sits on the white table near the image centre.
    centre = frame[100:160, 130:190]
    assert ((centre[..., 0] > 100) & (centre[..., 1] < 60) & (centre[..., 2] < 60)).sum() > 50


def test_an_asset_missing_from_the_installed_package_is_named():
    xml = '<mujoco><asset><mesh file="/elsewhere/robosuite/models/assets/objects/meshes/no_such_thing.stl" ' \
          'name="x"/></asset></mujoco>'
    with pytest.raises(AssetError, match="no_such_thing.stl"):
        portable_model(xml, "model_9.xml")
