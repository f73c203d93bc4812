"""Shared fixtures: small real builds in temporary stores (no mocks of the store or engine)."""

from __future__ import annotations

import os

# MuJoCo picks its GL backend when first imported: whichever test imports it first (an
# importorskip of robosuite), it renders offscreen on EGL as forge's own modules ask.
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from forge.build import BuildOptions, build
from forge_skills.oe.synthesize.templates import builtin_root

SMALL_INTENT: dict[str, Any] = {
    "name": "tabletop-test",
    "version": "0.1.0",
    "seed": 11,
    "oe": {
        "items": 120,
        "capabilities": ["visibility", "image_plane_relation", "depth_order", "multi_view"],
        "question_types": ["single_choice", "yes_no", "multi_view_choice", "grounding_choice"],
    },
    "sources": [{"kind": "pybullet_tabletop", "views": 3}],
    # 200 IRT bootstrap replicates, not the default 1,000: gate F's intervals cost a second of
    # every test build at 1,000, and 200 exercise the same code.
    "gates": {"grey_batch": 4, "min_blind_items": 10, "irt_bootstrap": 200},
}


def named_as_shown(source: dict[str, Any], evidence: dict[str, Any]) -> dict[str, Any]:
    """The source record with its objects under the names items show (read from their pixels)."""
    names = {o.get("source_name") or o["name"]: o["name"] for o in evidence["objects"]}
    return {**source, "objects": [{**o, "name": names.get(o["name"], o["name"])} for o in source["objects"]]}


def write_intent(folder: Path, name: str = "intent.yaml", **changes: Any) -> Path:
    data = json.loads(json.dumps(SMALL_INTENT))
    data.update(changes)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def copy_templates(folder: Path) -> Path:
    dest = folder / "my_templates"
    shutil.copytree(builtin_root() / "tabletop", dest)
    return dest


def copy_build(built: dict[str, Any], folder: Path, with_package: bool = False) -> dict[str, Any]:
    """A private copy of the shared small build (store and intent; its package too in ``out`` if
    ``with_package``), for a test that changes or damages it instead of building the same intent again."""
    shutil.copytree(built["store"], folder / "store")
    if with_package:
        shutil.copytree(built["out"], folder / "out")
    intent = folder / "intent.yaml"
    shutil.copy(built["intent"], intent)
    return {"store": folder / "store", "out": folder / "out", "intent": intent, "reference": built["package"]}


def run_build(intent: Path, store: Path, out: Path, **kw: Any) -> dict[str, Any]:
    return build(intent, BuildOptions(store_dir=store, out_dir=out, progress=False, workers=kw.pop("workers", 1), **kw))


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> dict[str, Any]:
    """One finished small build shared by read-only tests."""
    root = tmp_path_factory.mktemp("built")
    intent = write_intent(root)
    summary = run_build(intent, root / "store", root / "out")
    return {"root": root, "intent": intent, "store": root / "store", "out": root / "out", "summary": summary,
            "package": Path(summary["package_path"])}


WIDE_OE = {
    "items": 300,
    "capabilities": ["visibility", "image_plane_relation", "depth_order", "multi_view", "counting", "size_scale",
                     "metric_distance", "reachability", "camera_motion"],
    "question_types": ["single_choice", "yes_no", "multi_view_choice", "marked_object_choice", "multiple_choice",
                       "ordered_list", "interval_choice", "numeric", "grounding_choice"],
}


@pytest.fixture(scope="session")
def wide(tmp_path_factory) -> dict[str, Any]:
    """A small build over every capability and question type of the tabletop source."""
    root = tmp_path_factory.mktemp("wide")
    intent = write_intent(root, name="tabletop-wide", oe=WIDE_OE)
    summary = run_build(intent, root / "store", root / "out")
    return {"root": root, "intent": intent, "store": root / "store", "out": root / "out", "summary": summary,
            "package": Path(summary["package_path"])}
