"""The build step that runs ``package.assess`` on a track's released package (gates E and F, the
report, the exports); shared by the tracks whose packages are question items."""

from __future__ import annotations

from typing import Any

from forge.invocation import WorkflowNode
from forge.skills import REGISTRY
from forge_skills.package.build_record import skill_use

SKILL = "package.assess"


def assess_package(runner: Any, package_id: str, gates: dict[str, Any], record: dict[str, Any],
                   model_panel: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])) -> list[str]:
    """Run the assessment on the package; the assessed package's ids."""
    record = {**record, "skills": skill_use(runner.store, runner.executor.build_id, [(SKILL, "S5")])}
    members, rows = model_panel
    params = {"panel": list(gates["panel"]), "bootstrap": int(gates["irt_bootstrap"]), "build": record,
              "model_members": members, "model_rows": rows}
    node = WorkflowNode("assess", REGISTRY.get(SKILL), {})
    invocation = runner.executor.invocation(node, {"package": package_id}, params)
    result = runner.executor.run([invocation], label=f"S5 {SKILL}")
    runner.results.setdefault("assess", type(result)()).merge(result)
    if not result.verified and result.errors:
        from forge.errors import SkillExecutionError

        raise SkillExecutionError(result.errors[0])
    runner.require("assess", result, "assessed package")
    return result.verified
