"""Admission every template shares, whatever its answer rule: what the model sees must support
the question.

- Every object a question or its options names is a referent: it has a colour name read from
  its pixels that no other object of its category shares, and in each view the item shows
  where it can be made out, its pixels read that colour.
- A template's ``visibility`` declares where each slot must be seen, e.g.
  ``{object: {in: [first, last], min_pixels: 120, max_truncation: 0.25}}``. ``in`` names the
  views: ``view`` (the bound view), ``first``/``last`` (frames), ``all``/``any`` (every / one
  shown view), ``marked`` (the view with the markers, or the overview). Two keys are not
  slots: ``embodiment`` (``{body: arm, min_pixels: 400}``: the robot itself is in the bound
  view) and ``landmarks`` (``{in: [first, last], count: 1, min_pixels: 150}``: that many
  objects seen in every one of those views).
"""

from __future__ import annotations

import string
from typing import Any

from forge.artifact_types import EvidenceRecord
from forge_skills.synthesize.answer_rules import Derivation, FactTable, rule_for
from forge_skills.structure.appearance import MIN_NAMED_PIXELS

NAMED_OPTION_KINDS = ("objects", "matching")
OBJECT_SLOT_KINDS = ("object", "object_set", "object_pair")
SPECIAL_KEYS = ("embodiment", "landmarks")
WHERE = ("view", "first", "last", "all", "any", "marked")


SINGULAR = "_singular"  # a category slot's field in a realization, in the singular ({category_singular})


def realization_slots(tpl: dict[str, Any]) -> set[str]:
    """Slots the realizations name (``{category_singular}`` names the ``category`` slot)."""
    fields = {f for text in tpl["realizations"] for _, f, _, _ in string.Formatter().parse(text) if f}
    return {f[: -len(SINGULAR)] if f.endswith(SINGULAR) and f[: -len(SINGULAR)] in tpl["slots"] else f for f in fields}


def named_slots(tpl: dict[str, Any]) -> list[str]:
    """Slots whose objects appear by name in the question or the options."""
    named = realization_slots(tpl)
    if tpl["options"].get("kind") in NAMED_OPTION_KINDS:
        named |= {s for s, d in tpl["slots"].items() if d.get("kind") in ("object_set", "object_pair")}
    return sorted(s for s in named if tpl["slots"].get(s, {}).get("kind") in OBJECT_SLOT_KINDS)


def slot_names(value: Any) -> list[str]:
    return [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)]


def shown_views(ft: FactTable, tpl: dict[str, Any], view: int | None, slots: dict[str, Any]) -> list[int]:
    """The views the item's media show, in display order."""
    layout = tpl["media"].get("layout", "single_view")
    if layout == "frames":
        frames = ft.frames()
        if "window" in slots:
            frames = frames[slots["window"][0]: slots["window"][1] + 1]
        return frames
    if layout == "first_last":
        frames = ft.frames()
        return [frames[0], frames[-1]] if frames else []
    if layout == "top_down_forward":
        return ft.views_with_role(["overview"])[:1] + ([slots["frame"]] if "frame" in slots else [])
    if layout == "multi_view":
        return list(slots["pair"]) if "pair" in slots else list(ft.views)
    return [view] if view is not None else []


def _where(ft: FactTable, tpl: dict[str, Any], view: int | None, slots: dict[str, Any], spec: Any) -> tuple[list[int], bool]:
    """(views, every?): the views a visibility rule names, and whether all of them must hold."""
    shown = shown_views(ft, tpl, view, slots)
    frames = ft.frames()
    views: list[int] = []
    every = True
    for key in spec if isinstance(spec, list) else [spec]:
        if key == "view":
            views += [view] if view is not None else shown[:1]
        elif key == "first":
            views += [shown[0] if tpl["media"].get("layout") == "frames" and shown else frames[0]] if frames else []
        elif key == "last":
            views += [shown[-1] if tpl["media"].get("layout") == "frames" and shown else frames[-1]] if frames else []
        elif key == "all":
            views += shown
        elif key == "any":
            views += shown
            every = False
        elif key == "marked":
            overview = ft.views_with_role(["overview"])
            views += overview[:1] if tpl["media"].get("layout") == "top_down_forward" else ([view] if view is not None else [])
        else:
            raise ValueError(f"template {tpl.get('id')!r}: visibility 'in' must be one of {WHERE}, not {key!r}")
    return list(dict.fromkeys(views)), every


def _seen(ft: FactTable, obj: str, v: int, rule: dict[str, Any]) -> str | None:
    f = ft.fact(obj, v)
    need = int(rule.get("min_pixels", 1))
    if f.visible_pixels < need:
        return f"{obj} shows {f.visible_pixels} px in view {v} (needs {need})"
    cut = rule.get("max_truncation")
    if cut is not None and f.truncation is not None and f.truncation > float(cut):
        return f"{obj} is {f.truncation:.0%} outside view {v} (at most {float(cut):.0%})"
    return None


def visibility_problem(ft: FactTable, tpl: dict[str, Any], view: int | None, slots: dict[str, Any]) -> str | None:
    for key, rule in (tpl.get("visibility") or {}).items():
        if key == "embodiment" or "body" in rule:
            # a static body the question names or needs: the arm for reach, the table objects stand on
            v = view if view is not None else (shown_views(ft, tpl, view, slots) or [None])[0]
            body = rule.get("body", "arm")
            px = ft.view(v).body_pixels.get(body, 0) if v is not None else 0
            if px < int(rule.get("min_pixels", 1)):
                why = "reach cannot be judged" if key == "embodiment" else "the question names it"
                return f"the {body} shows {px} px in the view (needs {rule.get('min_pixels', 1)}): {why}"
            continue
        views, every = _where(ft, tpl, view, slots, rule.get("in", "view"))
        if key == "landmarks":
            common = [o for o in ft.objects if all(_seen(ft, o, v, rule) is None for v in views)]
            if len(common) < int(rule.get("count", 1)):
                return f"{len(common)} object(s) seen in every one of views {views} (needs {rule.get('count', 1)})"
            continue
        if key not in slots:
            raise ValueError(f"template {tpl.get('id')!r}: visibility names {key!r}, which is not a slot")
        for obj in slot_names(slots[key]):
            problems = [p for v in views for p in [_seen(ft, obj, v, rule)] if p]
            if (every and problems) or (not every and len(problems) == len(views)):
                return problems[0] if problems else f"{obj}: no view to be seen in"
    return None


def naming_problem(ft: FactTable, tpl: dict[str, Any], view: int | None, slots: dict[str, Any]) -> str | None:
    """A named object that may not be named, or whose pixels in a shown view read another colour."""
    shown = shown_views(ft, tpl, view, slots)
    for slot in named_slots(tpl):
        for name in slot_names(slots.get(slot)):
            obj = ft.object(name)
            if not obj.referable:
                return f"{name} cannot be named: {obj.naming}"
            if not obj.color:
                continue  # a source that names objects without colour (real-image labels)
            for v in shown:
                f = ft.fact(name, v)
                if f.visible_pixels >= MIN_NAMED_PIXELS and f.colour != obj.color:
                    return f"the {name} reads {f.colour or 'no clear colour'} in view {v}"
    return None


def completeness_problem(ft: FactTable, tpl: dict[str, Any]) -> str | None:
    if rule_for(tpl).complete_labels and not ft.evidence.labels_complete:
        return "the source's labels are not exhaustive, so a count or an absence cannot be shown from them"
    return None


def admission_problem(ft: FactTable, tpl: dict[str, Any], view: int | None, slots: dict[str, Any]) -> str | None:
    """Why these slots may not make an item of this template, or None."""
    return (completeness_problem(ft, tpl) or naming_problem(ft, tpl, view, slots)
            or visibility_problem(ft, tpl, view, slots))


def question_kinds(ft: FactTable, tpl: dict[str, Any], slots: dict[str, Any]) -> list[str]:
    """Categories of what the question itself names (its object and category slots)."""
    kinds = []
    for slot in sorted(realization_slots(tpl)):
        kind = tpl["slots"].get(slot, {}).get("kind")
        if kind in OBJECT_SLOT_KINDS:
            kinds += [ft.category(n) for n in slot_names(slots.get(slot))]
        elif kind == "category":
            kinds += slot_names(slots.get(slot))
    return sorted(kinds)


def derive(evidence: EvidenceRecord, view: int | None, slots: dict[str, Any], template: dict[str, Any]) -> Derivation:
    """The answer the evidence implies for these slots, or None with the reason: the rule's own
    admission first, then what every template shares (named referents, declared visibility)."""
    ft = FactTable(evidence)
    answer, why = rule_for(template).derive(ft, view, slots, template)
    if answer is None:
        return answer, why
    problem = admission_problem(ft, template, view, slots)
    return (None, {"reason": problem}) if problem else (answer, why)
