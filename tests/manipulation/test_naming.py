"""Things named as the agent sees them: every name picks out its one thing in the seeded state,
the bin called empty holds no object, a side named is the side of the agent's image the thing
is drawn on, and no name is an internal index ("bin 2")."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

pytest.importorskip("robosuite", reason="the robosuite extra is not installed (pip install -e '.[robosuite]')")

from forge_resources.robosuite.manipulation import ManipulationEnv  # noqa: E402
from forge_resources.robosuite.naming import AGENT_CAMERA, describe, mentions, parse, referents  # noqa: E402
from forge_skills.ie.checks import indexed  # noqa: E402
from forge_skills.ie.manipulation import names_seen  # noqa: E402

pytestmark = pytest.mark.xdist_group("robosuite")
AGENT_VIEW = (240, 320)  # the image size ManipulationEnv.render gives the agent
SCENES = [("PickPlace", 1), ("PickPlace", 7), ("Stack", 4), ("NutAssembly", 0), ("Lift", 1)]


@pytest.fixture(scope="module")
def env():
    return ManipulationEnv()


@pytest.mark.parametrize("env_name,seed", SCENES)
def test_every_name_picks_out_its_one_thing_and_none_is_an_index(env, env_name, seed):
    env.reset({"env": env_name, "seed": seed})
    for thing, called in zip(env.things(), names_seen(env).values()):
        assert referents(env, called) == [thing], (called, thing.name)
        assert referents(env, thing.name) == [thing], thing.name  # the action interface's names too
        assert not indexed(called) and not indexed(thing.name)
        assert mentions(f"Put it in the {called}.", env.things()) == [called]


@pytest.mark.parametrize("seed", [1, 7, 23])
def test_the_bin_called_empty_holds_no_object(env, seed):
    """PickPlace draws its four objects into one bin: the other is the empty bin, by its floor's
    footprint measured here, not by the naming code's own test."""
    env.reset({"env": "PickPlace", "seed": seed})
    called = names_seen(env)
    empty = [t for t in env.things() if called[t.name] == "empty bin"]
    assert [t.body for t in empty] == ["bin2"]
    objects = [env.body_position(t.body) for t in env.things() if t.kind == "object"]

    def inside(bin_body: str) -> int:
        centre, half = env.body_position(bin_body), env.body_half_extent(bin_body)
        return sum(bool(np.all(np.abs(p[:2] - centre[:2]) < half)) for p in objects)

    assert inside("bin2") == 0 and inside("bin1") == 4
    assert called[env.thing("bin on the left").name] == "bin on the left"  # holds objects: its side
    assert len(referents(env, "bin")) == 2  # a bare "bin" picks out both


@pytest.mark.parametrize("env_name", ["PickPlace", "NutAssembly"])
def test_a_side_named_is_where_the_agents_image_shows_it(env, env_name):
    """The agent observes the camera ManipulationEnv renders; a thing a side picks out (a bin,
    a peg, any thing asked for by side) is drawn on that side of the others sharing its noun."""
    env.reset({"env": env_name, "seed": 3})
    _, pixels_of = _agent_view(env)

    def column(thing) -> float:
        return float(np.median(np.nonzero(pixels_of(thing))[1]))

    checked = 0
    for thing in env.things():
        for phrase in (describe(env, thing), f"{parse(thing.name).noun} on the left",
                       f"{parse(thing.name).noun} on the right"):
            side = parse(phrase).side
            if side is None or referents(env, phrase) != [thing]:
                continue
            # a thing alone of its noun is on the side of the image's centre it is drawn on
            others = [column(t) for t in env.things() if t is not thing
                      and parse(t.name).noun == parse(thing.name).noun] or [AGENT_VIEW[1] / 2]
            assert all((column(thing) < c) == (side == "left") for c in others), (phrase, env_name)
            checked += 1
    assert checked >= len(env.things())


def test_the_cubes_colours_are_what_the_agents_image_shows(env):
    env.reset({"env": "Stack", "seed": 4})
    rgb, pixels_of = _agent_view(env)
    for name, channel in (("red cube", 0), ("green cube", 1)):
        mean = rgb[pixels_of(env.thing(name))].astype(float).mean(axis=0)
        assert mean.argmax() == channel, (name, mean)


def _agent_view(env: ManipulationEnv):
    """The agent's image, and a function giving the pixels a thing covers in it (its root body's
    geoms, by segmentation drawn with the same geoms the agent's image shows)."""
    import mujoco

    rgb = env.render(width=AGENT_VIEW[1], height=AGENT_VIEW[0])
    shown = mujoco.MjvOption()
    shown.geomgroup[0] = 0  # as ManipulationEnv.render draws it: visual geoms only
    renderer = mujoco.Renderer(env.model, height=AGENT_VIEW[0], width=AGENT_VIEW[1])
    try:
        renderer.enable_segmentation_rendering()
        renderer.update_scene(env.data, camera=AGENT_CAMERA, scene_option=shown)
        seg = renderer.render()
    finally:
        renderer.close()
    roots = env.model.body_rootid[env.model.geom_bodyid]
    geom = np.where(seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM), seg[..., 0], -1)

    def pixels_of(thing) -> np.ndarray:
        body = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_BODY, thing.body)
        mask = (geom >= 0) & (roots[np.maximum(geom, 0)] == body)
        assert mask.sum() > 50, f"the {thing.name} is not in the agent's view"
        return mask

    return rgb, pixels_of
