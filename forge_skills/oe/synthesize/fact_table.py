"""What answer rules read: an evidence record's per-view object facts (FactTable) and a candidate
binding."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forge_skills.oe.types import EvidenceRecord, ObjectViewFact
from forge_skills.oe.synthesize.camera import camera_of, project


@dataclass
class Candidate:
    slots: dict[str, Any]
    answer: str
    margin: float
    values: dict[str, Any] = field(default_factory=dict)
    # The derivation that found it, where its rule derived it to find it: rating and binding
    # read it instead of deriving the candidate again.
    why: dict[str, Any] | None = field(default=None, compare=False, repr=False)


class FactTable:
    """Evidence facts indexed by (object, view)."""

    def __init__(self, evidence: EvidenceRecord) -> None:
        self.evidence = evidence
        self.facts: dict[tuple[str, int], ObjectViewFact] = {(f.object, f.view): f for f in evidence.facts}
        self.objects = [o.name for o in evidence.objects]
        self.referents = [o.name for o in evidence.objects if o.referable]
        self._objects = {o.name: o for o in evidence.objects}
        self.views = [v.index for v in evidence.views]
        # Derivations ask for the same centres and camera matrices again and again (every
        # triple of objects in a view): each is computed once per table.
        self._centers: dict[str, np.ndarray] = {}
        self._views: dict[int, Any] | None = None
        self._cameras: dict[int, tuple[np.ndarray, dict[str, float]] | None] = {}
        self._feet: dict[tuple[str, float, int], tuple[float, float] | None] = {}

    def center_3d(self, name: str) -> np.ndarray:
        """Centre of an object's 3D box."""
        c = self._centers.get(name)
        if c is None:
            o = self._objects[name]
            c = self._centers[name] = (np.array(o.box_3d_min) + np.array(o.box_3d_max)) / 2.0
        return c

    def fact(self, obj: str, view: int) -> ObjectViewFact:
        try:
            return self.facts[(obj, view)]
        except KeyError:
            raise KeyError(f"no registered fact for object {obj!r} in view {view}") from None

    def value(self, obj: str, view: int, name: str) -> float | None:
        f = self.fact(obj, view)
        if name == "visible_pixels":
            return float(f.visible_pixels)
        if name == "median_depth":
            return f.median_depth
        if f.center_2d is None:
            return None
        return f.center_2d[0] if name == "center_x" else f.center_2d[1]

    def object(self, name: str):
        return self._objects[name]

    def category(self, name: str) -> str:
        return self._objects[name].category

    def visible(self, view: int, min_pixels: int) -> list[str]:
        """Objects clearly visible in the view whose labels (for real images) pass quality admission."""
        return [o for o in self.objects if self.fact(o, view).visible_pixels >= min_pixels and self.label_ok(o)]

    def label_ok(self, name: str) -> bool:
        return bool(self._objects[name].attributes.get("label_ok", True))

    def makes_out(self, obj: str, view: int, border: bool = True) -> str | None:
        """Why a person could not make out ``obj`` in ``view`` by the source's referent rules (too
        small for its category, mostly hidden, cut off by the border, lost against what surrounds
        it), or None. A source without rules, or a fact it did not measure, sets no limit. The
        border's cut is measured on the object's own projection where the source rendered it
        alone, else on its projected 3D box; ``border=False`` leaves it out (a count states that
        objects the border cuts count too)."""
        rules = self.evidence.referent_rules
        if not rules:
            return None
        f = self.fact(obj, view)
        sizes = rules.get("min_pixels") or {}
        need = int(sizes.get(self.category(obj), sizes.get("default", 0)))
        if f.visible_pixels < need:
            return f"{obj} shows {f.visible_pixels} px in view {view}; a {self.category(obj)} needs {need} to be recognised"
        cut = rules.get("max_truncation")
        outside = f.border_share if f.border_share is not None else f.truncation
        if border and cut is not None and outside is not None and outside > float(cut):
            return f"{obj} is {outside:.0%} outside view {view} (a referent at most {float(cut):.0%})"
        share = rules.get("min_visible_share")
        if share is not None and f.visible_share is not None and f.visible_share < float(share):
            return f"only {f.visible_share:.0%} of {obj} shows in view {view} (needs {float(share):.0%})"
        contrast = rules.get("min_contrast")
        if contrast is not None and f.contrast is not None and f.contrast < float(contrast):
            return f"{obj} stands out from its surroundings by {f.contrast:.0f} (CIELAB) in view {view} " \
                   f"(needs {float(contrast):.0f})"
        return None

    def camera(self, view: int) -> tuple[np.ndarray, dict[str, float]] | None:
        """(world-to-camera 4x4 matrix, intrinsics fx fy cx cy) of a calibrated view, or None:
        what a rule asking for depth, pose or a focal length reads."""
        if view not in self._cameras:
            self._cameras[view] = camera_of(self.view(view))
        return self._cameras[view]

    def project(self, point: Any, view: int) -> tuple[float, float] | None:
        """Pixel (u, v) of a world point in a calibrated view; None when the view has no camera
        geometry or the point is behind the camera."""
        camera = self.camera(view)
        return None if camera is None else project(camera, point)

    def foot(self, name: str, z: float, view: int) -> tuple[float, float] | None:
        """Pixel where the object's vertical centre line meets height ``z`` (a resting height):
        comparisons of where objects stand ask it of every pair and triple, so once each."""
        key = (name, z, view)
        if key not in self._feet:
            lo, hi = self._objects[name].box_3d_min, self._objects[name].box_3d_max
            self._feet[key] = self.project([(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, z], view)
        return self._feet[key]

    def clear(self, obj: str, view: int, min_pixels: float, border: bool = True) -> bool:
        """Clearly seen: at least ``min_pixels`` and made out by the source's referent rules."""
        return self.fact(obj, view).visible_pixels >= min_pixels and self.makes_out(obj, view, border) is None

    def frames(self) -> list[int]:
        """Views that are moments of a trajectory, in time order (overviews excluded)."""
        timed = [v for v in self.evidence.views if v.time is not None and v.role != "overview"]
        return [v.index for v in sorted(timed, key=lambda v: (v.time, v.index))]

    def view(self, index: int):
        if self._views is None:
            self._views = {v.index: v for v in self.evidence.views}
        return self._views[index]

    def views_with_role(self, roles: list[str] | None) -> list[int]:
        return [v.index for v in self.evidence.views if roles is None or v.role in roles]
