"""Markers: one ring size per image, tags beside their own marker and never on another, tag
sides that follow no rule, outlines for packed objects."""

from __future__ import annotations

import numpy as np

from forge_skills.oe.synthesize.media import draw_markers, marker_layout, ring_radius


def _white(img: np.ndarray) -> np.ndarray:
    return np.all(img == 255, axis=2)


def test_rings_share_one_size_whatever_the_objects():
    big, small = [40, 120, 160, 200], [250, 40, 262, 52]
    layout = marker_layout([{"bbox": big, "label": "A"}, {"bbox": small, "label": "B"}])
    assert layout[0]["radius"] == layout[1]["radius"] == ring_radius([big, small]) == 60 + 5
    # the same two objects with the labels swapped: the rings do not tell which is which
    swapped = marker_layout([{"bbox": small, "label": "A"}, {"bbox": big, "label": "B"}])
    assert {m["radius"] for m in swapped} == {m["radius"] for m in layout}


def test_a_label_never_covers_another_ring():
    img = np.full((240, 320, 3), 120, np.uint8)
    # the first ring's tag would go above it, into the second ring just above
    first, second = [140, 150, 170, 180], [140, 85, 170, 115]
    marks = marker_layout([{"bbox": first, "label": "B"}, {"bbox": second, "label": "D"}])
    marks[0]["spots"] = ["above", "below", "right", "left"]
    out = draw_markers(img, marks)
    ys, xs = np.nonzero(_white(out))
    assert len(ys)
    cx, cy, r = 155, 100, marks[1]["radius"]
    inside_second = (xs - cx) ** 2 + (ys - cy) ** 2 < r * r
    assert not inside_second.any(), "a label box lies on the other marked object's ring"


def test_tag_sides_turn_with_the_seed():
    marks = [{"bbox": [10, 10, 30, 30], "label": "A"}, {"bbox": [60, 60, 90, 90], "label": "B"}]
    firsts = {marker_layout(marks, seed)[0]["spots"][0] for seed in range(4)}
    assert firsts == {"above", "below", "right", "left"}


def test_labels_are_deterministic():
    img = np.full((120, 160, 3), 90, np.uint8)
    marks = [{"bbox": [10, 10, 30, 30], "label": "A"}, {"bbox": [60, 60, 90, 90], "label": "B"}]
    assert np.array_equal(draw_markers(img, marks), draw_markers(img, marks))


def test_outline_markers_follow_the_labelled_polygon():
    img = np.full((120, 160, 3), 90, np.uint8)
    poly = [20, 40, 60, 20, 70, 40, 30, 60]
    marks = marker_layout([{"bbox": [20, 20, 70, 60], "label": "A", "polygon": poly}], style="outline")
    assert marks[0]["box"] == [20, 20, 70, 60] and "radius" not in marks[0]
    out = draw_markers(img, marks)
    magenta = np.all(out == (255, 0, 200), axis=2)
    assert magenta[40, 20] and magenta[20, 60] and not magenta[40, 45]  # on the outline, not inside it
