"""IE task templates: a task kind with typed slots, a goal over the slots (ALFRED's
``pddl_params`` or subtasks), and the instruction's wordings. Loaded from the template library's
``household`` family (and the intent's folders) like OE templates, validated on load."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from forge.errors import DefinitionError
from forge.skills import LOCATION, SkillContext, skill
from forge.yamlfile import TEMPLATE_LIMITS, read_yaml
from forge_resources.household.goals import TASK_TYPES
from forge_skills.ie.types import IEBlueprint, TaskTemplate

SLOT_KINDS = ("pickupable", "receptacle_for", "movable_receptacle_for", "present", "state_change", "object", "place")
PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


class Slot(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["pickupable", "receptacle_for", "movable_receptacle_for", "present", "state_change", "object", "place"]
    of: str | list[str] | None = Field(None, description="the slot(s) whose type this receptacle must accept")
    types: list[str] | None = Field(None, description="only these object types")
    exclude: list[str] = Field(default_factory=list)
    at_least: int = Field(1, ge=1, description="instances of the type the scene must hold")
    differs_from: str | None = None
    flag: str | None = Field(None, description="state_change: the affordance the object needs")
    field: str | None = Field(None, description="state_change: the metadata field the goal sets")
    want: Any = None
    receptacle: bool | None = Field(None, description="state_change: the object must (not) be a receptacle")
    place_kind: str | None = Field(None, description="place: bin, peg or object (another object's top)")
    matches: str | None = Field(None, description="place: shares a word with this slot's name (the square nut's "
                                                  "square peg)")


class TaskTemplateFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    version: int = 1
    task_type: str
    difficulty: Literal["simple", "hard"]
    requires: list[str] = Field(default_factory=list, description="object types the scene must hold")
    requires_any: list[str] = Field(default_factory=list, description="the scene must hold one of these types")
    slots: dict[str, Slot]
    goal: dict[str, Any]
    instruction: dict[str, list[str]]
    max_per_state: int = Field(2, ge=1, le=20)
    scene_types: list[str] | None = Field(None, description="only scenes of these types (all when absent)")

    @model_validator(mode="after")
    def _consistent(self) -> "TaskTemplateFile":
        goal = self.goal
        if sum(k in goal for k in ("alfred", "subtasks", "outcomes", "libero")) != 1:
            raise ValueError("goal: give exactly one of `alfred` (pddl_params), `subtasks`, `outcomes` (physical) "
                             "or `libero` (a LIBERO task's own goal)")
        if "alfred" in goal and goal["alfred"].get("task_type") not in TASK_TYPES:
            raise ValueError(f"goal.alfred.task_type must be one of {list(TASK_TYPES)}")
        own = "libero" in goal  # LIBERO's own instruction, word for word: one wording may be all there is
        if own and (goal["libero"] or {}).get("facts", "any") not in ("any", "one", "several"):
            raise ValueError("goal.libero.facts must be any, one or several")
        macro = self.instruction.get("macro") or []
        if len(macro) < (1 if own else 4):
            raise ValueError("instruction.macro needs at least four wordings")
        names = set(self.slots) | {f"{s}_plural" for s in self.slots} | ({"instruction"} if own else set())
        for text in macro:
            unknown = set(PLACEHOLDER.findall(text)) - names
            if unknown:
                raise ValueError(f"instruction {text!r} names no slot {sorted(unknown)}")
        for slot in self.slots.values():
            refs = [slot.of] if isinstance(slot.of, str) else (slot.of or [])
            for ref in refs + [r for r in (slot.differs_from, slot.matches) if r]:
                if ref not in self.slots:
                    raise ValueError(f"a slot refers to {ref!r}, which is not a slot")
        return self


def read_task_template(path: Path) -> TaskTemplateFile:
    if not path.is_file():
        raise DefinitionError(f"{path}: task template not found")
    raw = read_yaml(path, TEMPLATE_LIMITS, what="task template", error=DefinitionError).data
    try:
        tpl = TaskTemplateFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise DefinitionError(f"{path}: invalid task template: {field}: {first['msg']}") from None
    if tpl.id != path.stem:
        raise DefinitionError(f"{path}: template id {tpl.id!r} must match the file name {path.stem!r}")
    return tpl


class LoadParams(BaseModel):
    template: str
    label: str
    path: str | None = Field(None, json_schema_extra=LOCATION)  # where the file is now, not part of its identity


def _reads(params: dict[str, Any]) -> dict[str, str]:
    from forge_skills.oe.synthesize.templates import template_path

    return {"template": str(template_path(params))}


@skill("ie.load_task_template", stage="S4", params=LoadParams, reads=_reads)
def load_task_template(ctx: SkillContext, blueprint: IEBlueprint) -> list[TaskTemplate]:
    """One task template, validated; templates of kinds the intent does not ask for are skipped."""
    from forge_skills.oe.synthesize.templates import template_path

    tpl = read_task_template(template_path(ctx.params.model_dump()))
    if blueprint.task_kinds and tpl.task_type not in blueprint.task_kinds:
        return []
    return [TaskTemplate(id=tpl.id, version=tpl.version, task_type=tpl.task_type, difficulty=tpl.difficulty,
                         slots={k: v.model_dump(exclude_defaults=True) for k, v in tpl.slots.items()},
                         goal={**tpl.goal, "requires": tpl.requires, "requires_any": tpl.requires_any,
                               **({"scene_types": tpl.scene_types} if tpl.scene_types else {})},
                         instruction=tpl.instruction, max_per_state=tpl.max_per_state, file=ctx.params.label)]


def natural(object_type: str) -> str:
    """An object type as words: ``CounterTop`` -> ``countertop``, ``DeskLamp`` -> ``desk lamp``,
    ``SinkBasin`` -> ``sink``, ``AppleSliced`` -> ``apple slice``."""
    special = {"CounterTop": "countertop", "SinkBasin": "sink", "BathtubBasin": "bathtub", "TVStand": "TV stand",
               "GarbageCan": "garbage can", "CD": "CD", "CellPhone": "cell phone", "KeyChain": "key chain",
               "CreditCard": "credit card", "TissueBox": "tissue box", "ToiletPaper": "toilet paper",
               "PaperTowelRoll": "paper towel roll", "HandTowel": "hand towel", "SoapBar": "bar of soap",
               "DishSponge": "dish sponge", "EggCracked": "cracked egg", "Bread": "loaf of bread",
               "Lettuce": "head of lettuce", "StoveBurner": "stove burner"}
    if object_type in special:
        return special[object_type]
    if object_type.endswith("Sliced"):
        return natural(object_type[:-6]) + " slice"
    return re.sub(r"(?<!^)(?=[A-Z])", " ", object_type).lower()


def plural(words: str) -> str:
    irregular = {"knife": "knives", "butter knife": "butter knives", "bar of soap": "bars of soap",
                 "toilet paper": "rolls of toilet paper", "head of lettuce": "heads of lettuce",
                 "loaf of bread": "loaves of bread", "cloth": "cloths", "CD": "CDs", "TV stand": "TV stands"}
    if words in irregular:
        return irregular[words]
    if words.endswith(("s", "sh", "ch", "x")):
        return words + "es"
    if words.endswith("y") and words[-2:-1] not in "aeiou":
        return words[:-1] + "ies"
    if words.endswith("o"):
        return words + "es"
    return words + "s"


# Receptacles things are put on, not in.
SURFACES = frozenset({"CounterTop", "DiningTable", "Desk", "Shelf", "Bed", "Sofa", "ArmChair", "Dresser", "SideTable",
                      "CoffeeTable", "TVStand", "StoveBurner", "Chair", "Ottoman", "Stool", "Floor", "Plate",
                      "Cart", "ShelvingUnit", "Toilet", "HandTowelHolder", "TowelHolder", "ToiletPaperHanger"})


def realize(text: str, slots: dict[str, str]) -> str:
    """A wording with each slot's object type in words (``{slot_plural}`` in the plural), with
    the article and preposition each needs: "an apple", "on the countertop"."""
    def name(match: re.Match) -> str:
        key = match.group(1)
        if key.endswith("_plural") and key[:-7] in slots:
            return plural(natural(slots[key[:-7]]))
        return natural(slots[key])

    for slot, kind in slots.items():
        if kind in SURFACES:
            text = re.sub(r"\b(in|into) (the|a) \{" + slot + r"\}", lambda m: ("on" if m.group(1) == "in" else "onto")
                          + f" {m.group(2)} {{{slot}}}", text)
    text = PLACEHOLDER.sub(name, text)
    return re.sub(r"\b([Aa]) (?=[aeiou])", lambda m: m.group(1) + "n ", text)
