"""Fisher information of 2PL items over the standardized ability scale.

    I_i(theta) = a_i^2 P_i(theta) (1 - P_i(theta)),   I_test(theta) = sum_i I_i(theta)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from forge_skills.evaluate.solvers import sigmoid


def theta_grid(lo: float = -4.0, hi: float = 4.0, step: float = 0.05) -> np.ndarray:
    """Evenly spaced abilities from lo to hi inclusive (161 points by default)."""
    count = int(round((hi - lo) / step)) + 1
    return np.round(lo + step * np.arange(count), 10)


@dataclass(frozen=True)
class InformationCurves:
    """Item curves (items x grid), the test curve, each scaled by its own maximum, and the
    grid point of each maximum (the first one on a tie; a flat curve normalizes to zeros)."""

    grid: np.ndarray
    item: np.ndarray
    test: np.ndarray

    @property
    def item_normalized(self) -> np.ndarray:
        peak = self.item.max(1, keepdims=True)
        return np.divide(self.item, peak, out=np.zeros_like(self.item), where=peak > 0)

    @property
    def test_normalized(self) -> np.ndarray:
        peak = self.test.max()
        return self.test / peak if peak > 0 else np.zeros_like(self.test)

    @property
    def item_theta_peak(self) -> np.ndarray:
        return self.grid[np.argmax(self.item, axis=1)]

    @property
    def test_theta_peak(self) -> float:
        return float(self.grid[np.argmax(self.test)])


def information_curves(a: ArrayLike, beta: ArrayLike, grid: ArrayLike | None = None) -> InformationCurves:
    """Information of each item (slope a, intercept beta) and of their sum on ``grid``."""
    a = np.asarray(a, dtype=float)
    beta = np.asarray(beta, dtype=float)
    g = theta_grid() if grid is None else np.asarray(grid, dtype=float)
    p = sigmoid(a[:, None] * g[None, :] + beta[:, None])
    item = a[:, None] ** 2 * p * (1.0 - p)
    return InformationCurves(grid=g, item=item, test=item.sum(0))
