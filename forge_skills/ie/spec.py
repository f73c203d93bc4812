"""What an IE task is, as a package and the episode harness read it.

A task is a restorable initial state, an instruction (macro and micro), an action interface,
goal conditions and a verifier compiled from them (data, not code). ``VISIBLE`` names what an
agent sees; the goal, the verifier and the reference plan are hidden from it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_STEPS = 150  # an episode's step cap: invalid actions count and do not end it
SPLITS = ("short_simple", "short_hard", "long_simple", "long_hard")
SCENE_TYPES = ("kitchen", "living_room", "bedroom", "bathroom")


class Instruction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    macro: str = Field(description="the goal in one sentence")
    micro: list[str] = Field(default_factory=list, description="the steps, in order, in plain words")


class TaskSpec(BaseModel):
    """One task of an IE package (``tasks/<task_id>.json``; its initial state in
    ``states/<task_id>.json``)."""

    model_config = ConfigDict(extra="forbid")
    VISIBLE: ClassVar[tuple[str, ...]] = ("task_id", "scene", "scene_type", "split", "instruction",
                                          "action_interface", "max_steps")

    task_id: str
    scene: str = Field(description="the floor plan (FloorPlan6) or the simulator scene (Stack-1234)")
    scene_type: str = Field(description="kitchen, living_room, bedroom, bathroom; lift, stack, pick_place, nut_assembly")
    split: Literal["short_simple", "short_hard", "long_simple", "long_hard"]
    task_type: str = Field(description="the task kind (an ALFRED task type or a household kind)")
    instruction: Instruction
    action_interface: dict[str, Any] = Field(description="{actions: [ActionSpec dicts], grounded: true}")
    max_steps: int = MAX_STEPS
    goal: dict[str, Any] = Field(description="pddl_params-style goal: task_type, targets, subtasks, mode")
    verifier: dict[str, Any] = Field(description="the compiled verifier (forge_resources.household.goals.Verifier)")
    reference_plan: list[dict[str, Any]] = Field(description="grounded actions (Action dicts) reaching the goal")
    subtasks: int = Field(ge=1)
    budget_steps: int = Field(ge=1, description="a fixed multiple of the reference plan's length, at most max_steps")
    environment: str = Field("household", description="the IE world that runs the task (household, robosuite)")
    budget: dict[str, Any] | None = Field(None, description="limits beyond steps: control steps, simulated seconds")

    def visible(self) -> dict[str, Any]:
        return {k: getattr(self, k) if not isinstance(getattr(self, k), BaseModel) else getattr(self, k).model_dump()
                for k in self.VISIBLE}
