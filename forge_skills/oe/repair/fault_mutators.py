"""Defects a fault plan can plant (see ``forge.faults``): each mutator returns the corrupted
content, or None where the defect does not apply to this artifact."""

from __future__ import annotations

import numpy as np

from forge_skills.oe.types import Binding, EvidenceRecord, MediaRef, OEItem
from forge.faults import FaultContext, mutator
from forge_skills.oe.synthesize.fact_table import FactTable

PHRASE = " (this is the correct one)"


@mutator("wrong_answer_key")
def wrong_answer_key(item: OEItem, ctx: FaultContext) -> OEItem | None:
    """The key points at another option; evidence and binding stay correct."""
    if item.answer_index is None:
        return None
    k = (item.answer_index + 1) % len(item.options)
    return item.model_copy(update={"answer": item.values()[k], "answer_index": k})


@mutator("shortcut_phrase")
def shortcut_phrase(item: OEItem, ctx: FaultContext) -> OEItem | None:
    """An explanatory phrase on the correct option's text only; what it refers to is unchanged."""
    if item.answer_index is None:
        return None
    opts = list(item.options)
    opts[item.answer_index] = opts[item.answer_index] + PHRASE
    return item.model_copy(update={"options": opts, "option_values": item.values()})


@mutator("answer_first")
def answer_first(item: OEItem, ctx: FaultContext) -> OEItem | None:
    """The correct option always listed first: every item stays valid on its own, only the
    answer positions of the template give it away (a position shortcut)."""
    if item.answer_index is None or item.answer_indices:
        return None
    order = [item.answer_index] + [i for i in range(len(item.options)) if i != item.answer_index]
    values = item.values()
    return item.model_copy(update={"options": [item.options[i] for i in order],
                                   "option_values": [values[i] for i in order], "answer_index": 0})


@mutator("hidden_view_media")
def hidden_view_media(item: OEItem, ctx: FaultContext) -> OEItem | None:
    """A multi-view question shown with only its first view: the answer is not visible."""
    if len(item.media_sources) < 2:
        return None
    first = item.media_sources[0]
    return item.model_copy(update={"media": [MediaRef(blob=first, role="image", label="image")],
                                   "media_sources": [first]})


@mutator("raw_segmentation_media")
def raw_segmentation_media(item: OEItem, ctx: FaultContext) -> OEItem | None:
    """The visible image replaced by a colour-coded segmentation map (an internal representation)."""
    ev = ctx.load(item.evidence)
    b = ctx.load(item.binding)
    src = ctx.load(ev.source)
    view = b.view if b.view is not None else ev.views[0].index
    seg = ctx.store.get_arrays(src.arrays)[f"seg_{view}"]
    palette = np.array([[31 * i % 256, 97 * i % 256, 53 * i % 256] for i in range(256)], dtype=np.uint8)
    blob = ctx.store.put_png(palette[(seg.astype(np.int64) + 1) % 256])
    return item.model_copy(update={"media": [MediaRef(blob=blob, role="image", label="image")]})


@mutator("wrong_frame_join")
def wrong_frame_join(ev: EvidenceRecord, ctx: FaultContext) -> EvidenceRecord | None:
    """Facts joined to the wrong view: each view's measurements filed under the next view."""
    views = [v.index for v in ev.views]
    shift = {v: views[(i + 1) % len(views)] for i, v in enumerate(views)}
    facts = [f.model_copy(update={"view": shift[f.view]}) for f in ev.facts]
    return ev.model_copy(update={"facts": facts})


@mutator("below_admission")
def below_admission(b: Binding, ctx: FaultContext) -> Binding | None:
    """A slot filled with an object too little visible to admit any answer."""
    if b.view is None:
        return None
    ev = ctx.load(b.evidence)
    tpl = ctx.load(b.template_artifact)
    ft = FactTable(ev)
    floor = float(tpl.admission.get("min_visible_pixels", 1))
    faint = [o for o in ft.objects if ft.fact(o, b.view).visible_pixels < floor]
    slots = dict(b.slots)
    if not slots or not faint:
        return None
    key = next(iter(slots))
    current = slots[key]
    if isinstance(current, list):
        replaced = [faint[0]] + [o for o in current[1:] if o != faint[0]]
        if len(set(replaced)) != len(current):
            return None
        slots[key] = replaced
    else:
        if key == "object" and tpl.answer_rule.get("rule") == "visible" and ft.fact(faint[0], b.view).visible_pixels == 0:
            return None  # absent is admissible for visibility; only partial visibility is not
        slots[key] = faint[0]
    return b.model_copy(update={"slots": slots})


@mutator("systematic_wrong_answer")
def systematic_wrong_answer(b: Binding, ctx: FaultContext) -> Binding | None:
    """A broken answer program: every binding it makes carries a wrong answer."""
    pres = b.presentation
    kind = pres["options"].get("kind")
    if kind == "yes_no":
        values = ["yes", "no"]
    elif kind == "labels":
        values = list(pres["options"].get("labels", ["A", "B"]))
    elif kind == "views":
        values = [m["label"] for m in pres["media"]]
    else:
        values = list(b.slots.get("objects", []))
    wrong = [v for v in values if v != b.answer]
    return b.model_copy(update={"answer": wrong[0]}) if wrong else None


@mutator("misassigned_slot")
def misassigned_slot(b: Binding, ctx: FaultContext) -> Binding | None:
    """Compatible evidence put in the wrong slot: the slot names an object of another scene."""
    ev = ctx.load(b.evidence)
    present = {o.name for o in ev.objects}
    slots = dict(b.slots)
    if not slots:
        return None
    key = next(iter(slots))
    current = slots[key]
    first = current[0] if isinstance(current, list) else current
    color, _, category = first.partition(" ")
    stranger = next((f"{c} {category}" for c in ("white", "black", "purple", "orange", "green", "red", "blue", "yellow")
                     if f"{c} {category}" not in present), None)
    if stranger is None:
        return None
    slots[key] = [stranger, *current[1:]] if isinstance(current, list) else stranger
    return b.model_copy(update={"slots": slots})


@mutator("textured_tints")
def textured_tints(scene, ctx: FaultContext):
    """Scene objects keep their mesh texture under the tint (how scenes were rendered before
    names were read from pixels): a "white" duck renders yellow, a "blue" jenga block near-black."""
    objects = [o.model_copy(update={"texture": True}) for o in scene.objects]
    return scene.model_copy(update={"objects": objects})


@mutator("tint_names")
def tint_names(item: OEItem, ctx: FaultContext) -> OEItem | None:
    """The question and options name objects by the tint the scene asked for, not by what their
    pixels show (the old naming)."""
    ev = ctx.load(item.evidence)
    swaps = {o.name: o.source_name for o in ev.objects if o.source_name and o.source_name != o.name and o.referable}
    if not swaps:
        return None
    def swap(text: str) -> str:
        for new, old in swaps.items():
            text = text.replace(new, old)
        return text
    changed = item.model_copy(update={"question": swap(item.question), "options": [swap(o) for o in item.options],
                                      "option_values": [swap(o) for o in item.values()], "answer": swap(item.answer)})
    return changed if changed.question != item.question or changed.options != item.options else None
