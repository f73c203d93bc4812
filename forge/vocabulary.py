"""The shared vocabulary of the OE track: capabilities and question types.

Intents, blueprints and templates speak these names; an unknown name is an intent error.
"""

from __future__ import annotations

CAPABILITIES: dict[str, str] = {
    "visibility": "whether an object can be seen in a view",
    "counting": "how many objects of a kind are present",
    "image_plane_relation": "left/right/above/below relations in the image plane",
    "depth_order": "which object is nearer to or farther from the camera",
    "metric_distance": "distances between objects or to the camera",
    "containment_support": "what is inside or on top of what",
    "reachability": "whether an embodiment can reach an object",
    "multi_view": "consistency across views and choosing the best view",
    "temporal": "visibility over time and the order along a trajectory",
    "camera_motion": "how the camera moved or turned between frames",
    "size_scale": "which object is larger, and absolute size",
    "object_state": "open/closed, on/off and other object states",
}

QUESTION_TYPES: dict[str, str] = {
    "single_choice": "exactly one option is correct",
    "multiple_choice": "several options may be correct",
    "yes_no": "answer yes or no",
    "ordered_list": "put the options in order",
    "interval_choice": "choose the interval that contains the value",
    "marked_object_choice": "choose among objects marked on the image",
    "multi_view_choice": "choose among several views",
    "temporal_choice": "choose among moments of a trajectory",
    "matching": "match items of two lists",
    "grounding_choice": "choose the region that shows the referent",
    "numeric": "a number, scored with tolerance",
}
