"""The regularized 2PL fit: parameter recovery, signs and bands, scale, missing pairs, solvers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.stats import spearmanr

from forge_skills.evaluate import FitSettings, difficulty, discrimination_bands, fit_2pl
from forge_skills.evaluate.irt import Panel, alternate, distinct_columns, standardize
from forge_skills.evaluate.solvers import bounded_brent

from .simulated import lognormal_panel, simulate


def test_defaults_are_table_31() -> None:
    s = FitSettings()
    assert (s.lambda_a, s.lambda_beta, s.lambda_theta) == (1.0, 0.05, 0.05)
    assert (s.rounds, s.item_maxiter, s.item_tol, s.theta_tol) == (4, 200, 1e-9, 1e-5)
    assert s.theta_bounds == (-6.0, 6.0) and s.b_min_abs_a == 0.05 and s.item_solver == "lbfgsb"


def test_recovers_parameters_on_a_30_model_panel() -> None:
    # 30 answers per item pin a slope down only to about +-0.5, so the slopes must spread wider
    # than that to be ranked: |a| in [1, 3], three in ten reversed; models evenly spaced.
    rng = np.random.default_rng(11)
    a = rng.uniform(1.0, 3.0, 500) * np.where(rng.random(500) < 0.3, -1.0, 1.0)
    b = rng.uniform(-1.5, 1.5, 500)
    theta = np.linspace(-2.0, 2.0, 30)
    fit = fit_2pl(simulate(a, b, theta, rng))
    assert fit.converged
    assert np.corrcoef(a, fit.a)[0, 1] > 0.9
    shown = ~np.isnan(fit.b)
    assert shown.mean() > 0.99
    # b = -beta/a has heavy tails where a slope is shrunk: compared by rank.
    assert spearmanr(b[shown], fit.b[shown]).statistic > 0.9
    assert np.corrcoef(theta, fit.theta)[0, 1] > 0.99


def test_recovers_lognormal_slopes_given_enough_models() -> None:
    y, a, b, theta = lognormal_panel(400, 500, seed=3)
    fit = fit_2pl(y)
    shown = ~np.isnan(fit.b)
    assert np.corrcoef(a, fit.a)[0, 1] > 0.9
    assert np.corrcoef(b[shown], fit.b[shown])[0, 1] > 0.9
    assert np.corrcoef(theta, fit.theta)[0, 1] > 0.99


def test_bands_and_difficulty_rules() -> None:
    bands = discrimination_bands([-0.1, 0.0, 0.29, 0.3, 0.69, 0.7, 2.0])
    assert bands.tolist() == ["reversed", "low", "low", "moderate", "moderate", "high", "high"]
    b = difficulty(np.array([0.04, -0.04, 0.05, -2.0]), np.array([1.0, 1.0, 1.0, 1.0]))
    assert np.isnan(b[:2]).all() and b[2:].tolist() == [-20.0, 0.5]


def test_reversed_item_is_flagged_and_flat_item_has_no_difficulty() -> None:
    y, *_ = lognormal_panel(30, 200, seed=5)
    raw = y.mean(1)
    weakest = np.argsort(raw)[:10]
    reversed_item = np.zeros((30, 1))
    reversed_item[weakest] = 1.0  # only the ten weakest models get it right
    flat_item = np.ones((30, 1))
    fit = fit_2pl(np.hstack([y, reversed_item, flat_item]))
    assert fit.a[200] < 0 and fit.bands[200] == "reversed" and np.isfinite(fit.b[200])
    # Every model right: the optimum is a = 0 exactly, whatever sign rounding leaves on it.
    assert abs(fit.a[201]) < 1e-9 and np.isnan(fit.b[201]) and fit.bands[201] == "low"


def test_abilities_are_standardized_and_follow_raw_scores() -> None:
    y, *_ = lognormal_panel(15, 300, seed=7)
    fit = fit_2pl(y)
    assert fit.theta.mean() == pytest.approx(0.0, abs=1e-12)
    assert fit.theta.var() == pytest.approx(1.0, abs=1e-12)
    assert np.corrcoef(fit.theta, y.mean(1))[0, 1] > 0.9
    # Mostly reversed items: raw scores now fall with the simulated ability, and theta follows
    # the raw scores, so the fitted slopes of those items come out positive.
    rng = np.random.default_rng(8)
    a = np.where(np.arange(300) < 240, -1.5, 1.5)
    y = simulate(a, rng.normal(0, 1, 300), rng.normal(0, 1, 15), rng)
    fit = fit_2pl(y)
    assert np.corrcoef(fit.theta, y.mean(1))[0, 1] > 0.9
    assert (fit.a[:240] > 0).mean() > 0.9 and (fit.a[240:] < 0).mean() > 0.9


def test_standardize_keeps_predictions_and_flips_sign_with_raw_scores() -> None:
    y = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    panel = Panel.single(y)
    theta = np.array([[-3.0, 1.0, 5.0]])  # runs against the raw scores 1, 0.5, 0
    a, beta = np.array([[0.7, -1.2]]), np.array([[0.3, 2.0]])
    t2, a2, b2 = standardize(theta, a, beta, panel)
    assert t2.mean() == pytest.approx(0.0) and t2.var() == pytest.approx(1.0)
    assert t2[0, 0] > t2[0, 2]
    before = a[:, None, :] * theta[:, :, None] + beta[:, None, :]
    after = a2[:, None, :] * t2[:, :, None] + b2[:, None, :]
    np.testing.assert_allclose(after, before, atol=1e-12)


def test_missing_pairs_are_left_out_of_the_likelihood() -> None:
    y, *_ = lognormal_panel(12, 150, seed=9)
    settings = FitSettings(item_solver="newton")
    base = fit_2pl(y, settings)
    # An item nobody answered changes nothing for the others, and stays at the penalty's optimum.
    padded = fit_2pl(np.hstack([y, np.full((12, 1), np.nan)]), settings)
    np.testing.assert_allclose(padded.a[:150], base.a, atol=1e-8)
    np.testing.assert_allclose(padded.theta, base.theta, atol=1e-8)
    assert padded.a[150] == pytest.approx(0.0, abs=1e-12) and padded.beta[150] == pytest.approx(0.0, abs=1e-12)
    holes = y.copy()
    holes[np.random.default_rng(0).random(y.shape) < 0.1] = np.nan
    fit = fit_2pl(holes)
    assert np.isfinite(fit.a).all() and np.corrcoef(fit.a, base.a)[0, 1] > 0.8


@pytest.mark.parametrize("solver", ["lbfgsb", "newton"])
def test_each_distinct_column_is_solved_once(solver: str) -> None:
    # Five models, 600 items: at most 3^5 distinct columns (0, 1 or missing per model).
    y, *_ = lognormal_panel(5, 600, seed=12)
    y[np.random.default_rng(3).random(y.shape) < 0.05] = np.nan
    cols = distinct_columns(y)
    assert cols.y.shape[1] <= 3**5 and cols.y.shape[1] < 150 and cols.items.sum() == 600
    np.testing.assert_array_equal(np.nan_to_num(cols.expand(cols.y), nan=9), np.nan_to_num(y, nan=9))
    settings = FitSettings(item_solver=solver)
    fit = fit_2pl(y, settings)
    theta, a, beta, _ = alternate(Panel.single(y), settings)  # every item its own column
    np.testing.assert_allclose(fit.theta, theta[0], atol=1e-4)
    np.testing.assert_allclose(fit.a, a[0], atol=2e-3 if solver == "lbfgsb" else 1e-8)
    np.testing.assert_allclose(fit.beta, beta[0], atol=2e-3 if solver == "lbfgsb" else 1e-8)
    for i, j in ((0, 1), (2, 3)):  # two items with the same answers get the same parameters
        same = np.flatnonzero(cols.inverse == cols.inverse[i])
        assert np.ptp(fit.a[same]) == 0.0 and np.ptp(fit.beta[same]) == 0.0


def test_item_solvers_agree() -> None:
    y, *_ = lognormal_panel(11, 400, seed=4)
    lbfgsb = fit_2pl(y)
    newton = fit_2pl(y, FitSettings(item_solver="newton"))
    np.testing.assert_allclose(lbfgsb.a, newton.a, atol=2e-3)
    np.testing.assert_allclose(lbfgsb.theta, newton.theta, atol=1e-3)


def test_lane_brent_matches_scipy_bounded_minimizer() -> None:
    rng = np.random.default_rng(2)
    centre, scale = rng.normal(0, 4, 40), rng.uniform(0.1, 3, 40)

    def lanes(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return scale[idx] * np.log1p(np.exp(x - centre[idx])) - x + 0.05 * x**2

    x, _, nfev = bounded_brent(lanes, 40, (-6.0, 6.0), xatol=1e-5)
    for j in range(40):
        ref = minimize_scalar(lambda t: lanes(np.array([t]), np.array([j]))[0], bounds=(-6, 6),
                              method="bounded", options={"xatol": 1e-5})
        assert x[j] == ref.x and nfev[j] == ref.nfev


@pytest.mark.parametrize("bad", [np.zeros(5), np.zeros((1, 4)), np.array([[0, 2], [1, 0]]),
                                 np.array([[np.nan, np.nan], [1, 0]])])
def test_rejects_malformed_matrices(bad: np.ndarray) -> None:
    with pytest.raises(ValueError):
        fit_2pl(bad)
