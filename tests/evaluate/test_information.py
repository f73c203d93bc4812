"""Information curves on the [-4, 4] grid, checked against closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from forge_skills.evaluate import information_curves, theta_grid


def test_grid() -> None:
    g = theta_grid()
    assert g.size == 161 and g[0] == -4.0 and g[-1] == 4.0 and g[80] == 0.0
    np.testing.assert_allclose(np.diff(g), 0.05)


def test_single_items_peak_where_p_is_one_half() -> None:
    # P = sigmoid(a theta + beta) is 1/2 at theta = -beta/a, where I = a^2 / 4.
    info = information_curves([2.0, -2.0, 1.0, 0.0], [-1.0, 1.0, 0.0, 0.3])
    assert info.item.shape == (4, 161)
    assert info.item_theta_peak[:3].tolist() == [0.5, 0.5, 0.0]
    assert info.item[0].max() == pytest.approx(1.0) and info.item[2].max() == pytest.approx(0.25)
    assert not info.item[3].any()  # a flat item carries no information
    assert not info.item_normalized[3].any()
    assert info.item_normalized[:3].max(1).tolist() == [1.0, 1.0, 1.0]


def test_test_curve_is_the_sum_and_peaks_between_mirrored_items() -> None:
    # Peaks at -1 and +1; the sum 2 p(1-p) at 0 is 0.393 against 0.355 at +-1, so it peaks at 0.
    info = information_curves([1.0, 1.0], [1.0, -1.0])
    np.testing.assert_allclose(info.test, info.item.sum(0))
    assert info.item_theta_peak.tolist() == [-1.0, 1.0]
    assert info.test_theta_peak == 0.0
    assert info.test_normalized.max() == 1.0 and info.test_normalized[80] == 1.0
    p = 1 / (1 + np.exp(-1.0))
    assert info.test[80] == pytest.approx(2 * p * (1 - p))
