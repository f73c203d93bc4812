"""Where the answer's marker lies among the others, and keeping that from giving the answer.

Marked-object options are answered from the picture, but the markers alone show where each
object stands: the nearer of two objects on a floor is mostly the lower one, so a template whose
answers sit mostly on the lower marker is answered by the markers with no look at the objects
(the marker-only blind solver finds it). Binding, allocation, the balance gate and release all
count the answer's place the same way, here: how many markers lie left of it, how many below,
and how many there are."""

from __future__ import annotations

from typing import Sequence


def place_among(points: Sequence[tuple[float, float]], i: int) -> str:
    """"left,below,count" for the marker at ``points[i]`` (image x, y; y grows downwards).
    Ranks, not "leftmost or not": with four markers, turns between leftmost and not would make
    the leftmost marker the answer half the time."""
    x, y = points[i]
    return f"{sum(p[0] < x for p in points)},{sum(p[1] > y for p in points)},{len(points)}"


def marked_answer_place(markers: Sequence[dict], answer: str) -> str:
    """The place of the marker labelled ``answer`` among ``markers`` (dicts with label, x, y);
    "" when the answer is not a marker's label."""
    labels = [m.get("label") for m in markers]
    if answer not in labels:
        return ""
    return place_among([(float(m["x"]), float(m["y"])) for m in markers], labels.index(answer))
