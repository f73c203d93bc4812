"""Contract predicates for the built-in artifact types (registered by name, used in
``contracts/*.yaml``). Each returns pass/fail with a diagnostic; the engine decides."""

from __future__ import annotations

import re
import string
from functools import lru_cache
from typing import Any

import numpy as np

from forge.artifact_types import Package
from forge_skills.oe.types import (Binding, Blueprint, EvidenceRecord, ImageRecord, ImageUnit, OEItem, SceneSpec,
                                   SourceRecord, Template)
from forge.contracts import CheckContext, Outcome, check
from forge.vocabulary import capabilities, question_type, question_types
from forge_skills.package import scorer as oe_scorer
from forge_skills.package.media import MARKER_STYLES
from forge_skills.synthesize.admission import SINGULAR, SPECIAL_KEYS, WHERE
from forge_skills.synthesize.admission import derive
from forge_skills.synthesize.answer_rules import rule_for
from forge_skills.synthesize.conventions import statements, template_problems as convention_problems
from forge_skills.structure.appearance import MIN_NAMED_PIXELS, NAMES as COLOUR_NAMES
from forge_skills.synthesize.rules_scene import plural

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


def _rederive(b: Binding, ctx: CheckContext, claimed: str, who: str) -> Outcome:
    """Derive the answer again from the binding's evidence and template; compare with ``claimed``."""
    tpl = ctx.load(b.template_artifact)
    answer, why = derive(ctx.load(b.evidence), b.view, b.slots, tpl.model_dump())
    if answer is None:
        return Outcome(False, f"evidence does not determine a unique answer: {why.get('reason')}")
    return Outcome(answer == claimed, "" if answer == claimed else f"evidence gives {answer!r}, {who} says {claimed!r}")


@check("binding_admissible")
def binding_admissible(b: Binding, ctx: CheckContext) -> Outcome:
    """The registered evidence for these slots clears the admission thresholds."""
    tpl = ctx.load(b.template_artifact)
    answer, why = derive(ctx.load(b.evidence), b.view, b.slots, tpl.model_dump())
    return Outcome(answer is not None, "" if answer is not None else f"below admission: {why.get('reason')}")


@check("binding_answer_matches")
def binding_answer_matches(b: Binding, ctx: CheckContext) -> Outcome:
    """Re-deriving the answer from the registered evidence gives the bound answer."""
    return _rederive(b, ctx, b.answer, "binding")


@check("binding_references")
def binding_references(b: Binding, ctx: CheckContext) -> Outcome:
    """Every object slot names an object of the evidence record; view slots and the view exist."""
    ev = ctx.load(b.evidence)
    tpl = ctx.load(b.template_artifact)
    names = {o.name for o in ev.objects}
    views = {v.index for v in ev.views}
    missing: list[Any] = []
    # A category slot names a kind of the scene, or one of the rule's vocabulary that complete
    # labels rule out (a presence question answered "no").
    categories = {plural(o.category) for o in ev.objects} | {plural(c) for c in tpl.answer_rule.get("categories", [])}
    for slot, value in b.slots.items():
        values = value if isinstance(value, list) else [value]
        kind = tpl.slots.get(slot, {}).get("kind")
        if kind == "frame_window":
            missing += [v for v in values if not (isinstance(v, int) and 0 <= v < len(ev.views))]
            continue
        pool = views if kind in ("view_pair", "view") else categories if kind == "category" else names
        missing += [v for v in values if v not in pool]
    bad_view = b.view is not None and b.view not in views
    return Outcome(not missing and not bad_view, f"unknown objects or views {missing}" if missing else
                   ("unknown view" if bad_view else ""))


# -- items ----------------------------------------------------------------------------------


@check("item_answer_in_options")
def item_answer_in_options(item: OEItem, ctx: CheckContext) -> Outcome:
    """The key is well formed for the question type and points at the answer."""
    problems = []
    values = item.values()
    qt = item.question_type
    if qt == "numeric":
        if item.answer_value is None or f"{item.answer_value:g}" != item.answer:
            problems.append("numeric answer value does not match the key")
        return Outcome(not problems, "; ".join(problems))
    if question_type(qt).answer_form == "value":  # a value its protocol parses: the key must parse as a response
        if item.options or not item.answer:
            problems.append("a value answer has no options and a non-empty key")
        return Outcome(not problems, "; ".join(problems))
    if len(item.options) < 2:
        problems.append("fewer than two options")
    if len({o.lower() for o in item.options}) != len(item.options):
        problems.append("duplicate options")
    if len(values) != len(item.options):
        problems.append("option values and displayed options differ in number")
    elif qt == "matching":
        idx = item.answer_indices or []
        if len(idx) != len(values) or not all(0 <= j < len(item.targets) for j in idx):
            problems.append("every option needs one target")
        elif "; ".join(sorted(f"{values[i]} -> {item.targets[j]}" for i, j in enumerate(idx))) != item.answer:
            problems.append("the matching does not match the key")
    elif qt in ("multiple_choice", "ordered_list"):
        idx = item.answer_indices or []
        if not idx or len(set(idx)) != len(idx) or not all(0 <= i < len(values) for i in idx):
            problems.append("answer indices are not distinct option indices")
        elif qt == "ordered_list" and (len(idx) != len(values) or " > ".join(values[i] for i in idx) != item.answer):
            problems.append("the order does not match the key")
        elif qt == "multiple_choice" and ", ".join(sorted(values[i] for i in idx)) != item.answer:
            problems.append("the selected options do not match the key")
    elif item.answer_index is None or not (0 <= item.answer_index < len(values)) or values[item.answer_index] != item.answer:
        problems.append("answer_index does not point at the answer")
    elif qt == "interval_choice":
        lo, hi = item.scoring.get("intervals", [[None, None]] * len(values))[item.answer_index]
        if item.answer_value is None or lo is None or not lo <= item.answer_value <= hi:
            problems.append("the keyed interval does not contain the answer value")
    return Outcome(not problems, "; ".join(problems))


@check("item_answer_derivable")
def item_answer_derivable(item: OEItem, ctx: CheckContext) -> Outcome:
    """The item's key equals the answer re-derived from evidence through its binding."""
    b = ctx.load(item.binding)
    if b.evidence != item.evidence:
        return Outcome(False, "item and binding name different evidence records")
    if item.question_type == "interval_choice":
        claimed = f"{item.answer_value:g}" if item.answer_value is not None else ""
    else:
        claimed = item.answer
    return _rederive(b, ctx, claimed, "key")


@check("item_scorer_executes")
def item_scorer_executes(item: OEItem, ctx: CheckContext) -> Outcome:
    """The scorer gives 1 to the key, 0 to wrong responses and to junk."""
    key = item.key()
    qt = question_type(item.question_type)
    gold = qt.gold_response(item) if qt.gold_response else item.answer
    if gold is None:
        return Outcome(False, "no answer to score")
    problems = []
    if oe_scorer.score_item(key, gold) != 1.0:
        problems.append("key does not score 1")
    if item.answer_index is not None and oe_scorer.score_item(key, item.options[item.answer_index]) != 1.0:
        problems.append("the correct option's text does not score 1")
    for wrong in (qt.wrong_responses(item) if qt.wrong_responses else []):
        if oe_scorer.score_item(key, wrong) != 0.0:
            problems.append(f"wrong response {wrong!r} scores above 0")
    if oe_scorer.score_item(key, "I cannot tell") != 0.0 or oe_scorer.score_item(key, None) != 0.0:
        problems.append("invalid response scores above 0")
    return Outcome(not problems, "; ".join(problems))


_HIDDEN = re.compile(r"(\burdf\b|\.urdf|\bbody\s*\d+|\bseg(mentation)?\b|\bdepth map\b|[0-9a-f]{16,}|\{|\})", re.I)


@check("item_no_leakage")
def item_no_leakage(item: OEItem, ctx: CheckContext) -> Outcome:
    """Visible text holds no ids or internals, and no choice question states its own answer."""
    texts = [item.question, *item.options, item.response_format]
    leaks = [m.group(0) for t in texts for m in [_HIDDEN.search(t)] if m]
    q = item.question.lower()
    # Naming the answer is a leak unless the question names every option alike ("A or B?").
    if item.question_type == "single_choice" and item.answer.lower() in q \
            and not all(o.lower() in q for o in item.options):
        leaks.append(f"answer {item.answer!r} appears in the question")
    return Outcome(not leaks, f"visible text leaks: {leaks}" if leaks else "")


@check("item_states_assumptions")
def item_states_assumptions(item: OEItem, ctx: CheckContext) -> Outcome:
    """Every convention the template's key relies on is stated in the item's question or its
    instruction line, as the evidence has it now."""
    b = ctx.load(item.binding)
    tpl = ctx.load(b.template_artifact).model_dump()
    missing = [c for c in rule_for(tpl).conventions_of(tpl) if c not in (tpl.get("assumptions") or {})]
    if missing:
        return Outcome(False, f"the template states no {missing} convention")
    shown = b.presentation.get("determinant", {}).get("views") or _shown(item, ctx)
    stated, why = statements(ctx.load(item.evidence), tpl, shown)
    if why:
        return Outcome(False, why)
    text = f"{item.question} {item.instruction}"
    unstated = [t for t in stated if t not in text]
    return Outcome(not unstated, f"not stated to the model: {unstated[:2]}" if unstated else "")


def _shown(item: OEItem, ctx: CheckContext) -> list[int]:
    ev = ctx.load(item.evidence)
    sources = set(item.media_sources)
    return [v.index for v in ev.views if v.rgb in sources]


@check("item_options_plain")
def item_options_plain(item: OEItem, ctx: CheckContext) -> Outcome:
    """Every option and target is a bare referent (an object, a declared value or label, a view
    or frame label): no option text can single out the answer."""
    ev = ctx.load(item.evidence)
    opts = ctx.load(item.binding).presentation["options"]
    allowed = {o.name for o in ev.objects} | {"yes", "no"}
    allowed |= set(opts.get("values", [])) | set(opts.get("labels", []))
    allowed |= {label for _, _, label in opts.get("intervals", [])}
    allowed |= {f"View {k + 1}" for k in range(len(ev.views))} | {f"Frame {k + 1}" for k in range(len(ev.views))}
    extra = [o for o in [*item.options, *item.targets] if o not in allowed]
    return Outcome(not extra, f"options carry text beyond their referents: {extra[:3]}" if extra else "")


@check("item_referents_match_pixels")
def item_referents_match_pixels(item: OEItem, ctx: CheckContext) -> Outcome:
    """Every object named in a visible field is a referent whose colour, as read from its pixels
    in each shown view where it can be made out, is the colour it is named by; no text names a
    coloured object the evidence does not register."""
    ev = ctx.load(item.evidence)
    shown = [v.index for v in ev.views if v.rgb in set(item.media_sources)]
    facts = {(f.object, f.view): f for f in ev.facts}
    texts = [item.question, *item.options, *item.targets]
    problems = []
    named = [o for o in ev.objects if any(_names(t, o.name) for t in texts)]
    for o in named:
        if not o.referable:
            problems.append(f"{o.name!r} is named but may not be: {o.naming}")
            continue
        if not o.color:
            continue
        for v in shown:
            f = facts.get((o.name, v))
            if f is not None and f.visible_pixels >= MIN_NAMED_PIXELS and f.colour != o.color:
                problems.append(f"the {o.name} reads {f.colour or 'no clear colour'} in view {v}")
    known = {o.name.lower() for o in named}
    categories = {o.category for o in ev.objects}
    for phrase in _coloured_phrases(texts, categories):
        if phrase not in known and not any(phrase in k for k in known):
            problems.append(f"{phrase!r} names no registered object")
    return Outcome(not problems, "; ".join(problems[:3]))


def _names(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.I) is not None


def _coloured_phrases(texts: list[str], categories: set[str]) -> list[str]:
    """'<colour> <category>' phrases in the texts (lower case)."""
    if not categories:
        return []
    nouns = sorted({w for c in categories for w in (c, plural(c))}, key=len, reverse=True)
    pattern = re.compile(rf"\b({'|'.join(COLOUR_NAMES)})\s+({'|'.join(map(re.escape, nouns))})\b", re.I)
    return [f"{m.group(1)} {m.group(2)}".lower() for t in texts for m in pattern.finditer(t)]


@check("item_wording_agrees")
def item_wording_agrees(item: OEItem, ctx: CheckContext) -> Outcome:
    """Number agreement between cues and the category nouns of the scene, and a/an."""
    from forge_skills.synthesize.wording import agreement_problems

    ev = ctx.load(item.evidence)
    singulars = {c.replace("-", " ") for c in {o.category for o in ev.objects}} | {"object"}
    plurals = {plural(c) for c in singulars}
    problems = agreement_problems(item.question, singulars, plurals)
    return Outcome(not problems, "; ".join(problems[:3]))


@check("media_processed_rgb")
def media_processed_rgb(item: OEItem, ctx: CheckContext, min_colors: int = 48) -> Outcome:
    """Every visible medium is a decodable RGB image, not a raw depth or segmentation map."""
    problems = []
    # A flat rendered scene (bare floor and sky) can have few colours itself: the bar is the
    # lower of ``min_colors`` and half the colours of the richest source image.
    sources = [_media_stats(ctx.store.blob_path(b))[2] for b in item.media_sources if ctx.store.has_blob(b)]
    min_colors = min(min_colors, max(2, max(sources, default=min_colors) // 2))
    for m in item.media:
        mode, grey, colors = _media_stats(ctx.store.blob_path(m.blob))
        if mode != "RGB":
            problems.append(f"{m.blob[:10]}: mode {mode}, expected RGB")
        elif grey:
            problems.append(f"{m.blob[:10]}: grey-scale (looks like a depth map)")
        elif colors < min_colors:
            problems.append(f"{m.blob[:10]}: only {colors} colours (looks like a label map)")
    return Outcome(not problems, "; ".join(problems))


COLOUR_COUNT_CAP = 256


@lru_cache(maxsize=4096)
def _media_stats(path) -> tuple[str, bool, int]:
    """(mode, grey-scale?, distinct colours) of an image blob; blobs are immutable, so cached."""
    from PIL import Image

    with Image.open(path) as img:
        mode = img.mode
        if mode != "RGB":
            return mode, False, 0
        a = np.asarray(img)
    grey = bool(np.array_equal(a[..., 0], a[..., 1]) and np.array_equal(a[..., 1], a[..., 2]))
    packed = ((a[..., 0].astype(np.uint32) << 16) | (a[..., 1].astype(np.uint32) << 8) | a[..., 2]).ravel()
    # Colours are counted up to COLOUR_COUNT_CAP (every bar the checks set is below it): a
    # sample of the pixels usually shows that many already, and the full count is rarely needed.
    sample = len(np.unique(packed[::7]))
    if sample >= COLOUR_COUNT_CAP:
        return mode, grey, COLOUR_COUNT_CAP
    return mode, grey, min(COLOUR_COUNT_CAP, int(len(np.unique(packed))))


@check("media_shows_evidence")
def media_shows_evidence(item: OEItem, ctx: CheckContext) -> Outcome:
    """Every view the binding derives the answer from is among the sources of the media."""
    b = ctx.load(item.binding)
    needed = {m["rgb"] for m in b.presentation["media"]}
    missing = needed - set(item.media_sources)
    return Outcome(not missing, f"{len(missing)} view(s) behind the answer are not shown" if missing else "")


@check("realization_natural")
def realization_natural(item: OEItem, ctx: CheckContext) -> Outcome:
    """The question reads as one well-formed question or instruction (built-in verifier backend)."""
    words = item.question.split()
    problems = []
    if not item.question.strip().endswith(("?", ".")):
        problems.append("does not end as a question or an instruction")
    if not 4 <= len(words) <= 40:
        problems.append(f"{len(words)} words")
    if re.search(r"\b(\w+) \1\b", item.question, re.I):
        problems.append("repeated word")
    return Outcome(not problems, "; ".join(problems), backend="builtin-verifier")


# -- package --------------------------------------------------------------------------------


@check("package_resolvable")
def package_resolvable(pkg: Package, ctx: CheckContext) -> Outcome:
    """Every file resolves to a stored blob and the manifest lists every other file."""
    import json

    # Present is what this requirement asks; export checks every file's bytes as it copies them.
    missing = [p for p, h in pkg.files.items() if not ctx.store.blob_path(h).exists()]
    manifest = json.loads(ctx.store.get_blob(pkg.manifest))
    listed = set(manifest["files"])
    expected = set(pkg.files) - {"manifest.json"}
    problems = []
    if missing:
        problems.append(f"missing blobs for {missing[:3]}")
    if listed != expected:
        problems.append("manifest does not list exactly the package files")
    if next(iter(manifest)) != "format_version":
        problems.append("manifest does not start with format_version")
    for listing, count in (("items.jsonl", "items"), ("tasks.jsonl", "tasks")):  # what the track releases
        if listing in pkg.files:
            lines = ctx.store.get_blob(pkg.files[listing]).decode().count("\n")
            if lines != pkg.counts.get(count):
                problems.append(f"{listing} has {lines} lines, counts say {pkg.counts.get(count)}")
    return Outcome(not problems, "; ".join(problems))


@check("response_matrix_complete")
def response_matrix_complete(pkg: Package, ctx: CheckContext) -> Outcome:
    """Gate E's records: every panel member answered every released item once, each response
    attributed to a model id and scored in [0, 1], an invalid one scored 0."""
    import json

    from forge_skills.package.panel import iter_responses, matrix_problems
    from forge_skills.package.report_data import PANEL_FILE, RESPONSES_FILE

    if RESPONSES_FILE not in pkg.files:
        return Outcome(True, "no panel records (the package is not assessed yet)")
    try:
        panel = json.loads(ctx.store.get_blob(pkg.files[PANEL_FILE]))
        listing, key = ("items.jsonl", "id") if "items.jsonl" in pkg.files else ("tasks.jsonl", "task_id")
        items = [json.loads(line)[key] for line in ctx.store.get_blob(pkg.files[listing]).decode().splitlines()
                 if line.strip()]
        problems = matrix_problems(panel.get("members", []), items,
                                   iter_responses(ctx.store.get_blob(pkg.files[RESPONSES_FILE])))
    except (KeyError, ValueError) as exc:
        return Outcome(False, f"panel records unreadable: {type(exc).__name__}: {exc}")
    return Outcome(not problems, "; ".join(problems[:5]))
