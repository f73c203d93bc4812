"""The capability catalogue: which words in an intent's free text ask for which capability.

Researchers describe what they want to evaluate in their own words ("can the robot tell what
is inside the drawer, in what order things appeared while it walked"); the catalogue maps the
phrases it recognizes to capabilities and reports which phrase chose each one, so the choice
can be checked and overridden by listing capabilities explicitly.
"""

from __future__ import annotations

import re

from forge.vocabulary import CAPABILITIES

# Phrases are matched as whole words, case-insensitively; a trailing * matches any ending.
CATALOGUE: dict[str, tuple[str, ...]] = {
    "visibility": ("visib*", "see", "seen", "can see", "occlu*", "hidden", "in view", "presence", "present",
                   "detect*", "which object is", "ground*", "refer*"),
    "counting": ("count*", "how many", "number of", "quantit*", "tally"),
    "image_plane_relation": ("left of", "right of", "leftmost", "rightmost", "above", "below", "image plane",
                             "relative position*", "spatial relation*", "left", "right"),
    "depth_order": ("depth", "nearer", "nearest", "closer", "closest", "farther", "farthest", "distance to the camera",
                    "front of", "behind"),
    "metric_distance": ("metric", "metre*", "meter*", "centimet*", "how far", "distance*", "far apart"),
    "containment_support": ("contain*", "inside", "in the tray", "on top of", "support*", "resting on", "placed on",
                            "on the table", "on the floor", "put in"),
    "reachability": ("reach*", "within reach", "graspab*", "grasp*", "manipulat*", "pick up"),
    "multi_view": ("multi-view", "multiview", "multiple views", "several cameras", "best view", "viewpoint*",
                   "cross-view", "consisten*", "top-down and forward", "correspondence"),
    "temporal": ("temporal*", "over time", "trajector*", "order of appearance", "first seen", "first appear*",
                 "sequence*", "along the path", "along the route", "while moving", "while it walked", "video",
                 "frames", "when", "came into view", "come into view", "comes into view", "in what order"),
    "camera_motion": ("camera motion", "ego-motion", "egomotion", "turn*", "rotat*", "orientation change",
                      "heading", "moved toward*", "approach*", "odometry"),
    "size_scale": ("size*", "larger", "largest", "smaller", "smallest", "bigger", "scale", "area", "how big"),
    "object_state": ("state*", "upright", "tipped", "fallen", "lying", "open", "closed", "on/off", "toppled"),
}


def _pattern(phrase: str) -> re.Pattern[str]:
    body = re.escape(phrase.rstrip("*")).replace(r"\ ", r"\s+")
    return re.compile(r"\b" + body + (r"\w*" if phrase.endswith("*") else r"\b"), re.I)


_PATTERNS = {cap: [(p, _pattern(p)) for p in phrases] for cap, phrases in CATALOGUE.items()}
assert set(CATALOGUE) <= set(CAPABILITIES), "catalogue names an unknown capability"


def capabilities_from_text(text: str) -> dict[str, list[str]]:
    """Capability -> the phrases of ``text`` that ask for it, in vocabulary order."""
    found: dict[str, list[str]] = {}
    for cap in CAPABILITIES:
        hits = []
        for _phrase, pattern in _PATTERNS.get(cap, []):
            hits += [m.group(0).lower() for m in pattern.finditer(text)]
        if hits:
            found[cap] = sorted(set(hits))
    return found
