"""S4: load expert templates, bind them to evidence, and realize candidate OE items."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from pydantic import BaseModel, Field

from forge_skills.oe.types import Binding, Blueprint, EvidenceRecord, MediaRef, OEItem, Template
from forge_skills.oe.synthesize.slots import chosen_class, slot_objects
from forge.codeversion import data_files_version, data_identity
from forge.errors import DefinitionError
from forge.keys import digest, file_digest
from forge.skills import LOCATION, Output, SkillContext, skill
from forge.vocabulary import answer_form, question_type
from forge_skills.oe.synthesize.admission import (SINGULAR, admission_problem, marker_geometry, marker_style, marks_of,
                                               question_kinds, shown_views)
from forge_skills.oe.synthesize.answer_rules import rule_for
from forge_skills.oe.synthesize.fact_table import Candidate, FactTable
from forge_skills.oe.synthesize.difficulty import BANDS
from forge_skills.oe.synthesize.marker_place import place_among
from forge_skills.oe.synthesize.conventions import instruction, statements
from forge_skills.oe.synthesize.rules_scene import singular
from forge_skills.oe.synthesize.media import (draw_markers, draw_scale_bar, marker_layout, panel, path_plot,
                                              primitive_marker)
from forge_skills.oe.synthesize.templates import read_template, template_code, template_path

SCENE_LAYOUTS = ("multi_view", "frames", "first_last", "top_down_forward")


class TemplateParams(BaseModel):
    template: str
    label: str
    path: str | None = Field(None, json_schema_extra=LOCATION)  # where the file is now, not part of its identity


def _template_reads(params: dict[str, Any]) -> dict[str, str]:
    """The template file and the registered code its items depend on (``template_code``)."""
    path = template_path(params)
    files = {f"template:{params['label']}": str(path)}
    try:
        files.update(template_code(read_template(path)))
    except DefinitionError:
        pass  # the skill itself reports the template's fault when it runs
    return files


@skill("synthesize.load_template", stage="S4", params=TemplateParams, reads=_template_reads)
def load_template(ctx: SkillContext, blueprint: Blueprint) -> list[Template]:
    """Read one expert template; emit it when the blueprint asks for its capability and type."""
    path = template_path(ctx.params.model_dump())
    tpl = read_template(path)
    wanted = [t.name for t in blueprint.templates]
    if wanted and tpl.id not in wanted:
        return []
    if not wanted and (tpl.capability not in blueprint.capabilities or tpl.question_type not in blueprint.question_types):
        return []
    # The code version is part of the template, so its bindings and items are rebuilt when a
    # rule, question type or protocol they depend on changes (and only theirs).
    code = digest(data_identity(data_files_version(template_code(tpl))))
    return [Template(**tpl.model_dump(), file=ctx.params.label, file_hash=file_digest(str(path)), code_version=code)]


def _applies(template: Template, evidence: EvidenceRecord) -> bool:
    roles = template.admission.get("view_roles")
    views = [v for v in evidence.views if roles is None or v.role in roles]
    return bool(views) and (template.scope == "view" or len(evidence.views) >= 2)


# Binding gives several times the bindings realization takes (54,000 for 10,000 items, about
# 10 KB each in memory): realization loads the ones it is given from the store.
@skill("synthesize.bind_template", stage="S4", applies=_applies, keep_outputs=False)
def bind_template(ctx: SkillContext, template: Template, evidence: EvidenceRecord) -> list[Binding]:
    """Fill the template's slots with admissible evidence, balancing the answers."""
    tpl = template.model_dump()
    rule = rule_for(tpl)
    ft = FactTable(evidence)
    views: list[int | None] = ft.views_with_role(template.admission.get("view_roles")) \
        if template.scope == "view" else [None]
    outputs = []
    picks = _candidate_rng(tpl, ctx.input_ids["evidence"])
    # Select-all answers take turns by how many they choose, as the balance gate counts them.
    turn = (lambda c: chosen_class(len(c.answer.split(", ")))) if answer_form(template.question_type) == "options" \
        else (lambda c: c.answer)
    for view in views:
        # A candidate is derived at most once: rating and binding share the derivation that
        # found it, or the one rating made. The memo holds the candidate itself, so no other
        # candidate can come to share its id while it is kept.
        derived: dict[int, tuple[Candidate, dict[str, Any]]] = {}

        def why_of(c: Candidate, v: int | None = view) -> dict[str, Any]:
            if c.why is not None:
                return c.why
            if id(c) not in derived:
                derived[id(c)] = (c, rule.derive(ft, v, c.slots, tpl)[1])
            return derived[id(c)][1]
        band = None if rule.difficulty is None else \
            (lambda c, v=view: rule.difficulty_of(why_of(c), tpl, ft, v))
        chosen = _select(rule.candidates(ft, view, tpl), template.max_per_evidence, picks,
                         lambda c, v=view: admission_problem(ft, tpl, v, c.slots) is None,
                         lambda c, v=view: _marker_place(ft, v, c), band, turn)
        for k, cand in enumerate(chosen):
            key = f"v{view if view is not None else 'all'}-{k}"
            # Consecutive scenes and views step through option orders, so answer positions
            # are balanced across a template by construction, not only in expectation.
            seed = evidence.scene_index * 97 + (view or 0) * 13 + k
            why = why_of(cand)
            outputs.append(Output(Binding(
                template=template.id, template_artifact=ctx.input_ids["template"], evidence=ctx.input_ids["evidence"],
                scene_index=evidence.scene_index, view=view, slots=cand.slots, answer=cand.answer,
                derivation={"rule": tpl["answer_rule"], "values": cand.values},
                admission_scores={"margin": round(float(cand.margin), 6)},
                variant=int(ctx.rng.integers(len(template.realizations))),
                presentation=presentation(template, evidence, ft, view, cand, ctx.input_ids["evidence"], seed, why),
                position_seed=seed, difficulty=rule.difficulty_of(why, tpl, ft, view),
            ), key=key))
    return outputs


# What a template asks, as opposed to how it words it: an edit to its realizations, stated
# conventions or version binds the same candidates, so its items keep their difficulty and its
# capability's band mix (and with it the allocation of the template's siblings) stays put.
_WORDING = ("realizations", "assumptions", "version", "file", "file_hash")


def _candidate_rng(tpl: dict[str, Any], evidence_id: str) -> np.random.Generator:
    """The generator that picks a template's candidates on one evidence record."""
    asks = {k: v for k, v in tpl.items() if k not in _WORDING}
    return np.random.default_rng(int(digest(asks, evidence_id)[:16], 16))


def _marker_place(ft: FactTable, view: int | None, cand: Candidate) -> str:
    """Where the answer's marker lies among the others (:func:`place_among`), for a question
    whose options are the labels of marked objects; "" for any other question."""
    marked = cand.slots.get("marked")
    answer = cand.answer
    if view is None or not isinstance(marked, list) or len(answer) != 1 or not "A" <= answer <= "Z":
        return ""
    i = ord(answer) - ord("A")
    centers = [ft.fact(o, view).center_2d for o in marked]
    if i >= len(marked) or any(c is None for c in centers):
        return ""
    return place_among([(float(c[0]), float(c[1])) for c in centers], i)


def _select(cands: list[Candidate], k: int, rng, admit, place=lambda c: None,
            band: Callable[[Candidate], str] | None = None,
            turn: Callable[[Candidate], str] = lambda c: c.answer) -> list[Candidate]:
    """Up to ``k`` admitted candidates, answers (by their class, ``turn``) taking turns (the
    balance gate evens them out over the template). One candidate per unordered object set: (a,
    b) and (b, a) are the same question. Admission is asked only of the candidates the turns
    reach (it reads pixels and visibility rules; most candidates are never needed). Where the
    options are marked objects, answers take turns by where their marker lies too (``place``):
    otherwise the nearer of two objects is mostly the lower marker, and the markers alone would
    answer. Within an answer, among the first few the difficulty bands take turns, the hardest
    first (``band``): a view holds a few demanding questions among many one-glance ones, and
    drawing at random would leave the mix little to choose from."""
    unique: dict[tuple, Candidate] = {}
    order = rng.permutation(len(cands)) if cands else []
    for i in order:
        c = cands[int(i)]
        unique.setdefault(_objects_key(c), c)
    groups: dict[str, list[Candidate]] = {}
    for c in unique.values():
        groups.setdefault(f"{turn(c)}|{place(c)}", []).append(c)
    if band is not None:
        # Rated within a window: rating every candidate derives each again, and a view's
        # grounding sets number in the thousands.
        window = max(8, BAND_WINDOW * k)
        groups = {a: _bands_take_turns(g[:window], band) + g[window:] for a, g in groups.items()}
    answers = sorted(groups)
    answers = [answers[int(i)] for i in rng.permutation(len(answers))]
    picked: list[Candidate] = []
    depth = 0
    while len(picked) < k and any(len(groups[a]) > depth for a in answers):
        for a in answers:
            if len(groups[a]) > depth and len(picked) < k and admit(groups[a][depth]):
                picked.append(groups[a][depth])
        depth += 1
    return picked


BAND_WINDOW = 4  # candidates per answer rated for their band, per item a view may give


def _objects_key(c: Candidate) -> tuple:
    return tuple(sorted(map(str, slot_objects(c.slots))))


def _bands_take_turns(cands: list[Candidate], band: Callable[[Candidate], str]) -> list[Candidate]:
    by_band: dict[str, list[Candidate]] = {}
    for c in cands:
        by_band.setdefault(band(c), []).append(c)
    lists = [by_band[b] for b in reversed(BANDS) if b in by_band]
    return [x[d] for d in range(max((len(x) for x in lists), default=0)) for x in lists if len(x) > d]


def presentation(template: Template, evidence: EvidenceRecord, ft: FactTable, view: int | None,
                 cand: Candidate, evidence_id: str, seed: int = 0, why: dict[str, Any] | None = None) -> dict[str, Any]:
    """What realization needs. A rule's derivation (``why``) may carry ``markers`` it draws itself
    (points, boxes, arrows, masks: ``media.primitive_marker``) and a hidden ``payload`` for the
    key (a mask, a pose), which only the answer key ships."""
    if why is None:
        why = cand.why if cand.why is not None else rule_for(template.model_dump()).derive(
            ft, view, cand.slots, template.model_dump())[1]
    layout = template.media.get("layout", "single_view")
    extra: dict[str, Any] = {}
    geometry: list[dict[str, Any]] = []
    if layout == "frames":
        frames = ft.frames()
        if "window" in cand.slots:  # a run of frames, relabelled from 1
            frames = frames[cand.slots["window"][0]: cand.slots["window"][1] + 1]
        media = [{"view": i, "rgb": ft.view(i).rgb, "label": f"Frame {k + 1}"} for k, i in enumerate(frames)]
        extra["frame_labels"] = [m["label"] for m in media]
    elif layout == "first_last":
        frames = ft.frames()
        media = [{"view": frames[0], "rgb": ft.view(frames[0]).rgb, "label": "First frame"},
                 {"view": frames[-1], "rgb": ft.view(frames[-1]).rgb, "label": "Last frame"}]
        if template.media.get("path_plot"):
            extra["path"] = [ft.view(i).camera_position[:2] for i in frames]
    elif layout == "top_down_forward":
        overview = ft.views_with_role(["overview"])[0]
        frame = cand.slots["frame"]
        media = [{"view": overview, "rgb": ft.view(overview).rgb, "label": "Top-down view"},
                 {"view": frame, "rgb": ft.view(frame).rgb, "label": "Forward view"}]
        extra["view_markers"] = {"0": marker_layout(marks_of(ft, {"A": cand.slots["object"]}, overview), seed)}
        geometry = marker_geometry(extra["view_markers"]["0"], ft.view(overview))
    elif layout == "multi_view":
        shown = [next(v for v in evidence.views if v.index == i) for i in cand.slots["pair"]] \
            if "pair" in cand.slots else list(evidence.views)
        media = [{"view": v.index, "rgb": v.rgb, "label": f"View {i + 1}"} for i, v in enumerate(shown)]
    else:
        v = next(v for v in evidence.views if v.index == view)
        media = [{"view": v.index, "rgb": v.rgb, "label": "image"}]
    markers: list[dict[str, Any]] = []
    if template.media.get("markers"):
        labels = template.options.get("labels", ["A", "B"])
        markers = marker_layout(marks_of(ft, dict(zip(labels, cand.slots["marked"])), view), seed,
                                marker_style(template.model_dump(include={"media"})))
        geometry = marker_geometry(markers, ft.view(view))
    drawn = why.get("markers") or []
    if drawn:  # the rule's own markers, after the object markers (one image only)
        markers = markers + [primitive_marker(spec, seed + k) for k, spec in enumerate(drawn)]
        geometry = marker_geometry(markers, ft.view(view if view is not None else media[0]["view"]))
    if why.get("payload"):
        extra["payload"] = why["payload"]
    if template.media.get("scale_bar") and evidence.metres_per_pixel:
        extra["scale_bar"] = scale_bar_spec(evidence.metres_per_pixel, media[0]["view"], evidence)
    for m in media:
        recipe = ft.view(m["view"]).recipe
        if recipe is not None:
            m["recipe"] = recipe
    tpl = template.model_dump()
    stated, _ = statements(evidence, tpl, shown_views(ft, tpl, view, cand.slots))
    return {
        "realizations": template.realizations, "options": template.options, "media": media, "markers": markers,
        "assumptions": stated, "marker_geometry": geometry,
        "layout": layout, "question_type": template.question_type,
        "capability": template.capability, "scoring": template.scoring,
        "kinds": question_kinds(ft, tpl, cand.slots),
        # Where the answer's marker lies among the others: allocation keeps answers taking turns
        # by it, as binding did, so that drawing towards a band does not make the markers answer.
        "answer_place": _marker_place(ft, view, cand),
        # Items on the same media whose answers read the same quantity of nested referents
        # determine each other (the independence gate keeps one of them).
        "determinant": {"quantity": rule_for(tpl).quantity_of(tpl), "evidence": evidence_id,
                        "views": [] if rule_for(tpl).scene_fact else shown_views(ft, tpl, view, cand.slots),
                        **({"scene_fact": True} if rule_for(tpl).scene_fact else {}),
                        "whole_order": rule_for(tpl).whole_order or len(slot_objects(cand.slots)) <= 2,
                        "referents": sorted(v for v in slot_objects(cand.slots) if isinstance(v, str))},
        **extra,
    }


# About 5 ms an item in the driver; starting two workers takes about 2 s: a one-template edit's
# few hundred items are realized in the driver, a build's thousands by the running workers.
@skill("synthesize.realize_item", stage="S4", parallel=True, pool_from=1000)
def realize_item(ctx: SkillContext, binding: Binding) -> list[OEItem]:
    """Write the question, options and visible media of one item from its binding."""
    pres = binding.presentation
    names = {k: v for k, v in binding.slots.items() if isinstance(v, str)}
    names.update({f"{k}{SINGULAR}": singular(v) for k, v in list(names.items())})
    question = pres["realizations"][binding.variant].format(**names)
    kind = pres["options"].get("kind")
    qt = pres["question_type"]
    extra: dict = {}
    if kind == "objects":
        objs = sorted(binding.slots["objects"])
        options = _nth_permutation(objs, binding.position_seed + binding.variant)
        if qt == "ordered_list":
            extra["answer_indices"] = [options.index(n) for n in binding.answer.split(" > ")]
        elif qt == "multiple_choice":
            extra["answer_indices"] = sorted(options.index(n) for n in binding.answer.split(", "))
    elif kind == "fixed":
        options = _nth_permutation(sorted(pres["options"]["values"]), binding.position_seed + binding.variant)
    elif kind == "none":
        options = []
        if question_type(qt).answer_form == "number":
            extra["answer_value"] = float(binding.answer)
    elif kind == "intervals":
        intervals = pres["options"]["intervals"]
        options = [label for _, _, label in intervals]
        value = float(binding.answer)
        hit = [label for lo, hi, label in intervals if lo <= value <= hi]
        if len(hit) != 1:
            raise ValueError(f"template {binding.template!r}: {value} falls in {len(hit)} intervals")
        extra["answer_value"] = value
        answer_text = hit[0]
    elif kind == "yes_no":
        options = ["yes", "no"]
    elif kind == "labels":
        options = list(pres["options"].get("labels", ["A", "B"]))
    elif kind == "views":
        options = [m["label"] for m in pres["media"]]
    elif kind == "frames":
        options = list(pres["frame_labels"])
    elif kind == "matching":
        objs = sorted(binding.slots["objects"])
        options = _nth_permutation(objs, binding.position_seed + binding.variant)
        pairs = dict(part.split(" -> ") for part in binding.answer.split("; "))
        targets = list(pres["frame_labels"])
        extra["targets"] = targets
        extra["answer_indices"] = [targets.index(pairs[o]) for o in options]
    else:
        raise ValueError(f"template {binding.template!r}: unknown option kind {kind!r}")
    media = _media(ctx, pres)
    answer = answer_text if kind == "intervals" else binding.answer
    scoring = dict(pres["scoring"])
    if kind == "intervals":
        scoring["intervals"] = [[lo, hi] for lo, hi, _ in pres["options"]["intervals"]]
    return [OEItem(
        question=question, instruction=instruction(pres.get("assumptions", [])), options=options, media=media,
        response_format=question_type(qt).response_format,
        question_type=qt, capability=pres["capability"], answer=answer,
        answer_index=options.index(answer) if answer in options else None, **extra,
        scoring=scoring, template=binding.template, binding=ctx.input_ids["binding"],
        evidence=binding.evidence, derivation=binding.derivation,
        media_sources=[m["rgb"] for m in pres["media"]], option_values=list(options),
        kinds=list(pres.get("kinds", [])),
        determinant=dict(pres.get("determinant", {})),
        markers=list(pres.get("marker_geometry", [])), difficulty=binding.difficulty,
        payload=dict(pres.get("payload") or {}),
    )]


def _nth_permutation(items: list[str], n: int) -> list[str]:
    """The (n mod len!)-th permutation of ``items`` in lexicographic order."""
    pool = list(items)
    n %= math.factorial(len(pool))
    out = []
    for i in range(len(pool), 0, -1):
        idx, n = divmod(n, math.factorial(i - 1))
        out.append(pool.pop(idx))
    return out


# Panels are pure functions of their views, and blobs are content-addressed: all multi-view
# items of a scene share one panel, composed once per process.
_PANELS: dict[tuple, str] = {}


def _media(ctx: SkillContext, pres: dict[str, Any]) -> list[MediaRef]:
    sources = pres["media"]
    if pres["layout"] in SCENE_LAYOUTS:
        path = pres.get("path")
        markers = pres.get("view_markers") or {}
        key = (tuple((m["rgb"], m["label"]) for m in sources), repr(path), repr(markers))
        blob = _PANELS.get(key)
        if blob is None or not ctx.store.has_blob(blob):
            images = [ctx.get_image(m["rgb"]) for m in sources]
            images = [draw_markers(img, markers[str(i)]) if str(i) in markers else img for i, img in enumerate(images)]
            labels = [m["label"] for m in sources]
            if path:
                images.append(path_plot(path, images[0].shape[0]))
                labels.append("Path from above")
            blob = _PANELS[key] = ctx.put_png(panel(images, labels))
        return [MediaRef(blob=blob, role="views", label=", ".join(m["label"] for m in sources))]
    src = sources[0]
    recipe = _recipe(pres)
    if pres["markers"] or pres.get("scale_bar"):
        img = ctx.get_image(src["rgb"])
        if pres["markers"]:
            img = draw_markers(img, pres["markers"])
        if pres.get("scale_bar"):
            img = draw_scale_bar(img, pres["scale_bar"]["pixels"], pres["scale_bar"]["label"])
        label = "image with marked objects" if pres["markers"] else "image with a scale bar"
        return [MediaRef(blob=ctx.put_png(img), role="image", label=label, recipe=recipe)]
    return [MediaRef(blob=src["rgb"], role="image", label="image", recipe=recipe)]


def _recipe(pres: dict[str, Any]) -> dict[str, Any] | None:
    """How to rebuild the medium from dataset files whose pixels may not be redistributed."""
    views = [m.get("recipe") for m in pres["media"]]
    if not any(views):
        return None
    return {"views": views, "markers": pres["markers"], "scale_bar": pres.get("scale_bar"), "layout": pres["layout"]}


def scale_bar_spec(metres_per_pixel: float, view: int, evidence: EvidenceRecord) -> dict[str, Any]:
    """A round length near a quarter of the image width."""
    width = next(v.width for v in evidence.views if v.index == view)
    target = width / 4 * metres_per_pixel
    metres = max(1, min((1, 2, 5, 10, 20, 50, 100, 200, 500), key=lambda m: abs(m - target)))
    return {"pixels": round(metres / metres_per_pixel, 2), "label": f"{metres} m", "metres": metres}
