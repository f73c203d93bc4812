"""The second, Bayesian 2PL backend (py-irt: variational inference with Pyro) and its
cross-check against the regularized fit.

py-irt is an optional extra (it brings torch and Pyro, and caps rich, typer and pandas), so
it is imported only when called. Its 2PL uses logit a_i (theta_m - b_i) with a log-normal
slope: discriminations are positive, so a reversed item shows up there only as a small slope.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from forge.errors import PrerequisiteError
from forge_skills.evaluate.classical import spearman
from forge_skills.evaluate.irt import IrtFit, as_response_matrix

EXTRA = "irt-bayes"
EXTRA_REQUIREMENTS = ("py-irt>=0.7.1", "torch==2.13.0", "rich>=13,<14", "typer<0.15", "pandas<3")


@dataclass(frozen=True)
class BayesFit:
    """Posterior location of each slope (a), difficulty (b) and ability (theta)."""

    a: np.ndarray
    b: np.ndarray
    theta: np.ndarray
    priors: str
    epochs: int


@dataclass(frozen=True)
class CrossCheck:
    """Rank agreement (Spearman) of the two backends' discriminations and abilities."""

    spearman_a: float
    spearman_theta: float
    n_items: int
    n_models: int


def _import_py_irt():  # noqa: ANN202 (returns modules)
    try:
        with warnings.catch_warnings():  # its dependencies' deprecation notices on import
            warnings.simplefilter("ignore", DeprecationWarning)
            from py_irt.config import IrtConfig
            from py_irt.dataset import Dataset
            from py_irt.training import IrtModelTrainer
            import pyro
    except ImportError as exc:
        raise PrerequisiteError(
            f"the Bayesian IRT backend needs the optional extra '{EXTRA}' (py-irt with a CPU torch); "
            f"importing it failed: {exc}",
            hint="pip install " + " ".join(f"'{r}'" for r in EXTRA_REQUIREMENTS),
        ) from exc
    return pyro, IrtConfig, Dataset, IrtModelTrainer


def fit_py_irt(responses: ArrayLike, *, priors: Literal["vague", "hierarchical"] = "hierarchical",
               epochs: int = 1000, lr: float = 0.1, seed: int = 0) -> BayesFit:
    """Fit py-irt's 2PL to a models x items matrix (0/1, NaN missing pairs left out) on CPU.

    "hierarchical" learns the spread of slopes, difficulties and abilities; "vague" holds slopes
    and difficulties to tight fixed priors. Seeds Pyro (and with it torch, numpy's and Python's
    global generators) so the fit repeats.
    """
    y = as_response_matrix(responses)
    pyro, IrtConfig, Dataset, IrtModelTrainer = _import_py_irt()
    import pandas as pd

    frame = pd.DataFrame(y, columns=[f"i{j}" for j in range(y.shape[1])])
    frame.insert(0, "model", [f"m{m}" for m in range(y.shape[0])])
    dataset = Dataset.from_pandas(frame, subject_column="model", item_columns=list(frame.columns[1:]))
    pyro.set_rng_seed(seed)
    config = IrtConfig(model_type="2pl", priors=priors, epochs=epochs, lr=lr, seed=seed)
    trainer = IrtModelTrainer(data_path=None, config=config, dataset=dataset, verbose=False)
    with contextlib.redirect_stdout(io.StringIO()):  # py-irt logs to the console even when quiet
        trainer.train(device="cpu")
    params = trainer.last_params
    # Parameters come back indexed as the dataset encoded them: rows and columns in order.
    item_order = [int(params["item_ids"][j][1:]) for j in range(y.shape[1])]
    model_order = [int(params["subject_ids"][m][1:]) for m in range(y.shape[0])]
    a = np.empty(y.shape[1])
    b = np.empty(y.shape[1])
    theta = np.empty(y.shape[0])
    a[item_order] = params["disc"]
    b[item_order] = params["diff"]
    theta[model_order] = params["ability"]
    return BayesFit(a=a, b=b, theta=theta, priors=priors, epochs=epochs)


def cross_check(fit: IrtFit, bayes: BayesFit) -> CrossCheck:
    """Spearman rho between the backends' slopes (over items) and abilities (over models)."""
    if fit.a.shape != bayes.a.shape or fit.theta.shape != bayes.theta.shape:
        raise ValueError("the two fits are of different response matrices")
    return CrossCheck(
        spearman_a=spearman(fit.a, bayes.a),
        spearman_theta=spearman(fit.theta, bayes.theta),
        n_items=int(fit.a.size),
        n_models=int(fit.theta.size),
    )
