"""Contract predicates for the built-in artifact types (registered by name, used in
``forge_contracts/*.yaml``). Each returns pass/fail with a diagnostic; the engine decides."""

from __future__ import annotations

import string

import numpy as np

from forge_skills.oe.types import (Blueprint, EvidenceRecord, ImageRecord, ImageUnit, SceneSpec, SourceRecord, Template)
from forge.contracts import CheckContext, Outcome, check
from forge.vocabulary import capabilities, question_types
from forge_skills.scoring import scorer as oe_scorer
from forge_skills.oe.synthesize.media import MARKER_STYLES
from forge_skills.oe.synthesize.admission import SINGULAR, SPECIAL_KEYS, WHERE
from forge_skills.oe.synthesize.answer_rules import rule_for
from forge_skills.oe.synthesize.conventions import template_problems as convention_problems

# -- blueprint ------------------------------------------------------------------------------


@check("blueprint_complete")
def blueprint_complete(bp: Blueprint, ctx: CheckContext) -> Outcome:
    """Targets, question types and resources are present and mutually compatible."""
    from forge.resources import descriptors

    problems = []
    if sum(bp.capability_targets.values()) != bp.items_target:
        problems.append("capability targets do not add up to the item target")
    problems += [f"unknown capability {c}" for c in bp.capabilities if c not in capabilities()]
    problems += [f"unknown question type {q}" for q in bp.question_types if q not in question_types()]
    for src in bp.sources:
        d = descriptors().get(src.get("kind"))
        if d is None:
            problems.append(f"unknown resource kind {src.get('kind')}")
        elif d.track != bp.track:
            problems.append(f"resource {d.kind} serves track {d.track}, blueprint is {bp.track}")
    if not bp.sources:
        problems.append("no sources")
    return Outcome(not problems, "; ".join(problems))


# -- scenes and sources ---------------------------------------------------------------------


# Half-extents (x, y) in metres where a layout may place objects.
LAYOUT_BOUNDS = {"tabletop": (0.7, 0.45), "room": (3.5, 3.5), "ground": (5.0, 5.0)}


@check("scene_well_formed")
def scene_well_formed(scene: SceneSpec, ctx: CheckContext) -> Outcome:
    """Object names are unique, at least two cameras, placements on the table."""
    names = [o.name for o in scene.objects]
    problems = []
    if len(set(names)) != len(names):
        problems.append("duplicate object names")
    if len(scene.cameras) < 2:
        problems.append("fewer than two camera views")
    if len({c.index for c in scene.cameras}) != len(scene.cameras):
        problems.append("duplicate camera indices")
    bounds = LAYOUT_BOUNDS.get(scene.layout)
    if bounds is None:
        problems.append(f"unknown layout {scene.layout!r}")
    else:
        where = "on the table" if scene.layout == "tabletop" else "in the scene area"
        problems += [f"{o.name} is not placed {where}" for o in scene.objects
                     if abs(o.xy[0]) > bounds[0] or abs(o.xy[1]) > bounds[1]]
    return Outcome(not problems, "; ".join(problems))


@check("source_decodable")
def source_decodable(src: SourceRecord, ctx: CheckContext) -> Outcome:
    """Every view's RGB decodes at its size; raw arrays exist per view with matching shapes."""
    arrays = ctx.store.get_arrays(src.arrays)
    problems = []
    bodies = {o.body for o in src.objects}
    for v in src.views:
        rgb = ctx.store.get_image(v.rgb)
        if rgb.shape != (v.height, v.width, 3):
            problems.append(f"view {v.index}: RGB shape {rgb.shape}")
        for name in (f"depth_{v.index}", f"seg_{v.index}"):
            if name not in arrays or arrays[name].shape != (v.height, v.width):
                problems.append(f"view {v.index}: {name} missing or mis-shaped")
        depth = arrays.get(f"depth_{v.index}")
        if depth is not None and not (np.isfinite(depth).all() and depth.min() >= v.near * 0.99 and depth.max() <= v.far * 1.01):
            problems.append(f"view {v.index}: depth outside [near, far]")
    seg_ids = set()
    for v in src.views:
        seg = arrays.get(f"seg_{v.index}")
        if seg is not None:
            seg_ids |= set(np.unique(seg).tolist())
    if not bodies & seg_ids:
        problems.append("no object appears in any segmentation")
    return Outcome(not problems, "; ".join(problems))


# -- evidence -------------------------------------------------------------------------------


@check("evidence_consistent")
def evidence_consistent(ev: EvidenceRecord, ctx: CheckContext) -> Outcome:
    """One fact per (object, view); boxes inside the image; counts and depths plausible."""
    problems = []
    objects = {o.name for o in ev.objects}
    views = {v.index: v for v in ev.views}
    src = ctx.load(ev.source)
    v_far = {v.index: v.far for v in src.views} if isinstance(src, SourceRecord) else {}  # no depth in real images
    pairs = {(f.object, f.view) for f in ev.facts}
    if pairs != {(o, v) for o in objects for v in views} or len(pairs) != len(ev.facts):
        problems.append("facts do not cover every (object, view) exactly once")
    for f in ev.facts:
        v = views.get(f.view)
        if f.object not in objects or v is None:
            problems.append(f"fact refers to unknown object/view {f.object}/{f.view}")
            continue
        if f.visible_pixels:
            x0, y0, x1, y1 = f.bbox_2d or (0, 0, -1, -1)
            if not (0 <= x0 <= x1 < v.width and 0 <= y0 <= y1 < v.height):
                problems.append(f"{f.object}@{f.view}: 2D box outside the image")
            elif f.visible_pixels > (x1 - x0 + 1) * (y1 - y0 + 1):
                problems.append(f"{f.object}@{f.view}: more visible pixels than box area")
            if v_far and (f.median_depth is None or not (0.0 < f.median_depth <= v_far.get(f.view, 10.0))):
                problems.append(f"{f.object}@{f.view}: implausible median depth {f.median_depth}")
        elif f.bbox_2d is not None or f.median_depth is not None:
            problems.append(f"{f.object}@{f.view}: box or depth without visible pixels")
    return Outcome(not problems, "; ".join(problems[:5]))


@check("evidence_matches_arrays")
def evidence_matches_arrays(ev: EvidenceRecord, ctx: CheckContext) -> Outcome:
    """Each fact's visible-pixel count, re-measured on its own view's segmentation, agrees."""
    src = ctx.load(ev.source)
    if isinstance(src, ImageRecord):
        return _evidence_matches_labels(ev, src)
    arrays = ctx.store.get_arrays(src.arrays)
    by_source = {o.name: o.body for o in src.objects}
    body = {o.name: by_source.get(o.source_name or o.name) for o in ev.objects}
    wrong = []
    for f in ev.facts:
        seg = arrays.get(f"seg_{f.view}")
        if seg is None or body.get(f.object) is None:
            wrong.append(f"{f.object}@{f.view}: no such view or object in the source")
            continue
        if int((seg == body[f.object]).sum()) != f.visible_pixels:
            wrong.append(f"{f.object}@{f.view}")
    return Outcome(not wrong, f"facts disagree with the source arrays: {wrong[:4]}" if wrong else "")


def _evidence_matches_labels(ev: EvidenceRecord, src: ImageRecord) -> Outcome:
    """Each fact's area and box, re-measured on its label polygon, agree."""
    from forge_resources.image_folder import polygon_area

    labels = {lab.name: lab for lab in src.labels}
    wrong = []
    for f in ev.facts:
        lab = labels.get(f.object)
        if lab is None or f.view != 0:
            wrong.append(f"{f.object}@{f.view}: no such label")
        elif int(round(polygon_area(lab.polygon))) != f.visible_pixels:
            wrong.append(f"{f.object}@{f.view}")
    return Outcome(not wrong, f"facts disagree with the labels: {wrong[:4]}" if wrong else "")


@check("image_unit_readable")
def image_unit_readable(unit: ImageUnit, ctx: CheckContext) -> Outcome:
    """Every file of the unit exists under the dataset root with the recorded SHA-256."""
    from pathlib import Path

    from forge_resources.image_folder import file_sha256

    problems = []
    for rel, sha in zip(unit.files, unit.sha256):
        path = Path(unit.root) / rel
        if not path.exists():
            problems.append(f"{path}: missing")
        elif file_sha256(str(path)) != sha:
            problems.append(f"{path}: SHA-256 differs")
    if unit.labels and not (Path(unit.root) / unit.labels).exists():
        problems.append(f"{unit.labels}: label file missing")
    return Outcome(not problems, "; ".join(problems))


@check("image_record_consistent")
def image_record_consistent(rec: ImageRecord, ctx: CheckContext) -> Outcome:
    """Views decode at their size; label polygons lie inside the image; names are unique."""
    problems = []
    for v in rec.views:
        rgb = ctx.store.get_image(v.rgb)
        if rgb.shape != (v.height, v.width, 3):
            problems.append(f"view {v.index}: RGB shape {rgb.shape}")
    names = [lab.name for lab in rec.labels]
    if len(set(names)) != len(names):
        problems.append("duplicate label names")
    w, h = (rec.views[0].width, rec.views[0].height) if rec.views else (0, 0)
    for lab in rec.labels:
        xs, ys = lab.polygon[0::2], lab.polygon[1::2]
        if min(xs) < -0.5 or min(ys) < -0.5 or max(xs) > w + 0.5 or max(ys) > h + 0.5:
            problems.append(f"{lab.name}: polygon outside the image")
    if not rec.redistribute and any(v.recipe is None for v in rec.views):
        problems.append("pixels that may not be redistributed carry no rebuild recipe")
    return Outcome(not problems, "; ".join(problems[:5]))


@check("evidence_traceable")
def evidence_traceable(ev: EvidenceRecord, ctx: CheckContext) -> Outcome:
    """The evidence names its source record, and its views and objects are that record's."""
    src = ctx.load(ev.source)
    if not isinstance(src, (SourceRecord, ImageRecord)):
        return Outcome(False, f"source {ev.source} is a {type(src).__name__}, not a SourceRecord or ImageRecord")
    problems = []
    if {(v.index, v.rgb) for v in ev.views} != {(v.index, v.rgb) for v in src.views}:
        problems.append("views differ from the source record")
    names = {o.name for o in src.objects} if isinstance(src, SourceRecord) else {lab.name for lab in src.labels}
    if {o.source_name or o.name for o in ev.objects} != names:
        problems.append("objects differ from the source record")
    return Outcome(not problems, "; ".join(problems))


# -- templates and bindings -----------------------------------------------------------------

MIN_REALIZATIONS = 4
LAYOUTS = {"single_view": "view", "multi_view": "scene", "frames": "scene", "first_last": "scene",
           "top_down_forward": "scene"}


@check("template_declares")
def template_declares(t: Template, ctx: CheckContext) -> Outcome:
    """Evidence slots, answer rule, options and scoring are declared and type-compatible."""
    problems = []
    try:
        rule = rule_for(t.model_dump())
    except KeyError:
        rule = None
    if rule is None:
        problems.append(f"unknown answer rule {t.answer_rule.get('rule')!r}")
    else:
        if t.question_type not in rule.question_types:
            problems.append(f"rule {rule.name} answers {rule.question_types}, not {t.question_type}")
        if set(t.slots) != set(rule.slots):
            problems.append(f"slots {sorted(t.slots)} do not match rule slots {list(rule.slots)}")
    kind = t.options.get("kind")
    qt = question_types().get(t.question_type)
    if qt is None:
        problems.append(f"unknown question type {t.question_type!r}")
    else:
        if kind not in qt.option_kinds:
            problems.append(f"option kind {kind!r} does not fit question type {t.question_type} "
                            f"(it takes {list(qt.option_kinds)})")
        if not oe_scorer.knows_protocol(t.scoring.get("protocol")):
            problems.append(f"unknown scoring protocol {t.scoring.get('protocol')!r}")
        elif qt.protocol != t.scoring.get("protocol"):
            problems.append(f"{t.question_type} items are scored by {qt.protocol}, not {t.scoring.get('protocol')}")
    if kind == "intervals":
        bounds = t.options.get("intervals") or []
        if not bounds or any(lo > hi for lo, hi, _ in bounds) or \
                any(a[1] >= b[0] for a, b in zip(bounds, bounds[1:])):
            problems.append("intervals must be ordered and disjoint")
    for text in t.realizations:
        fields = {f for _, f, _, _ in string.Formatter().parse(text) if f}
        fields = {f[: -len(SINGULAR)] if f.endswith(SINGULAR) and t.slots.get(f[: -len(SINGULAR)], {}).get("kind")
                  == "category" else f for f in fields}
        if not fields <= set(t.slots):
            problems.append(f"realization uses undeclared slots {sorted(fields - set(t.slots))}")
    if len(set(t.realizations)) < MIN_REALIZATIONS:
        problems.append(f"{len(set(t.realizations))} distinct realizations; at least {MIN_REALIZATIONS} keep "
                        "the wording from becoming a template's signature")
    for key, spec in t.visibility.items():
        if key not in t.slots and key not in SPECIAL_KEYS and not (isinstance(spec, dict) and "body" in spec):
            problems.append(f"visibility names {key!r}, neither a slot, a static body ({{body: NAME}}) nor one of "
                            f"{list(SPECIAL_KEYS)}")
        wheres = spec.get("in", "view") if isinstance(spec, dict) else None
        if wheres is None or any(w not in WHERE for w in (wheres if isinstance(wheres, list) else [wheres])):
            problems.append(f"visibility of {key!r}: 'in' must name views among {list(WHERE)}")
    if t.media.get("markers", False) not in (True, False, *MARKER_STYLES):
        problems.append(f"media markers must be true, false or one of {list(MARKER_STYLES)}, not "
                        f"{t.media.get('markers')!r}")
    if t.media.get("layout") not in LAYOUTS:
        problems.append(f"unknown media layout {t.media.get('layout')!r}")
    if kind == "fixed" and len(set(t.options.get("values") or [])) < 2:
        problems.append("fixed options need two or more distinct values")
    elif LAYOUTS[t.media["layout"]] != t.scope:
        problems.append(f"{t.media['layout']} media needs {LAYOUTS[t.media['layout']]} scope")
    if rule is not None:
        problems += convention_problems(t.model_dump(), rule.conventions_of(t.model_dump()))
    return Outcome(not problems, "; ".join(problems))


# -- items ----------------------------------------------------------------------------------


# -- package --------------------------------------------------------------------------------


