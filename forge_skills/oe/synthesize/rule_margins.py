"""What answer rules share: a derivation's form, the margins that decide whether a comparison is
clear in the image (depth cues, area ratios, edge gaps, separations) and the per-object
candidate wrapper."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from forge_skills.oe.synthesize.fact_table import Candidate, FactTable

FIELDS = ("center_x", "center_y", "median_depth", "visible_pixels")


Derivation = tuple[str | None, dict[str, Any]]


# What a person sees of a comparison, beside its metric margin: a depth gap shows as the nearer
# object standing lower in the image (height in the visual field, a share of the image height),
# a size difference as an area ratio.
MIN_DEPTH_CUE = 0.04
MIN_AREA_RATIO = 1.3
MIN_EDGE_GAP = 4.0  # pixels between like edges of two objects ordered by position in the image


def depth_cue(ft: FactTable, view: int, near: str, far: str) -> float | None:
    """How far below the farther object the nearer one stands in the image, as a share of the
    image height: the rows where each one's vertical line meets the lower of their two resting
    heights (on a common floor or table top, the nearer is the lower). None in an uncalibrated view."""
    a, b = ft.object(near), ft.object(far)
    if a.box_3d_min is None or b.box_3d_min is None or a.box_3d_max is None or b.box_3d_max is None:
        return None
    z = min(a.box_3d_min[2], b.box_3d_min[2])
    foot = [ft.foot(n, z, view) for n in (near, far)]
    if foot[0] is None or foot[1] is None:
        return None
    return (foot[0][1] - foot[1][1]) / ft.view(view).height


def held_problem(ft: FactTable, names: list[str]) -> str | None:
    """Why distances cannot be compared among ``names``: one is held up in the gripper. Lifted off
    the table it has no resting place to read its distance by; a person sees only its size and
    height, which mislead (a268df40)."""
    held = (ft.evidence.gripper or {}).get("holding")
    if held in names:
        return f"the {held} is held up in the gripper: nothing in the picture shows how far it is"
    return None


def image_margin(ft: FactTable, view: int, field: str, low: str, high: str, tpl: dict[str, Any]
                 ) -> tuple[float | None, str | None]:
    """(the margin a person sees, why it is too small) between two objects whose ``field`` values
    are ordered low < high: for depth the nearer one's drop below the farther in the image, for
    area the ratio of the larger to the smaller, for an image position the smaller gap between
    their like edges (left edges and right edges, or top and bottom)."""
    if field == "median_depth":
        if (why := held_problem(ft, [low, high])) is not None:
            return None, why
        cue = depth_cue(ft, view, low, high)
        need = _adm(tpl, "min_depth_cue", MIN_DEPTH_CUE)
        if cue is not None and cue < need:
            return cue, f"the nearer {low} stands {cue:.1%} of the image below the {high} (needs {need:.0%})"
        return cue, None
    if field == "visible_pixels":
        small, large = ft.value(low, view, field), ft.value(high, view, field)
        ratio = large / max(small, 1.0)
        need = _adm(tpl, "min_area_ratio", MIN_AREA_RATIO)
        return ratio, (None if ratio >= need else f"area ratio {ratio:.2f} below {need:.2f}")
    if field in ("center_x", "center_y"):
        # A person may judge "further left" by an object's centre or by its edge: both edges
        # must agree with the centres, or a large object whose edge reaches past a small one's
        # is the other answer.
        a, b = ft.fact(low, view).bbox_2d, ft.fact(high, view).bbox_2d
        if a is None or b is None:
            return None, None
        axis = 0 if field == "center_x" else 1
        gap = float(min(b[axis] - a[axis], b[axis + 2] - a[axis + 2]))
        need = _adm(tpl, "min_edge_gap", MIN_EDGE_GAP)
        if gap < need:
            return gap, (f"by their edges the {low} and the {high} are not clearly apart "
                         f"({gap:.0f} px, needs {need:.0f})")
        return gap, None
    return None, None


def _adm(tpl: dict[str, Any], key: str, default: float) -> float:
    return float(tpl["admission"].get(key, default))


def separated_pairs(ft: FactTable, view: int, names: list[str], min_px: float,
                    value_field: str | None = None, min_margin: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Ordered index pairs (row-major, as itertools.permutations yields them) of objects with
    clear labels whose centres are at least ``min_px`` apart and, given a field, whose values
    differ by at least ``min_margin``; and which of them are near a threshold. Pairs outside are
    certain to fail; pairs near a threshold need the exact derivation."""
    if len(names) < 2:
        return np.zeros((0, 2), dtype=int), np.zeros(0, dtype=bool)
    centers = [ft.fact(o, view).center_2d for o in names]
    ok = np.array([c is not None and ft.label_ok(o) for o, c in zip(names, centers)])
    xy = np.array([c if c is not None else (np.nan, np.nan) for c in centers], dtype=float)
    gap = np.hypot(xy[:, None, 0] - xy[None, :, 0], xy[:, None, 1] - xy[None, :, 1])
    keep = ok[:, None] & ok[None, :] & (gap >= min_px - 1e-6)
    near = gap < min_px + 1e-6
    if value_field is not None:
        vals = np.array([np.nan if (v := ft.value(o, view, value_field)) is None else v for o in names], dtype=float)
        diff = np.abs(vals[:, None] - vals[None, :])
        keep &= diff >= min_margin - 1e-9
        near |= diff < min_margin + 1e-9
    np.fill_diagonal(keep, False)
    pairs = np.argwhere(keep)
    return pairs, near[pairs[:, 0], pairs[:, 1]]


def per_object(derive: Callable[..., Derivation], margin: Callable[[dict[str, Any]], float] = lambda d: 1.0,
               values: Callable[[dict[str, Any]], Any] = lambda d: d) -> Callable[..., list[Candidate]]:
    """Candidates of a rule with one object slot: every object whose derivation admits an answer."""
    def candidates(ft: FactTable, view: Any, tpl: dict[str, Any]) -> list[Candidate]:
        out = []
        for obj in ft.objects:
            answer, d = derive(ft, view, {"object": obj}, tpl)
            if answer is not None:
                out.append(Candidate({"object": obj}, answer, float(margin(d)), values(d), d))
        return out
    return candidates


def _view_label(ft: FactTable, view: int) -> str:
    return f"View {ft.views.index(view) + 1}"


def _center_of(ft: FactTable, name: str):
    return ft.center_3d(name)


MIN_IMAGE_RATIO = 1.25  # the second nearest at least this much further from the anchor in the image


def image_separations(ft: FactTable, view: int, anchor: str, names: list[str]) -> dict[str, float] | None:
    """Image distance (pixels) from the anchor to each object, between the points where their
    vertical lines meet the lowest resting height among them; None in an uncalibrated view."""
    objs = [ft.object(n) for n in [anchor, *names]]
    if any(o.box_3d_min is None or o.box_3d_max is None for o in objs):
        return None
    z = min(o.box_3d_min[2] for o in objs)
    feet = [ft.foot(n, z, view) for n in [anchor, *names]]
    if any(f is None for f in feet):
        return None
    return {n: float(np.hypot(f[0] - feet[0][0], f[1] - feet[0][1])) for n, f in zip(names, feet[1:])}
