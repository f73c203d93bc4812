"""Repairs of IE tasks, and the defects a fault plan can plant in them.

The operators change the smallest thing that restores the violated requirement and invent
nothing: a split is recomputed from the goal and the reference plan, an instruction is realized
again from the binding's goal; a task that disagrees with its goal is synthesized anew from its
verified binding. Re-executing the synthesis and rolling back to the verified state are the
engine's (the producing run is run again).
"""

from __future__ import annotations

from pydantic import BaseModel

from forge.faults import FaultContext, mutator
from forge.skills import SkillContext, skill
from forge_skills.ie.synthesis import split_of, subgoal_count, synthesize_task
from forge_skills.ie.types import IETask, TaskBinding


class RepairParams(BaseModel):
    attempt: int = 1


@skill("ie.repair.local_field_task", stage="S4", params=RepairParams)
def local_field_task(ctx: SkillContext, item: IETask) -> list[IETask]:
    """The split and subtask count recomputed from the goal and the reference plan, and the
    instruction's wording taken again from the binding (the words its goal was realized in)."""
    binding: TaskBinding = ctx.load(item.binding)
    subtasks = subgoal_count(item.goal)
    instruction = {**item.instruction, "macro": binding.macro}
    return [item.model_copy(update={"split": split_of(subtasks, len(item.reference_plan)), "subtasks": subtasks,
                                    "instruction": instruction})]


@skill("ie.repair.resynthesize_task", stage="S4", params=RepairParams)
def resynthesize_task(ctx: SkillContext, binding: TaskBinding) -> list[IETask]:
    """A task made anew from its verified binding."""
    return synthesize_task(ctx, binding)


# -- planted defects (tests of the repair loop) ---------------------------------------------------

@mutator("ie_instruction_mismatch")
def instruction_mismatch(task: IETask, ctx: FaultContext) -> IETask | None:
    """The instruction names another object than the goal's first target."""
    from forge_skills.ie.synthesis import goal_targets
    from forge_skills.ie.templates import natural

    targets = sorted(goal_targets(task.goal))
    words = natural(targets[0]) if targets else ""
    if not words or words not in task.instruction.get("macro", ""):
        return None
    other = "teddy bear" if words != "teddy bear" else "basketball"
    return task.model_copy(update={"instruction": {**task.instruction,
                                                   "macro": task.instruction["macro"].replace(words, other)}})


@mutator("ie_placeholder_instruction")
def placeholder_instruction(task: IETask, ctx: FaultContext) -> IETask | None:
    """The instruction left as its template's placeholder."""
    return task.model_copy(update={"instruction": {**task.instruction, "macro": "Put a {object} in the {receptacle}."}})


@mutator("ie_split_inconsistent")
def split_inconsistent(task: IETask, ctx: FaultContext) -> IETask | None:
    """The split says the other difficulty."""
    length, difficulty = task.split.split("_")
    return task.model_copy(update={"split": f"{length}_{'simple' if difficulty == 'hard' else 'hard'}"})


@mutator("ie_broken_verifier")
def broken_verifier(task: IETask, ctx: FaultContext) -> IETask | None:
    """The verifier's first predicate ranges over a type no scene holds."""
    preds = [dict(p) for p in task.verifier["predicates"]]
    preds[0] = {**preds[0], "subject": {**preds[0]["subject"], "value": "Unobtainium"}}
    return task.model_copy(update={"verifier": {**task.verifier, "predicates": preds}})


@mutator("ie_restore_failure")
def restore_failure(task: IETask, ctx: FaultContext) -> IETask | None:
    """The initial state points at bytes that do not restore."""
    bad = ctx.store.put_blob(b'{"format": 1, "scene": null}')
    return task.model_copy(update={"initial_state": bad})
