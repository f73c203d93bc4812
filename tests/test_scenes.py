"""Room and ground sources: embodiment cameras along trajectories, and every new capability's
answers checked against ground truth recomputed here from raw arrays and simulator state."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from forge.store import Store
from tests.conftest import named_as_shown
from forge_resources.pybullet_sim import catalogue
from forge_skills.oe.verify.reverify import reverify_package
from tests.conftest import run_build

ROOM_OE = {
    "items": 240,
    "capabilities": ["temporal", "containment_support", "object_state", "camera_motion", "counting", "visibility"],
    "question_types": ["single_choice", "yes_no", "temporal_choice", "matching", "ordered_list", "numeric",
                       "interval_choice", "multiple_choice", "grounding_choice"],
}
GROUND_OE = {
    "items": 160,
    "capabilities": ["multi_view", "temporal", "depth_order", "metric_distance", "counting"],
    "question_types": ["single_choice", "yes_no", "temporal_choice", "matching", "ordered_list", "numeric",
                       "interval_choice", "marked_object_choice"],
}


def _build(root: Path, name: str, oe: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    intent = root / f"{name}.yaml"
    intent.write_text(yaml.safe_dump({"name": name, "seed": 5, "oe": oe, "sources": [source],
                                      "gates": {"grey_batch": 4, "min_blind_items": 10, "irt_bootstrap": 200}},
                                     sort_keys=False))
    summary = run_build(intent, root / "store", root / "out")
    return {"store": root / "store", "summary": summary, "package": Path(summary["package_path"])}


# The module's tests read one module build: they run in one worker, which builds it once.
pytestmark = pytest.mark.xdist_group("scenes")


@pytest.fixture(scope="module")
def room(tmp_path_factory) -> dict[str, Any]:
    return _build(tmp_path_factory.mktemp("room"), "room-husky", ROOM_OE,
                  {"kind": "pybullet_room", "embodiment": "husky", "scenes": 60})


@pytest.fixture(scope="module")
def vehicle(tmp_path_factory) -> dict[str, Any]:
    return _build(tmp_path_factory.mktemp("vehicle"), "ground-racecar", GROUND_OE,
                  {"kind": "pybullet_ground", "embodiment": "racecar", "scenes": 16})


def _released(built: dict[str, Any]):
    store = Store(built["store"], read_only=True)
    load = lambda aid: json.loads(store.one("SELECT content FROM artifacts WHERE id = ?", [aid])[0])  # noqa: E731
    out = []
    for key in (json.loads(x) for x in open(built["package"] / "answers.jsonl")):
        item = load(key["id"])
        b = load(item["binding"])
        ev = load(item["evidence"])
        src = named_as_shown(load(ev["source"]), ev)
        inputs = store.one("SELECT r.inputs FROM artifacts a JOIN skill_runs r ON a.run_key = r.run_key "
                           "WHERE a.id = ?", [ev["source"]])[0]
        spec = load(json.loads(inputs)["scene"])
        out.append((key, item, b, src, spec, store.get_arrays(src["arrays"])))
    return store, out


def _px(arrays, src, view: int) -> dict[str, int]:
    seg = arrays[f"seg_{view}"]
    return {o["name"]: int((seg == o["body"]).sum()) for o in src["objects"]}


def _frames(src) -> list[int]:
    timed = [v for v in src["views"] if v["time"] is not None and v["role"] != "overview"]
    return [v["index"] for v in sorted(timed, key=lambda v: v["time"])]


def test_room_frames_are_the_embodiment_camera_along_its_path(room):
    store, items = _released(room)
    mount = catalogue()["embodiments"]["husky"]
    key, item, b, src, spec, arrays = items[0]
    frames = _frames(src)
    assert len(frames) == 6 and [src["views"][i]["time"] for i in frames] == sorted(src["views"][i]["time"] for i in frames)
    for v in src["views"]:
        assert abs(v["camera_position"][2] - mount["camera_height"]) < 1e-3  # the robot's own camera height
        assert v["intrinsics"]["fx"] > 0 and len(v["view_matrix"]) == 16
    # The base under the camera: the mount sits camera_forward ahead along the heading.
    base = []
    for i in frames:
        f = np.array(src["views"][i]["forward"][:2])
        base.append(np.array(src["views"][i]["camera_position"][:2]) - mount["camera_forward"] * f / np.linalg.norm(f))
    assert all(abs(np.linalg.norm(b1 - b0) - mount["step"]) < 1e-2 for b0, b1 in zip(base, base[1:]))


def test_room_answers_against_ground_truth(room):
    store, items = _released(room)
    seen = set()
    for key, item, b, src, spec, arrays in items:
        t = item["template"]
        obj = {o["name"]: o for o in src["objects"]}
        if t in ("support_choice", "in_tray_yesno"):
            o = obj[b["slots"]["object"]]
            center = (np.array(o["aabb_min"]) + np.array(o["aabb_max"])) / 2
            trays = [bd for bd in spec["bodies"] if bd["category"] == "tray"]
            tables = [bd for bd in spec["bodies"] if bd["category"] == "table"]
            in_tray = any(np.linalg.norm(center[:2] - np.array(bd["position"][:2])) < 0.32 and o["aabb_min"][2] < 0.2
                          for bd in trays)
            # Off the floor beside a table: resting on it (a large object may hang over its edge).
            on_table = any(np.linalg.norm(center[:2] - np.array(bd["position"][:2])) < 0.45 and o["aabb_min"][2] > 0.2
                           for bd in tables)
            truth = "tray" if in_tray else "table" if on_table else "floor"
            expected = {"support_choice": {"tray": "a tray", "table": "a table", "floor": "the floor"},
                        "in_tray_yesno": {"tray": "yes", "table": "no", "floor": "no"}}[t][truth]
            assert key["answer"] == expected, (t, o["name"], truth, o["aabb_min"], o["support"])
        elif t in ("lying_yesno", "state_choice"):
            o = obj[b["slots"]["object"]]
            x, y, z, w = o["orientation"]
            world_z_row = np.array([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)])
            tilt = math.degrees(math.acos(min(1.0, abs(float(world_z_row @ np.array(o["up_axis"]))))))
            lying = tilt > 65
            assert key["answer"] == {"lying_yesno": ("yes" if lying else "no"),
                                     "state_choice": ("lying flat" if lying else "standing on its end")}[t]
        elif t in ("first_seen_choice", "appearance_order_list", "frame_match", "first_frame_temporal"):
            frames = _frames(src)
            first = {}
            for n in (b["slots"].get("objects") or [b["slots"]["object"]]):
                first[n] = next(r for r, v in enumerate(frames) if _px(arrays, src, v)[n] >= 80)
                assert all(_px(arrays, src, v)[n] <= 15 for v in frames[: first[n]])
            if t == "first_seen_choice":
                assert key["answer"] == min(first, key=first.get)
            elif t == "appearance_order_list":
                assert [key["options"][i] for i in key["answer_indices"]] == sorted(first, key=first.get)
            elif t == "frame_match":
                assert [key["targets"][j] for j in key["answer_indices"]] == [f"Frame {first[o] + 1}" for o in key["options"]]
            else:
                start = b["slots"]["window"][0]
                assert key["answer"] == f"Frame {first[b['slots']['object']] - start + 1}"
        elif t == "turn_direction_choice":
            frames = _frames(src)
            p = [np.array(src["views"][v]["camera_position"][:2]) for v in frames]
            a, c = p[1] - p[0], p[-1] - p[-2]
            assert key["answer"] == ("left" if a[0] * c[1] - a[1] * c[0] > 0 else "right")
        elif t == "approach_yesno":
            frames = _frames(src)
            o = obj[b["slots"]["object"]]
            center = (np.array(o["aabb_min"]) + np.array(o["aabb_max"])) / 2
            d0, d1 = (np.linalg.norm(center - np.array(src["views"][v]["camera_position"])) for v in (frames[0], frames[-1]))
            assert key["answer"] == ("yes" if d1 < d0 else "no")
        else:
            continue
        seen.add(t)
    assert {"support_choice", "in_tray_yesno", "turn_direction_choice"} <= seen, seen
    # Temporal questions on one path determine each other often; each kind that is released is checked.
    assert len(seen & {"first_seen_choice", "frame_match", "first_frame_temporal", "appearance_order_list"}) >= 2, seen


def test_room_and_vehicle_releases_reverify(room, vehicle):
    for built in (room, vehicle):
        with Store(built["store"], read_only=True) as s:
            report = reverify_package(s, built["package"])
        assert report["invalid"] == 0, report["reasons"]


def test_blind_solvers_near_chance_on_new_sources(room, vehicle):
    for built in (room, vehicle):
        for template, row in built["summary"]["templates"].items():
            blind = row["blind"]
            assert blind["flagged"] is False or row.get("released", 0) == 0, (template, blind)


def test_vehicle_overview_questions_use_both_views(vehicle):
    store, items = _released(vehicle)
    checked = 0
    for key, item, b, src, spec, arrays in items:
        if item["template"] != "overview_seen_yesno":
            continue
        overview = next(v for v in src["views"] if v["role"] == "overview")
        assert _px(arrays, src, overview["index"])[b["slots"]["object"]] >= 25  # marked where it can be seen
        px = _px(arrays, src, b["slots"]["frame"])[b["slots"]["object"]]
        assert key["answer"] == ("yes" if px >= 80 else "no")
        assert item["media"][0]["label"] == "Top-down view, Forward view"
        checked += 1
    assert checked >= 8
    assert abs(src["views"][0]["camera_position"][2] - catalogue()["embodiments"]["racecar"]["camera_height"]) < 1e-3


def test_uav_frames_look_straight_down(tmp_path):
    built = _build(tmp_path, "ground-uav", {"items": 40, "capabilities": ["counting", "image_plane_relation"],
                                            "question_types": ["numeric", "single_choice"]},
                   {"kind": "pybullet_ground", "embodiment": "uav", "scenes": 4})
    store, items = _released(built)
    src = items[0][3]
    for v in src["views"]:
        assert v["role"] == "top_down" and 7.0 <= v["camera_position"][2] <= 9.0
        assert v["forward"][2] < -0.999
    with Store(built["store"], read_only=True) as s:
        assert reverify_package(s, built["package"])["invalid"] == 0


def test_an_object_on_a_tray_rim_is_not_in_the_tray():
    """A tray supports an object only when it lies within the tray: one propped on the rim, its
    centre over the edge (an item once said "in the tray" of a mug leaning on the rim), has no
    registrable support, so no support question is asked of it."""
    from forge_skills.oe.types import BodySpec, CameraSpec, SceneSpec
    from forge_resources.pybullet_sim import SceneSimulator, catalogue
    from forge_skills.oe.collect.layout import make_object

    cat = catalogue()
    yaw = 0.6
    tray = BodySpec(name="tray 1", category="tray", urdf=cat["furniture"]["tray"]["urdf"], position=[1.0, 0.5, 0.0],
                    yaw=yaw, scale=cat["furniture"]["tray"]["scale"])
    along = [math.cos(yaw), math.sin(yaw)]
    inside = make_object(cat, "red", "cube", "room", 1.0, 0.5, 0.0, z=0.02)
    # On the rim along the tray's own x axis (its footprint turns with it).
    with SceneSimulator() as sim:
        sim.reset_to_scene(SceneSpec(source_kind="test", scene_index=0, seed=0, robot="none", objects=[inside],
                                     cameras=[CameraSpec(index=0, eye=[3, 0.5, 1.0], target=[1, 0.5, 0], fov=60.0, width=64, height=48)],
                                     layout="room", bodies=[tray], support_height=0.0))
        half = sim.footprints["tray 1"][1][0]
    # Set down at nine tenths of the way to the rim, a mug tips onto it and rests there, leaning.
    rim = make_object(cat, "blue", "mug", "room", 1.0 + along[0] * 0.9 * half, 0.5 + along[1] * 0.9 * half, yaw, z=0.05)
    with SceneSimulator() as sim:
        spec = SceneSpec(source_kind="test", scene_index=0, seed=0, robot="none", objects=[inside, rim],
                         cameras=[CameraSpec(index=0, eye=[3, 0.5, 1.0], target=[1, 0.5, 0], fov=60.0, width=64, height=48)],
                         layout="room", bodies=[tray], support_height=0.0)
        sim.reset_to_scene(spec)
        support = {o["name"]: o["support"] for o in sim.read_state(spec)}
    assert support["red cube"] == "tray 1"
    assert support["blue mug"] == "unclear", support


def _room_evidence(built: dict[str, Any]):
    from forge_skills.oe.types import EvidenceRecord
    with Store(built["store"], read_only=True) as s:
        rows = s.execute("SELECT content FROM artifacts WHERE type = 'EvidenceRecord' AND status = 'verified' "
                         "ORDER BY id").fetchall()
    return [EvidenceRecord.model_validate_json(c) for (c,) in rows]


def test_whether_an_object_came_into_view_is_as_hard_as_its_sightings(room):
    """Seen along the path: a "yes" for an object that fills a frame is a glance (5561e337), a
    "no" is as hard as the objects shown that share its colour (and its kind besides); the frame
    an object first appears in is a glance when it comes in large (10828717) and a search when it
    enters small."""
    from forge_skills.oe.synthesize.answer_rules import rule_for
    from forge_skills.oe.synthesize.fact_table import FactTable
    from forge_skills.oe.synthesize.templates import builtin_root, read_template
    tpl = read_template(next(builtin_root().glob("*/seen_along_yesno.yaml"))).model_dump()
    first = read_template(next(builtin_root().glob("*/first_frame_temporal.yaml"))).model_dump()
    rule, first_rule = rule_for(tpl), rule_for(first)
    checked = set()
    for ev in _room_evidence(room):
        ft = FactTable(ev)
        for cand in rule.candidates(ft, None, tpl):
            answer, why = rule.derive(ft, None, cand.slots, tpl)
            obj = cand.slots["object"]
            if answer == "yes" and max(why["visible_pixels"].values()) >= 320:
                assert rule.difficulty_of(why, tpl, ft, None) == "easy"
                checked.add("large yes")
            elif answer == "no":
                shown = [o for o in ft.objects if o != obj and max(ft.fact(o, v).visible_pixels for v in ft.frames()) >= 80]
                if not shown:
                    continue
                # The absent object given the kind and colour of one that is shown: both must be read.
                twin = ft.object(shown[0])
                objects = [o.model_copy(update={"category": twin.category, "color": twin.color}) if o.name == obj else o
                           for o in ev.objects]
                assert rule.difficulty_of(why, tpl, FactTable(ev.model_copy(update={"objects": objects})), None) == "hard"
                # Only its kind shown (a colour nothing shown has): ruled out by colour at a glance,
                # as reviewers found such "no" answers; only its colour shown: its shape must be read.
                for update, band in (({"category": twin.category, "color": "ochre"}, "easy"),
                                     ({"category": "kettle", "color": twin.color}, "medium")):
                    objects = [o.model_copy(update=update) if o.name == obj else o for o in ev.objects]
                    assert rule.difficulty_of(why, tpl, FactTable(ev.model_copy(update={"objects": objects})), None) == band
                checked.add("look-alike no")
        for cand in first_rule.candidates(ft, None, first):
            _, why = first_rule.derive(ft, None, cand.slots, first)
            band = first_rule.difficulty_of(why, first, ft, None)
            colour = ft.object(why["object"]).color
            kin = [o for o in ft.objects if o != why["object"] and ft.object(o).color == colour
                   and any(ft.fact(o, v).visible_pixels >= 80 for v in ft.frames()[: why["window"][1] + 1])]
            if colour and not kin:  # the only thing of its colour in the frames: found at a glance
                assert band == "easy"
                continue
            assert band == ("easy" if why["first_pixels"] >= 640 else "hard" if why["first_pixels"] < 240 else "medium")
            checked.add(band)
        if {"large yes", "look-alike no"} <= checked and len(checked) >= 4:
            return
    pytest.fail(f"the room build offers too few sightings to check: {sorted(checked)}")


def test_an_object_first_appears_only_after_frames_that_show_none_of_it(room):
    """2b1154d7 keyed Frame 3 for a red lego brick that Frame 1 showed as a red speck a reader
    made out: every frame before the first must show none of the object, not a few pixels."""
    from forge_skills.oe.synthesize.answer_rules import rule_for
    from forge_skills.oe.synthesize.fact_table import FactTable
    from forge_skills.oe.synthesize.templates import builtin_root, read_template
    tpl = read_template(next(builtin_root().glob("*/first_frame_temporal.yaml"))).model_dump()
    rule = rule_for(tpl)
    for ev in _room_evidence(room):
        ft = FactTable(ev)
        for cand in rule.candidates(ft, None, tpl):
            obj, start = cand.slots["object"], cand.slots["window"][0]
            earlier = ft.frames()[start - 1] if start > 0 else None
            if earlier is None:
                continue
            assert ft.fact(obj, earlier).visible_pixels == 0
            speck = [f.model_copy(update={"visible_pixels": 12}) if (f.object, f.view) == (obj, earlier) else f
                     for f in ev.facts]
            answer, why = rule.derive(FactTable(ev.model_copy(update={"facts": speck})), None, cand.slots, tpl)
            assert answer is None, why
            return
    pytest.fail("the room build offers no first appearance after an earlier frame")


def test_what_an_object_rests_on_is_asked_only_beside_another_holder(room):
    """793f276e asked whether a mug rested on the floor, a table or a tray with no table or tray in
    view: the floor is read off the picture without looking at the mug. A table or tray besides
    the object's own support must be in view; taken out of the picture, the question is refused."""
    from forge_skills.oe.synthesize.answer_rules import rule_for
    from forge_skills.oe.synthesize.fact_table import FactTable
    from forge_skills.oe.synthesize.templates import builtin_root, read_template
    tpl = read_template(next(builtin_root().glob("*/support_choice.yaml"))).model_dump()
    rule = rule_for(tpl)
    for ev in _room_evidence(room):
        ft = FactTable(ev)
        for view in ft.views:
            for cand in rule.candidates(ft, view, tpl):
                own = ft.object(cand.slots["object"]).attributes.get("support_body")
                shown = ft.view(view).body_pixels
                assert any(n != own and n.rsplit(" ", 1)[0] in ("table", "tray") and px >= 600 for n, px in shown.items())
                bare = {n: (px if n == own or n.rsplit(" ", 1)[0] not in ("table", "tray") else 0) for n, px in shown.items()}
                views = [v.model_copy(update={"body_pixels": bare}) if v.index == view else v for v in ev.views]
                answer, why = rule.derive(FactTable(ev.model_copy(update={"views": views})), view, cand.slots, tpl)
                assert answer is None and "nothing to tell it from" in why["reason"]
                return
    pytest.fail("the room build asks no support question")


@pytest.mark.parametrize("pair", [("mug", "duck"), ("ball", "jenga block"), ("lego brick", "cube")])
def test_two_objects_set_into_one_tabletop_tray_both_rest_in_it(pair):
    """A tabletop tray may hold two objects side by side (so "which are in a tray" has answers of
    more than one): both settle inside it, not on its rim or on each other."""
    from forge_skills.oe.types import BodySpec, CameraSpec, SceneSpec
    from forge_resources.pybullet_sim import SceneSimulator
    from forge_skills.oe.collect.layout import make_object
    from forge_skills.oe.collect.tabletop import TABLE_TOP_Z, TRAY_SCALE, _tray_slots

    cat = catalogue()
    yaw = 0.9
    picks = [("red", pair[0]), ("blue", pair[1]), ("green", "cube")]
    slots: list = []
    for seed in range(20):  # a seed whose draw pairs them
        slots = _tray_slots(np.random.default_rng(seed), 0.1, 0.0, yaw, picks, 0)
        if len(slots) == 2:
            break
    assert len(slots) == 2
    assert len(_tray_slots(np.random.default_rng(0), 0.1, 0.0, yaw, [("red", "soccer ball"), *picks], 0)) == 1
    bodies = [BodySpec(name="table", category="table", urdf="table/table.urdf", position=[0, 0, 0]),
              BodySpec(name="tray 1", category="tray", urdf=cat["furniture"]["tray"]["urdf"],
                       position=[0.1, 0.0, TABLE_TOP_Z], yaw=yaw, scale=TRAY_SCALE)]
    objects = [make_object(cat, c, k, "tabletop", x, y, 0.3, z=z) for (x, y, z), (c, k) in zip(slots, picks)]
    spec = SceneSpec(source_kind="test", scene_index=0, seed=0, robot="none", objects=objects,
                     cameras=[CameraSpec(index=0, eye=[1.0, 0.0, 1.2], target=[0.1, 0, 0.6], fov=45.0, width=64, height=48)],
                     layout="tabletop", bodies=bodies, support_height=TABLE_TOP_Z)
    with SceneSimulator() as sim:
        sim.reset_to_scene(spec)
        support = {o["name"]: o["support"] for o in sim.read_state(spec)}
    assert support == {f"red {pair[0]}": "tray 1", f"blue {pair[1]}": "tray 1"}, support
