"""Marked-object labels: a tag sits beside its own ring and never on another marked object."""

from __future__ import annotations

import numpy as np

from forge_skills.package.media import draw_markers


def _white(img: np.ndarray) -> np.ndarray:
    return np.all(img == 255, axis=2)


def test_a_label_never_covers_another_ring():
    img = np.full((240, 320, 3), 120, np.uint8)
    # a large ring whose usual spot (above it) lies inside a small ring just above it
    big, small = [100, 120, 220, 200], [150, 90, 175, 110]
    out = draw_markers(img, [{"bbox": big, "label": "B"}, {"bbox": small, "label": "D"}])
    labels = _white(out)
    assert labels.any()
    cx, cy, r = (small[0] + small[2]) / 2, (small[1] + small[3]) / 2, 12.5 + 5
    ys, xs = np.nonzero(labels)
    inside_small = (np.abs(xs - cx) < r) & (np.abs(ys - cy) < r)
    assert not inside_small.any(), "a label box lies on the small marked object's ring"
    # each label is near its own ring: one white region above or below the big ring, one by the small
    assert (ys < small[1]).any() and (ys > 100).any()


def test_labels_are_deterministic():
    img = np.full((120, 160, 3), 90, np.uint8)
    marks = [{"bbox": [10, 10, 30, 30], "label": "A"}, {"bbox": [60, 60, 90, 90], "label": "B"}]
    assert np.array_equal(draw_markers(img, marks), draw_markers(img, marks))
