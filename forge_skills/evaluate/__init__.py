"""IRT diagnosis of a models x items response matrix (0/1, NaN where a pair is missing).

- ``irt``: the regularized 2PL fit (``fit_2pl``), difficulty and discrimination bands.
- ``classical``: item-rest correlation, reverse risk, top-3 minus bottom-3 gap, rank agreement.
- ``bootstrap``: the model bootstrap of the slopes.
- ``information``: item and test information curves.
- ``bayes``: the optional py-irt backend and the cross-check between backends.
- ``report``: ``diagnose``, everything above as one JSON-ready ``IrtDiagnosis``.
"""

from forge_skills.evaluate.bayes import BayesFit, CrossCheck, cross_check, fit_py_irt
from forge_skills.evaluate.bootstrap import BOOTSTRAP_SEED, BootstrapResult, model_bootstrap
from forge_skills.evaluate.classical import item_rest_correlation, rank_agreement, reverse_risk, top_bottom_gap
from forge_skills.evaluate.information import InformationCurves, information_curves, theta_grid
from forge_skills.evaluate.irt import (BANDS, FitSettings, IrtFit, RoundLog, band_index, difficulty,
                                       discrimination_bands, fit_2pl)
from forge_skills.evaluate.report import IrtDiagnosis, ItemBootstrap, diagnose

__all__ = [
    "BANDS", "BOOTSTRAP_SEED", "BayesFit", "BootstrapResult", "CrossCheck", "FitSettings", "InformationCurves",
    "IrtDiagnosis", "IrtFit", "ItemBootstrap", "RoundLog", "band_index", "cross_check", "diagnose", "difficulty",
    "discrimination_bands", "fit_2pl", "fit_py_irt", "information_curves", "item_rest_correlation",
    "model_bootstrap", "rank_agreement", "reverse_risk", "theta_grid", "top_bottom_gap",
]
