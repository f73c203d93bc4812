"""The whole IRT diagnosis of one response matrix as one JSON-ready record."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from forge_skills.evaluate.bootstrap import BOOTSTRAP_SEED, model_bootstrap
from forge_skills.evaluate.classical import item_rest_correlation, rank_agreement, reverse_risk, top_bottom_gap
from forge_skills.evaluate.information import information_curves
from forge_skills.evaluate.irt import BANDS, FitSettings, as_response_matrix, fit_2pl

FORMAT = "forge.irt-diagnosis/1"


def _floats(values: ArrayLike) -> list[float | None]:
    """A list of floats with None for NaN (JSON has no NaN)."""
    return [None if math.isnan(v) else float(v) for v in np.asarray(values, dtype=float).ravel()]


@dataclass(frozen=True)
class ItemBootstrap:
    replicates: int
    seed: int
    level: float
    a_low: list[float]
    a_high: list[float]
    band_stability: list[float]
    high_disc_interval: list[float]


@dataclass(frozen=True)
class IrtDiagnosis:
    """Per-model and per-item results (lists in matrix order) and panel-level summaries.

    Per item: slope a, intercept beta, difficulty b (None where |a| < 0.05), band, item-rest
    correlation (None where undefined), reverse-risk flag, top-bottom gap D, the ability of
    peak information. Item information curves are not stored: information_curves(a, beta)
    recomputes them.
    """

    model_ids: list[str]
    item_ids: list[str]
    settings: dict[str, Any]
    converged: bool
    theta: list[float]
    a: list[float]
    beta: list[float]
    b: list[float | None]
    band: list[str]
    item_rest: list[float | None]
    reverse_risk: list[bool]
    top_bottom_gap: list[float | None]
    item_theta_peak: list[float]
    band_counts: dict[str, int]
    high_disc_share: float
    mean_gap: float | None
    spearman_a_gap: float | None
    information_grid: list[float]
    test_information: list[float]
    test_theta_peak: float
    bootstrap: ItemBootstrap | None = None
    format: str = FORMAT

    def to_dict(self) -> dict[str, Any]:
        """The record's fields (sharing its lists: ``asdict`` would copy a hundred thousand
        numbers one by one)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.bootstrap is not None:
            out["bootstrap"] = {f.name: getattr(self.bootstrap, f.name) for f in fields(self.bootstrap)}
        return out

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IrtDiagnosis:
        if data.get("format") != FORMAT:
            raise ValueError(f"not an IRT diagnosis record of format {FORMAT}: {data.get('format')!r}")
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("bootstrap") is not None:
            values["bootstrap"] = ItemBootstrap(**values["bootstrap"])
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> IrtDiagnosis:
        return cls.from_dict(json.loads(text))


def _nan_to_none(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def diagnose(responses: ArrayLike, *, model_ids: list[str] | None = None, item_ids: list[str] | None = None,
             settings: FitSettings | None = None, bootstrap_replicates: int = 1000,
             seed: int = BOOTSTRAP_SEED, level: float = 0.95) -> IrtDiagnosis:
    """Fit, classify, corroborate and (unless ``bootstrap_replicates`` is 0) bootstrap a models
    x items matrix of 0/1 with NaN for missing pairs."""
    y = as_response_matrix(responses)
    n_models, n_items = y.shape
    model_ids = list(model_ids) if model_ids is not None else [f"model-{m}" for m in range(n_models)]
    item_ids = list(item_ids) if item_ids is not None else [f"item-{i}" for i in range(n_items)]
    if len(model_ids) != n_models or len(item_ids) != n_items:
        raise ValueError(f"{len(model_ids)} model ids and {len(item_ids)} item ids for a {n_models} x {n_items} matrix")
    s = settings or FitSettings()
    fit = fit_2pl(y, s)
    rest = item_rest_correlation(y)
    gap = top_bottom_gap(y)
    info = information_curves(fit.a, fit.beta)
    bands = fit.bands
    boot = None
    if bootstrap_replicates > 0:
        result = model_bootstrap(y, replicates=bootstrap_replicates, seed=seed, settings=s, reference=fit, level=level)
        boot = ItemBootstrap(replicates=result.replicates, seed=result.seed, level=result.level,
                             a_low=_floats(result.a_low), a_high=_floats(result.a_high),
                             band_stability=_floats(result.band_stability),
                             high_disc_interval=list(result.high_disc_interval))
    return IrtDiagnosis(
        model_ids=model_ids, item_ids=item_ids, settings=json.loads(json.dumps(asdict(s))), converged=fit.converged,
        theta=_floats(fit.theta), a=_floats(fit.a), beta=_floats(fit.beta), b=_floats(fit.b),
        band=[str(x) for x in bands], item_rest=_floats(rest),
        reverse_risk=[bool(x) for x in reverse_risk(fit.a, rest)],
        top_bottom_gap=_floats(gap), item_theta_peak=_floats(info.item_theta_peak),
        band_counts={name: int((bands == name).sum()) for name in BANDS},
        high_disc_share=fit.high_disc_share,
        mean_gap=_nan_to_none(float(np.nanmean(gap))) if not np.isnan(gap).all() else None,
        spearman_a_gap=_nan_to_none(rank_agreement(fit.a, gap)),
        information_grid=_floats(info.grid), test_information=_floats(info.test),
        test_theta_peak=info.test_theta_peak, bootstrap=boot,
    )
