"""S1: turn a validated intent into a blueprint (targets, resources, output schema)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from forge_skills.oe.types import Blueprint
from forge.errors import IntentError
from forge.intent import IntentBase, intent_model
from forge.keys import digest
from forge.resources import descriptor
from forge.skills import SkillContext, skill

# Items one view yields across the tabletop template family (measured on built scenes: at
# 10,000 items the scarcest capabilities, reach and size, keep about 5% more bindings than the
# supply headroom asks): used only to size the scene count when the intent does not give it and
# the source descriptor gives no ``items_per_view`` of its own. Short units are topped up by
# the gap the bindings show.
ITEMS_PER_VIEW_ESTIMATE = 5.5


class BlueprintParams(BaseModel):
    intent: dict[str, Any]
    folder_listing: str | None = None  # identity of image folders' contents (see the planner)
    chosen_by: dict[str, list[str]] | None = None  # capability -> why a model role chose it


@skill("blueprint.from_intent", stage="S1", params=BlueprintParams)
def blueprint_from_intent(ctx: SkillContext) -> list[Blueprint]:
    """Capability targets, question types, source sizing and gate settings from the intent."""
    intent = intent_model().model_validate(ctx.params.intent)
    oe = intent.oe
    sources = []
    for index, src in enumerate(intent.sources):
        entry = src.model_dump(mode="json")
        if entry.get("items") is None:
            entry.pop("items", None)  # not set: the blueprint (and every id below it) stays as without the field
        entry["scenes_given"] = entry.get("scenes") is not None
        fixed = src.fixed_units(entry)
        if fixed == 0:
            raise IntentError(f"sources.{index} ({src.kind}): {src.no_units(entry)}")
        if fixed is not None:
            entry["scenes"] = fixed
            entry["scenes_given"] = True  # the source decides; more units cannot be made
        elif entry.get("scenes") is None:
            views = int(getattr(src, "views", 1))
            # Sources share the items: each is first sized for its share (top-ups follow the yield).
            per_view = descriptor(src.kind).items_per_view or ITEMS_PER_VIEW_ESTIMATE
            entry["scenes"] = max(2, math.ceil(_share(intent, src) / (views * per_view)))
        sources.append(entry)
    unavailable = _unavailable(intent)
    wanted = [c for c in oe.capabilities if c not in unavailable]
    if not wanted:
        raise IntentError("the sources support none of the asked capabilities: "
                          + "; ".join(f"{c}: {why}" for c, why in unavailable.items()),
                          hint="ask for capabilities the source can show, or set trust_label_completeness if "
                               "you know the labels are exhaustive")
    per_cap = {**_split(oe.items, wanted, {c: w for c, w in oe.weights.items() if c in wanted}),
               **{c: 0 for c in unavailable}}
    return [Blueprint(
        name=intent.name, version=intent.version, seed=intent.seed, track=intent.track,
        items_target=oe.items, capabilities=list(oe.capabilities), question_types=list(oe.question_types),
        capability_targets=per_cap,
        templates=[] if oe.templates == "all" else [{"name": t, "path": ""} for t in oe.templates],
        sources=sources, gates=intent.gates.model_dump(mode="json"),
        intent_hash=digest(ctx.params.intent),
        capability_sources=ctx.params.chosen_by or _capability_sources(ctx.params.intent, oe.focus),
        composition_tolerance=oe.tolerance, difficulty=dict(oe.difficulty),
        unavailable=unavailable,
    )]


def _share(intent: IntentBase, src: Any) -> float:
    """The items a source is to give: its own ``items``, else an even part of what the sources
    that set theirs leave."""
    if getattr(src, "items", None):
        return float(src.items)
    given = [s.items for s in intent.sources if getattr(s, "items", None)]
    open_sources = len(intent.sources) - len(given)
    return max(0.0, intent.oe.items - sum(given)) / max(1, open_sources)


def _unavailable(intent: IntentBase) -> dict[str, str]:
    """Asked capabilities a source rules out (real-image labels that are not exhaustive cannot
    show a count, unless the intent vouches for them)."""
    out: dict[str, str] = {}
    for src in intent.sources:
        out.update(src.unavailable(list(intent.oe.capabilities)))
    return out


def _capability_sources(raw: dict[str, Any], focus: str | None) -> dict[str, list[str]]:
    if raw.get("oe", {}).get("capabilities") or not focus:
        return {}
    from forge.capability_catalogue import capabilities_from_text

    return capabilities_from_text(focus)


def _split(total: int, keys: list[str], weights: dict[str, float] | None = None) -> dict[str, int]:
    """Item targets per capability in proportion to the weights (largest remainders)."""
    w = {k: float((weights or {}).get(k, 1.0)) for k in keys}
    exact = {k: total * w[k] / sum(w.values()) for k in keys}
    out = {k: int(math.floor(v)) for k, v in exact.items()}
    for k in sorted(keys, key=lambda k: (out[k] - exact[k], keys.index(k)))[: total - sum(out.values())]:
        out[k] += 1
    return out
