"""Model-visible media: processed RGB only (markers, labelled panels), never raw depth or
segmentation. Deterministic, so equal inputs give byte-identical PNGs (shared blobs)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

MARKER_COLOR = (255, 0, 200)
PANEL_GAP = 6


@lru_cache(maxsize=4)
def _font(size: int) -> ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has no scalable default font
        return ImageFont.load_default()


def _label(draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, size: int) -> None:
    font = _font(size)
    x0, y0, x1, y1 = draw.textbbox(xy, text, font=font)
    draw.rectangle((x0 - 3, y0 - 2, x1 + 3, y1 + 2), fill=(255, 255, 255), outline=(0, 0, 0))
    draw.text(xy, text, fill=(0, 0, 0), font=font)


RING_PAD, MIN_RING = 5, 8  # pixels around the largest marked object; the smallest ring drawn
SPOTS = ("above", "below", "right", "left")
MARKER_STYLES = ("ring", "outline")
# Markers a rule draws itself (its derivation's ``markers``), in the view's pixels:
#   point  {"at": [u, v]}                a numbered query point
#   box    {"box": [x0, y0, x1, y1]}     a rectangle
#   arrow  {"from": [u, v], "to": [u, v]} a direction or a motion
#   mask   {"polygon": [u0, v0, ...], "fill": bool}  a region, outlined or filled
PRIMITIVES = ("point", "box", "arrow", "mask")
POINT_RADIUS = 4


def primitive_marker(spec: dict, seed: int = 0) -> dict:
    """A rule's marker laid out as ``draw_markers`` and the marker-only solver read markers:
    label, style, centre, box and the order of the spots its tag tries."""
    style = spec.get("style")
    if style not in PRIMITIVES:
        raise ValueError(f"unknown marker style {style!r}; a rule may draw {PRIMITIVES}")
    label = str(spec.get("label", ""))
    if style == "point":
        u, v = (float(c) for c in spec["at"])
        box = [u - POINT_RADIUS, v - POINT_RADIUS, u + POINT_RADIUS, v + POINT_RADIUS]
    elif style == "box":
        box = [float(c) for c in spec["box"]]
    elif style == "arrow":
        (a, b), (c, d) = spec["from"], spec["to"]
        box = [min(a, c), min(b, d), max(a, c), max(b, d)]
    else:
        poly = [float(c) for c in spec["polygon"]]
        box = [min(poly[0::2]), min(poly[1::2]), max(poly[0::2]), max(poly[1::2])]
    out = {**spec, "label": label, "style": style, "box": [round(c, 2) for c in box],
           "centre": [round((box[0] + box[2]) / 2, 2), round((box[1] + box[3]) / 2, 2)]}
    turn = seed % len(SPOTS)
    out["spots"] = list(SPOTS[turn:] + SPOTS[:turn])
    return out


def ring_radius(boxes: list[list[int]]) -> float:
    """One ring size for every marker of an image: the largest marked object's half-extent plus
    a margin, so a ring's size says nothing about which object it marks."""
    return max([MIN_RING] + [max(x1 - x0, y1 - y0) / 2 + RING_PAD for x0, y0, x1, y1 in boxes])


def marker_layout(marks: list[dict], seed: int = 0, style: str = "ring") -> list[dict]:
    """Where each marker goes. ``ring``: one ring size for the image, centred on the object's
    visible centroid (its box centre when unknown); ``outline``: the object's own outline (its
    labelled polygon, else its box), for objects packed too closely for a ring to single one
    out, where the marker's size is the object's. Each tag tries the spots around its marker in
    an order rotated by ``seed``, so tags do not sit on one side by rule."""
    r = round(ring_radius([m["bbox"] for m in marks]), 2)
    out = []
    for k, m in enumerate(marks):
        x0, y0, x1, y1 = m["bbox"]
        cx, cy = m.get("centre") or ((x0 + x1) / 2, (y0 + y1) / 2)
        turn = (seed + k) % len(SPOTS)
        marker = {"label": m["label"], "object": m.get("object"), "style": style,
                  "centre": [round(float(cx), 2), round(float(cy), 2)], "spots": list(SPOTS[turn:] + SPOTS[:turn])}
        if style == "outline":
            poly = m.get("polygon") or [x0, y0, x1, y0, x1, y1, x0, y1]
            marker.update({"polygon": [round(float(v), 2) for v in poly],
                           "box": [round(float(min(poly[0::2])), 2), round(float(min(poly[1::2])), 2),
                                   round(float(max(poly[0::2])), 2), round(float(max(poly[1::2])), 2)]})
        else:
            marker.update({"radius": r, "box": [round(cx - r, 2), round(cy - r, 2), round(cx + r, 2), round(cy + r, 2)]})
        out.append(marker)
    return out


def draw_markers(rgb: np.ndarray, markers: list[dict]) -> np.ndarray:
    """Draw each marker (a ring, or an outline) and tag it with its label; all markers look alike
    (see ``marker_layout``). A label goes beside its own marker where it covers no other marker
    and no label already placed (the marker's spots in its order), so a tag never sits on
    another marked object. Markers given as boxes alone are laid out as rings first."""
    if markers and "box" not in markers[0]:
        markers = marker_layout(markers)
    img = Image.fromarray(rgb).convert("RGB")
    draw = ImageDraw.Draw(img)
    h, w = rgb.shape[:2]
    size = max(10, h // 18)
    placed: list[tuple[float, float, float, float]] = []
    for i, m in enumerate(markers):
        x0, y0, x1, y1 = m["box"]
        cx, cy = m["centre"]
        style = m.get("style")
        if style in ("outline", "mask"):
            pts = list(zip(m["polygon"][0::2], m["polygon"][1::2]))
            if style == "mask" and m.get("fill"):
                layer = Image.new("RGBA", img.size, (0, 0, 0, 0))
                ImageDraw.Draw(layer).polygon(pts, fill=MARKER_COLOR + (90,))
                img.paste(Image.alpha_composite(img.convert("RGBA"), layer).convert("RGB"))
                draw = ImageDraw.Draw(img)
            draw.line(pts + pts[:1], fill=MARKER_COLOR, width=2)
        elif style == "point":  # a dot with a white rim, so it shows on any colour
            draw.ellipse((x0, y0, x1, y1), fill=MARKER_COLOR, outline=(255, 255, 255), width=1)
        elif style == "box":
            draw.rectangle((x0, y0, x1, y1), outline=MARKER_COLOR, width=2)
        elif style == "arrow":
            _arrow(draw, m["from"], m["to"])
        else:
            draw.ellipse((x0, y0, x1, y1), outline=MARKER_COLOR, width=2)
        if not m["label"]:
            continue
        box = draw.textbbox((0, 0), m["label"], font=_font(size))
        tw, th = box[2] - box[0] + 6, box[3] - box[1] + 4
        others = [tuple(o["box"]) for j, o in enumerate(markers) if j != i]
        where = {"above": (cx - tw / 2, y0 - th - 3), "below": (cx - tw / 2, y1 + 3),
                 "right": (x1 + 3, cy - th / 2), "left": (x0 - tw - 3, cy - th / 2)}
        spots = [where[s] for s in m.get("spots", SPOTS)]
        spots = [(min(max(x, 2), w - tw - 2), min(max(y, 2), h - th - 2)) for x, y in spots]
        lx, ly = min(spots, key=lambda xy: sum(_overlap((xy[0], xy[1], xy[0] + tw, xy[1] + th), o)
                                               for o in others + placed))
        placed.append((lx, ly, lx + tw, ly + th))
        _label(draw, (lx + 3, ly + 2), m["label"], size)
    return np.asarray(img)


def _arrow(draw: ImageDraw.ImageDraw, start: list[float], end: list[float]) -> None:
    """A line from ``start`` to ``end`` with a head at ``end``."""
    (x0, y0), (x1, y1) = start, end
    draw.line((x0, y0, x1, y1), fill=MARKER_COLOR, width=2)
    length = max(1e-6, float(np.hypot(x1 - x0, y1 - y0)))
    ux, uy = (x1 - x0) / length, (y1 - y0) / length
    head = min(10.0, length / 2)
    left = (x1 - head * ux + head * 0.5 * uy, y1 - head * uy - head * 0.5 * ux)
    right = (x1 - head * ux - head * 0.5 * uy, y1 - head * uy + head * 0.5 * ux)
    draw.polygon([(x1, y1), left, right], fill=MARKER_COLOR)


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def panel(images: list[np.ndarray], labels: list[str]) -> np.ndarray:
    """Views side by side, each tagged with its label in the top-left corner."""
    h = max(i.shape[0] for i in images)
    w = sum(i.shape[1] for i in images) + PANEL_GAP * (len(images) - 1)
    canvas = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    x = 0
    size = max(10, h // 16)
    for img, label in zip(images, labels):
        canvas.paste(Image.fromarray(img).convert("RGB"), (x, 0))
        _label(draw, (x + 6, 5), label, size)
        x += img.shape[1] + PANEL_GAP
    return np.asarray(canvas)


def path_plot(path: list[list[float]], size: int) -> np.ndarray:
    """The camera path seen from above: a line through the frame positions, a dot at the start
    and an arrow head at the end, in a square of ``size`` pixels (north up, east right)."""
    img = Image.new("RGB", (size, size), (250, 250, 245))
    draw = ImageDraw.Draw(img)
    pts = np.array(path, dtype=float)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    span = float(max(hi - lo)) or 1.0
    margin = size * 0.15
    scale = (size - 2 * margin) / span
    mid = (lo + hi) / 2
    xy = [(size / 2 + (p[0] - mid[0]) * scale, size / 2 - (p[1] - mid[1]) * scale) for p in pts]
    for step in range(0, size, max(8, size // 8)):  # a faint grid so the plot reads as a map
        draw.line([(step, 0), (step, size)], fill=(225, 225, 220))
        draw.line([(0, step), (size, step)], fill=(225, 225, 220))
    draw.line(xy, fill=(20, 60, 200), width=3)
    r = max(3, size // 40)
    draw.ellipse((xy[0][0] - r, xy[0][1] - r, xy[0][0] + r, xy[0][1] + r), fill=(0, 150, 0))
    (x0, y0), (x1, y1) = xy[-2], xy[-1]
    ang = float(np.arctan2(y1 - y0, x1 - x0))
    head = [(x1, y1), (x1 - 3 * r * np.cos(ang - 0.5), y1 - 3 * r * np.sin(ang - 0.5)),
            (x1 - 3 * r * np.cos(ang + 0.5), y1 - 3 * r * np.sin(ang + 0.5))]
    draw.polygon(head, fill=(200, 30, 30))
    return np.asarray(img)


def draw_scale_bar(rgb: np.ndarray, pixels: float, label: str) -> np.ndarray:
    """A black-and-white bar of ``pixels`` length in the lower-left corner, with its length."""
    img = Image.fromarray(rgb).convert("RGB")
    draw = ImageDraw.Draw(img)
    h = rgb.shape[0]
    x0, y0 = 10, h - 16
    draw.rectangle((x0 - 4, y0 - 22, x0 + pixels + 4, y0 + 8), fill=(255, 255, 255))
    draw.rectangle((x0, y0, x0 + pixels, y0 + 5), fill=(0, 0, 0))
    _label(draw, (x0, y0 - 19), label, max(10, h // 30))
    return np.asarray(img)
