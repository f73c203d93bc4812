"""S2/S3 for real-image folders: list units through the adapter, read them, register facts.

DOTA facts come from the labels (polygon area, box, centroid, ground position from the
ground sampling distance); frame facts come from file names only (capture order, stereo side).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import BaseModel

from forge_skills.oe.types import (Blueprint, EvidenceObject, EvidenceRecord, EvidenceView, ImageLabel, ImageRecord,
                                   ImageUnit, ObjectViewFact, ViewRecord)
from forge_skills.oe.structure.source_rules import descriptor_reads, source_rules
from forge.sources import own_section
from forge.skills import SkillContext, skill
from forge_resources.image_folder import adapter_for, clip_polygon, file_sha256, parse_dota, polygon_area

# A label keeps this share of its area inside the tile, or it counts as truncated (DOTA_devkit's 0.7).
KEEP_FRACTION = 0.7


class UnitParams(BaseModel):
    scene_index: int
    source_index: int | None = None  # which of the intent's sources it plans for (the runner says)


@skill("collect.plan_image_units", stage="S2", params=UnitParams)
def plan_image_units(ctx: SkillContext, blueprint: Blueprint) -> list[ImageUnit]:
    """The unit at this index of the folder, with the SHA-256 of every file it reads."""
    src = own_section(blueprint.sources, "image_folder", ctx.params.source_index)
    root = Path(src["root"])
    units = adapter_for(src["adapter"]).units(root, src)
    if ctx.params.scene_index >= len(units):
        return []
    u = units[ctx.params.scene_index]
    adapter = adapter_for(src["adapter"])
    return [ImageUnit(source_kind=src["kind"], adapter=src["adapter"], root=str(root), unit_index=ctx.params.scene_index,
                      kind=u["kind"], files=u["files"], sha256=[file_sha256(str(root / f)) for f in u["files"]],
                      labels_complete=adapter.labels_complete or bool(src.get("trust_label_completeness")),
                      crop=u.get("crop"), labels=u.get("labels"), order=u.get("order", []), sides=u.get("sides", []))]


@skill("collect.read_image_unit", stage="S2", requires=("PIL",))
def read_image_unit(ctx: SkillContext, unit: ImageUnit) -> list[ImageRecord]:
    """Decode the unit's pixels (cropping a tile) and parse and clip its labels."""
    from PIL import Image

    root = Path(unit.root)
    adapter = adapter_for(unit.adapter)
    views = []
    for k, (rel, sha) in enumerate(zip(unit.files, unit.sha256)):
        path = root / rel
        if file_sha256(str(path)) != sha:
            raise ValueError(f"{path}: file changed since it was listed (SHA-256 differs)")
        with Image.open(path) as im:
            img = im.convert("RGB")
            if unit.crop:
                img = img.crop(tuple(unit.crop))
            rgb = np.asarray(img)
        time = unit.order[k] if unit.order else None
        role = unit.sides[k] if unit.sides else ("frame" if unit.order else "top_down")
        recipe = None if adapter.redistribute else {"dataset": root.name, "file": rel, "sha256": sha, "crop": unit.crop}
        views.append(ViewRecord(index=k, rgb=ctx.put_png(rgb), width=rgb.shape[1], height=rgb.shape[0], intrinsics={},
                                view_matrix=[], camera_position=[], near=0.0, far=0.0, role=role, time=time,
                                recipe=recipe))
    labels, gsd = [], None
    if unit.labels:
        parsed = parse_dota(root / unit.labels)
        gsd = parsed.gsd
        x0, y0, x1, y1 = unit.crop
        # A label is named by its category and its object line in the label file: stable across tiles.
        for line_index, box in enumerate(parsed.boxes, 1):
            clipped = clip_polygon(box.polygon, (x0, y0, x1, y1))
            area = polygon_area(box.polygon)
            if not clipped or polygon_area(clipped) < 1.0:
                continue  # outside this tile
            local = [c - (x0 if i % 2 == 0 else y0) for i, c in enumerate(clipped)]
            labels.append(ImageLabel(name=f"{box.category} #{line_index}", category=box.category,
                                     polygon=[round(c, 2) for c in local], difficult=box.difficult,
                                     center=[round(float(np.mean(box.polygon[0::2])) - x0, 2),
                                             round(float(np.mean(box.polygon[1::2])) - y0, 2)],
                                     truncated=polygon_area(clipped) < KEEP_FRACTION * area))
    return [ImageRecord(source_kind=unit.source_kind, adapter=unit.adapter, unit_index=unit.unit_index, views=views,
                        labels=labels, metres_per_pixel=gsd, root=unit.root, labels_file=unit.labels, crop=unit.crop,
                        redistribute=adapter.redistribute, licence_note=adapter.licence_note,
                        labels_complete=unit.labels_complete)]


@skill("structure.image_evidence", stage="S3", reads=descriptor_reads)
def image_evidence(ctx: SkillContext, record: ImageRecord) -> list[EvidenceRecord]:
    """Per-label facts (area, box, centroid, ground position) and per-view capture facts."""
    facts, objects = [], []
    gsd = record.metres_per_pixel
    for label in record.labels:
        xs, ys = label.polygon[0::2], label.polygon[1::2]
        v = record.views[0]
        area = polygon_area(label.polygon)
        box = [max(0, int(min(xs))), max(0, int(min(ys))), min(v.width - 1, int(max(xs))), min(v.height - 1, int(max(ys)))]
        cx, cy = label.center  # the whole object's centre, also when the tile cuts a corner off
        facts.append(ObjectViewFact(object=label.name, view=v.index, visible_pixels=int(round(area)),
                                    in_frustum=not label.truncated, bbox_2d=box,
                                    center_2d=[round(cx, 2), round(cy, 2)], projected_center=[round(cx, 2), round(cy, 2)]))
        ground = None if gsd is None else [round(cx * gsd, 4), round(cy * gsd, 4), 0.0]
        objects.append(EvidenceObject(
            name=label.name, category=label.category, color="", position=ground,
            box_3d_min=None if gsd is None else [round(min(xs) * gsd, 4), round(min(ys) * gsd, 4), 0.0],
            box_3d_max=None if gsd is None else [round(max(xs) * gsd, 4), round(max(ys) * gsd, 4), 0.0],
            attributes={"label_ok": not (label.difficult or label.truncated), "difficult": label.difficult,
                        "truncated": label.truncated, "polygon": [round(float(c), 2) for c in label.polygon],
                        **({"ground_area_m2": round(area * gsd * gsd, 3)} if gsd else {})}))
    views = [EvidenceView(index=v.index, rgb=v.rgb, width=v.width, height=v.height, role=v.role, time=v.time,
                          recipe=v.recipe)
             for v in record.views]
    conventions, referents = source_rules(record.source_kind)
    return [EvidenceRecord(source=ctx.input_ids["record"], scene_index=record.unit_index, views=views, objects=objects,
                           facts=facts, metres_per_pixel=gsd, labels_complete=record.labels_complete,
                           conventions=conventions, referent_rules=referents)]
