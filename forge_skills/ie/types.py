"""The IE track's artifact types, from the blueprint to the task.

A household source plans scene units (a floor plan and an initial-state variation), collects
each as a restorable state from real AI2-THOR dumps or ALFRED trials, and structures it into
what binding reads (objects, receptacles, affordances). Task templates bind to structured
states; a binding becomes a task: instruction, goal, compiled verifier, reference plan, split.
Large payloads (restorable states) live in blobs.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from forge.artifact_types import ArtifactContent


class IEBlueprint(ArtifactContent):
    """Targets per scene type and difficulty, the task kinds asked, the sources."""

    name: str
    version: str
    seed: int
    track: str
    tasks_target: int
    targets: dict[str, dict[str, int]] = Field(description="scene type -> {simple, hard} -> tasks")
    task_kinds: list[str]
    sources: list[dict[str, Any]]
    gates: dict[str, Any]
    intent_hash: str
    composition_tolerance: float = 0.05

    def summary(self) -> str:
        return f"{self.name} {self.version}: {self.tasks_target} tasks over {sorted(self.targets)}"


class HouseholdUnit(ArtifactContent):
    """One unit to collect: a floor plan from the real data and an initial-state variation."""

    source_kind: str
    unit_index: int
    floor_plan: str
    scene_type: str
    origin: str = Field(description="ai2thor:<floor plan> (a THOR metadata dump) or alfred:<trial id>")
    origin_file: str = Field(description="the data file, relative to the data root")
    variation: int = Field(description="0: the recorded state; k: objects moved among compatible receptacles")
    seed: int
    data_root: str = Field(description="the folder holding ai2thor/ and alfred/")
    moves: int = Field(4, description="objects a variation moves")

    def summary(self) -> str:
        return f"unit {self.unit_index}: {self.floor_plan} ({self.scene_type}) variation {self.variation} of {self.origin}"


class HouseholdState(ArtifactContent):
    """A restorable initial state (the environment's own serialization, in a blob)."""

    source_kind: str
    unit_index: int
    floor_plan: str
    scene_type: str
    origin: str
    origin_file: str
    origin_sha256: str = Field(description="of the data file the scene came from")
    variation: int
    state: str = Field(description="blob: HouseholdEnv.get_state() as JSON")
    moved: list[dict[str, str]] = Field(default_factory=list, description="objects the variation moved: from, to")
    objects: int

    def summary(self) -> str:
        moved = f", moved {len(self.moved)}" if self.moved else ""
        return (f"{self.floor_plan} ({self.scene_type}) variation {self.variation}: {self.objects} objects from "
                f"{self.origin_file} (sha256 {self.origin_sha256[:12]}){moved}")


class HouseholdStructure(ArtifactContent):
    """What binding reads of a state: per object its type, affordances and where it is."""

    state: str = Field(description="the HouseholdState artifact id")
    state_blob: str = Field(description="its restorable state (blob)")
    floor_plan: str
    scene_type: str
    objects: list[dict[str, Any]] = Field(description="objectId, objectType, flags, parent, isOpen, isToggled, ...")
    receptacles_for: dict[str, list[str]] = Field(description="pickupable object type -> receptacle types that "
                                                              "accept it here")

    def summary(self) -> str:
        return f"{self.floor_plan}: {len(self.objects)} objects, {len(self.receptacles_for)} pickupable types placeable"


class TaskTemplate(ArtifactContent):
    """A task template of the library (or the intent's folders)."""

    id: str
    version: int
    task_type: str
    difficulty: str
    slots: dict[str, Any]
    goal: dict[str, Any]
    instruction: dict[str, Any]
    max_per_state: int
    file: str

    def summary(self) -> str:
        return f"{self.id} v{self.version} ({self.task_type}, {self.difficulty}; {self.file})"


class TaskBinding(ArtifactContent):
    """A template's slots bound to object types of one structured state, with the goal they give."""

    template: str
    template_artifact: str
    structure: str
    state: str = Field(description="the HouseholdState artifact id")
    state_blob: str
    scene: str
    scene_type: str
    task_type: str
    difficulty: str
    slots: dict[str, str] = Field(description="slot -> object type (goals name types, as ALFRED's do)")
    goal: dict[str, Any] = Field(description="the template's goal with the slots filled in")
    macro: str = Field(description="the instruction's wording chosen for this binding, slots in words")
    variant: int
    recorded_reference: str | None = Field(None, description="blob: a real demonstration's actions reaching this "
                                                             "goal from this state, where one exists")

    def summary(self) -> str:
        return f"{self.template} on {self.scene}: {self.slots} -> {self.macro!r}"


class IETask(ArtifactContent):
    """A task: what the agent sees, and the hidden goal, verifier and reference plan."""

    VISIBLE_FIELDS: ClassVar[tuple[str, ...]] = ("task_id", "scene", "scene_type", "split", "instruction",
                                                 "action_interface", "max_steps")

    task_id: str
    scene: str
    scene_type: str
    split: str
    task_type: str
    instruction: dict[str, Any]
    action_interface: dict[str, Any]
    max_steps: int
    goal: dict[str, Any]
    verifier: dict[str, Any]
    reference_plan: list[dict[str, Any]]
    subtasks: int
    budget_steps: int
    initial_state: str = Field(description="blob: the restorable initial state (JSON)")
    template: str
    binding: str
    state_artifact: str
    difficulty: str
    environment: str = Field("household", description="the registered IE world whose environment runs the task")
    budget: dict[str, Any] | None = Field(None, description="limits beyond steps: control steps, simulated seconds")

    def summary(self) -> str:
        return f"{self.task_id} [{self.split}]: {self.instruction.get('macro')} ({len(self.reference_plan)} reference steps)"