"""S5 of the IE track: select the composition and lay out the release.

Layout (``packages_out/<name>-<version>/``)::

    manifest.json         format version, track "ie", counts, which checks ran without a model, checksums
    tasks.jsonl           one line per task: what an agent sees (TaskSpec.VISIBLE)
    tasks/<id>.json       the same, one file per task
    states/<id>.json      the restorable initial state (the household backend's serialization)
    answers/<id>.json     hidden: task kind, goal, compiled verifier, reference plan, subtasks, budget
    <module>/verify.py    a verifier that needs only the standard library: a terminal state in
                          AI2-THOR's metadata schema -> success, progress, unmet conditions
    composition.json      targets and achieved per scene type and difficulty, splits, kinds, scenes
    README.md

Nothing depends on time or machine: the same accepted tasks give byte-identical files.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from forge import PACKAGE_FORMAT_VERSION
from forge.artifact_types import Package
from forge.keys import digest
from forge.skills import SkillContext, skill
from forge_skills.ie.types import IEBlueprint, IETask
from forge_skills.ie.world import default_environment, world as world_of

VISIBLE = ("task_id", "scene", "scene_type", "split", "instruction", "action_interface", "max_steps")
HIDDEN = ("task_type", "difficulty", "goal", "verifier", "reference_plan", "subtasks", "budget_steps")


class IEPackageParams(BaseModel):
    model_checks: dict[str, Any] | None = Field(None, description="which checks ran on a model")
    admission: dict[str, Any] | None = Field(None, description="states and bindings tried and admitted, and why not")


# Each world lays out its own part of the package (``IEWorld.package``).
@skill("ie.package", stage="S5", params=IEPackageParams, consults=("ie_world",))
def ie_package(ctx: SkillContext, blueprint: IEBlueprint, tasks: list[IETask]) -> list[Package]:
    """The composition's tasks with their states, hidden answers and a standalone verifier."""
    ids = ctx.input_ids["tasks"]
    selected = select(blueprint, list(zip(ids, tasks)))
    mod = blueprint.name.replace("-", "_")
    files: dict[str, str] = {}
    rows = []
    for _, task in selected:
        visible = {k: getattr(task, k) for k in VISIBLE}
        if task.environment != default_environment():  # which world runs it, for every reader of the task
            visible["environment"] = task.environment
        visible.update({k: getattr(task, k) for k in world_of(task.environment).shows})
        rows.append(visible)
        files[f"tasks/{task.task_id}.json"] = ctx.put_blob(_json(visible))
        files[f"answers/{task.task_id}.json"] = ctx.put_blob(_json({"task_id": task.task_id,
                                                                    **{k: getattr(task, k) for k in HIDDEN}}))
        files[f"states/{task.task_id}.json"] = ctx.put_blob(_json(json.loads(ctx.get_blob(task.initial_state))))
    files["tasks.jsonl"] = ctx.put_blob("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode())
    composition = _composition(blueprint, [t for _, t in selected])
    if ctx.params.admission:
        composition["admission"] = ctx.params.admission
    files["composition.json"] = ctx.put_blob(_json(composition))
    world = _world({t.environment for _, t in selected})
    files[f"{mod}/__init__.py"] = ctx.put_blob(f'"""Verifier of the {blueprint.name} tasks."""\n'.encode())
    for name, data in world["files"]().items():
        files[f"{mod}/{name}"] = ctx.put_blob(data)
    checks = ctx.params.model_checks
    files["README.md"] = ctx.put_blob(_readme(blueprint, composition, mod, checks, world).encode())
    counts = {"tasks": len(selected), "scenes": len({t.scene for _, t in selected}),
              "accepted_candidates": len(tasks)}
    manifest = {"format_version": PACKAGE_FORMAT_VERSION, "name": blueprint.name, "version": blueprint.version,
                "track": blueprint.track, "intent_hash": blueprint.intent_hash,
                "store_snapshot": digest(sorted(i for i, _ in selected)), "counts": counts,
                "licence": world["licence"],
                **({"model_checks": checks} if checks else {}),
                "files": {p: files[p] for p in sorted(files)}}
    files["manifest.json"] = ctx.put_blob(_json(manifest))
    return [Package(name=blueprint.name, version=blueprint.version, files=files, counts=counts,
                    manifest=files["manifest.json"])]


def select(blueprint: IEBlueprint, tasks: list[tuple[str, IETask]]) -> list[tuple[str, IETask]]:
    """Per scene type and difficulty, its target of tasks, taking floor plans and templates in
    turn so no scene or kind crowds the others out."""
    out: list[tuple[str, IETask]] = []
    for scene_type, row in sorted(blueprint.targets.items()):
        for difficulty, n in sorted(row.items()):
            cell = [(i, t) for i, t in sorted(tasks, key=lambda p: p[0])
                    if t.scene_type == scene_type and _difficulty(t) == difficulty]
            groups: dict[tuple[str, str], list[tuple[str, IETask]]] = {}
            for pair in cell:
                groups.setdefault((pair[1].scene, pair[1].template), []).append(pair)
            order = sorted(groups, key=lambda k: digest(k))
            taken: list[tuple[str, IETask]] = []
            depth = 0
            while len(taken) < n and any(len(groups[k]) > depth for k in order):
                for k in order:
                    if len(taken) < n and len(groups[k]) > depth:
                        taken.append(groups[k][depth])
                depth += 1
            out += taken
    return sorted(out, key=lambda p: p[1].task_id)


def _difficulty(task: IETask) -> str:
    return "hard" if task.subtasks >= 2 else "simple"


def _composition(blueprint: IEBlueprint, tasks: list[IETask]) -> dict[str, Any]:
    have = Counter((t.scene_type, _difficulty(t)) for t in tasks)
    cells = {}
    met = True
    for scene_type, row in sorted(blueprint.targets.items()):
        cells[scene_type] = {}
        for difficulty, n in sorted(row.items()):
            got = have.get((scene_type, difficulty), 0)
            ok = got >= n * (1 - blueprint.composition_tolerance) - 1e-9
            met = met and ok
            cells[scene_type][difficulty] = {"target": n, "achieved": got, "within_tolerance": ok}
    shortfall = [{"part": f"{scene_type} {difficulty} tasks", "target": c["target"], "achieved": c["achieved"]}
                 for scene_type, row in cells.items() for difficulty, c in row.items() if not c["within_tolerance"]]
    return {"target_tasks": blueprint.tasks_target, "tasks": len(tasks), "tolerance": blueprint.composition_tolerance,
            "tolerance_field": "ie.tolerance", "composition_met": met, "shortfall": shortfall, "scene_types": cells,
            "splits": dict(sorted(Counter(t.split for t in tasks).items())),
            "task_kinds": dict(sorted(Counter(t.task_type for t in tasks).items())),
            "templates": dict(sorted(Counter(t.template for t in tasks).items())),
            "scenes": dict(sorted(Counter(t.scene for t in tasks).items())),
            "reference_steps": {"mean": round(sum(len(t.reference_plan) for t in tasks) / max(1, len(tasks)), 2),
                                "max": max((len(t.reference_plan) for t in tasks), default=0)}}


def _household_files() -> dict[str, bytes]:
    import forge_resources.household.goals as goals_module

    household = Path(goals_module.__file__).parent
    return {"verify.py": (Path(__file__).parent / "verify_cli.py").read_bytes(),
            "goals.py": (household / "goals.py").read_bytes(), "catalog.py": (household / "catalog.py").read_bytes()}


HOUSEHOLD = {
    "files": _household_files, "scenes": "floor plans", "kind": "household",
    "licence": {"source": "AI2-THOR scene metadata and ALFRED trials (MIT)", "terms": {"redistribute": True}},
    "run": ("Run agents on every task (reference plan, random, greedy, or an OpenAI-compatible model) with "
            "`forge eval PACKAGE --agent SPEC`."),
    "episodes": "Episodes are capped at 150 steps; invalid actions are recorded and do not end an episode.",
    "check": ["Check a terminal state (AI2-THOR's `event.metadata['objects']`, as JSON) against a task's goal with "
              "only the standard library:", "", "    python -m {mod}.verify TASK_ID terminal_objects.json"],
}


def _world(environments: set[str]) -> dict[str, Any]:
    """What a package of this IE world ships beside its tasks (its verifier, licence, README lines)."""
    from forge.errors import ContractError

    if len(environments) != 1:
        raise ContractError(f"one package holds tasks of one IE world; these tasks run in {sorted(environments)}")
    (name,) = environments
    return world_of(name).package


def _readme(blueprint: IEBlueprint, composition: dict[str, Any], mod: str, checks: dict[str, Any] | None,
            world: dict[str, Any]) -> str:
    lines = [f"# {blueprint.name} {blueprint.version}", "",
             f"Interactive {world['kind']} benchmark: {composition['tasks']} tasks over {len(composition['scenes'])} "
             f"{world['scenes']}. Each task is a restorable initial state (`states/`), an instruction and an action interface "
             "(`tasks/`), and hidden goal conditions with a verifier compiled from them (`answers/`).", "",
             "| scene type | simple (target) | hard (target) |", "|---|---|---|"]
    for kind, row in composition["scene_types"].items():
        lines.append(f"| {kind} | {row.get('simple', {}).get('achieved', 0)} ({row.get('simple', {}).get('target', 0)}) "
                     f"| {row.get('hard', {}).get('achieved', 0)} ({row.get('hard', {}).get('target', 0)}) |")
    adm = composition.get("admission") or {}
    if "states_tried" in adm:
        why = "; ".join(f"{n} {r}" for r, n in adm["not_admitted"].items())
        lines += ["", f"Admission: {adm['states_admitted']} of {adm['states_tried']} seeded scenes settled with finite "
                      f"poses{' (not admitted: ' + why + ')' if why else ''}; the reference reached the goal in "
                      f"{adm['references_reached']} of {adm['bindings_drawn']} bindings tried."]
    lines += ["", "Splits: " + ", ".join(f"{k} {v}" for k, v in composition["splits"].items()) + ".",
              "", world["episodes"] + " Give an agent `tasks/` and `states/`; keep `answers/` hidden.", "",
              *[line.format(mod=mod) for line in world["check"]], "",
              world["run"]]
    if checks and checks.get("without_model"):
        lines += ["", "Checks that ran on built-in backends, without a model: " + "; ".join(checks["without_model"]) + "."]
    return "\n".join(lines) + "\n"


def _json(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()
