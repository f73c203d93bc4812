"""Regularized two-parameter logistic (2PL) fit of a models x items response matrix.

    P(y_mi = 1 | theta_m) = sigmoid(a_i * theta_m + beta_i),   b_i = -beta_i / a_i

Rows are models, columns items; entries are 0/1 and NaN marks a pair that was not observed,
which is left out of every likelihood term (it neither counts as wrong nor as right).

The fit minimizes, by four alternating rounds of an item step and an ability step,

    sum over observed (m, i) of -log P(y_mi | theta_m, a_i, beta_i)
      + lambda_a * sum_i a_i^2 + lambda_beta * sum_i beta_i^2 + lambda_theta * sum_m theta_m^2

The specification gives only the three weights (1.0, 0.05, 0.05), not the form. We read them
as plain ridge weights on the squared values, each shrinking toward 0: a slope pulled toward 0
leaves an item that carries no ranking signal (answered alike by every model) nearly flat,
which is the case the |a_i| < 0.05 rule for omitting b_i is written for; a pull toward 1 would
instead report such items as highly discriminating.

Items are independent given the abilities, and an item enters the ability step only through its
column of responses, so two items with the same column (the same models right, wrong and
missing) get the same (a, beta) at every step. The fit therefore solves each distinct column
once and weights it by how many items share it: a panel of K models has at most 3^K distinct
columns (2^K with none missing), so a package of ten thousand items answered by a handful of
models is a problem of a few dozen columns. The result is the same fit, up to the order in
which sums are added.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from forge_skills.evaluate.solvers import bounded_brent, newton_2d, sigmoid, softplus

ItemSolver = Literal["lbfgsb", "newton"]
BANDS = ("reversed", "low", "moderate", "high")


@dataclass(frozen=True)
class FitSettings:
    """The settings of the paper's Table 31 (the defaults) and the item solver to use."""

    lambda_a: float = 1.0
    lambda_beta: float = 0.05
    lambda_theta: float = 0.05
    rounds: int = 4
    item_maxiter: int = 200
    item_tol: float = 1e-9
    theta_tol: float = 1e-5
    theta_bounds: tuple[float, float] = (-6.0, 6.0)
    b_min_abs_a: float = 0.05
    # "lbfgsb" is the specified solver. "newton" reaches the same optimum of each (strictly
    # convex) item step to tighter precision and runs many panels at once; the bootstrap uses it.
    item_solver: ItemSolver = "lbfgsb"


@dataclass(frozen=True)
class RoundLog:
    """What one alternating round did: item solver iterations and whether it reported success,
    the most function evaluations one ability took, and the largest ability change."""

    item_iterations: int
    item_converged: bool
    theta_evaluations: int
    theta_change: float


@dataclass(frozen=True)
class IrtFit:
    """Item parameters (length n_items), abilities (length n_models, mean 0, variance 1,
    larger for models with higher raw scores) and the log of the alternating rounds."""

    a: np.ndarray
    beta: np.ndarray
    theta: np.ndarray
    settings: FitSettings
    rounds: tuple[RoundLog, ...] = field(default=())

    @property
    def b(self) -> np.ndarray:
        """Difficulty -beta/a, NaN where |a| < settings.b_min_abs_a (no stable crossing point)."""
        return difficulty(self.a, self.beta, self.settings.b_min_abs_a)

    @property
    def bands(self) -> np.ndarray:
        return discrimination_bands(self.a)

    @property
    def high_disc_share(self) -> float:
        return float(np.mean(self.a >= 0.7))

    @property
    def converged(self) -> bool:
        return all(r.item_converged for r in self.rounds)


def difficulty(a: np.ndarray, beta: np.ndarray, min_abs_a: float = 0.05) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    flat = np.abs(a) < min_abs_a
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(flat, np.nan, -np.asarray(beta, dtype=float) / np.where(flat, 1.0, a))


# A slope this close to 0 is 0 up to rounding: an item every model answers alike has its optimum
# at exactly a = 0, which the solvers return as +-1e-17; its sign must not make it "reversed".
ZERO_SLOPE = 1e-9


def band_index(a: ArrayLike) -> np.ndarray:
    """Position in BANDS: reversed (a < 0), low [0, 0.3), moderate [0.3, 0.7), high (>= 0.7)."""
    a = np.asarray(a, dtype=float)
    return np.digitize(np.where(np.abs(a) < ZERO_SLOPE, 0.0, a), [0.0, 0.3, 0.7])


def discrimination_bands(a: ArrayLike) -> np.ndarray:
    """The band name of each slope (see band_index)."""
    return np.asarray(BANDS, dtype=object)[band_index(a)]


def as_response_matrix(responses: ArrayLike) -> np.ndarray:
    """The models x items matrix as float64, checked: 0/1 or NaN, at least two models, and
    every model with at least one observed item."""
    y = np.array(responses, dtype=float)
    if y.ndim != 2:
        raise ValueError(f"expected a models x items matrix, got an array of shape {y.shape}")
    if y.shape[0] < 2 or y.shape[1] < 1:
        raise ValueError(f"need at least 2 models and 1 item, got {y.shape[0]} x {y.shape[1]}")
    seen = ~np.isnan(y)
    if not np.isin(y[seen], (0.0, 1.0)).all():
        raise ValueError("responses must be 0, 1 or NaN (missing)")
    empty = np.flatnonzero(~seen.any(axis=1))
    if empty.size:
        raise ValueError(f"models {empty.tolist()} have no observed response")
    return y


@dataclass(frozen=True)
class DistinctColumns:
    """The distinct response columns of a models x items matrix: ``y`` (models x columns, NaN
    kept), ``items`` (how many items share each column) and ``inverse`` (each item's column)."""

    y: np.ndarray
    items: np.ndarray
    inverse: np.ndarray

    def expand(self, per_column: np.ndarray) -> np.ndarray:
        """Per-column values (columns on the last axis) as per-item values."""
        return per_column[..., self.inverse]


def distinct_columns(y: np.ndarray) -> DistinctColumns:
    codes = np.where(np.isnan(y), 2, y).astype(np.int8)  # 0, 1, or 2 for missing
    _, first, inverse, items = np.unique(codes, axis=1, return_index=True, return_inverse=True, return_counts=True)
    return DistinctColumns(y=y[:, first], items=items.astype(float), inverse=inverse.reshape(-1))


@dataclass
class Panel:
    """A stack of R panels of K model rows over the same N columns, the form every step works
    on. ``counts`` is how often each row stands in the panel (a bootstrap draws a model more
    than once; a duplicated row has the same ability, so it is fitted once and weighted);
    0 marks padding. ``observed`` is None when no pair is missing. ``items`` is how many items
    each column stands for (see the module's note on distinct columns); None means one each."""

    y: np.ndarray  # (R, K, N), missing entries set to 0
    observed: np.ndarray | None  # (R, K, N) 1.0 where observed
    counts: np.ndarray  # (R, K)
    raw: np.ndarray  # (R, K) raw mean score over observed items
    items: np.ndarray | None = None  # (N,)

    @classmethod
    def single(cls, y: np.ndarray, items: np.ndarray | None = None, raw: np.ndarray | None = None) -> Panel:
        """One panel over the columns of ``y``; ``raw`` (per model) defaults to the row means,
        which a caller passing distinct columns gives from the full matrix."""
        seen = ~np.isnan(y)
        observed = None if seen.all() else seen.astype(float)[None]
        raw = np.nanmean(y, axis=1) if raw is None else raw
        return cls(np.nan_to_num(y, nan=0.0)[None], observed, np.ones((1, y.shape[0])), raw[None], items)

    def item_sum(self, x: np.ndarray) -> np.ndarray:
        """Sum over the last (column) axis, each column counted once per item it stands for."""
        return x.sum(-1) if self.items is None else x @ self.items

    @property
    def item_weight(self) -> np.ndarray:
        w = self.counts[:, :, None]
        return w if self.observed is None else w * self.observed

    @property
    def theta_weight(self) -> np.ndarray | float:
        return 1.0 if self.observed is None else self.observed


def _logit_rate(hits: np.ndarray, n: np.ndarray) -> np.ndarray:
    p = (hits + 0.5) / (n + 1.0)  # continuity correction keeps all-right / all-wrong finite
    return np.log(p / (1.0 - p))


def initial_values(panel: Panel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Abilities from the standardized logits of the models' mean responses, beta from each
    item's mean-response logit, a from the item-ability correlation (0 for a constant item)."""
    wt = panel.theta_weight
    theta = _logit_rate(panel.item_sum(panel.y * wt), panel.item_sum(np.broadcast_to(wt, panel.y.shape)))
    theta, _, _ = standardize(theta, np.zeros((theta.shape[0], 1)), np.zeros((theta.shape[0], 1)), panel)
    iw = np.broadcast_to(panel.item_weight, panel.y.shape)
    n = iw.sum(1)
    safe_n = np.where(n > 0, n, 1.0)
    beta = _logit_rate((iw * panel.y).sum(1), n)
    y_mean = (iw * panel.y).sum(1) / safe_n
    t_mean = np.einsum("rkn,rk->rn", iw, theta) / safe_n
    cov = np.einsum("rkn,rk->rn", iw * panel.y, theta) / safe_n - y_mean * t_mean
    var_y = y_mean - y_mean**2
    var_t = np.einsum("rkn,rk->rn", iw, theta**2) / safe_n - t_mean**2
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where((var_y > 1e-12) & (var_t > 1e-12), cov / np.sqrt(var_y * var_t), 0.0)
    return theta, a, beta


def standardize(theta: np.ndarray, a: np.ndarray, beta: np.ndarray,
                panel: Panel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Abilities to mean 0, variance 1 (over the panel's models, with their counts) and signed
    to correlate positively with raw scores. a and beta follow the same affine change, so every
    predicted probability a*theta + beta is unchanged."""
    c = panel.counts
    total = c.sum(1, keepdims=True)
    mu = (c * theta).sum(1, keepdims=True) / total
    sd = np.sqrt((c * (theta - mu) ** 2).sum(1, keepdims=True) / total)
    sd = np.where(sd > 1e-12, sd, 1.0)  # every model alike: centre only
    theta = (theta - mu) / sd
    beta = beta + a * mu
    a = a * sd
    raw_c = panel.raw - (c * panel.raw).sum(1, keepdims=True) / total
    sign = np.where((c * theta * raw_c).sum(1, keepdims=True) < 0, -1.0, 1.0)
    return theta * sign, a * sign, beta


def _item_objective(panel: Panel, theta: np.ndarray, s: FitSettings, a: np.ndarray, beta: np.ndarray) -> np.ndarray:
    z = a[:, None, :] * theta[:, :, None] + beta[:, None, :]
    nll = softplus(z) - panel.y * z
    nll *= panel.item_weight
    return nll.sum(1) + s.lambda_a * a**2 + s.lambda_beta * beta**2


def _item_grad_hess(panel: Panel, theta: np.ndarray, s: FitSettings, a: np.ndarray,
                    beta: np.ndarray, hessian: bool = True) -> tuple[np.ndarray, ...]:
    p = sigmoid(a[:, None, :] * theta[:, :, None] + beta[:, None, :])
    iw = panel.item_weight
    res = (p - panel.y) * iw
    g_a = np.einsum("rkn,rk->rn", res, theta) + 2.0 * s.lambda_a * a
    g_b = res.sum(1) + 2.0 * s.lambda_beta * beta
    if not hessian:
        return g_a, g_b
    h = p * (1.0 - p) * iw
    h_aa = np.einsum("rkn,rk->rn", h, theta**2) + 2.0 * s.lambda_a
    h_ab = np.einsum("rkn,rk->rn", h, theta)
    h_bb = h.sum(1) + 2.0 * s.lambda_beta
    return g_a, g_b, h_aa, h_ab, h_bb


def item_step(panel: Panel, theta: np.ndarray, a: np.ndarray, beta: np.ndarray,
              s: FitSettings) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """Best (a, beta) of every item given the abilities; items are independent given theta."""
    if s.item_solver == "newton":
        a, beta, iters = newton_2d(lambda u, v: _item_grad_hess(panel, theta, s, u, v),
                                   lambda u, v: _item_objective(panel, theta, s, u, v),
                                   a, beta, maxiter=s.item_maxiter)
        return a, beta, iters, iters < s.item_maxiter
    shape = a.shape

    # Each distinct column counts once: the columns' problems are independent, so the sum has the
    # same minimizer as the sum over items, and equal weights keep the joint problem well scaled.
    def joint(x: np.ndarray) -> tuple[float, np.ndarray]:
        u, v = x[: a.size].reshape(shape), x[a.size:].reshape(shape)
        f = _item_objective(panel, theta, s, u, v).sum()
        g_a, g_b = _item_grad_hess(panel, theta, s, u, v, hessian=False)
        return float(f), np.concatenate([g_a.ravel(), g_b.ravel()])

    from scipy.optimize import minimize  # imported on use: the bootstrap's Newton solver never needs it

    out = minimize(joint, np.concatenate([a.ravel(), beta.ravel()]), jac=True, method="L-BFGS-B",
                   tol=s.item_tol, options={"maxiter": s.item_maxiter})
    return out.x[: a.size].reshape(shape), out.x[a.size:].reshape(shape), int(out.nit), bool(out.success)


def theta_step(panel: Panel, a: np.ndarray, beta: np.ndarray, s: FitSettings) -> tuple[np.ndarray, int]:
    """Best ability of every model row given the items: bounded Brent per row, run as lanes."""
    r, k, n = panel.y.shape
    # The response-dependent part is linear in theta: sum_i w y (a theta + beta).
    weighted_a = a if panel.items is None else a * panel.items
    lin = np.einsum("rkn,rn->rk", panel.y if panel.observed is None else panel.y * panel.observed, weighted_a).ravel()
    observed = None if panel.observed is None else panel.observed.reshape(r * k, n)

    def f(x: np.ndarray, lanes: np.ndarray) -> np.ndarray:
        if lanes.size == r * k:  # every lane: broadcast instead of gathering rows
            z = a[:, None, :] * x.reshape(r, k)[:, :, None] + beta[:, None, :]
            z = z.reshape(r * k, n)
        else:
            rows = lanes // k
            z = a[rows] * x[:, None] + beta[rows]
        sp = softplus(z)
        if observed is not None:
            sp *= observed[lanes]
        return panel.item_sum(sp) - lin[lanes] * x + s.lambda_theta * x**2

    x, _, nfev = bounded_brent(f, r * k, s.theta_bounds, xatol=s.theta_tol)
    return x.reshape(r, k), int(nfev.max())


def alternate(panel: Panel, s: FitSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[RoundLog]]:
    theta, a, beta = initial_values(panel)
    log = []
    for _ in range(s.rounds):
        a, beta, iters, ok = item_step(panel, theta, a, beta, s)
        new_theta, nfev = theta_step(panel, a, beta, s)
        new_theta, a, beta = standardize(new_theta, a, beta, panel)
        live = panel.counts > 0
        change = float(np.abs(new_theta - theta)[live].max())
        theta = new_theta
        log.append(RoundLog(iters, ok, nfev, change))
    return theta, a, beta, log


def fit_2pl(responses: ArrayLike, settings: FitSettings | None = None) -> IrtFit:
    """Fit the regularized 2PL to a models x items matrix of 0/1 with NaN for missing."""
    s = settings or FitSettings()
    y = as_response_matrix(responses)
    cols = distinct_columns(y)
    theta, a, beta, log = alternate(Panel.single(cols.y, cols.items, raw=np.nanmean(y, axis=1)), s)
    return IrtFit(a=cols.expand(a[0]), beta=cols.expand(beta[0]), theta=theta[0], settings=s, rounds=tuple(log))


def with_solver(settings: FitSettings | None, solver: ItemSolver) -> FitSettings:
    return replace(settings or FitSettings(), item_solver=solver)
