"""Real-image folders read through adapters.

An adapter lists a folder's units (DOTA tiles, frame sequences, stereo pairs), reads them and
says what it can register. Nothing is guessed: a DOTA tile registers its labelled boxes; a
folder of unlabelled frames registers only what its file names prove (capture order within a
sequence, the side of a stereo pair). Files it cannot register anything from are reported
as rejected, with the reason.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from forge.errors import DefinitionError
from forge.keys import file_digest
from forge.paths import list_files

DOTA_CATEGORIES = ("plane", "ship", "storage-tank", "baseball-diamond", "tennis-court", "basketball-court",
                   "ground-track-field", "harbor", "bridge", "large-vehicle", "small-vehicle", "helicopter",
                   "roundabout", "soccer-ball-field", "swimming-pool", "container-crane", "airport", "helipad")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".bmp")


@lru_cache(maxsize=256)
def file_sha256(path: str) -> str:
    """SHA-256 of a dataset file (cached: a unit's files are hashed when listed and when read)."""
    return file_digest(path)


@dataclass(frozen=True)
class DotaBox:
    polygon: tuple[float, ...]
    category: str
    difficult: bool


@dataclass(frozen=True)
class DotaLabels:
    source: str | None
    gsd: float | None
    boxes: tuple[DotaBox, ...]


def parse_dota(path: Path) -> DotaLabels:
    """DOTA v1/v1.5 label text: optional ``imagesource:`` and ``gsd:`` header lines, then
    ``x1 y1 x2 y2 x3 y3 x4 y4 category difficult`` per object."""
    source, gsd, boxes = None, None, []
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("imagesource:"):
            source = line.split(":", 1)[1].strip()
            continue
        if line.startswith("gsd:"):
            value = line.split(":", 1)[1].strip()
            gsd = float(value) if re.fullmatch(r"[0-9.eE+-]+", value) and float(value) > 0 else None
            continue
        parts = line.split()
        if len(parts) < 9:
            raise DefinitionError(f"{path}:{n}: expected 8 coordinates and a category, got {line!r}")
        try:
            coords = tuple(float(x) for x in parts[:8])
        except ValueError:
            raise DefinitionError(f"{path}:{n}: coordinates are not numbers: {line!r}") from None
        difficult = len(parts) > 9 and parts[9] == "1"
        boxes.append(DotaBox(coords, parts[8], difficult))
    return DotaLabels(source, gsd, tuple(boxes))


def polygon_area(poly: list[float] | tuple[float, ...]) -> float:
    xs, ys = poly[0::2], poly[1::2]
    return abs(sum(xs[i] * ys[(i + 1) % len(xs)] - xs[(i + 1) % len(xs)] * ys[i] for i in range(len(xs)))) / 2.0


def clip_polygon(poly: list[float] | tuple[float, ...], box: tuple[float, float, float, float]) -> list[float]:
    """Sutherland-Hodgman clip of a polygon to an axis-aligned box (x0, y0, x1, y1)."""
    pts = list(zip(poly[0::2], poly[1::2]))
    x0, y0, x1, y1 = box
    edges = [(lambda p: p[0] >= x0, lambda a, b: _cut_x(a, b, x0)), (lambda p: p[0] <= x1, lambda a, b: _cut_x(a, b, x1)),
             (lambda p: p[1] >= y0, lambda a, b: _cut_y(a, b, y0)), (lambda p: p[1] <= y1, lambda a, b: _cut_y(a, b, y1))]
    for inside, cut in edges:
        out = []
        for i, cur in enumerate(pts):
            prev = pts[i - 1]
            if inside(cur):
                if not inside(prev):
                    out.append(cut(prev, cur))
                out.append(cur)
            elif inside(prev):
                out.append(cut(prev, cur))
        pts = out
        if not pts:
            return []
    return [c for p in pts for c in p]


def _cut_x(a, b, x):
    t = (x - a[0]) / (b[0] - a[0])
    return (x, a[1] + t * (b[1] - a[1]))


def _cut_y(a, b, y):
    t = (y - a[1]) / (b[1] - a[1])
    return (a[0] + t * (b[0] - a[0]), y)


def tile_origins(size: int, tile: int, overlap: int) -> list[int]:
    """Evenly spaced tile origins covering ``size`` with at least ``overlap`` pixels shared."""
    if size <= tile:
        return [0]
    n = math.ceil((size - overlap) / (tile - overlap))
    return [round(i * (size - tile) / (n - 1)) for i in range(n)]


def clean_windows(labels: DotaLabels, width: int, height: int, size: int, limit: int) -> list[list[int]]:
    """Up to ``limit`` non-overlapping square windows in which, for some category, the border cuts
    no box of that category and at least two of its boxes lie whole inside: zoomed crops in
    which every object of that kind can be counted."""
    if size <= 0 or size > min(width, height):
        return []
    boxes = [(min(b.polygon[0::2]), min(b.polygon[1::2]), max(b.polygon[0::2]), max(b.polygon[1::2]), b.category)
             for b in labels.boxes]
    chosen: list[list[int]] = []
    step = max(16, size // 4)
    for y in range(0, height - size + 1, step):
        for x in range(0, width - size + 1, step):
            x1, y1 = x + size, y + size
            if any(not (cx >= x1 or cy >= y1 or x >= ex or y >= ey) for cx, cy, ex, ey in
                   [(c[0], c[1], c[2], c[3]) for c in chosen]):
                continue  # overlaps a window already chosen
            inside: dict[str, int] = {}
            cut: set[str] = set()
            for bx0, by0, bx1, by1, category in boxes:
                if bx0 >= x and by0 >= y and bx1 <= x1 and by1 <= y1:
                    inside[category] = inside.get(category, 0) + 1
                elif not (bx1 < x or by1 < y or bx0 > x1 or by0 > y1):
                    cut.add(category)
            if any(n >= 2 and c not in cut for c, n in inside.items()):
                chosen.append([x, y, x1, y1])
                if len(chosen) >= limit:
                    return chosen
    return chosen


class Adapter(Protocol):
    name: str
    redistribute: bool
    licence_note: str
    # Whether every object of the labelled categories carries a label: counts and absences
    # follow from labels only when they do. ``rules_out`` names the capabilities that need it.
    labels_complete: bool
    completeness_note: str
    rules_out: tuple[str, ...]

    def units(self, root: Path, source: dict[str, Any]) -> list[dict[str, Any]]: ...

    def rejected(self, root: Path) -> dict[str, str]: ...


class DotaAdapter:
    """DOTA layout: ``images/<id>.png`` with ``labelTxt/<id>.txt``; large images are split into
    overlapping tiles as DOTA_devkit does."""

    name = "dota"
    redistribute = False
    licence_note = ("DOTA images are for academic use only and are not redistributed: the package references "
                    "them by path and SHA-256 and rebuilds its media from the user's own copy")
    labels_complete = False
    completeness_note = ("DOTA labels are not exhaustive (in dense scenes many small vehicles and boats carry no "
                         "box), so a count or an absence cannot be shown from them")
    rules_out = ("counting",)

    def units(self, root: Path, source: dict[str, Any]) -> list[dict[str, Any]]:
        from PIL import Image

        _require_dir(root)
        out = []
        for label in _labels(root):
            image = _image_for(root / "images", label.stem)
            if image is None:
                continue
            with Image.open(image) as im:
                width, height = im.size
            tile, overlap = int(source.get("tile", 600)), int(source.get("tile_overlap", 100))
            for y in tile_origins(height, tile, overlap):
                for x in tile_origins(width, tile, overlap):
                    out.append({"kind": "tile", "files": [str(image.relative_to(root))],
                                "labels": str(label.relative_to(root)),
                                "crop": [x, y, min(width, x + tile), min(height, y + tile)]})
            zoom = int(source.get("zoom", 0))
            for crop in clean_windows(parse_dota(label), width, height, zoom, int(source.get("zooms_per_image", 6))):
                out.append({"kind": "zoom", "files": [str(image.relative_to(root))],
                            "labels": str(label.relative_to(root)), "crop": crop})
        return out

    def rejected(self, root: Path) -> dict[str, str]:
        return {str(p.relative_to(root)): "label file without its image"
                for p in _labels(root) if _image_for(root / "images", p.stem) is None}


class FramesAdapter:
    """Unlabelled frames. Registrable: capture order of frames named ``<number>_<camera>.png``
    whose numbers are at most ``max_gap`` apart (one sequence), and the side of stereo pairs
    named ``<stem>_left`` / ``<stem>_right``. Every other file is rejected."""

    name = "frames"
    redistribute = True
    licence_note = "frames from BSD-3 sources (TartanAir tools, scikit-image data) may be copied"
    labels_complete = True  # nothing is labelled, so nothing is missing: no object facts at all
    completeness_note = ""
    rules_out: tuple[str, ...] = ()
    max_gap = 5

    def _files(self, root: Path) -> list[Path]:
        _require_dir(root)
        return [p for p in list_files(root, recursive=True, what=f"image folder {root}")
                if p.suffix.lower() in IMAGE_SUFFIXES]

    def units(self, root: Path, source: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for group in self._sequences(root):
            out.append({"kind": "sequence", "files": [str(p.relative_to(root)) for p, _ in group],
                        "order": [float(n) for _, n in group]})
        for left, right in self._stereo(root):
            out.append({"kind": "stereo_pair", "files": [str(left.relative_to(root)), str(right.relative_to(root))],
                        "sides": ["left", "right"]})
        return out

    def _sequences(self, root: Path) -> list[list[tuple[Path, int]]]:
        numbered: dict[tuple[Path, str], list[tuple[Path, int]]] = {}
        for p in self._files(root):
            m = re.fullmatch(r"(\d+)_(\w+)", p.stem)
            if m:
                numbered.setdefault((p.parent, m.group(2)), []).append((p, int(m.group(1))))
        groups = []
        for frames in numbered.values():
            frames.sort(key=lambda t: t[1])
            current = [frames[0]]
            for f in frames[1:]:
                if f[1] - current[-1][1] <= self.max_gap:
                    current.append(f)
                else:
                    groups.append(current)
                    current = [f]
            groups.append(current)
        return [g for g in groups if len(g) >= 2]

    def _stereo(self, root: Path) -> list[tuple[Path, Path]]:
        pairs = []
        for p in self._files(root):
            if p.stem.endswith("_left") and not re.fullmatch(r"\d+_left", p.stem):
                right = p.with_name(p.name.replace("_left", "_right"))
                if right.exists():
                    pairs.append((p, right))
        return pairs

    def rejected(self, root: Path) -> dict[str, str]:
        used = {f for u in self.units(root, {}) for f in u["files"]}
        return {str(p.relative_to(root)): "no registrable evidence: not part of a numbered sequence or a stereo pair"
                for p in self._files(root) if str(p.relative_to(root)) not in used}


ADAPTERS: dict[str, Adapter] = {"dota": DotaAdapter(), "frames": FramesAdapter()}


def adapter_for(name: str) -> Adapter:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise DefinitionError(f"unknown image-folder adapter {name!r}; known: {sorted(ADAPTERS)}") from None


def _labels(root: Path) -> list[Path]:
    """DOTA label files, read within the dataset folder."""
    _require_dir(root)
    folder = root / "labelTxt"
    return list_files(folder, "*.txt", what=f"label folder {folder}") if folder.is_dir() else []


def _require_dir(root: Path) -> None:
    if not root.is_dir():
        raise DefinitionError(f"{root}: image folder not found (sources[].root is relative to the intent file)")


def _image_for(folder: Path, stem: str) -> Path | None:
    for suffix in IMAGE_SUFFIXES:
        p = folder / f"{stem}{suffix}"
        if p.exists():
            return p
    return None
