"""Item-rest correlation, reverse risk, the top-3 minus bottom-3 gap and its rank agreement, on
matrices small enough to check by hand."""

from __future__ import annotations

import numpy as np
import pytest

from forge_skills.evaluate import item_rest_correlation, rank_agreement, reverse_risk, top_bottom_gap
from forge_skills.evaluate.classical import average_ranks, spearman

# Four models in a Guttman pattern plus an item everyone gets right.
GUTTMAN = np.array([
    [1, 1, 1, 1],
    [1, 1, 0, 1],
    [1, 0, 0, 1],
    [0, 0, 0, 1],
], dtype=float)

# Seven models with totals 4, 0, 6, 1, 5, 2, 3: top three are rows 2, 4, 0; bottom three 1, 3, 5.
RANKED = np.array([
    [1, 0, 1, 1, 0, 1],
    [0, 0, 0, 0, 0, 0],
    [1, 1, 1, 1, 1, 1],
    [1, 0, 0, 0, 0, 0],
    [1, 1, 1, 1, 0, 1],
    [0, 1, 0, 0, 1, 0],
    [1, 0, 1, 0, 0, 1],
], dtype=float)


def test_item_rest_correlation_by_hand() -> None:
    # Item 0 against rest sums (2, 1, 0, 0) + 1: cov 0.75, var 0.75 and 2.75 -> sqrt(3/11).
    # Item 1 against (2, 1, 1, 0) + 1: cov 1, var 1 and 2 -> 1/sqrt(2). Item 2 mirrors item 0.
    r = item_rest_correlation(GUTTMAN)
    np.testing.assert_allclose(r[:3], [np.sqrt(3 / 11), 1 / np.sqrt(2), np.sqrt(3 / 11)])
    assert np.isnan(r[3])  # a constant item has no correlation


def test_item_rest_correlation_leaves_missing_pairs_out() -> None:
    y = GUTTMAN.copy()
    y[3, 0] = np.nan
    r = item_rest_correlation(y)
    # Item 0: only models 0-2 count; their rest means over items 1-3 are 1, 2/3, 1/3.
    assert np.isnan(r[0])  # item 0 is 1 for all three remaining models
    # Item 1: rest means over items 0, 2, 3 are 1, 2/3, 2/3, and model 3's is over items 2
    # and 3 only (item 0 is missing): 0.5.
    rest = np.array([1.0, 2 / 3, 2 / 3, 0.5])
    assert r[1] == pytest.approx(np.corrcoef(y[:, 1], rest)[0, 1])


def test_reverse_risk() -> None:
    flags = reverse_risk([0.8, -0.2, 0.5, 0.5, -0.1, -1e-17], [0.3, 0.2, -0.1, np.nan, np.nan, np.nan])
    assert flags.tolist() == [False, True, True, False, True, False]  # -1e-17: a slope of 0, rounded


def test_top_bottom_gap_by_hand() -> None:
    np.testing.assert_allclose(top_bottom_gap(RANKED), [2 / 3, 1 / 3, 1, 1, 0, 1])


def test_top_bottom_gap_with_missing_pairs_and_small_panels() -> None:
    y = RANKED.copy()
    y[5, 1] = np.nan  # a bottom model's answer to item 1 is missing: bottom mean is over two
    assert top_bottom_gap(y)[1] == pytest.approx(2 / 3 - 0.0)
    # Four models: groups of two.
    assert top_bottom_gap(GUTTMAN).tolist() == [0.5, 1.0, 0.5, 0.0]


def test_rank_agreement() -> None:
    assert rank_agreement([0.1, 0.5, 0.9, 1.2], [0.0, 0.2, 0.3, 0.9]) == pytest.approx(1.0)
    assert rank_agreement([0.1, 0.5, np.nan, 1.2], [0.9, 0.2, 0.3, 0.0]) == pytest.approx(-1.0)
    assert np.isnan(rank_agreement([1.0, 1.0, 1.0], [0.1, 0.2, 0.3]))


def test_average_ranks_share_the_mean_rank_of_a_tie() -> None:
    assert average_ranks([0.3, 0.1, 0.3, 0.2, 0.3]).tolist() == [4.0, 1.0, 4.0, 2.0, 4.0]
    assert average_ranks([]).tolist() == []


@pytest.mark.parametrize("seed", range(6))
def test_spearman_is_scipys_rho_with_ties(seed: int) -> None:
    from scipy.stats import spearmanr

    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 400))
    x = rng.integers(0, 6, n).astype(float)  # few distinct values: many ties
    y = x * rng.choice([-1.0, 0.5, 2.0]) + rng.normal(0, 2, n).round(1)
    assert spearman(x, y) == pytest.approx(float(spearmanr(x, y).statistic), abs=1e-12)
    assert np.isnan(spearman(np.ones(n), y))
    with pytest.raises(ValueError, match="pairs them"):
        spearman(x, y[:-1])
