"""Answer rules for manipulation on hand-made evidence: touching and stacking follow the recorded
contacts and never answer "no" across a gap too small to see; the gripper's state and grasp
answer only when clear; a clip's first closing frame needs every earlier frame clearly open;
a lift needs a clear rise (these need no simulator)."""

from __future__ import annotations

from typing import Any

from forge_skills.oe.types import EvidenceObject, EvidenceRecord, EvidenceView, ObjectViewFact
from forge_skills.oe.synthesize.answer_rules import rule_for
from forge_skills.oe.synthesize.fact_table import FactTable

PX = 2000


def _evidence(objects: list[EvidenceObject], *, frames: int = 1, gripper: dict | None = None,
              timeline: list[dict] | None = None, gripper_px: int = PX, hidden: tuple[str, ...] = ()) -> FactTable:
    views = [EvidenceView(index=k, rgb="0" * 64, width=320, height=240, role="frame" if frames > 1 else "view",
                          time=float(k) if frames > 1 else None, body_pixels={"gripper": gripper_px})
             for k in range(frames)]
    facts = [ObjectViewFact(object=o.name, view=k, visible_pixels=0 if o.name in hidden else PX, in_frustum=True)
             for o in objects for k in range(frames)]
    return FactTable(EvidenceRecord(source="s", scene_index=0, views=views, objects=objects, facts=facts,
                                    gripper=gripper, timeline=timeline))


def _obj(name: str, lo: list[float], hi: list[float], **attributes: Any) -> EvidenceObject:
    support = attributes.pop("support", "table")
    return EvidenceObject(name=name, category=name.split()[-1], color="", box_3d_min=lo, box_3d_max=hi,
                          support=support, attributes=attributes)


def _tpl(rule: str, **admission: Any) -> dict[str, Any]:
    return {"id": f"t_{rule}", "answer_rule": {"rule": rule, **admission.pop("rule_args", {})},
            "admission": {"min_visible_pixels": 100, "min_gripper_pixels": 500, **admission}}


def _answer(ft: FactTable, tpl: dict[str, Any], view: Any = 0, **slots: Any) -> str | None:
    return rule_for(tpl).derive(ft, view, slots, tpl)[0]


def test_touching_and_stacking_follow_contacts_and_need_a_visible_gap_for_no():
    a = _obj("red cube", [0, 0, 0.80], [0.04, 0.04, 0.84], touching=["green cube"], resting_on="green cube",
             support="object")
    b = _obj("green cube", [0, 0, 0.76], [0.05, 0.05, 0.80], touching=["red cube"])
    c = _obj("can", [0.30, 0, 0.76], [0.36, 0.06, 0.88])
    near = _obj("milk carton", [0.06, 0, 0.76], [0.10, 0.04, 0.90])  # 1 cm from the green cube, not touching
    ft = _evidence([a, b, c, near])
    touching = _tpl("touching", min_gap_cm=3.0)
    assert _answer(ft, touching, a="red cube", b="green cube") == "yes"
    assert _answer(ft, touching, a="green cube", b="red cube") == "yes"
    assert _answer(ft, touching, a="can", b="green cube") == "no"
    assert _answer(ft, touching, a="milk carton", b="green cube") is None  # too close to tell apart
    stacked = _tpl("stacked", min_gap_cm=3.0)
    assert _answer(ft, stacked, a="red cube", b="green cube") == "yes"
    assert _answer(ft, stacked, a="can", b="green cube") == "no"
    assert _answer(ft, stacked, a="green cube", b="red cube") is None  # the lower cube rests on the table, touching
    hidden = _evidence([a, b], hidden=("green cube",))
    assert _answer(hidden, touching, a="red cube", b="green cube") is None  # must be seen


def test_the_gripper_state_and_grasp_answer_only_when_clear():
    cube = _obj("cube", [0, 0, 0.9], [0.04, 0.04, 0.94])
    can = _obj("can", [0.3, 0, 0.8], [0.36, 0.06, 0.92])
    closed = {"state": "closed", "opening_m": 0.04, "holding": "cube"}
    ft = _evidence([cube, can], gripper=closed)
    assert _answer(ft, _tpl("gripper_closed")) == "yes"
    assert _answer(ft, _tpl("holding", min_gap_cm=5.0), object="cube") == "yes"
    assert _answer(ft, _tpl("holding", min_gap_cm=5.0), object="can") == "no"
    moving = _evidence([cube], gripper={"state": None, "opening_m": 0.06, "holding": None})
    assert _answer(moving, _tpl("gripper_closed")) is None
    unseen = _evidence([cube], gripper=closed, gripper_px=100)
    assert _answer(unseen, _tpl("gripper_closed")) is None
    opened = _evidence([cube], gripper={"state": "open", "opening_m": 0.08, "holding": None})
    assert _answer(opened, _tpl("gripper_closed")) == "no"
    assert _answer(opened, _tpl("holding", min_gap_cm=5.0), object="cube") == "no"


def test_open_fingers_around_an_object_are_never_asked_about():
    """Seen from outside, open fingers standing either side of a cube look closed on it (a
    reviewer read one such "no" as a grasp): neither the gripper's state nor a grasp of that
    object is asked, while a grasp of another object still is."""
    cube = _obj("cube", [0, 0, 0.82], [0.04, 0.04, 0.86])
    can = _obj("can", [0.3, 0, 0.8], [0.36, 0.06, 0.92])
    around = _evidence([cube, can], gripper={"state": "open", "opening_m": 0.08, "holding": None, "between": "cube"})
    assert _answer(around, _tpl("gripper_closed")) is None
    assert _answer(around, _tpl("holding", min_gap_cm=5.0), object="cube") is None
    assert _answer(around, _tpl("holding", min_gap_cm=5.0), object="can") == "no"


def _clip(states: list[str | None], heights: list[float] | None = None) -> FactTable:
    cube = _obj("cube", [0, 0, 0.82], [0.04, 0.04, 0.86])
    timeline = [{"gripper": {"state": s, "opening_m": 0.05, "holding": None},
                 "heights": {"cube": (heights or [0.82] * len(states))[k]}} for k, s in enumerate(states)]
    return _evidence([cube], frames=len(states), timeline=timeline)


def test_the_first_closing_frame_needs_every_earlier_frame_clearly_open():
    closes = _tpl("gripper_change", rule_args={"to": "closed"})
    opens = _tpl("gripper_change", rule_args={"to": "open"})
    assert _answer(_clip(["open", "open", "closed", "closed"]), closes, None) == "Frame 3"
    assert _answer(_clip(["open", None, "closed", "closed"]), closes, None) is None  # a moving frame before
    assert _answer(_clip(["closed", "closed", "open", "open"]), closes, None) is None  # closed from the start
    assert _answer(_clip(["closed", "closed", "open", "open"]), opens, None) == "Frame 3"


def test_a_lift_needs_a_clear_rise_and_stillness_a_clear_no():
    lifted = _tpl("lifted", min_rise_cm=5.0, max_still_cm=0.5)
    assert _answer(_clip(["open"] * 4, [0.82, 0.82, 0.86, 0.95]), lifted, None, object="cube") == "yes"
    assert _answer(_clip(["open"] * 4, [0.82, 0.82, 0.822, 0.821]), lifted, None, object="cube") == "no"
    assert _answer(_clip(["open"] * 4, [0.82, 0.83, 0.84, 0.84]), lifted, None, object="cube") is None
