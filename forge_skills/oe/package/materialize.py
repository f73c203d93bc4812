"""Rebuild the media of a package whose source images may not be redistributed.

Shipped inside such packages as ``<package>/materialize.py`` beside a copy of the drawing
code (``media.py``); needs numpy and Pillow, not forge::

    python -m <package>.materialize --data-root /path/to/dataset

Every referenced file is checked against its SHA-256 first, and every rebuilt image against
the pixel hash the package records, so a different copy of the dataset is reported, never
silently used.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

try:
    from . import media
except ImportError:  # run as a plain script beside media.py
    import media  # type: ignore[no-redef]


def pixels_sha256(rgb: np.ndarray) -> str:
    return hashlib.sha256(f"{rgb.shape}".encode() + rgb.tobytes()).hexdigest()


def _file_sha256(path: Path) -> str:  # forge.keys.file_digest, restated: this script runs without forge
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_view(recipe: dict, data_root: Path) -> np.ndarray:
    path = data_root / recipe["file"]
    if not path.exists():
        raise FileNotFoundError(f"{path}: referenced dataset file not found (is --data-root the {recipe['dataset']} folder?)")
    if _file_sha256(path) != recipe["sha256"]:
        raise ValueError(f"{path}: SHA-256 differs from the file this package was built from")
    with Image.open(path) as im:
        img = im.convert("RGB")
        if recipe.get("crop"):
            img = img.crop(tuple(recipe["crop"]))
        return np.asarray(img)


def rebuild(entry: dict, data_root: Path) -> np.ndarray:
    recipe = entry["recipe"]
    views = [load_view(v, data_root) for v in recipe["views"]]
    if recipe["layout"] == "single_view":
        img = views[0]
        if recipe.get("markers"):
            img = media.draw_markers(img, recipe["markers"])
        if recipe.get("scale_bar"):
            img = media.draw_scale_bar(img, recipe["scale_bar"]["pixels"], recipe["scale_bar"]["label"])
        return img
    return media.panel(views, [f"View {i + 1}" for i in range(len(views))])


def materialize(package: Path, data_root: Path) -> dict[str, int]:
    written = mismatched = 0
    for line in (package / "items.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for entry in row["media"]:
            if "recipe" not in entry:
                continue
            img = rebuild(entry, data_root)
            if pixels_sha256(img) != entry["pixels_sha256"]:
                mismatched += 1
            out = package / entry["path"]
            out.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(img).save(out)
            written += 1
    return {"written": written, "mismatched": mismatched}


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description="Rebuild referenced media from your copy of the dataset.")
    ap.add_argument("--data-root", type=Path, required=True, help="the dataset folder the package references")
    ap.add_argument("--package", type=Path, default=here)
    args = ap.parse_args(argv)
    try:
        result = materialize(args.package, args.data_root)
    except (FileNotFoundError, ValueError) as exc:
        print(f"materialize: error: {exc}", file=sys.stderr)
        return 2
    print(f"rebuilt {result['written']} media; {result['mismatched']} differ from the recorded pixels")
    return 0 if result["mismatched"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
