"""Re-verification of a released IE package from its own files (``forge verify`` / ``reverify``).

For every task: the initial state in ``states/`` restores exactly; the reference plan in
``answers/`` runs valid from it and reaches the compiled verifier, which no strict prefix does;
and what an agent sees (``tasks/``, ``tasks.jsonl``) carries none of the hidden fields (the
leakage check). Damage is reported on the task it touches; nothing raises.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from forge_resources.household import HouseholdEnv
from forge_resources.household.goals import Verifier, evaluate
from forge_resources.household.protocol import Action

HIDDEN = ("goal", "verifier", "reference_plan", "task_type", "subtasks", "budget_steps")


def reverify_ie_package(store: Any, package: Path, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """``store`` is not needed (a package holds what its tasks need); kept for the reverifier signature."""
    file_problems: list[str] = []
    ids = sorted(p.stem for p in (package / "tasks").glob("*.json")) if (package / "tasks").is_dir() else []
    if not ids:
        file_problems.append("tasks/: no task files")
    invalid: dict[str, str] = {}
    for done, tid in enumerate(ids):
        if progress is not None and done % 50 == 0 and done:
            progress(done, len(ids))
        try:
            reason = task_problem(package, tid)
        except Exception as exc:  # damage of any kind is the task's, reported
            reason = f"cannot be re-verified: {type(exc).__name__}: {str(exc)[:160]}"
        if reason:
            invalid[tid] = reason
    file_problems += _listing_leaks(package)
    if progress is not None:
        progress(len(ids), len(ids))
    return {"items": len(ids), "valid": len(ids) - len(invalid), "invalid": len(invalid),
            "valid_rate": (len(ids) - len(invalid)) / len(ids) if ids else 0.0, "reasons": invalid,
            "file_problems": file_problems}


def task_problem(package: Path, tid: str) -> str | None:
    visible = json.loads((package / "tasks" / f"{tid}.json").read_text())
    leaked = [k for k in HIDDEN if k in visible]
    if leaked:
        return f"the visible task shows hidden fields {leaked}"
    answer = json.loads((package / "answers" / f"{tid}.json").read_text())
    state = json.loads((package / "states" / f"{tid}.json").read_text())
    from forge_skills.ie.world import default_environment, world

    return world(visible.get("environment", default_environment())).reverify(answer, state)


def household_task_problem(answer: dict[str, Any], state: dict[str, Any]) -> str | None:
    """A household task re-run from its files: the state restores exactly, the goal does not hold
    at the start, the reference plan runs valid and reaches it, no strict prefix does."""
    env = HouseholdEnv()
    env.set_state(state)
    if env.get_state() != state:
        return "the initial state does not restore exactly"
    verifier = Verifier.from_dict(answer["verifier"])
    if evaluate(verifier, env.objects())[0]:
        return "the goal already holds at the start"
    steps = answer["reference_plan"]
    for i, step in enumerate(steps):
        result = env.step(Action.from_dict(step))
        if not result.valid:
            return f"reference step {i + 1} is refused: {result.message}"
        done = evaluate(verifier, env.objects())[0]
        if done and i < len(steps) - 1:
            return f"a strict prefix of {i + 1} steps already meets the goal"
        if i == len(steps) - 1 and not done:
            return "the reference plan ends without meeting the goal"
    return None


def _listing_leaks(package: Path) -> list[str]:
    out = []
    listing = package / "tasks.jsonl"
    if listing.is_file():
        for n, line in enumerate(listing.read_text(errors="replace").splitlines(), 1):
            try:
                row = json.loads(line)
            except ValueError:
                out.append(f"tasks.jsonl line {n}: not JSON")
                continue
            leaked = [k for k in HIDDEN if k in row]
            if leaked:
                out.append(f"tasks.jsonl line {n}: shows hidden fields {leaked}")
    return out
