"""Simulated response matrices for the IRT tests (fixed seeds)."""

from __future__ import annotations

import numpy as np


def simulate(a: np.ndarray, b: np.ndarray, theta: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Models x items 0/1 draws from P = sigmoid(a (theta - b))."""
    p = 1.0 / (1.0 + np.exp(-a[None, :] * (theta[:, None] - b[None, :])))
    return (rng.random(p.shape) < p).astype(float)


def lognormal_panel(n_models: int, n_items: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Slopes lognormal around 1, difficulties and abilities standard normal."""
    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.0, 0.5, n_items)
    b = rng.normal(0.0, 1.0, n_items)
    theta = rng.normal(0.0, 1.0, n_models)
    return simulate(a, b, theta, rng), a, b, theta
