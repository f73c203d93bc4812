"""Scoring protocol ``inside_region``: the reply is a point (x, y in percent of the image); it is
right when it lies inside the region the key's hidden ``payload`` holds (``polygon``: x0, y0,
x1, y1, ... in percent). Standard library only: packages ship this file beside their scorer."""

from __future__ import annotations

import math
import re

NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


def parse(key: dict, response: object) -> tuple[float, float] | None:
    """Two numbers, x then y."""
    if response is None:
        return None
    found = NUMBER.findall(str(response))
    return (float(found[0]), float(found[1])) if len(found) == 2 else None


def _polygon(key: dict) -> list[tuple[float, float]]:
    flat = key["payload"]["polygon"]
    return list(zip(flat[0::2], flat[1::2]))


def inside(polygon: list[tuple[float, float]], x: float, y: float) -> bool:
    """Even-odd rule."""
    hit = False
    for (x1, y1), (x2, y2) in zip(polygon, polygon[1:] + polygon[:1]):
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            hit = not hit
    return hit


def score(key: dict, response: object) -> float:
    got = parse(key, response)
    return 1.0 if got is not None and inside(_polygon(key), *got) else 0.0


def secondary(key: dict, response: object) -> dict:
    """How far the point lies outside the region, in percent of the image (0 inside)."""
    got = parse(key, response)
    if got is None:
        return {}
    polygon = _polygon(key)
    if inside(polygon, *got):
        return {"distance_to_region": 0.0}
    x, y = got

    def to_edge(a: tuple[float, float], b: tuple[float, float]) -> float:
        (x1, y1), (x2, y2) = a, b
        dx, dy = x2 - x1, y2 - y1
        t = max(0.0, min(1.0, ((x - x1) * dx + (y - y1) * dy) / (dx * dx + dy * dy or 1.0)))
        return math.hypot(x - (x1 + t * dx), y - (y1 + t * dy))
    return {"distance_to_region": min(to_edge(a, b) for a, b in zip(polygon, polygon[1:] + polygon[:1]))}
