"""Classical item statistics that corroborate the 2PL slopes: item-rest correlation, the
reverse-risk flag, the top-3 minus bottom-3 gap D_i and its rank agreement with a_i (Spearman's rho).

All take a models x items matrix of 0/1 with NaN for missing pairs."""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike

from forge_skills.evaluate.irt import ZERO_SLOPE, as_response_matrix


def item_rest_correlation(responses: ArrayLike) -> np.ndarray:
    """Per item, Pearson correlation across models between the item and the model's score on
    the other items. The rest score is the mean over the other observed items (with nothing
    missing that is the rest sum divided by a constant, so the correlation is the same); only
    models that answered the item count. NaN for an item or rest score that does not vary."""
    y = as_response_matrix(responses)
    seen = ~np.isnan(y)
    filled = np.where(seen, y, 0.0)
    hits = filled.sum(1, keepdims=True) - filled
    answered = seen.sum(1, keepdims=True) - seen
    with np.errstate(divide="ignore", invalid="ignore"):
        rest = hits / answered
    w = (seen & (answered > 0)).astype(float)
    rest = np.where(w > 0, rest, 0.0)
    n = w.sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        my = (w * filled).sum(0) / n
        mr = (w * rest).sum(0) / n
        cov = (w * (filled - my) * (rest - mr)).sum(0)
        vy = (w * (filled - my) ** 2).sum(0)
        vr = (w * (rest - mr) ** 2).sum(0)
        r = cov / np.sqrt(vy * vr)
    return np.where((vy > 1e-12) & (vr > 1e-12), r, np.nan)


def reverse_risk(a: ArrayLike, item_rest: ArrayLike) -> np.ndarray:
    """Flag an item whose slope is negative or whose item-rest correlation is negative (an
    undefined correlation raises no flag by itself, nor does a slope that is 0 up to rounding)."""
    r = np.asarray(item_rest, dtype=float)
    return (np.asarray(a, dtype=float) < -ZERO_SLOPE) | (np.nan_to_num(r, nan=0.0) < 0)


def top_bottom_gap(responses: ArrayLike, group: int = 3) -> np.ndarray:
    """D_i: mean correctness of the ``group`` best models minus that of the ``group`` worst,
    models ranked by mean score over their observed items (ties keep row order: a stable sort).
    Missing pairs are left out of each group's mean. With fewer than 2 * group models the
    groups shrink to half the panel each."""
    y = as_response_matrix(responses)
    k = min(group, y.shape[0] // 2)
    order = np.argsort(np.nanmean(y, axis=1), kind="stable")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an item no model of a group answered: NaN
        return np.nanmean(y[order[-k:]], axis=0) - np.nanmean(y[order[:k]], axis=0)


def rank_agreement(a: ArrayLike, gap: ArrayLike) -> float:
    """Spearman rho between slopes and top-bottom gaps (pairs with a NaN left out)."""
    a = np.asarray(a, dtype=float)
    d = np.asarray(gap, dtype=float)
    keep = ~(np.isnan(a) | np.isnan(d))
    if keep.sum() < 3 or np.ptp(a[keep]) == 0 or np.ptp(d[keep]) == 0:
        return float("nan")
    return spearman(a[keep], d[keep])


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman's rho: Pearson's r of the average ranks (ties share the mean of their ranks), as
    scipy's ``spearmanr`` computes it; NaN when either side does not vary. Written here because
    importing ``scipy.stats`` costs a build most of a second and about 30 MB more than the
    ``scipy.optimize`` its fit loads."""
    rx, ry = average_ranks(x), average_ranks(y)
    if rx.size != ry.size:
        raise ValueError(f"{rx.size} and {ry.size} values: Spearman's rho pairs them")
    rx, ry = rx - rx.mean(), ry - ry.mean()
    scale = np.sqrt((rx @ rx) * (ry @ ry))
    if rx.size < 2 or not scale > 0:
        return float("nan")
    return float(np.clip((rx @ ry) / scale, -1.0, 1.0))


def average_ranks(values: ArrayLike) -> np.ndarray:
    """1-based ranks, each run of equal values given the mean of the ranks it spans."""
    x = np.asarray(values, dtype=float).ravel()
    order = np.argsort(x, kind="stable")
    ordered = x[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1], True])  # run edges, n at the end
    mean_rank = (starts[:-1] + starts[1:] + 1) / 2.0  # a run [s, e) holds ranks s+1 .. e
    ranks = np.empty(x.size)
    ranks[order] = np.repeat(mean_rank, np.diff(starts))
    return ranks
