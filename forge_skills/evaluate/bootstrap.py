"""Model bootstrap of the 2PL fit: how much the item slopes depend on which models make up the
panel.

Each replicate draws as many model rows as the panel has, with replacement, and refits the full
2PL (same initialisation, four rounds, same penalties). A model drawn twice contributes its row
twice to every item likelihood; both copies get the same ability, since they pose the same
ability problem, so each distinct model is fitted once and weighted by its count. Items are
fitted once per distinct response column, as in the full fit (a resampled column depends only on
the original one). Replicates are solved a stack at a time, as many as keep the arrays in cache.
The draws come from one generator seeded once, so the grouping changes results only by rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from forge_skills.evaluate.irt import (BANDS, FitSettings, IrtFit, ItemSolver, Panel, alternate, as_response_matrix,
                                       band_index, distinct_columns, fit_2pl, with_solver)

BOOTSTRAP_SEED = 20260731


@dataclass(frozen=True)
class BootstrapResult:
    """Per item: the percentile interval of a over replicates and the share of replicates that
    put the item in the same discrimination band as the full fit. Per replicate: the share of
    high-discrimination items. ``a_samples`` (replicates x items) only when asked for."""

    replicates: int
    seed: int
    level: float
    a_low: np.ndarray
    a_high: np.ndarray
    band_stability: np.ndarray
    high_disc_shares: np.ndarray
    a_samples: np.ndarray | None = None

    @property
    def high_disc_interval(self) -> tuple[float, float]:
        tail = 50.0 * (1.0 - self.level)
        lo, hi = np.percentile(self.high_disc_shares, [tail, 100.0 - tail])
        return float(lo), float(hi)


def resample_counts(n_models: int, replicates: int, seed: int) -> np.ndarray:
    """How often each model is drawn in each replicate (replicates x models)."""
    draws = np.random.default_rng(seed).integers(0, n_models, size=(replicates, n_models))
    counts = np.zeros((replicates, n_models), dtype=np.int64)
    np.add.at(counts, (np.arange(replicates)[:, None], draws), 1)
    return counts


def _chunk_panel(y: np.ndarray, seen: np.ndarray | None, raw: np.ndarray, counts: np.ndarray,
                 items: np.ndarray) -> Panel:
    """Stack the distinct models of each replicate, padded to the widest with zero-count rows."""
    width = int((counts > 0).sum(1).max())
    # Drawn models first (stable, in model order), then padding from the undrawn ones.
    idx = np.argsort(counts == 0, axis=1, kind="stable")[:, :width]
    c = np.take_along_axis(counts, idx, axis=1).astype(float)
    observed = None if seen is None else seen[idx].astype(float)
    return Panel(y=y[idx], observed=observed, counts=c, raw=raw[idx], items=items)


def model_bootstrap(responses: ArrayLike, *, replicates: int = 1000, seed: int = BOOTSTRAP_SEED,
                    settings: FitSettings | None = None, reference: IrtFit | None = None,
                    level: float = 0.95, item_solver: ItemSolver = "newton",
                    max_chunk_cells: int = 600_000, keep_samples: bool = False) -> BootstrapResult:
    """Refit the 2PL on ``replicates`` model resamples of a models x items matrix.

    ``reference`` is the full-panel fit the band stability compares against (fitted here when
    absent). ``item_solver`` defaults to the batched Newton solver (see FitSettings); the
    ability step is the same bounded Brent as in the full fit. ``max_chunk_cells`` bounds
    replicates x models x items solved at once.
    """
    s = with_solver(settings, item_solver)
    y = as_response_matrix(responses)
    n_models, n_items = y.shape
    reference = reference or fit_2pl(y, settings)
    raw = np.nanmean(y, axis=1)
    cols = distinct_columns(y)
    seen = ~np.isnan(cols.y)
    filled = np.nan_to_num(cols.y, nan=0.0)
    observed = None if seen.all() else seen

    counts = resample_counts(n_models, replicates, seed)
    # Group replicates of equal width so that little padding is solved.
    order = np.argsort((counts > 0).sum(1), kind="stable")
    per_chunk = max(1, max_chunk_cells // (n_models * cols.items.size))
    samples = np.empty((replicates, cols.items.size))  # per distinct column
    for start in range(0, replicates, per_chunk):
        rows = order[start:start + per_chunk]
        panel = _chunk_panel(filled, observed, raw, counts[rows], cols.items)
        _, a, _, _ = alternate(panel, s)
        samples[rows] = a

    tail = 50.0 * (1.0 - level)
    a_low, a_high = np.percentile(samples, [tail, 100.0 - tail], axis=0)
    # Share of replicates in each band, per column; an item reads the share of its own band.
    in_band = np.stack([(band_index(samples) == k).mean(0) for k in range(len(BANDS))], axis=1)
    return BootstrapResult(
        replicates=replicates, seed=seed, level=level,
        a_low=cols.expand(a_low), a_high=cols.expand(a_high),
        band_stability=in_band[cols.inverse, band_index(reference.a)],
        high_disc_shares=((samples >= 0.7) @ cols.items) / n_items,
        a_samples=cols.expand(samples) if keep_samples else None,
    )
