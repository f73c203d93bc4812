"""Several sources in one intent: each collected by its own skills, items counted per source,
and items set per source honoured (or refused before anything runs when they cannot fit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from forge.errors import CompositionError

from conftest import run_build

DOTA = Path(__file__).resolve().parents[2] / "shared" / "data" / "aerial_dota"


def _intent(folder: Path, ground: dict, dota: dict | None = None, items: int = 60,
            capabilities: tuple[str, ...] = ("visibility", "image_plane_relation", "size_scale", "metric_distance")
            ) -> Path:
    sources = [{"kind": "pybullet_ground", "embodiment": "uav", "frames": 4, **ground}]
    if dota is not None:
        sources.append({"kind": "image_folder", "adapter": "dota", "root": str(DOTA), "zoom": 200, **dota})
    path = folder / "mixed.yaml"
    path.write_text(yaml.safe_dump({
        "name": "mixed", "seed": 5,
        "oe": {"items": items, "capabilities": list(capabilities),
               "question_types": ["numeric", "grounding_choice", "single_choice", "yes_no"]
               + (["marked_object_choice"] if "size_scale" in capabilities else [])},
        "sources": sources, "gates": {"grey_batch": 4, "irt_bootstrap": 200}}, sort_keys=False))
    return path


@pytest.mark.slow
def test_items_set_per_source_are_drawn_from_each(tmp_path):
    if not DOTA.is_dir():
        pytest.skip(f"{DOTA} is not beside the project")
    # Capabilities both sources show (from straight above, two objects of one kind cover the same
    # ground, so simulated flights give few size items; DOTA labels give no image-plane ones).
    summary = run_build(_intent(tmp_path, {"items": 45}, {}, capabilities=("visibility", "metric_distance")),
                        tmp_path / "store", tmp_path / "out", workers=2)
    composition = json.loads((Path(summary["package_path"]) / "composition.json").read_text())
    assert composition["composition_met"]
    sources = composition["sources"]
    assert sources["pybullet_ground"]["target"] == 45 and sources["image_folder"]["target"] == 15
    for row in sources.values():  # each source gives its share within the composition tolerance
        assert abs(row["items"] - row["target"]) <= max(1, 0.05 * row["target"]) + 1, sources
    assert set(summary["units_by_source"]) == {"pybullet_ground", "image_folder"}
    assert {"plan", "plan@1", "collect", "collect@1", "structure", "structure@1"} <= set(summary["nodes"])


def test_items_per_source_that_cannot_fit_are_refused_before_anything_runs(tmp_path):
    if not DOTA.is_dir():
        pytest.skip(f"{DOTA} is not beside the project")
    with pytest.raises(CompositionError, match=r"sources.0.items: the sources' items add up to 80"):
        run_build(_intent(tmp_path, {"items": 50}, {"items": 30}), tmp_path / "store", tmp_path / "out")
    with pytest.raises(CompositionError, match="items per source needs two or more sources"):
        run_build(_intent(tmp_path, {"items": 60}), tmp_path / "store", tmp_path / "out")
    with pytest.raises(CompositionError, match="kind 'pybullet_ground' is listed 2 times"):
        path = _intent(tmp_path, {})
        data = yaml.safe_load(path.read_text())
        data["sources"].append(dict(data["sources"][0]))
        path.write_text(yaml.safe_dump(data))
        run_build(path, tmp_path / "store", tmp_path / "out")
    assert not (tmp_path / "store").exists()
