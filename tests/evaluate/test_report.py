"""The diagnosis record: complete, strict JSON, and read back unchanged."""

from __future__ import annotations

import json

import numpy as np
import pytest

from forge_skills.evaluate import IrtDiagnosis, diagnose

from .simulated import lognormal_panel


def test_diagnosis_round_trips_through_json(tmp_path) -> None:
    y, *_ = lognormal_panel(11, 80, seed=6)
    y[:, 5] = 1.0  # everyone right: flat, no difficulty, no item-rest correlation
    y[2, 7] = np.nan
    d = diagnose(y, model_ids=[f"m{m}" for m in range(11)], bootstrap_replicates=20)
    path = tmp_path / "irt.json"
    path.write_text(d.to_json(indent=1))
    back = IrtDiagnosis.from_json(path.read_text())
    assert back == d
    data = json.loads(path.read_text())  # allow_nan=False when written: strict JSON
    assert data["format"] == "forge.irt-diagnosis/1" and data["model_ids"][0] == "m0"
    assert d.b[5] is None and d.item_rest[5] is None and d.band[5] == "low" and not d.reverse_risk[5]
    assert sum(d.band_counts.values()) == 80 and len(d.a) == 80 and len(d.theta) == 11
    assert d.bootstrap is not None and d.bootstrap.replicates == 20 and d.bootstrap.seed == 20260731
    assert len(d.test_information) == len(d.information_grid) == 161
    assert d.converged and d.spearman_a_gap is not None and d.spearman_a_gap > 0.5


def test_diagnosis_without_bootstrap_and_bad_ids() -> None:
    y, *_ = lognormal_panel(8, 30, seed=6)
    assert diagnose(y, bootstrap_replicates=0).bootstrap is None
    with pytest.raises(ValueError):
        diagnose(y, item_ids=["only-one"], bootstrap_replicates=0)
    with pytest.raises(ValueError):
        IrtDiagnosis.from_dict({"format": "something-else"})


def test_a_long_chart_label_ends_in_an_ellipsis_and_shows_whole_on_hover() -> None:
    from forge_skills.package import svg

    long = "candidate_resynthesis: C1 (non_target_shortcut)"
    page = svg.bars("repairs", [long, "short"], [3.0, 1.0], title="repairs")
    assert f"<title>{long}</title>{long[:39]}\u2026</text>" in page
    assert ">short</text>" in page and "<title>short</title>" not in page.split("<rect")[0]
    grid = svg.heatmap("accuracy", ["a" * 50], ["b" * 30], [[0.5]], title="accuracy")
    assert "a" * 39 + "\u2026" in grid and "b" * 21 + "\u2026" in grid
