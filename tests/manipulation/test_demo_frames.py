"""Moments and clips of the real demonstrations as OE sources: moments spread over every
demonstration (its end first), clips in time order, the gripper's state, grasp, stacking and the
door's hinge read from the replayed state, and the example intent with the three robosuite
sources building to a package that passes independent re-verification."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

pytest.importorskip("robosuite", reason="the robosuite extra is not installed (pip install -e '.[robosuite]')")
pytest.importorskip("h5py")

from forge.store import Store  # noqa: E402
from forge_resources.robosuite.demo_frames import (MIN_SPACING, RESHAPED, DemoWorld, clip_count, clip_windows,  # noqa: E402
                                                   demos_under, moment_count, moments, recorded, unit_clip,
                                                   unit_moment)
from forge_resources.robosuite.scenes import IDENTITIES  # noqa: E402
from forge_skills.oe.verify.reverify import reverify_package  # noqa: E402
from tests.conftest import run_build  # noqa: E402

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "robosuite_demos"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "arm_robosuite.yaml"
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"the real demos folder {DATA} is absent")


def _world(env: str) -> tuple:
    demo = next(d for d in demos_under(str(DATA)) if d.env_name == env)
    scene, world = recorded(str(demo.path), demo.key)
    return demo, scene, world


def _names(world: DemoWorld) -> dict[int, str]:
    return {b: o.name for o in world.objects for b in o.bodies}


def test_moments_start_at_the_end_and_spread_over_each_demonstration():
    demos = demos_under(str(DATA))
    assert {d.env_name for d in demos} == {"Door", "Lift", "NutAssembly", "PickPlace", "Stack"}  # Wipe has no objects
    for d in demos:
        m = moments(d)
        assert m[0] == len(d) - 1 and len(m) >= 0.5 * (len(d) // MIN_SPACING)
        assert min(abs(a - b) for i, a in enumerate(m) for b in m[i + 1:]) >= MIN_SPACING
        assert max(m) - min(m) > 0.8 * len(d)  # the whole demonstration, not one stretch of it
    first = [unit_moment(str(DATA), u)[0].env_name for u in range(5)]
    assert sorted(first) == sorted(d.env_name for d in demos)  # demonstrations in turn
    assert moment_count(str(DATA)) == sum(len(moments(d)) for d in demos)


def test_clips_are_moments_in_time_order_overlapping_by_half():
    demos = demos_under(str(DATA))
    for d in demos:
        windows = clip_windows(d, 4, 20)
        assert windows and all(w == [w[0] + 20 * k for k in range(4)] for w in windows)
        assert all(b[0] - a[0] == 30 for a, b in zip(windows, windows[1:])) and windows[-1][-1] < len(d)
    assert clip_count(str(DATA), 4, 20) == sum(len(clip_windows(d, 4, 20)) for d in demos)
    assert {unit_clip(str(DATA), u, 4, 20)[0].env_name for u in range(5)} == {d.env_name for d in demos}


def test_an_object_its_recorded_model_reshapes_is_not_named_at_all():
    """PickPlace's recorded models squash the cereal box (0.4 x 1.0 x 0.4) into a small block;
    the milk carton and bread loaf, scaled evenly, keep their names. "The block" would fit the
    loaf beside it as well, so the reshaped box is counted but never named."""
    from forge_skills.oe.structure.appearance import ColourReading, name_referents

    _, _, world = _world("PickPlace")
    names = {o.name: o.identity for o in world.objects}
    assert names == {"Milk0": "milk carton", "Bread0": "bread loaf", "Cereal0": "reshaped object", "Can0": "can"}
    assert [o.name for o in world.objects if o.unnameable] == ["Cereal0"]
    seen = {o.name: [ColourReading("red", 1.0, (50.0, 40.0, 30.0), 500)] for o in world.objects}
    naming = name_referents([(o.name, o.identity) for o in world.objects], seen, by_identity=True,
                            unnameable={o.name: o.unnameable for o in world.objects if o.unnameable})
    assert not naming["Cereal0"].referable and "stretched" in naming["Cereal0"].reason
    assert naming["Bread0"].referable and naming["Bread0"].name == "bread loaf"


def test_the_gripper_is_open_then_closed_on_the_lifted_cube():
    demo, scene, world = _world("Lift")
    scene.set(len(demo) - 1)
    end = world.gripper(float(demo.actions[-1][-1]))
    assert end["state"] == "closed" and end["holding"] == "cube"
    opened = [i for i in range(len(demo)) if demo.actions[i][-1] < 0]
    scene.set(opened[len(opened) // 2])
    mid = world.gripper(float(demo.actions[opened[len(opened) // 2]][-1]))
    assert mid["state"] == "open" and mid["holding"] is None and mid["opening_m"] > 0.07


def test_open_fingers_lowered_around_the_cube_have_it_between_them():
    """The last open moment before the grasp has the cube between the fingers (it looks held
    from outside); the first moments, with the gripper high above, have nothing there."""
    demo, scene, world = _world("Lift")
    opened = [i for i in range(len(demo)) if demo.actions[i][-1] < 0]
    last_open = max(i for i in opened if i < next(i for i in range(len(demo)) if demo.actions[i][-1] > 0))
    scene.set(last_open)
    assert world.gripper(float(demo.actions[last_open][-1]))["between"] == "cube"
    scene.set(0)
    assert world.gripper(float(demo.actions[0][-1]))["between"] is None


def test_the_stacked_cube_rests_on_the_other_and_the_door_ends_open():
    demo, scene, world = _world("Stack")
    scene.set(len(demo) - 1)
    names = _names(world) | {0: "world"}
    a = next(o for o in world.objects if o.name == "cubeA")
    state = world.object_state(a, names)
    assert state["support"] == "cubeB" and "cubeB" in state["touching"]
    scene.set(0)
    assert world.object_state(a, names)["support"] != "cubeB"
    demo, scene, world = _world("Door")
    door = next(o for o in world.objects if o.identity == "door")
    scene.set(len(demo) - 1)
    assert world.hinge_deg(door) > 20.0
    scene.set(0)
    assert world.hinge_deg(door) < 1.0


@pytest.mark.slow
def test_the_example_builds_from_scenes_and_demonstrations_and_reverifies(tmp_path):
    data = yaml.safe_load(EXAMPLE.read_text())
    data["oe"]["items"] = 120
    for src in data["sources"]:
        if "root" in src:
            src["root"] = str(DATA)
        src.update({"robosuite_scenes": {"scenes": 70}, "robosuite_demos": {"frames": 40},
                    "robosuite_demo_clips": {"clips": 30}}[src["kind"]])
    intent = tmp_path / "arm_robosuite.yaml"
    intent.write_text(yaml.safe_dump(data, sort_keys=False))
    summary = run_build(intent, tmp_path / "store", tmp_path / "out", workers=2)
    package = Path(summary["package_path"])
    with Store(tmp_path / "store", read_only=True) as s:
        report = reverify_package(s, package)
    assert report["invalid"] == 0, report["reasons"]
    assert summary["items_released"] >= 0.9 * 120
    composition = json.loads((package / "composition.json").read_text())
    assert all(composition["sources"][k]["items"] > 0 for k in ("robosuite_scenes", "robosuite_demos"))
    assert set(composition["sources"]) == {"robosuite_scenes", "robosuite_demos", "robosuite_demo_clips"}
    identities = set(IDENTITIES.values()) | {RESHAPED}
    items = [json.loads(line) for line in (package / "items.jsonl").read_text().splitlines()]
    for it in items:
        assert not re.search(r"\b(cube|nut|can|carton) \d\b", it["question"]), it["question"]
        for opt in it.get("options") or []:
            if opt not in ("yes", "no") and not re.fullmatch(r"(View|Frame) \d|[A-D]", opt):
                assert opt in identities or opt.split(" ", 1)[-1] in identities, opt
    assert any("gripper" in it["question"] for it in items)
