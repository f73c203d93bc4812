"""The py-irt backend (an optional extra) against the regularized fit."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from forge.errors import PrerequisiteError
from forge_skills.evaluate import cross_check, fit_2pl, fit_py_irt

from .simulated import lognormal_panel


def test_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "py_irt", None)  # import py_irt now raises ImportError
    with pytest.raises(PrerequisiteError, match="irt-bayes") as err:
        fit_py_irt(np.array([[1.0, 0.0], [0.0, 1.0]]))
    assert "py-irt" in str(err.value) and "torch==2.13.0" in str(err.value)


@pytest.mark.slow
def test_backends_agree_on_a_shared_matrix() -> None:
    pytest.importorskip("py_irt", reason="py-irt (the 'irt-bayes' extra) is not installed")
    y, *_ = lognormal_panel(60, 120, seed=2)
    check = cross_check(fit_2pl(y), fit_py_irt(y, epochs=300, seed=0))
    assert check.n_items == 120 and check.n_models == 60
    assert check.spearman_a > 0.8
    assert check.spearman_theta > 0.8
