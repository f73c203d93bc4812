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

import functools
import string
from typing import Any

from forge_skills.oe.types import EvidenceRecord
from forge_skills.oe.synthesize.answer_rules import rule_for
from forge_skills.oe.synthesize.rule_margins import Derivation
from forge_skills.oe.synthesize.fact_table import FactTable
from forge_skills.oe.synthesize.conventions import statements
from forge_skills.oe.synthesize.rules_scene import plural
from forge_skills.oe.synthesize.media import marker_layout
from forge_skills.oe.structure.appearance import MIN_NAMED_PIXELS

NAMED_OPTION_KINDS = ("objects", "matching")
OBJECT_SLOT_KINDS = ("object", "object_set", "object_pair")
SPECIAL_KEYS = ("embodiment", "landmarks")
WHERE = ("view", "first", "last", "all", "any", "marked")


SINGULAR = "_singular"  # a category slot's field in a realization, in the singular ({category_singular})


def realization_slots(tpl: dict[str, Any]) -> set[str]:
    """Slots the realizations name (``{category_singular}`` names the ``category`` slot)."""
    return set(_fields(tuple(tpl["realizations"]), frozenset(tpl["slots"])))


@functools.lru_cache(maxsize=1024)  # asked for every candidate binding of a template
def _fields(realizations: tuple[str, ...], slots: frozenset[str]) -> frozenset[str]:
    fields = {f for text in realizations for _, f, _, _ in string.Formatter().parse(text) if f}
    return frozenset(f[: -len(SINGULAR)] if f.endswith(SINGULAR) and f[: -len(SINGULAR)] in slots else f
                     for f in fields)


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
    return ft.makes_out(obj, v)


def _body_pixels(shown: dict[str, int], body: str) -> int:
    """Pixels of the static body named ``body``, or of the most visible of its numbered kind
    ("tray" for "tray 1" and "tray 2")."""
    if body in shown:
        return shown[body]
    return max((px for name, px in shown.items() if name.rsplit(" ", 1)[0] == body), default=0)


def visibility_problem(ft: FactTable, tpl: dict[str, Any], view: int | None, slots: dict[str, Any]) -> str | None:
    for key, rule in (tpl.get("visibility") or {}).items():
        if key == "embodiment" or "body" in rule:
            # a static body the question names or needs: the arm for reach, the table objects stand on
            v = view if view is not None else (shown_views(ft, tpl, view, slots) or [None])[0]
            body = rule.get("body", "arm")
            px = _body_pixels(ft.view(v).body_pixels, body) if v is not None else 0
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


def lookalike_problem(ft: FactTable, tpl: dict[str, Any], view: int | None, slots: dict[str, Any]) -> str | None:
    """A shown view where a named object is not clearly seen (absent, or only in part) but another
    object of its colour (or its kind, for a name without a colour) is, too little to tell them apart: a reader asked whether
    the yellow car is there could take a sliver of a yellow cube for it."""
    shown = shown_views(ft, tpl, view, slots)
    for slot in named_slots(tpl):
        for name in slot_names(slots.get(slot)):
            obj = ft.object(name)
            for v in shown:
                if ft.clear(name, v, MIN_NAMED_PIXELS):
                    continue
                for other in ft.objects:
                    if other == name or not ft.fact(other, v).visible_pixels or ft.clear(other, v, MIN_NAMED_PIXELS):
                        continue
                    # A sliver shows its colour before its shape: objects named by colour are
                    # confused by colour, the others by kind.
                    kin = ft.object(other).color == obj.color if obj.color else ft.category(other) == obj.category
                    if kin:
                        return f"in view {v} the {other}, seen only in part, could be taken for the {name}"
    return None


def kind_lookalike_problem(ft: FactTable, tpl: dict[str, Any], view: int | None, slots: dict[str, Any]
                           ) -> str | None:
    """A shown view holding another object of a named one's colour whose kind the source lists as
    looking like the named one's (a green jenga block beside "the green domino"): the name does
    not pick out one thing a person can see, and an absence would be keyed against what the
    reader takes for the object."""
    groups = [set(g) for g in (ft.evidence.referent_rules or {}).get("look_alike", [])]
    if not groups:
        return None
    shown = shown_views(ft, tpl, view, slots)
    for slot in named_slots(tpl):
        for name in slot_names(slots.get(slot)):
            obj = ft.object(name)
            kin = set().union(*(g for g in groups if obj.category in g)) - {obj.category}
            if not kin or not obj.color:
                continue
            alike = [o for o in ft.objects
                     if o != name and ft.category(o) in kin and ft.object(o).color == obj.color]
            for v in shown:
                for other in alike:
                    if ft.fact(other, v).visible_pixels:
                        return f"in view {v} the {other} looks like the {name} (the source lists a " \
                               f"{ft.category(other)} and a {obj.category} as look-alikes)"
    return None


def completeness_problem(ft: FactTable, tpl: dict[str, Any]) -> str | None:
    if rule_for(tpl).complete_labels and not ft.evidence.labels_complete:
        return "the source's labels are not exhaustive, so a count or an absence cannot be shown from them"
    return None


# An object whose centre lies inside another's ring competes for its label when it is at least
# this large beside the marked one (a row of ships, not the cars parked beside a plane), or is
# of the kind the question names (the ships inside a harbour's ring).
COMPETING_SHARE = 0.25


def marks_of(ft: FactTable, labelled: dict[str, str], view: int) -> list[dict[str, Any]]:
    """Label -> object, as the boxes, centroids and labelled outlines ``marker_layout`` places
    markers by."""
    return [{"label": label, "object": name, "bbox": ft.fact(name, view).bbox_2d,
             "centre": ft.fact(name, view).center_2d, "polygon": ft.object(name).attributes.get("polygon")}
            for label, name in labelled.items()]


def marker_style(tpl: dict[str, Any]) -> str:
    return "outline" if tpl["media"].get("markers") == "outline" else "ring"


def marker_geometry(markers: list[dict[str, Any]], view: Any) -> list[dict[str, Any]]:
    """The markers as a solver that sees no pixels would: label, centre and size (the ring's
    radius, or half the outline's larger side) as shares of the image."""
    out = []
    for m in markers:
        x0, y0, x1, y1 = m["box"]
        size = m["radius"] if "radius" in m else max(x1 - x0, y1 - y0) / 2
        out.append({"label": m["label"], "x": round(m["centre"][0] / view.width, 4),
                    "y": round(m["centre"][1] / view.height, 4), "r": round(size / view.height, 4)})
    return out


def _inside(marker: dict[str, Any], x: float, y: float) -> bool:
    if marker.get("style") != "outline":
        (cx, cy), r = marker["centre"], marker["radius"]
        return (x - cx) ** 2 + (y - cy) ** 2 < r * r
    pts = list(zip(marker["polygon"][0::2], marker["polygon"][1::2]))
    hit = False
    for (x1, y1), (x2, y2) in zip(pts, pts[1:] + pts[:1]):  # even-odd rule
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            hit = not hit
    return hit


def marker_problem(ft: FactTable, tpl: dict[str, Any], view: int | None, slots: dict[str, Any]) -> str | None:
    """A ring that would also enclose another object (a region that holds other labelled objects,
    a small object's ring sized for a large one): the label would not single out one thing."""
    layout = tpl["media"].get("layout", "single_view")
    if layout == "top_down_forward" and "object" in slots:
        where, labelled = ft.views_with_role(["overview"])[0], {"A": slots["object"]}
    elif tpl["media"].get("markers") and "marked" in slots and view is not None:
        where, labelled = view, dict(zip(tpl["options"].get("labels", ["A", "B"]), slots["marked"]))
    else:
        return None
    if any(ft.fact(n, where).bbox_2d is None for n in labelled.values()):
        return "a marked object is not in view"
    # Kinds the item names or marks: an object of one of them inside another's marker is a second
    # answer (the ships inside a harbour's outline, when the question is which one is a ship).
    kinds = set(slot_names(slots.get("category"))) | {plural(ft.category(n)) for n in labelled.values()}
    for m in marker_layout(marks_of(ft, labelled, where), style=marker_style(tpl)):
        size = ft.fact(m["object"], where).visible_pixels
        for other in ft.objects:
            f = ft.fact(other, where)
            if other == m["object"] or f.center_2d is None or not f.visible_pixels:
                continue
            competes = f.visible_pixels >= COMPETING_SHARE * size or \
                (plural(ft.category(other)) in kinds and ft.category(other) != ft.category(m["object"]))
            if competes and _inside(m, *f.center_2d):
                return f"the {m['style']} around {m['object']} would also enclose {other}"
    return None


def convention_problem(ft: FactTable, tpl: dict[str, Any], view: int | None, slots: dict[str, Any]) -> str | None:
    """Why the item could not state a convention its key relies on (a scale reference out of view)."""
    if not tpl.get("assumptions"):
        return None
    return statements(ft.evidence, tpl, shown_views(ft, tpl, view, slots))[1]


def admission_problem(ft: FactTable, tpl: dict[str, Any], view: int | None, slots: dict[str, Any]) -> str | None:
    """Why these slots may not make an item of this template, or None."""
    return (completeness_problem(ft, tpl) or naming_problem(ft, tpl, view, slots)
            or visibility_problem(ft, tpl, view, slots) or lookalike_problem(ft, tpl, view, slots)
            or kind_lookalike_problem(ft, tpl, view, slots) or marker_problem(ft, tpl, view, slots)
            or convention_problem(ft, tpl, view, slots))


def question_kinds(ft: FactTable, tpl: dict[str, Any], slots: dict[str, Any]) -> list[str]:
    """Categories of what the question itself names (its object and category slots)."""
    kinds = []
    for slot in sorted(realization_slots(tpl)):
        kind = tpl["slots"].get(slot, {}).get("kind")
        if kind in OBJECT_SLOT_KINDS:
            kinds += [ft.category(n) for n in slot_names(slots.get(slot))]
        elif kind in ("category", "part"):  # a part by its name: "the top drawer" must not tell open from shut
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
