"""The IE track on robosuite: seeded manipulation scenes, admitted per seed, bound to task
templates whose goals are physical outcomes, made into tasks with a scripted reference.

A unit is one environment and seed. Its state is admitted when the scene settles (objects move
less than ``DRIFT_LIMIT`` over the last settling steps) and every pose is finite; the reason is
recorded either way, so the yield (tried, kept, why not) can be read from the store. A binding is
admitted when the scripted reference reaches the goal from the restored state and no strict
prefix of it does. Budgets are a fixed multiple of the reference: high-level steps, control
steps and simulated seconds.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from forge.sources import own_section
from forge.artifact_types import ArtifactContent
from forge.keys import canonical_json, digest
from forge.registry import register
from forge.skills import SkillContext, skill
from forge_skills.ie.templates import realize
from forge_skills.ie.types import IEBlueprint, IETask, TaskBinding, TaskTemplate

DRIFT_LIMIT = 0.002  # metres an object may still move over the last settling steps
BUDGET_FACTOR = 3  # an agent's budget: this multiple of the reference (steps, control steps, seconds)
STEPS_PER_SUBGOAL = 4  # move above, descend, grasp, lift: a subgoal needing more (a placement) is long
ENVIRONMENT = "robosuite"
SCENE_TYPES = {"Lift": "lift", "Stack": "stack", "PickPlace": "pick_place", "NutAssembly": "nut_assembly"}


class ManipulationUnit(ArtifactContent):
    source_kind: str
    unit_index: int
    env: str = Field(description="the robosuite environment")
    scene_type: str
    seed: int
    demo: dict[str, str] | None = Field(None, description="a real demonstration (path, key) to start from instead")

    def summary(self) -> str:
        origin = f"demonstration {self.demo['key']} of {self.demo['path']}" if self.demo else f"seed {self.seed}"
        return f"unit {self.unit_index}: {self.env} {origin}"


class ManipulationState(ArtifactContent):
    """A seeded, settled scene (restorable exactly) and whether it was admitted."""

    source_kind: str
    unit_index: int
    env: str
    scene_type: str
    seed: int
    state: str = Field(description="blob: ManipulationEnv.get_state() as JSON")
    drift_m: float
    finite: bool
    admitted: bool
    reason: str = Field("", description="why the seed was not admitted")
    objects: list[dict[str, Any]]
    demo: dict[str, str] | None = None
    demo_reference: str | None = Field(None, description="blob: the demonstration's actions up to the step that "
                                                         "first reaches its goal here (JSON list)")

    def summary(self) -> str:
        verdict = "admitted" if self.admitted else f"not admitted ({self.reason})"
        return f"{self.env} seed {self.seed}: drift {self.drift_m * 1000:.2f} mm, {verdict}"


class ManipulationStructure(ArtifactContent):
    """What binding reads: the things of an admitted state, by name and kind."""

    state: str
    state_blob: str
    env: str
    scene: str
    scene_type: str
    things: list[dict[str, str]] = Field(description="name and kind (object, bin, peg) of each thing, and what "
                                                     "a person seeing the state calls it (called)")
    demo_reference: str | None = None
    demo_outcomes: list[dict[str, str]] | None = Field(None, description="the goal the demonstration reaches")

    def summary(self) -> str:
        return f"{self.scene}: {[t['name'] for t in self.things]}"


class UnitParams(BaseModel):
    unit_index: int
    source_index: int | None = None  # which of the intent's sources it plans for (the runner says)


@skill("ie.plan_manipulation_units", stage="S2", params=UnitParams)
def plan_manipulation_units(ctx: SkillContext, blueprint: IEBlueprint) -> list[ManipulationUnit]:
    """Environments in turn (those whose scene types the blueprint targets), a seed each."""
    src = own_section(blueprint.sources, "robosuite_tasks", ctx.params.source_index)
    envs = [e for e in src["envs"] if SCENE_TYPES[e] in blueprint.targets]
    demos = [d for d in src.get("demo_units", []) if d["env"] in envs]
    i = ctx.params.unit_index
    if i < len(demos):  # the real demonstrations first, then seeds
        d = demos[i]
        return [ManipulationUnit(source_kind="robosuite_tasks", unit_index=i, env=d["env"],
                                 scene_type=SCENE_TYPES[d["env"]], seed=0, demo={"path": d["path"], "key": d["key"]})]
    i -= len(demos)
    env = envs[i % len(envs)]
    seed = int(digest(blueprint.seed, blueprint.name, env, i // len(envs), length=8), 16)
    return [ManipulationUnit(source_kind="robosuite_tasks", unit_index=ctx.params.unit_index, env=env,
                             scene_type=SCENE_TYPES[env], seed=seed)]


@skill("ie.collect_manipulation_state", stage="S2", parallel=True)
def collect_manipulation_state(ctx: SkillContext, unit: ManipulationUnit) -> list[ManipulationState]:
    """The seeded scene, settled; admitted when it came to rest with finite poses."""
    from forge_resources.robosuite.manipulation import ManipulationEnv

    env = ctx.held("robosuite.manipulation", ManipulationEnv)
    if unit.demo:
        env.reset_to_demo(unit.demo["path"], unit.demo["key"])
    else:
        env.reset({"env": unit.env, "seed": unit.seed})
    drift = float(env.drift)
    objects = env.objects()
    finite = bool(np.all(np.isfinite(env.data.qpos)) and all(np.all(np.isfinite(o["position"])) for o in objects))
    called = names_seen(env)
    reasons = ([] if finite else ["a pose is not finite"]) + (
        [] if drift < DRIFT_LIMIT else [f"objects still moved {drift * 1000:.1f} mm while settling"])
    state = env.get_state()
    reference = None
    if unit.demo and not reasons:
        reference = _demo_reference(env, unit)
        if reference is None:
            reasons.append("its recorded actions, replayed here, do not reach the demonstration's goal")
        env.set_state(state)
    return [ManipulationState(source_kind=unit.source_kind, unit_index=unit.unit_index, env=unit.env,
                              scene_type=unit.scene_type, seed=unit.seed,
                              state=ctx.put_blob(canonical_json(state).encode()), drift_m=round(drift, 6),
                              finite=finite, admitted=not reasons, reason="; ".join(reasons),
                              objects=[{**{k: o[k] for k in ("name", "kind", "position")}, "called": called[o["name"]]}
                                       for o in objects],
                              demo=unit.demo,
                              demo_reference=ctx.put_blob(canonical_json(reference).encode()) if reference else None)]


def _demo_reference(env: Any, unit: ManipulationUnit) -> list[dict[str, Any]] | None:
    """The demonstration's actions replayed from its first state, up to the step that first
    reaches its goal here (None when none does)."""
    from forge_resources.household.protocol import Action
    from forge_resources.robosuite.demo_frames import recorded
    from forge_resources.robosuite.outcomes import holds
    from forge_resources.robosuite.task_kinds import DEMO_OUTCOMES

    scene, _ = recorded(unit.demo["path"], unit.demo["key"])
    goal = verifier_of({"outcomes": DEMO_OUTCOMES[unit.env]}, unit.env)["goal"]
    steps = []
    for values in scene.demo.actions:
        step = Action("MoveDelta", tuple(f"{float(v):.6g}" for v in values))
        if not env.step(step).valid:
            return None
        steps.append(step.to_dict())
        if holds(goal, env):
            return steps
    return None


@skill("ie.structure_manipulation_state", stage="S3")
def structure_manipulation_state(ctx: SkillContext, state: ManipulationState) -> list[ManipulationStructure]:
    """The things of an admitted state (a state not admitted binds nothing)."""
    if not state.admitted:
        return []
    scene = f"{state.env}-demo{state.demo['key'].removeprefix('demo_')}" if state.demo else f"{state.env}-{state.seed}"
    return [ManipulationStructure(state=ctx.input_ids["state"], state_blob=state.state, env=state.env,
                                  scene=scene, scene_type=state.scene_type,
                                  things=[{"name": o["name"], "kind": o["kind"], "called": o.get("called", o["name"])}
                                          for o in state.objects],
                                  demo_reference=state.demo_reference,
                                  demo_outcomes=_demo_outcomes(state.env) if state.demo_reference else None)]


def names_seen(env: Any) -> dict[str, str]:
    """Each thing's name -> what a person seeing the environment's current state calls it (the
    empty bin): instructions name things so, the agent's view showing no internal index."""
    from forge_resources.robosuite.naming import describe

    return {t.name: describe(env, t) for t in env.things()}


def _demo_outcomes(env_name: str) -> list[dict[str, str]]:
    from forge_resources.robosuite.task_kinds import DEMO_OUTCOMES

    return DEMO_OUTCOMES[env_name]


# -- binding ---------------------------------------------------------------------------------------

@skill("ie.bind_manipulation_template", stage="S4")
def bind_manipulation_template(ctx: SkillContext, template: TaskTemplate,
                               structure: ManipulationStructure) -> list[TaskBinding]:
    """Assignments of the scene's things to the template's slots (objects to object slots,
    places of the asked kind to place slots)."""
    if "outcomes" not in template.goal:
        return []
    allowed = template.goal.get("scene_types")
    if allowed and structure.scene_type not in allowed:
        return []
    out = []
    called = {t["name"]: t.get("called", t["name"]) for t in structure.things}
    for slots in _assignments(template.slots, structure.things):
        goal = {"outcomes": _fill(template.goal["outcomes"], slots), "mode": "all"}
        variant = int(digest(template.id, slots, structure.scene, length=8), 16) % len(template.instruction["macro"])
        recorded = structure.demo_reference if goal["outcomes"] == structure.demo_outcomes else None
        out.append(TaskBinding(template=template.id, template_artifact=ctx.input_ids["template"],
                               structure=ctx.input_ids["structure"], state=structure.state,
                               state_blob=structure.state_blob, scene=structure.scene,
                               scene_type=structure.scene_type, task_type=template.task_type,
                               difficulty=template.difficulty, slots=slots, goal=goal,
                               macro=realize(template.instruction["macro"][variant],
                                             {k: called[v] for k, v in slots.items()}), variant=variant,
                               recorded_reference=recorded))
    order = ctx.rng.permutation(len(out))
    # the demonstration's own goal first: its recorded reference is what a demonstration gives
    ranked = sorted((out[int(i)] for i in order), key=lambda b: b.recorded_reference is None)
    return ranked[: template.max_per_state]


def _assignments(slots: dict[str, dict[str, Any]], things: list[dict[str, str]]) -> list[dict[str, str]]:
    names = sorted(slots, key=lambda n: (slots[n]["kind"] == "place", n))  # objects before the places they refer to
    out: list[dict[str, str]] = []

    def options(name: str, chosen: dict[str, str]) -> list[str]:
        spec = slots[name]
        if spec["kind"] == "object":
            found = [t["name"] for t in things if t["kind"] == "object"]
        else:
            want = spec.get("place_kind")
            found = [t["name"] for t in things if t["kind"] == want]
        if spec.get("types"):
            found = [f for f in found if f in spec["types"]]
        if spec.get("matches"):
            words = set(chosen.get(spec["matches"], "").split()) - {"nut", "cube", "peg", "bin"}
            found = [f for f in found if words & set(f.split())]
        taken = set(chosen.values())
        return [f for f in found if f not in taken]

    def walk(i: int, chosen: dict[str, str]) -> None:
        if i == len(names):
            out.append(dict(chosen))
            return
        for value in options(names[i], chosen):
            chosen[names[i]] = value
            walk(i + 1, chosen)
            del chosen[names[i]]

    walk(0, {})
    return out


def _fill(value: Any, slots: dict[str, str]) -> Any:
    if isinstance(value, str):
        for name, thing in slots.items():
            value = value.replace("{" + name + "}", thing)
        return value
    if isinstance(value, list):
        return [_fill(v, slots) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, slots) for k, v in value.items()}
    return value


# -- tasks ----------------------------------------------------------------------------------------------

def subgoals_of(goal: dict[str, Any], env_name: str) -> list:
    """The bound outcomes as subgoals on the environment's things (a name it lacks: KeyError)."""
    from forge_resources.robosuite.task_kinds import Subgoal, things

    th = things(env_name)
    return [Subgoal(o["kind"], th[o["object"]], th[o["place"]] if o.get("place") else None)
            for o in goal["outcomes"]]


def verifier_of(goal: dict[str, Any], env_name: str) -> dict[str, Any]:
    """The compiled verifier: the physical outcome on body names, with its tolerances."""
    from forge_resources.robosuite import outcomes
    from forge_resources.robosuite.task_kinds import goal_of

    return {"kind": "physical", "environment": env_name, "goal": goal_of(subgoals_of(goal, env_name)),
            "tolerances": {"lift_margin_m": outcomes.LIFT_MARGIN, "peg_xy_m": outcomes.PEG_XY,
                           "peg_z_m": outcomes.PEG_Z, "bin_height_m": 0.1}}


def state_env(ctx_get_blob, blob: str):
    """A manipulation environment restored to a stored state (one per process, reused)."""
    from forge.skills import held
    from forge_resources.robosuite.manipulation import ManipulationEnv

    env = held("robosuite.manipulation", ManipulationEnv)
    state = json.loads(ctx_get_blob(blob))
    env.set_state(state)
    return env, state


def execute(env: Any, steps: list[dict[str, Any]], goal: dict[str, Any]) -> tuple[bool, list[bool], str]:
    """(every step valid, the goal after each step, the first refusal)."""
    from forge_resources.household.protocol import Action
    from forge_resources.robosuite.outcomes import holds

    after = []
    for step in steps:
        result = env.step(Action.from_dict(step))
        if not result.valid:
            return False, after, result.message
        after.append(holds(goal, env))
    return True, after, ""


@skill("ie.synthesize_manipulation_task", stage="S4", parallel=True)
def synthesize_manipulation_task(ctx: SkillContext, binding: TaskBinding) -> list[IETask]:
    """The binding as a task when its scripted reference reaches the goal from the restored
    state and no strict prefix does (the seed's admission); budgets from the reference."""
    from forge_resources.robosuite.manipulation import CONTROL_DT
    from forge_resources.robosuite.task_kinds import reference_plan

    env_name = binding.scene.split("-")[0]
    env, state = state_env(ctx.get_blob, binding.state_blob)
    called = names_seen(env)  # in the initial state, as the macro's names
    subgoals = subgoals_of(binding.goal, env_name)
    verifier = verifier_of(binding.goal, env_name)
    scripted = [a.to_dict() for a in reference_plan(subgoals)]
    steps = json.loads(ctx.get_blob(binding.recorded_reference)) if binding.recorded_reference else scripted
    ok, after, _ = execute(env, steps, verifier["goal"])
    if not ok or not after or not after[-1] or any(after[:-1]):
        return []
    control = env.control_steps()
    # in words, the way there (a demonstration's deltas have none)
    micro = [_say(s, called, {t.name: t.kind for t in env.things()}) for s in scripted]
    return [IETask(
        task_id=f"{binding.scene.lower()}-{binding.template}-{digest(ctx.input_ids['binding'], length=8)}",
        scene=binding.scene, scene_type=binding.scene_type,
        split=f"{'long' if len(steps) > STEPS_PER_SUBGOAL * len(subgoals) else 'short'}_"
              f"{'hard' if len(subgoals) >= 2 else 'simple'}",
        task_type=binding.task_type, instruction={"macro": binding.macro, "micro": micro},
        action_interface=action_interface(), max_steps=BUDGET_FACTOR * len(steps),
        goal=binding.goal, verifier=verifier, reference_plan=steps, subtasks=len(subgoals),
        budget_steps=BUDGET_FACTOR * len(steps), initial_state=binding.state_blob, template=binding.template,
        binding=ctx.input_ids["binding"], state_artifact=binding.state, difficulty=binding.difficulty,
        environment=ENVIRONMENT,
        budget={"steps": BUDGET_FACTOR * len(steps), "control_steps": BUDGET_FACTOR * control,
                "simulated_seconds": round(BUDGET_FACTOR * control * CONTROL_DT, 2),
                "reference_control_steps": control})]


def action_interface() -> dict[str, Any]:
    from dataclasses import asdict

    from forge_resources.robosuite.manipulation import ACTIONS

    return {"actions": [asdict(a) for a in ACTIONS], "grounded": True, "stop": "Stop: end the episode",
            "levels": {"low": ["MoveDelta"], "high": [a.name for a in ACTIONS if a.name != "MoveDelta"]},
            "control_hz": 20}


_SAY = {"MoveAbove": "Move the gripper above the {0}.", "Descend": "Lower the gripper around the {0}.",
        "Grasp": "Close the gripper.", "Lift": "Lift it.", "PlaceAt": "Put it {at} the {0} and let go.",
        "Release": "Open the gripper."}


_AT = {"bin": "in", "peg": "over"}  # the preposition a place of each kind takes (an object's top: on)


def _say(step: dict[str, Any], called: dict[str, str], kinds: dict[str, str]) -> str:
    args = step.get("args") or []
    at = _AT.get(kinds.get(args[0], ""), "on") if args else "on"
    return _SAY[step["name"]].format(*(called.get(a, a) for a in args), at=at)


def robosuite_setup(entry: dict[str, Any], src: Any) -> tuple[list[str], int]:
    """The scene types of the environments asked, in their order; the demonstrations of those
    environments that have a goal to pursue, when a folder of them is given."""
    from forge.errors import IntentError
    from forge_resources.robosuite.task_kinds import DEMO_OUTCOMES

    entry["demo_units"] = []
    if src.demos:
        from forge_resources.robosuite.demo_frames import demos_under
        from forge_resources.robosuite.demos import DemoError

        try:
            found = demos_under(str(src.demos))
        except DemoError as exc:
            raise IntentError(f"sources: robosuite_tasks.demos: {exc}") from None
        entry["demo_units"] = [{"path": str(d.path), "key": d.key, "env": d.env_name} for d in found
                               if d.env_name in src.envs and d.env_name in DEMO_OUTCOMES]
    return [SCENE_TYPES[e] for e in src.envs], TASKS_PER_UNIT


TASKS_PER_UNIT = 2  # admitted tasks a seed yields across the library (measured), to size the units
register("ie_source_setup", "robosuite_tasks", robosuite_setup)


def _package_files() -> dict[str, bytes]:
    from pathlib import Path

    import forge_resources.robosuite.outcomes as outcomes

    return {"outcomes.py": Path(outcomes.__file__).read_bytes()}


PACKAGE = {
    "files": _package_files, "scenes": "seeded robosuite scenes", "kind": "manipulation",
    "licence": {"source": "robosuite's environments, models and assets (MIT)", "terms": {"redistribute": True}},
    "episodes": ("Each task's budget (high-level steps, control steps at 20 Hz and simulated seconds) is three times "
                 "its scripted reference's; invalid actions are recorded and do not end an episode."),
    "run": ("Run an episode by restoring `states/<task>.json` in forge's `ManipulationEnv` and stepping its actions; "
            "the gates ran each reference three times, a cut and a wrong-target control, and a restore check."),
    "check": ["The verifier (`answers/<task>.json`, field `verifier.goal`) is a physical outcome on MuJoCo body "
              "names with tolerances; `{mod}/outcomes.py` evaluates it with `holds(goal, scene)` on a restored "
              "simulator state (forge's `ManipulationEnv` restores `states/<task>.json` exactly)."],
}


def reverify_task(answer: dict[str, Any], state: dict[str, Any]) -> str | None:
    """A released task re-run from its own files: the state restores exactly, the goal does not
    hold at the start, the reference runs valid and reaches it, no strict prefix does."""
    from forge.skills import held
    from forge_resources.robosuite.manipulation import ManipulationEnv
    from forge_resources.robosuite.outcomes import holds

    env = held("robosuite.manipulation", ManipulationEnv)
    env.set_state(state)
    if env.get_state() != state:
        return "the initial state does not restore exactly"
    goal = answer["verifier"]["goal"]
    if holds(goal, env):
        return "the goal already holds at the start"
    ok, after, refused = execute(env, answer["reference_plan"], goal)
    if not ok:
        return f"reference step {len(after) + 1} is refused: {refused}"
    if any(after[:-1]):
        return f"a strict prefix of {after.index(True) + 1} steps already meets the goal"
    return None if after and after[-1] else "the reference plan ends without meeting the goal"

