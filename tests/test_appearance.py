"""Names from pixels: every object category, in every tint a scene may give it, renders as that
colour's name in each source's layout; and a texture under the tint, as before, would not."""

from __future__ import annotations

import numpy as np
import pytest

from forge_skills.oe.types import CameraSpec, SceneSpec
from forge_resources.pybullet_sim import SceneSimulator, catalogue
from forge_skills.oe.structure.appearance import MIN_NAMED_PIXELS, name_referents, read_colour
from forge_skills.oe.collect.layout import make_object, tints

# Cameras as each layout's embodiment sees an object: an arm's orbit over the table, a robot's
# forward camera across the room floor, a drone looking down and a car looking ahead.
LAYOUT_CAMERAS = {
    "tabletop": [dict(target=[0.0, 0.0, 0.65], distance=0.55, yaw=y, pitch=-40.0, fov=45.0) for y in (30, 150, 270)],
    "room": [dict(eye=[-1.6, 0.2 * k, 0.55], target=[0.0, 0.0, 0.1], fov=60.0) for k in (-1, 0, 1)],
    "ground": [dict(eye=[0.0, 0.0, 7.5], target=[0.0, 0.01, 0.0], fov=60.0),
               dict(eye=[-6.0, 0.5, 0.32], target=[0.0, 0.0, 0.2], fov=65.0)],
}
SUPPORT = {"tabletop": 0.626, "room": 0.0, "ground": 0.0}


def _render(layout: str, category: str, colour: str, texture: bool = False) -> list:
    cat = catalogue()
    obj = make_object(cat, colour, category, layout, 0.0, 0.0, 0.6)
    if texture:
        obj = obj.model_copy(update={"texture": True})
    bodies = []
    if layout == "tabletop":
        from forge_skills.oe.types import BodySpec

        bodies = [BodySpec(name="table", category="table", urdf="table/table.urdf", position=[0, 0, 0])]
    cams = [CameraSpec(index=k, width=160, height=120, far=12.0, **c) for k, c in enumerate(LAYOUT_CAMERAS[layout])]
    spec = SceneSpec(source_kind="test", scene_index=0, seed=0, robot="none", objects=[obj], cameras=cams,
                     layout=layout, bodies=bodies, support_height=SUPPORT[layout])
    readings = []
    with SceneSimulator() as sim:
        sim.reset_to_scene(spec)
        body = sim.bodies[obj.name]
        for cam in cams:
            rgb, _depth, seg = sim.render_view(cam)
            readings.append(read_colour(rgb[seg == body]))
    return readings


def _cases():
    cat = catalogue()
    for layout in LAYOUT_CAMERAS:
        for category, entry in sorted(cat["categories"].items()):
            if layout in entry["scale"]:
                for colour in tints(cat, category):
                    yield layout, category, colour


@pytest.mark.slow
def test_every_category_renders_as_the_colour_it_may_be_named_with():
    wrong = []
    seen = 0
    for layout, category, colour in _cases():
        readings = [r for r in _render(layout, category, colour) if r.pixels >= MIN_NAMED_PIXELS]
        if not readings:
            continue  # too small from these cameras to tell a colour (no name would be given)
        seen += 1
        named = name_referents([("it", category)], {"it": readings})["it"]
        # Where the pixels give a clear name it is the tint's: an unclear view may keep an object
        # from being named, never make it named wrongly.
        if any(r.name not in (colour, None) for r in readings) or (named.referable and named.colour != colour):
            wrong.append(f"{layout} {colour} {category}: {[r.name for r in readings]}")
    assert seen > 150
    assert not wrong, wrong


def test_a_texture_under_the_tint_would_rename_the_object():
    """The textured duck rendered a 'white' tint yellow and a 'blue' one near-black: names read
    from pixels catch it, and dropping the texture fixes the class."""
    textured = [r.name for r in _render("tabletop", "duck", "white", texture=True) if r.pixels >= MIN_NAMED_PIXELS]
    assert textured and "white" not in textured and "yellow" in textured
    blue = [r.name for r in _render("tabletop", "jenga block", "blue", texture=True) if r.pixels >= MIN_NAMED_PIXELS]
    assert blue and "blue" not in blue
    plain = [r.name for r in _render("tabletop", "duck", "white") if r.pixels >= MIN_NAMED_PIXELS]
    assert plain and set(plain) <= {"white", None} and "white" in plain


def test_colour_names_of_plain_pixels():
    def name(rgb):
        return read_colour(np.array([rgb] * 200, dtype=np.uint8)).name
    assert name((200, 30, 30)) == "red" and name((30, 160, 40)) == "green" and name((30, 60, 220)) == "blue"
    assert name((235, 210, 30)) == "yellow" and name((240, 120, 10)) == "orange" and name((130, 25, 180)) == "purple"
    assert name((240, 240, 240)) == "white" and name((15, 15, 15)) == "black" and name((128, 128, 128)) == "grey"
    assert name((110, 60, 20)) == "brown"
    half = np.array([(200, 30, 30)] * 100 + [(30, 60, 220)] * 100, dtype=np.uint8)
    assert read_colour(half).name is None, "no clear majority, no name"


def test_look_alike_objects_are_not_named():
    def r(rgb, n=200):
        return read_colour(np.array([rgb] * n, dtype=np.uint8))
    names = name_referents([("a", "duck"), ("b", "duck"), ("c", "mug")],
                           {"a": [r((200, 30, 30))], "b": [r((190, 40, 35))], "c": [r((200, 30, 30))]})
    assert not names["a"].referable and not names["b"].referable, "two red ducks: neither can be named"
    assert names["c"].referable and names["c"].name == "red mug"
    assert names["a"].name == "duck 1" and names["b"].name == "duck 2"
