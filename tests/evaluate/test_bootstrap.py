"""The model bootstrap: seeded, independent of batching, and equal to refitting the resampled
matrix with its duplicated rows."""

from __future__ import annotations

import numpy as np

from forge_skills.evaluate import BOOTSTRAP_SEED, FitSettings, fit_2pl, model_bootstrap
from forge_skills.evaluate.bootstrap import resample_counts

from .simulated import lognormal_panel


def test_reproducible_with_its_seed() -> None:
    y, *_ = lognormal_panel(11, 120, seed=1)
    first = model_bootstrap(y, replicates=40)
    again = model_bootstrap(y, replicates=40, seed=BOOTSTRAP_SEED)
    assert first.seed == 20260731
    for name in ("a_low", "a_high", "band_stability", "high_disc_shares"):
        np.testing.assert_array_equal(getattr(first, name), getattr(again, name))
    other = model_bootstrap(y, replicates=40, seed=1)
    assert not np.array_equal(first.a_low, other.a_low)


def test_intervals_and_stability_are_well_formed() -> None:
    y, *_ = lognormal_panel(11, 120, seed=2)
    fit = fit_2pl(y)
    boot = model_bootstrap(y, replicates=60, reference=fit)
    assert (boot.a_low <= boot.a_high).all()
    assert ((boot.band_stability >= 0) & (boot.band_stability <= 1)).all()
    lo, hi = boot.high_disc_interval
    assert 0 <= lo <= hi <= 1 and boot.high_disc_shares.shape == (60,)


def test_resampled_counts() -> None:
    counts = resample_counts(11, 500, BOOTSTRAP_SEED)
    assert counts.shape == (500, 11) and (counts.sum(1) == 11).all()
    assert 6 < (counts > 0).sum(1).mean() < 8  # about 11 (1 - (10/11)^11) = 7.0 distinct models


def test_weighted_rows_equal_refitting_the_duplicated_matrix() -> None:
    y, *_ = lognormal_panel(11, 150, seed=3)
    boot = model_bootstrap(y, replicates=5, keep_samples=True)
    in_batches = model_bootstrap(y, replicates=5, keep_samples=True, max_chunk_cells=10**7)
    np.testing.assert_allclose(boot.a_samples, in_batches.a_samples, atol=1e-5)
    counts = resample_counts(11, 5, BOOTSTRAP_SEED)
    for r in range(5):
        resampled = np.repeat(y, counts[r], axis=0)
        refit = fit_2pl(resampled, FitSettings(item_solver="newton"))
        np.testing.assert_allclose(boot.a_samples[r], refit.a, atol=1e-5)
