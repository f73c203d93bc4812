"""S3: register per-object, per-view facts of a rendered scene from the simulator's ground truth.

Visible pixels and 2D boxes come from the segmentation, depth from the metric depth map
(median over the object's visible pixels), colour names from the rendered RGB under the mask,
border truncation from the projected 3D box, 3D boxes, poses, supports and tilts from the
simulator state, camera poses and frame times from the collection record. Objects are named
by how they rendered (see ``appearance``), never by the tint the scene asked for.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from forge_skills.oe.types import EvidenceObject, EvidenceRecord, EvidenceView, ObjectViewFact, SourceRecord
from forge.skills import SkillContext, skill
from forge_skills.oe.structure.source_rules import descriptor_reads, source_rules
from forge_skills.oe.structure.appearance import ColourReading, name_referents, read_colour, srgb_to_lab


@skill("structure.rendered_evidence", stage="S3", parallel=True, pool_from=100, reads=descriptor_reads)  # about 40 ms a scene
def rendered_evidence(ctx: SkillContext, source: SourceRecord) -> list[EvidenceRecord]:
    """Visible pixels, 2D box, centroid, median depth, colour and truncation of every object in
    every view."""
    return [measure_evidence(source, ctx.input_ids["source"], ctx.get_arrays(source.arrays), ctx.get_image)]


def measure_evidence(source: SourceRecord, source_id: str, arrays: dict[str, np.ndarray],
                     get_image: Callable[[str], np.ndarray]) -> EvidenceRecord:
    """The evidence record of a rendered source: its raw arrays and RGB measured per object and view."""
    facts: list[ObjectViewFact] = []
    readings: dict[str, list[ColourReading]] = {o.name: [] for o in source.objects}
    for view in source.views:
        seg = arrays[f"seg_{view.index}"]
        depth = arrays[f"depth_{view.index}"]
        if seg.shape != (view.height, view.width) or depth.shape != seg.shape:
            raise ValueError(f"view {view.index}: array shapes {seg.shape}/{depth.shape} do not match "
                             f"{view.height}x{view.width}")
        rgb = get_image(view.rgb)
        proj = _projection(view.intrinsics, view.near, view.far)
        vm = np.array(view.view_matrix, dtype=float).reshape(4, 4, order="F")
        for obj in source.objects:
            mask = seg == obj.body
            count = int(mask.sum())
            center3 = (np.array(obj.aabb_min) + np.array(obj.aabb_max)) / 2.0
            u, v, z = _project(center3, vm, proj, view.width, view.height)
            in_frustum = bool(z > view.near and 0 <= u < view.width and 0 <= v < view.height)
            fact = ObjectViewFact(object=obj.name, view=view.index, visible_pixels=count, in_frustum=in_frustum,
                                  projected_center=[round(u, 2), round(v, 2)] if np.isfinite(u) else None,
                                  truncation=truncation(obj.aabb_min, obj.aabb_max, vm, proj, view.width,
                                                        view.height, view.near))
            if count:
                ys, xs = np.nonzero(mask)
                fact.bbox_2d = [int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())]
                fact.center_2d = [round(float(xs.mean()), 2), round(float(ys.mean()), 2)]
                fact.median_depth = round(float(np.median(depth[mask])), 5)
                reading = read_colour(rgb[mask])
                readings[obj.name].append(reading)
                fact.colour = reading.name
                fact.colour_lab = [round(c, 2) for c in reading.lab]
                fact.contrast = surround_contrast(rgb, mask, fact.bbox_2d)
                whole = (view.whole_pixels or {}).get(obj.name)
                if whole:
                    fact.visible_share = round(min(1.0, count / whole), 4)
                    outside = (view.outside_pixels or {}).get(obj.name, 0)
                    fact.border_share = round(outside / (whole + outside), 4)
            facts.append(fact)
    conventions, referents = source_rules(source.source_kind)
    naming = name_referents([(o.name, o.category) for o in source.objects], readings,
                            by_identity=source.naming == "identity",
                            unnameable={o.name: o.unnameable for o in source.objects if o.unnameable})
    for f in facts:
        f.object = naming[f.object].name
    return EvidenceRecord(
        source=source_id, scene_index=source.scene_index,
        views=[EvidenceView(index=v.index, rgb=v.rgb, width=v.width, height=v.height, camera_position=v.camera_position,
                            role=v.role, time=v.time, forward=v.forward, body_pixels=v.body_pixels,
                            intrinsics=v.intrinsics, view_matrix=v.view_matrix, attributes=dict(v.attributes))
               for v in source.views],
        objects=[EvidenceObject(name=naming[o.name].name, category=o.category, color=naming[o.name].colour,
                                source_name=o.name, referable=naming[o.name].referable, naming=naming[o.name].reason,
                                position=o.position, box_3d_min=o.aabb_min, box_3d_max=o.aabb_max, tilt_deg=o.tilt_deg,
                                support=_support_kind(o.support, source.bodies),
                                attributes={**({"support_body": o.support} if o.support in source.bodies else {}),
                                            **({"touching": [naming[t].name for t in o.touching]} if o.touching else {}),
                                            **({"opening_deg": o.opening_deg} if o.opening_deg is not None else {}),
                                            **({"resting_on": naming[o.support].name} if o.support in naming else {})})
                 for o in source.objects],
        facts=facts,
        robot_base=source.robot_base, conventions=conventions, referent_rules=referents, parts=source.parts,
        gripper=_named_gripper(source.gripper, naming),
        timeline=None if source.timeline is None else [
            {**t, "gripper": _named_gripper(t.get("gripper"), naming),
             "heights": {naming[n].name: z for n, z in (t.get("heights") or {}).items() if n in naming}}
            for t in source.timeline],
    )


SURROUND_PX = 3  # the ring of pixels around an object its contrast is measured against


def surround_contrast(rgb: np.ndarray, mask: np.ndarray, bbox: list[int]) -> float | None:
    """CIELAB distance between the median colour of an object's pixels and that of the pixels just
    around it (whatever they show: table, floor, another object): a black object on a black
    table top scores near 0."""
    from scipy.ndimage import binary_dilation

    h, w = mask.shape
    x0, y0 = max(0, bbox[0] - SURROUND_PX), max(0, bbox[1] - SURROUND_PX)
    x1, y1 = min(w, bbox[2] + SURROUND_PX + 1), min(h, bbox[3] + SURROUND_PX + 1)
    crop = mask[y0:y1, x0:x1]
    ring = binary_dilation(crop, iterations=SURROUND_PX) & ~crop
    if not ring.any():
        return None
    pixels = rgb[y0:y1, x0:x1]
    inside = np.median(srgb_to_lab(pixels[crop]), axis=0)
    around = np.median(srgb_to_lab(pixels[ring]), axis=0)
    return round(float(np.linalg.norm(inside - around)), 2)


def _named_gripper(gripper: dict | None, naming: dict) -> dict | None:
    """The gripper record with the held object under the name items show."""
    if gripper is None:
        return None
    held, between = gripper.get("holding"), gripper.get("between")
    return {**gripper, "holding": naming[held].name if held in naming else None,
            "between": naming[between].name if between in naming else between}


def truncation(lo: list[float], hi: list[float], view: np.ndarray, proj: np.ndarray, width: int, height: int,
               near: float) -> float:
    """Share of the object's projected 3D box that falls outside the image (1 when any corner is
    behind the camera: the object reaches past the image plane)."""
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    pts = []
    for c in corners:
        u, v, d = _project(c, view, proj, width, height)
        if not np.isfinite(u) or d <= near:
            return 1.0
        pts.append((u, v))
    us, vs = [p[0] for p in pts], [p[1] for p in pts]
    area = (max(us) - min(us)) * (max(vs) - min(vs))
    if area <= 0:
        return 0.0
    inside = max(0.0, min(max(us), width) - max(min(us), 0.0)) * max(0.0, min(max(vs), height) - max(min(vs), 0.0))
    return round(1.0 - inside / area, 4)


def _support_kind(support: str | None, bodies: dict[str, str]) -> str | None:
    """The category of what the object rests on; None when unknown or ambiguous (several, or
    propped on a tray's rim)."""
    if support is None or support in ("several", "unknown", "unclear"):
        return None
    return bodies.get(support, "object")


def _projection(intr: dict[str, float], near: float, far: float) -> np.ndarray:
    """OpenGL projection matrix equivalent to the pinhole intrinsics."""
    w, h = intr["width"], intr["height"]
    m = np.zeros((4, 4))
    m[0, 0] = 2 * intr["fx"] / w
    m[1, 1] = 2 * intr["fy"] / h
    m[2, 2] = -(far + near) / (far - near)
    m[2, 3] = -2 * far * near / (far - near)
    m[3, 2] = -1
    return m


def _project(point: np.ndarray, view: np.ndarray, proj: np.ndarray, width: float, height: float):
    cam = view @ np.array([*point, 1.0])
    clip = proj @ cam
    depth = float(-cam[2])
    if clip[3] <= 1e-9:
        return float("nan"), float("nan"), depth
    ndc = clip[:3] / clip[3]
    return float((ndc[0] + 1) * 0.5 * width), float((1 - ndc[1]) * 0.5 * height), depth
