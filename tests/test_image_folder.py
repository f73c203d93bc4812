"""Real-image folders: DOTA tiles with label admission and licence-aware packages, and
unlabelled frames that admit only what their file names register."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from PIL import Image

from forge.errors import DefinitionError, ForgeError
from forge.store import Store
from forge_resources.image_folder import adapter_for, parse_dota, polygon_area
from forge_skills.oe.verify.reverify import reverify_package
from tests.conftest import run_build

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DOTA, TARTANAIR, IMAGES = DATA / "aerial_dota", DATA / "tartanair", DATA / "images"

pytestmark = [pytest.mark.skipif(not DOTA.is_dir(), reason="../shared/data is not beside the project"),
              pytest.mark.xdist_group("image_folder")]  # one worker builds the module's build once


def _intent(folder: Path, name: str, source: dict[str, Any], oe: dict[str, Any]) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "seed": 3, "oe": oe, "sources": [source],
                                    "gates": {"grey_batch": 4, "irt_bootstrap": 200}}, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def aerial(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("aerial")
    # Counts and absences from DOTA labels only when the user vouches for them (they are not exhaustive).
    intent = _intent(root, "aerial-test", {"kind": "image_folder", "adapter": "dota", "root": str(DOTA),
                                           "trust_label_completeness": True},
                     {"items": 80, "capabilities": ["counting", "visibility", "size_scale", "metric_distance"],
                      "question_types": ["numeric", "interval_choice", "yes_no", "marked_object_choice",
                                         "grounding_choice"]})
    summary = run_build(intent, root / "store", root / "out")
    return {"root": root, "store": root / "store", "summary": summary, "package": Path(summary["package_path"])}


def test_dota_units_tiles_and_rejections():
    adapter = adapter_for("dota")
    units = adapter.units(DOTA, {"tile": 600, "tile_overlap": 100})
    assert len(units) == 11  # 3 x 3 tiles of P0706 (1111 x 1182) and 2 x 1 of P1888 (712 x 557)
    assert all(u["crop"][2] - u["crop"][0] <= 600 for u in units)
    # Label files whose image is not in the folder are reported, not guessed at.
    assert set(adapter.rejected(DOTA)) == {f"labelTxt/{s}.txt" for s in ("P0770", "P1088", "P1234", "P2598", "P2709")}


def test_dota_parse_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "labelTxt" / "X.txt"
    bad.parent.mkdir()
    bad.write_text("imagesource:GoogleEarth\ngsd:0.2\n1 2 3 4 5 6 7 8 ship 0\n1 2 3 four 5 6 7 8 ship 0\n")
    with pytest.raises(DefinitionError, match=r"X.txt:4: coordinates are not numbers"):
        parse_dota(bad)
    assert parse_dota(DOTA / "labelTxt" / "P1888.txt").gsd == pytest.approx(0.266170468393)


def test_aerial_answers_from_the_label_files(aerial):
    store = Store(aerial["store"], read_only=True)
    load = lambda aid: json.loads(store.one("SELECT content FROM artifacts WHERE id = ?", [aid])[0])  # noqa: E731
    seen = set()
    for key in (json.loads(x) for x in open(aerial["package"] / "answers.jsonl")):
        item, = [load(key["id"])]
        b = load(item["binding"])
        rec = load(load(item["evidence"])["source"])
        labels = parse_dota(Path(rec["root"]) / rec["labels_file"])
        x0, y0, x1, y1 = rec["crop"]
        inside = [bx for bx in labels.boxes
                  if all(x0 <= x <= x1 for x in bx.polygon[0::2]) and all(y0 <= y <= y1 for y in bx.polygon[1::2])]
        if item["template"] in ("aerial_count_numeric", "aerial_count_interval"):
            kind = b["slots"]["category"]
            n = sum(1 for bx in inside if bx.category.replace("-", " ") + "s" == kind and polygon_area(bx.polygon) >= 60)
            assert item["answer_value"] == n
            item["template"] = "counting"  # either count template: which one the composition draws varies
        elif item["template"] == "aerial_presence_yesno" and key["answer"] == "no":
            kind = b["slots"]["category"]
            assert not any(bx.category.replace("-", " ") + "s" == kind for bx in labels.boxes
                           if any(x0 <= x <= x1 for x in bx.polygon[0::2]) and any(y0 <= y <= y1 for y in bx.polygon[1::2]))
        elif item["template"] == "aerial_marked_larger_choice":
            a, c = (labels.boxes[int(n.split("#")[1]) - 1] for n in b["slots"]["marked"])
            assert key["answer"] == ("A" if polygon_area(a.polygon) > polygon_area(c.polygon) else "B")
        elif item["template"] == "aerial_category_grounding":
            kinds = [labels.boxes[int(n.split("#")[1]) - 1].category.replace("-", " ") + "s" for n in b["slots"]["marked"]]
            assert kinds.count(b["slots"]["category"]) == 1
            assert key["answer"] == "AB"[kinds.index(b["slots"]["category"])]
            assert "a " + b["slots"]["category"][:-1] in item["question"]  # "is a ship", in the singular
        else:
            continue
        seen.add(item["template"])
    assert {"counting", "aerial_presence_yesno", "aerial_marked_larger_choice",
            "aerial_category_grounding"} <= seen
    report = reverify_package(store, aerial["package"])
    assert report["invalid"] == 0, report["reasons"]


def test_incomplete_labels_rule_out_counts_and_absences(tmp_path):
    """DOTA's labels are not exhaustive: by default no count or presence item is made, the
    composition says why, and the other capabilities take the share."""
    intent = _intent(tmp_path, "aerial-default", {"kind": "image_folder", "adapter": "dota", "root": str(DOTA)},
                     # 20 items: the 11 images give about 12 visibility items the gates accept, so
                     # 15 of each (30 items) passed or failed with whichever bindings were drawn.
                     {"items": 20, "capabilities": ["counting", "visibility", "metric_distance"],
                      "question_types": ["numeric", "grounding_choice"]})
    summary = run_build(intent, tmp_path / "store", tmp_path / "out")
    comp = json.loads((Path(summary["package_path"]) / "composition.json").read_text())
    assert "not exhaustive" in comp["unavailable"]["counting"]
    assert comp["capabilities"]["counting"]["target"] == 0 and comp["composition_met"]
    assert summary["capabilities_unavailable"] == comp["unavailable"]
    keys = [json.loads(x) for x in open(Path(summary["package_path"]) / "answers.jsonl")]
    assert keys and not [k for k in keys if k["capability"] == "counting"]
    assert "Asked for but not included: counting" in (Path(summary["package_path"]) / "README.md").read_text()
    only = _intent(tmp_path, "aerial-count", {"kind": "image_folder", "adapter": "dota", "root": str(DOTA)},
                   {"items": 5, "capabilities": ["counting"], "question_types": ["numeric"]})
    with pytest.raises(ForgeError, match="support none of the asked capabilities: counting: DOTA labels"):
        run_build(only, tmp_path / "store2", tmp_path / "out2")


def test_dota_pixels_are_referenced_never_copied(aerial, tmp_path):
    pkg = aerial["package"]
    manifest = json.loads((pkg / "manifest.json").read_text())
    assert manifest["licence"]["media_mode"] == "reference" and manifest["counts"]["media"] == 0
    assert not (pkg / "media").exists()
    rows = [json.loads(x) for x in open(pkg / "items.jsonl")]
    assert all("recipe" in m and m["recipe"]["views"][0]["file"].startswith("images/") for r in rows for m in r["media"])
    # The shipped script rebuilds every medium pixel-exactly from the user's own copy ...
    copy = tmp_path / "pkg"
    shutil.copytree(pkg, copy)
    mod = [p.name for p in copy.iterdir() if (p / "materialize.py").exists()][0]
    done = subprocess.run([sys.executable, "-m", f"{mod}.materialize", "--data-root", str(DOTA)], cwd=copy,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "0 differ" in done.stdout, done.stderr
    first = rows[0]["media"][0]
    assert Image.open(copy / first["path"]).mode == "RGB"
    # ... and refuses a copy whose files differ.
    fake = tmp_path / "fake" / "images"
    fake.mkdir(parents=True)
    for name in ("P0706.png", "P1888.png"):
        Image.new("RGB", (8, 8)).save(fake / name)
    bad = subprocess.run([sys.executable, "-m", f"{mod}.materialize", "--data-root", str(fake.parent)], cwd=copy,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "SHA-256 differs" in bad.stderr


def test_frames_admit_only_registrable_questions(tmp_path):
    adapter = adapter_for("frames")
    units = adapter.units(TARTANAIR, {})
    assert [u["order"] for u in units] == [[9.0, 10.0], [380.0, 381.0]]
    assert adapter.rejected(IMAGES) == {"skimage/coffee.png": "no registrable evidence: not part of a numbered "
                                                              "sequence or a stereo pair"}
    intent = _intent(tmp_path, "frames-test", {"kind": "image_folder", "adapter": "frames", "root": str(TARTANAIR)},
                     {"items": 2, "capabilities": ["temporal"], "question_types": ["temporal_choice"]})
    summary = run_build(intent, tmp_path / "store", tmp_path / "out")
    pkg = Path(summary["package_path"])
    keys = [json.loads(x) for x in open(pkg / "answers.jsonl")]
    assert len(keys) == 2 and {k["template"] for k in keys} == {"capture_order_temporal"}
    with Store(tmp_path / "store", read_only=True) as s:
        assert reverify_package(s, pkg)["invalid"] == 0
    # Counting cannot be registered from unlabelled frames: the build says so instead of guessing.
    counting = _intent(tmp_path, "frames-count", {"kind": "image_folder", "adapter": "frames", "root": str(TARTANAIR)},
                       {"items": 2, "capabilities": ["counting"], "question_types": ["numeric"]})
    with pytest.raises(ForgeError, match="counting"):
        run_build(counting, tmp_path / "store2", tmp_path / "out2")


def test_stereo_side_from_file_names(tmp_path):
    intent = _intent(tmp_path, "stereo-test", {"kind": "image_folder", "adapter": "frames", "root": str(IMAGES)},
                     {"items": 1, "capabilities": ["multi_view"], "question_types": ["multi_view_choice"]})
    summary = run_build(intent, tmp_path / "store", tmp_path / "out")
    key = json.loads(open(Path(summary["package_path"]) / "answers.jsonl").readline())
    store = Store(tmp_path / "store", read_only=True)
    b = json.loads(store.one("SELECT content FROM artifacts WHERE id = (SELECT json_extract_string(content, "
                             "'$.binding') FROM artifacts WHERE id = ?)", [key["id"]])[0])
    rec_views = json.loads(store.one("SELECT content FROM artifacts WHERE type = 'ImageRecord'")[0])["views"]
    left = next(v["index"] for v in rec_views if v["role"] == "left")
    assert key["answer"] == f"View {b['slots']['pair'].index(left) + 1}"


def test_missing_folder_is_a_clear_error(tmp_path):
    intent = _intent(tmp_path, "nofolder", {"kind": "image_folder", "adapter": "dota", "root": "no/such/folder"},
                     {"items": 5, "capabilities": ["counting"], "question_types": ["numeric"]})
    # Found at validation, before anything runs (an IntentError: exit 2).
    with pytest.raises(ForgeError, match=r"sources\.0\.root: folder .*no/such/folder not found"):
        run_build(intent, tmp_path / "store", tmp_path / "out")
    assert not (tmp_path / "store").exists()


def test_a_changed_folder_is_planned_again(tmp_path):
    folder = tmp_path / "frames"
    folder.mkdir()
    for name in ("000009_left.png", "000010_left.png"):
        shutil.copy(TARTANAIR / name, folder / name)
    intent = _intent(tmp_path, "frames-grow", {"kind": "image_folder", "adapter": "frames", "root": "frames"},
                     {"items": 2, "capabilities": ["temporal"], "question_types": ["temporal_choice"]})
    first = run_build(intent, tmp_path / "store", tmp_path / "out")
    assert first["units_collected"] == 1
    for name in ("000380_left.png", "000381_left.png"):
        shutil.copy(TARTANAIR / name, folder / name)
    second = run_build(intent, tmp_path / "store", tmp_path / "out")
    assert second["units_collected"] == 2 and second["nodes"]["blueprint"]["executed"] == 1


def test_a_data_root_that_leads_to_a_folder_without_images_is_named_before_anything_runs(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "aerial").symlink_to(tmp_path / "empty")
    intent = _intent(tmp_path, "aerial-empty", {"kind": "image_folder", "adapter": "dota", "root": "aerial"},
                     {"items": 10, "capabilities": ["visibility"], "question_types": ["grounding_choice"]})
    done = subprocess.run([sys.executable, "-m", "forge.cli", "build", str(intent), "--store", str(tmp_path / "store"),
                           "--quiet"], capture_output=True, text=True, cwd="/")
    assert done.returncode == 2, done.stderr
    assert (f"sources.0 (image_folder): the folder {tmp_path / 'aerial'} (which leads to {tmp_path / 'empty'}) holds "
            "nothing the dota adapter reads (label files in labelTxt/ with their images in images/)") in done.stderr
    assert "Field required" not in done.stderr and "Traceback" not in done.stderr
