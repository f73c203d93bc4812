"""The built-in capabilities and question types (registered by the ``builtin`` plugin)."""

from __future__ import annotations

import string

from forge_skills.oe.types import OEItem
from forge.registry import register
from forge.vocabulary import Capability, QuestionType

LETTERS = string.ascii_uppercase

CAPABILITIES = (
    Capability("visibility", "whether an object can be seen in a view",
               ("visib*", "see", "seen", "can see", "occlu*", "hidden", "in view", "presence", "present",
                "detect*", "which object is", "ground*", "refer*")),
    Capability("counting", "how many objects of a kind are present",
               ("count*", "how many", "number of", "quantit*", "tally")),
    Capability("image_plane_relation", "left/right/above/below relations in the image plane",
               ("left of", "right of", "leftmost", "rightmost", "above", "below", "image plane",
                "relative position*", "spatial relation*", "left", "right")),
    Capability("depth_order", "which object is nearer to or farther from the camera",
               ("depth", "nearer", "nearest", "closer", "closest", "farther", "farthest", "distance to the camera",
                "front of", "behind")),
    Capability("metric_distance", "distances between objects or to the camera",
               ("metric", "metre*", "meter*", "centimet*", "how far", "distance*", "far apart")),
    Capability("containment_support", "what is inside or on top of what",
               ("contain*", "inside", "in the tray", "on top of", "support*", "resting on", "placed on",
                "on the table", "on the floor", "put in")),
    Capability("reachability", "whether an embodiment can reach an object",
               ("reach*", "within reach", "graspab*", "grasp*", "manipulat*", "pick up")),
    Capability("multi_view", "consistency across views and choosing the best view",
               ("multi-view", "multiview", "multiple views", "several cameras", "best view", "viewpoint*",
                "cross-view", "consisten*", "top-down and forward", "correspondence")),
    Capability("temporal", "visibility over time and the order along a trajectory",
               ("temporal*", "over time", "trajector*", "order of appearance", "first seen", "first appear*",
                "sequence*", "along the path", "along the route", "while moving", "while it walked", "video",
                "frames", "when", "came into view", "come into view", "comes into view", "in what order")),
    Capability("camera_motion", "how the camera moved or turned between frames",
               ("camera motion", "ego-motion", "egomotion", "turn*", "rotat*", "orientation change",
                "heading", "moved toward*", "approach*", "odometry")),
    Capability("size_scale", "which object is larger, and absolute size",
               ("size*", "larger", "largest", "smaller", "smallest", "bigger", "scale", "area", "how big")),
    Capability("contact", "which objects touch each other",
               ("contact*", "touch*", "in contact", "collid*", "collision*", "against each other", "leaning on")),
    Capability("gripper_state", "whether the gripper is open or closed, and what it holds",
               ("gripper*", "grasp state", "holding", "held", "closed the gripper", "opened the gripper",
                "end effector", "end-effector")),
    Capability("object_state", "open/closed, on/off and other object states",
               ("state*", "upright", "tipped", "fallen", "lying", "open", "closed", "on/off", "toppled")),
)


# -- what the scorer contract feeds each answer form ----------------------------------------------


def gold_response(item: OEItem) -> str | None:
    form = _form(item)
    if form == "number":
        return None if item.answer_value is None else f"{item.answer_value:g}"
    if form in ("options", "order"):
        return ", ".join(LETTERS[i] for i in item.answer_indices or [])
    if form == "matching":
        return ", ".join(f"{LETTERS[i]}={j + 1}" for i, j in enumerate(item.answer_indices or []))
    return None if item.answer_index is None else LETTERS[item.answer_index]


def wrong_responses(item: OEItem) -> list[str]:
    form = _form(item)
    if form == "number":
        v = item.answer_value or 0.0
        return [f"{v * 3 + 50:g}", f"{-abs(v) - 10:g}"]
    if form == "matching":
        idx = list(item.answer_indices or [])
        shifted = [(j + 1) % max(1, len(item.targets)) for j in idx]
        return [", ".join(f"{LETTERS[i]}={j + 1}" for i, j in enumerate(shifted))]
    if form in ("options", "order"):
        idx = list(item.answer_indices or [])
        wrong = [list(reversed(idx))] if form == "order" else [[i for i in range(len(item.options)) if i not in idx]]
        return [", ".join(LETTERS[i] for i in w) for w in wrong if w and w != idx]
    return [o for i, o in enumerate(item.options) if i != item.answer_index]


def _form(item: OEItem) -> str:
    return _FORMS.get(item.question_type, "option")


def _qt(name: str, description: str, form: str, protocol: str, option_kinds: tuple[str, ...], response_format: str,
        balanced: bool = False) -> QuestionType:
    return QuestionType(name, description, form, protocol, option_kinds, response_format, balanced,
                        gold_response=gold_response, wrong_responses=wrong_responses)


QUESTION_TYPES = (
    _qt("single_choice", "exactly one option is correct", "option", "exact_choice", ("objects", "fixed"),
        "Answer with the letter of the correct option.", True),
    _qt("multiple_choice", "several options may be correct", "options", "set_match", ("objects",),
        "Answer with the letters of all correct options, separated by commas."),
    _qt("yes_no", "answer yes or no", "option", "yes_no", ("yes_no",), "Answer with yes or no.", True),
    _qt("ordered_list", "put the options in order", "order", "ordered_list", ("objects",),
        "Answer with the letters of the options in order, separated by commas."),
    _qt("interval_choice", "choose the interval that contains the value", "option", "interval", ("intervals",),
        "Answer with the letter of the interval that contains the value.", True),
    _qt("marked_object_choice", "choose among objects marked on the image", "option", "exact_choice", ("labels",),
        "Answer with the label of the marked object.", True),
    _qt("multi_view_choice", "choose among several views", "option", "exact_choice", ("views",),
        "Answer with the letter of the correct view option.", True),
    _qt("temporal_choice", "choose among moments of a trajectory", "option", "exact_choice", ("views", "frames"),
        "Answer with the letter of the correct moment.", True),
    _qt("matching", "match items of two lists", "matching", "matching", ("matching",),
        "Match every lettered option to one target, e.g. A=2, B=1, C=3 (targets by number)."),
    _qt("grounding_choice", "choose the region that shows the referent", "option", "exact_choice", ("labels",),
        "Answer with the label of the marked object.", True),
    _qt("numeric", "a number, scored with tolerance", "number", "numeric", ("none",), "Answer with a single number."),
)
_FORMS = {q.name: q.answer_form for q in QUESTION_TYPES}

for _cap in CAPABILITIES:
    register("capability", _cap.name, _cap)
for _q in QUESTION_TYPES:
    register("question_type", _q.name, _q)
