"""Colour names from rendered pixels: how an object looks, not the tint it was asked for.

Pixels are converted from sRGB to CIELAB (D65) and named per pixel in its polar form (lightness
L, chroma C, hue h): low chroma reads as white, grey or black by lightness; otherwise the hue
picks the name, with brown for dark oranges and yellows and pink for light, soft reds. A pixel
too close to a boundary between two names gets none. An object's colour in a view is the name
most of its visible pixels carry; when no name holds a clear majority, the object has no colour
name there and cannot be referred to by colour.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Hue bands in degrees (CIELAB hue angle); a pixel closer than HUE_MARGIN to a boundary has no name.
HUE_BANDS: tuple[tuple[float, float, str], ...] = (
    (-20.0, 50.0, "red"),
    (50.0, 75.0, "orange"),
    (75.0, 112.0, "yellow"),
    (112.0, 230.0, "green"),
    (230.0, 308.0, "blue"),
    (308.0, 340.0, "purple"),
)
HUE_MARGIN = 3.0
# Shading scales a surface's light, which moves lightness and chroma together: their ratio
# (saturation) keeps a surface's kind, and its lit face (the brightest pixels) its lightness.
CHROMATIC_SATURATION, ACHROMATIC_SATURATION = 0.45, 0.2
CHROMATIC_CHROMA, ACHROMATIC_CHROMA = 14.0, 8.0
DARK_L = 12.0  # darker pixels carry no reliable hue: they count as black
LIT_PERCENTILE = 90.0
WHITE_L, GREY_L, BLACK_L = 78.0, (40.0, 70.0), 30.0
BROWN_L, ORANGE_L = 44.0, 52.0  # a lit face of orange hue below BROWN_L is brown, above ORANGE_L orange
YELLOW_L = 58.0  # a lit face of yellow hue below this is olive: no clear name
PINK_L, PINK_SATURATION = 68.0, 0.7
NAMES = ("red", "orange", "yellow", "green", "blue", "purple", "white", "grey", "black", "brown", "pink")
MIN_SHARE = 0.6  # the winning name must hold this share of the object's pixels
MIN_NAMED_PIXELS = 30  # fewer visible pixels than this: too small to tell a colour


@dataclass(frozen=True)
class ColourReading:
    """The colour name an object's visible pixels carry in one view (None: not one clear name)."""

    name: str | None
    share: float
    lab: tuple[float, float, float]
    pixels: int

    def as_fact(self) -> dict:
        return {"name": self.name, "share": round(self.share, 4), "lab": [round(v, 2) for v in self.lab],
                "pixels": self.pixels}


def srgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """(N, 3) uint8 sRGB -> (N, 3) CIELAB under D65."""
    c = rgb.astype(np.float64) / 255.0
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    m = np.array([[0.4124564, 0.3575761, 0.1804375],
                  [0.2126729, 0.7151522, 0.0721750],
                  [0.0193339, 0.1191920, 0.9503041]])
    xyz = lin @ m.T / np.array([0.95047, 1.0, 1.08883])
    eps = 216 / 24389
    f = np.where(xyz > eps, np.cbrt(xyz), (24389 / 27 * xyz + 16) / 116)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=1)


ACHROMATIC = "achromatic"
FAMILIES = tuple(name for _, _, name in HUE_BANDS) + (ACHROMATIC,)


def pixel_families(lab: np.ndarray) -> np.ndarray:
    """Index into FAMILIES per pixel (a hue band, or achromatic); -1 on a boundary."""
    L, a, b = lab[:, 0], lab[:, 1], lab[:, 2]
    chroma = np.hypot(a, b)
    sat = chroma / np.maximum(L, 1.0)
    hue = np.degrees(np.arctan2(b, a))
    hue = np.where(hue < HUE_BANDS[0][0], hue + 360.0, hue)  # into the span of HUE_BANDS
    out = np.full(len(lab), -1, dtype=np.int64)
    achromatic = (L < DARK_L) | (chroma < ACHROMATIC_CHROMA) | (sat < ACHROMATIC_SATURATION)
    out[achromatic] = FAMILIES.index(ACHROMATIC)
    chromatic = ~achromatic & (chroma >= CHROMATIC_CHROMA) & (sat >= CHROMATIC_SATURATION)
    for k, (lo, hi, _) in enumerate(HUE_BANDS):
        out[chromatic & (hue >= lo + HUE_MARGIN) & (hue < hi - HUE_MARGIN)] = k
    return out


def _name(family: str, lab: np.ndarray) -> str | None:
    """The name of a surface of this family, from the lightness of its lit face."""
    lit = lab[lab[:, 0] >= np.percentile(lab[:, 0], LIT_PERCENTILE)]
    L = float(np.median(lit[:, 0]))
    sat = float(np.median(np.hypot(lit[:, 1], lit[:, 2]) / np.maximum(lit[:, 0], 1.0)))
    if family == ACHROMATIC:
        if L >= WHITE_L:
            return "white"
        if L <= BLACK_L:
            return "black"
        return "grey" if GREY_L[0] <= L <= GREY_L[1] else None
    if family == "orange":
        return "brown" if L < BROWN_L else ("orange" if L > ORANGE_L else None)
    if family == "yellow" and L < YELLOW_L:
        return None
    if family in ("red", "purple") and L > PINK_L and sat < PINK_SATURATION:
        return "pink"
    return family


def read_colour(rgb_pixels: np.ndarray) -> ColourReading:
    """The colour name of an object's visible pixels ((N, 3) uint8)."""
    n = int(len(rgb_pixels))
    if n == 0:
        return ColourReading(None, 0.0, (0.0, 0.0, 0.0), 0)
    lab = srgb_to_lab(rgb_pixels.reshape(-1, 3))
    lit = lab[lab[:, 0] >= np.percentile(lab[:, 0], 75.0)]
    summary = tuple(float(v) for v in np.median(lit, axis=0))  # the lit surface colour
    if n < MIN_NAMED_PIXELS:
        return ColourReading(None, 0.0, summary, n)
    families = pixel_families(lab)
    counts = np.bincount(families[families >= 0], minlength=len(FAMILIES))
    best = int(np.argmax(counts))
    share = float(counts[best]) / n
    if share < MIN_SHARE:
        return ColourReading(None, share, summary, n)
    return ColourReading(_name(FAMILIES[best], lab[families == best]), share, summary, n)


def object_colours(rgb: np.ndarray, seg: np.ndarray, bodies: dict[str, int]) -> dict[str, ColourReading]:
    """Colour reading of every body in one rendered view (RGB HxWx3, segmentation HxW)."""
    out = {}
    for name, body in bodies.items():
        mask = seg == body
        out[name] = read_colour(rgb[mask])
    return out


def lab_distance(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    """CIE76 colour difference."""
    return float(np.linalg.norm(np.subtract(a, b)))


CONFUSABLE_DELTA_E = 20.0  # two objects of one category whose lit colours are closer than this look alike
MIN_VIEW_AGREEMENT = 0.5  # share of an object's clearly seen views that must read its colour


@dataclass(frozen=True)
class Naming:
    """How an object may be referred to: by its rendered colour and category, or not at all."""

    name: str
    colour: str
    referable: bool
    reason: str | None = None
    by_identity: bool = False  # named by what it is (a milk carton), not by its colour


def name_referents(objects: list[tuple[str, str]], readings: dict[str, list[ColourReading]],
                   by_identity: bool = False, unnameable: dict[str, str] | None = None) -> dict[str, Naming]:
    """Names from pixels for ``objects`` ((source name, category)), given each one's readings in
    every view. An object is named "<colour> <category>" when its clearly seen views mostly read
    one colour and no other object of its category reads (or nearly reads) the same; otherwise
    it keeps an internal name and may not be named in a question. With ``by_identity`` the
    category is an object's identity (a milk carton): one alone in its category is named by it,
    seen clearly in some view. A name that would also fit another object is not given: "the red
    ball" when a red soccer ball is there too. ``unnameable``: source name -> why no name
    singles the object out."""
    colour: dict[str, str | None] = {}
    lab: dict[str, np.ndarray] = {}
    reason: dict[str, str] = {}
    for src, _ in objects:
        seen = [r for r in readings.get(src, []) if r.pixels >= MIN_NAMED_PIXELS]
        names = [r.name for r in seen if r.name is not None]
        if not seen:
            colour[src], reason[src] = None, "too small in every view to tell its colour"
            continue
        if not names:
            colour[src], reason[src] = None, "its pixels carry no clear colour name"
            continue
        best = max(sorted(set(names)), key=names.count)
        colour[src] = best
        lab[src] = np.mean([r.lab for r in seen if r.name == best], axis=0)
        if names.count(best) < MIN_VIEW_AGREEMENT * len(seen):
            reason[src] = f"reads {best} in only {names.count(best)} of {len(seen)} views"
    by_category: dict[str, list[str]] = {}
    for src, cat in objects:
        by_category.setdefault(cat, []).append(src)
    for cat, members in by_category.items():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                # Alike when either reads, in some view, the colour the other is named by.
                reads_a = {r.name for r in readings.get(a, [])}
                reads_b = {r.name for r in readings.get(b, [])}
                alike = (colour.get(a) is not None and colour[a] in reads_b) or \
                        (colour.get(b) is not None and colour[b] in reads_a)
                if not alike and a in lab and b in lab:
                    alike = lab_distance(tuple(lab[a]), tuple(lab[b])) < CONFUSABLE_DELTA_E
                if alike:
                    why = f"looks like another {cat}"
                    reason.setdefault(a, why)
                    reason.setdefault(b, why)
    blocked = dict(unnameable or {})
    # "<colour> <kind>" also fits an object of a longer kind ending in it ("ball": "soccer ball").
    for src, cat in objects:
        wider = [other for o, other in objects if o != src and other.endswith(" " + cat)
                 and (by_identity or colour.get(o) == colour.get(src))]
        if wider and (by_identity or colour.get(src) is not None):
            blocked.setdefault(src, f"its name would also fit the {wider[0]}")
    reason = {**reason, **blocked}
    out: dict[str, Naming] = {}
    unnamed: dict[str, int] = {}
    for src, cat in objects:
        c = colour.get(src)
        seen = any(r.pixels >= MIN_NAMED_PIXELS for r in readings.get(src, []))
        if by_identity and len(by_category[cat]) == 1 and seen and src not in blocked:
            out[src] = Naming(cat, c or "", True, by_identity=True)
        elif c is not None and src not in reason:
            out[src] = Naming(f"{c} {cat}", c, True)
        else:
            unnamed[cat] = unnamed.get(cat, 0) + 1
            out[src] = Naming(f"{cat} {unnamed[cat]}", c or "", False, reason.get(src))
    return out
