"""The Offline-EQA track: its roles, default skills, what the planner gives its nodes, the
checks an OE intent passes before anything runs, and its stage runner (``oe_stages``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from forge.intent import LoadedIntent, did_you_mean
from forge.vocabulary import capabilities, question_types
from forge.planner import blueprint_params, template_file_fanout
from forge.registry import register
from forge.tracks import Track
from forge_skills.oe import prepare
from forge_skills.oe.compatibility import check_compatibility
from forge_skills.oe.stages import StageRunner
from forge_skills.oe.synthesize.difficulty import DEFAULT_SHARES, shares_problem

ROLES = ("blueprint", "plan", "collect", "structure", "template", "bind", "realize", "package")
SOURCE_ROLES = ("plan", "collect", "structure")  # each source's descriptor names these skills
DEFAULTS = {
    "blueprint": "blueprint.from_intent",
    "template": "synthesize.load_template",
    "bind": "synthesize.bind_template",
    "realize": "synthesize.realize_item",
    "package": "package.oe_package",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OESpec(_Strict):
    """What the Offline-EQA track should contain."""

    items: int = Field(2000, ge=1, le=200_000)
    focus: str | None = Field(None, description="what to evaluate, in free text; mapped to capabilities by the "
                                                "capability catalogue when `capabilities` is absent")
    capabilities: list[str] = Field(min_length=1, description="capabilities to cover; derived from `focus` when absent")
    question_types: list[str] = Field(min_length=1)
    templates: list[str] | Literal["all"] = "all"
    weights: dict[str, float] = Field(default_factory=dict, description="relative share of a capability's items "
                                                                       "(1 when absent), e.g. {counting: 0.5}")
    tolerance: float = Field(0.05, ge=0.0, le=1.0, description="allowed shortfall of each capability target, as a "
                                                               "fraction of the target, before composition is reported unmet")
    extra_realizations: int = Field(0, ge=0, le=8, description="with a synthesizer model: this many more realizations "
                                                               "written for each library template")
    difficulty: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_SHARES),
                                         description="share of items per difficulty band (easy, medium, hard; "
                                                     "rated from each item's own margins), e.g. {easy: 0.2, "
                                                     "medium: 0.4, hard: 0.4}")

    @field_validator("difficulty")
    @classmethod
    def _difficulty_mix(cls, value: dict[str, float]) -> dict[str, float]:
        problem = shares_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _weights_name_capabilities(self) -> "OESpec":
        unknown = sorted(set(self.weights) - set(self.capabilities))
        if unknown:
            raise ValueError(f"weights name capabilities the intent does not ask for: {unknown}")
        if any(w <= 0 for w in self.weights.values()):
            raise ValueError("weights must be positive")
        return self

    @model_validator(mode="before")
    @classmethod
    def _capabilities_from_focus(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("capabilities") and isinstance(data.get("focus"), str):
            from forge.capability_catalogue import capabilities_from_text

            found = capabilities_from_text(data["focus"])
            if not found:
                raise ValueError("focus names no capability the catalogue knows; list `capabilities` explicitly "
                                 f"(known: {sorted(capabilities())})")
            data = {**data, "capabilities": list(found)}
        return data

    @field_validator("capabilities")
    @classmethod
    def _known_capabilities(cls, value: list[str]) -> list[str]:
        return _known(value, capabilities(), "capabilities")

    @field_validator("question_types")
    @classmethod
    def _known_question_types(cls, value: list[str]) -> list[str]:
        return _known(value, question_types(), "question types")


def _known(value: list[str], known: dict[str, Any], what: str) -> list[str]:
    """``value`` when every name is registered; else an error with the closest names."""
    unknown = [v for v in value if v not in known]
    if unknown:
        raise ValueError(f"unknown {what} {unknown}{did_you_mean(unknown, known)}; known: {sorted(known)}")
    return value


def node_params(role: str, loaded: LoadedIntent) -> dict[str, Any]:
    return blueprint_params(loaded) if role == "blueprint" else {}


def node_fanout(role: str, loaded: LoadedIntent) -> list[dict[str, Any]] | None:
    return template_file_fanout(loaded) if role == "template" else None


OE_TRACK = Track(
    name="oe", description="Offline EQA: questions, answers and a scorer over images and trajectories",
    roles=ROLES, source_roles=SOURCE_ROLES, defaults=DEFAULTS, runner=StageRunner, section="oe", section_model=OESpec,
    node_params=node_params, node_fanout=node_fanout, check_intent=check_compatibility,
    asks_before_planning=prepare.asks_before_planning, plan_with_models=prepare.plan_with_models,
    repair_skills={"local_field_item": "repair.local_field_item", "local_field_binding": "repair.local_field_binding",
                   "rebind": "repair.rebind", "resynthesize_item": "repair.resynthesize_item"},
    # The OE requirements' failure categories and the smallest operator that restores each
    # (escalation for a repeated symptom of one producer).
    repair_routes={"answer_mismatch": ("local_field_repair", "skill_reexecution"),
                   "wrong_slot": ("template_rebinding", "candidate_resynthesis"),
                   "ambiguous_realization": ("candidate_resynthesis", None),
                   "non_target_shortcut": ("candidate_resynthesis", None),
                   "answer_not_visible": ("candidate_resynthesis", None),
                   "invalid_media": ("skill_reexecution", None),
                   "inadmissible_evidence": ("final_rejection", None)},
    gate_categories={"C1": "non_target_shortcut"},  # a shortcut the blind panel found
    item_type="OEItem",
    summary_rows=(("items_candidates", "items candidates"), ("items_rejected", "items rejected"),
                  ("items_held", "items held by gates"), ("items_accepted", "items accepted"),
                  ("items_released", "items released"), ("items_not_needed", "items accepted, not needed")),
)
register("track", "oe", OE_TRACK)
