"""Repair operators that produce a new version of an artifact from registered evidence.

Skill re-execution, upstream rollback and final rejection are carried out by the engine
(re-running the producing skill, or terminating the lineage); the operators here change
the smallest thing that restores the violated requirement. None of them invents a value:
answers come from re-deriving over the registered evidence, or the repair fails.
"""

from __future__ import annotations

from pydantic import BaseModel

from forge_skills.oe.types import Binding, OEItem
from forge.skills import SkillContext, skill
from forge_skills.oe.synthesize.admission import admission_problem
from forge_skills.oe.synthesize.admission import derive
from forge_skills.oe.synthesize.answer_rules import rule_for
from forge_skills.oe.synthesize.fact_table import FactTable
from forge_skills.oe.synthesize.synthesis import presentation, realize_item


class RepairParams(BaseModel):
    attempt: int = 1


class NoAdmissibleRepair(Exception):
    """The registered evidence does not allow this repair; the lineage must be rejected."""


def _derived(binding: Binding, ctx: SkillContext) -> str:
    tpl = ctx.load(binding.template_artifact)
    answer, why = derive(ctx.load(binding.evidence), binding.view, binding.slots, tpl.model_dump())
    if answer is None:
        raise NoAdmissibleRepair(f"the evidence admits no answer: {why.get('reason')}")
    return answer


@skill("repair.local_field_item", stage="S4", params=RepairParams)
def local_field_item(ctx: SkillContext, item: OEItem) -> list[OEItem]:
    """Set the answer key (and its index) to what the evidence gives; nothing else changes."""
    answer = _derived(ctx.load(item.binding), ctx)
    values = item.values()
    if item.question_type == "interval_choice":
        value = float(answer)
        hits = [i for i, (lo, hi) in enumerate(item.scoring.get("intervals", [])) if lo <= value <= hi]
        if len(hits) != 1:
            raise NoAdmissibleRepair(f"no single interval holds the derived value {value:g}")
        return [item.model_copy(update={"answer": values[hits[0]], "answer_index": hits[0], "answer_value": value})]
    if item.question_type == "numeric":
        return [item.model_copy(update={"answer": answer, "answer_value": float(answer)})]
    if item.question_type in ("ordered_list", "multiple_choice"):
        sep = " > " if item.question_type == "ordered_list" else ", "
        parts = answer.split(sep)
        if not all(p in values for p in parts):
            raise NoAdmissibleRepair("the derived answer names an object that is not an option")
        idx = [values.index(p) for p in parts]
        return [item.model_copy(update={"answer": answer,
                                        "answer_indices": idx if item.question_type == "ordered_list" else sorted(idx)})]
    if answer not in values:
        raise NoAdmissibleRepair(f"the derived answer {answer!r} is not among the options")
    return [item.model_copy(update={"answer": answer, "answer_index": values.index(answer)})]


@skill("repair.local_field_binding", stage="S4", params=RepairParams)
def local_field_binding(ctx: SkillContext, binding: Binding) -> list[Binding]:
    """Set the bound answer to what the evidence gives."""
    return [binding.model_copy(update={"answer": _derived(binding, ctx)})]


@skill("repair.rebind", stage="S4", params=RepairParams)
def rebind(ctx: SkillContext, binding: Binding) -> list[Binding]:
    """Bind the template's slots anew on the same evidence and view, avoiding the failed slots."""
    tpl = ctx.load(binding.template_artifact)
    ev = ctx.load(binding.evidence)
    t = tpl.model_dump()
    ft = FactTable(ev)
    cands = [c for c in rule_for(t).candidates(ft, binding.view, t)
             if c.slots != binding.slots and admission_problem(ft, t, binding.view, c.slots) is None]
    if not cands:
        raise NoAdmissibleRepair("no other admissible slot assignment on this evidence")
    same = [c for c in cands if c.answer == binding.answer] or cands
    pick = same[int(ctx.rng.integers(len(same)))]
    return [binding.model_copy(update={"slots": pick.slots, "answer": pick.answer,
                                       "derivation": {"rule": t["answer_rule"], "values": pick.values},
                                       "admission_scores": {"margin": round(float(pick.margin), 6)},
                                       "presentation": presentation(tpl, ev, ft, binding.view, pick, binding.evidence)})]


@skill("repair.resynthesize_item", stage="S4", params=RepairParams)
def resynthesize_item(ctx: SkillContext, binding: Binding) -> list[OEItem]:
    """A new candidate from the same verified binding: next realization, fresh option order."""
    n = len(binding.presentation["realizations"])
    again = binding.model_copy(update={"variant": (binding.variant + ctx.params.attempt) % n})
    ctx.input_ids = {"binding": ctx.input_ids["binding"]}
    return realize_item(ctx, again)
