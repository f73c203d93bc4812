"""Contract checks of OE bindings and items: the answer re-derived from evidence, the key against
its options, the scorer, leakage, stated assumptions, plain options, referents the pixels show,
wording, and the media."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import numpy as np

from forge.contracts import CheckContext, Outcome, check
from forge.vocabulary import question_type
from forge_skills.oe.types import Binding, OEItem
from forge_skills.scoring import scorer as oe_scorer
from forge_skills.oe.structure.appearance import MIN_NAMED_PIXELS
from forge_skills.oe.structure.appearance import NAMES as COLOUR_NAMES
from forge_skills.oe.synthesize.admission import derive
from forge_skills.oe.synthesize.answer_rules import rule_for
from forge_skills.oe.synthesize.conventions import statements
from forge_skills.oe.synthesize.rules_scene import plural


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


# Slot kinds that name something of the evidence: its objects, views, categories or parts.
REFERENCE_KINDS = ("object", "object_set", "object_pair", "view", "view_pair", "category", "part")


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
        if kind is not None and kind not in REFERENCE_KINDS:
            continue  # a value the rule drew (points on the image), not a reference to the evidence
        pool = (views if kind in ("view_pair", "view") else categories if kind == "category"
                else set(ev.parts) if kind == "part" else names)
        missing += [v for v in values if v not in pool]
    bad_view = b.view is not None and b.view not in views
    return Outcome(not missing and not bad_view, f"unknown objects or views {missing}" if missing else
                   ("unknown view" if bad_view else ""))


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
    from forge_skills.oe.synthesize.wording import agreement_problems

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
