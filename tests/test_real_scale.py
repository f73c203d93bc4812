"""Simulated objects at the sizes of the things they are called: every category in every layout
it is used in, loaded as scenes load it, measures within its catalogue range (a soccer ball is
about 22 cm across, a rubber duck about a hand's width), and the furniture and the arm's table
are the sizes the sources state to the model."""

from __future__ import annotations

import numpy as np
import pytest

from forge_resources.pybullet_sim import catalogue, import_pybullet


@pytest.fixture(scope="module")
def physics():
    import pybullet_data

    p = import_pybullet()
    client = p.connect(p.DIRECT)
    p.setAdditionalSearchPath(pybullet_data.getDataPath(), physicsClientId=client)
    yield p, client
    p.disconnect(physicsClientId=client)


def _extent(p, client, urdf: str, scale: float) -> np.ndarray:
    """Width, depth and height of the whole body (every link) as loaded at ``scale``."""
    uid = p.loadURDF(urdf, [0, 0, 1], globalScaling=scale, physicsClientId=client)
    boxes = [p.getAABB(uid, link, physicsClientId=client) for link in range(-1, p.getNumJoints(uid, physicsClientId=client))]
    lo = np.min([b[0] for b in boxes], axis=0)
    hi = np.max([b[1] for b in boxes], axis=0)
    p.removeBody(uid, physicsClientId=client)
    return hi - lo


def test_every_category_is_its_real_size_in_every_layout(physics):
    p, client = physics
    wrong = []
    for name, entry in catalogue()["categories"].items():
        lo, hi = entry["size_m"]
        for layout, scale in entry["scale"].items():
            size = float(_extent(p, client, entry["urdf"], scale).max())
            if not lo <= size <= hi:
                wrong.append(f"{name} in {layout}: {size:.3f} m, a {name} is {lo}-{hi} m")
    assert not wrong, wrong


def test_canonical_objects_keep_their_canonical_size(physics):
    """Things whose size a person knows (a soccer ball, a mug, a rubber duck) have narrow ranges:
    a metre-wide soccer ball would make a person's size sense give the wrong distances."""
    cat = catalogue()["categories"]
    for name, (lo, hi) in {"soccer ball": (0.18, 0.23), "mug": (0.08, 0.15), "duck": (0.06, 0.15)}.items():
        assert cat[name]["size_m"][0] >= lo and cat[name]["size_m"][1] <= hi, name


def test_stated_scale_references_match_the_bodies(physics):
    """The tabletop source tells the model the table top is 150 by 100 cm: the table it loads is."""
    p, client = physics
    w, d, _ = sorted(_extent(p, client, "table/table.urdf", 1.0), reverse=True)
    assert abs(w - 1.5) < 0.01 and abs(d - 1.0) < 0.01
    from forge.resources import descriptor

    assert "150 cm long and 100 cm wide" in descriptor("pybullet_tabletop").conventions["scale"]["text"]
