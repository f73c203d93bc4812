"""The build step that runs ``package.assess`` on a track's released package (gates E and F, the
report, the exports); shared by the tracks whose packages are question items."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from forge.invocation import WorkflowNode
from forge.skills import REGISTRY
from forge_skills.package.build_record import skill_use
from forge_skills.package.panel import response_record

SKILL = "package.assess"


def assess_package(runner: Any, package_id: str, gates: dict[str, Any], record: dict[str, Any],
                   model_panel: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])) -> list[str]:
    """Run the assessment on the package; the assessed package's ids."""
    record = {**record, "skills": skill_use(runner.store, runner.executor.build_id, [(SKILL, "S5")])}
    members, rows = model_panel
    params = {"panel": list(gates["panel"]), "bootstrap": int(gates["irt_bootstrap"]), "build": record,
              "model_members": members, "model_rows": rows}
    if gates.get("panel_agents") is not None:
        params["agents"] = list(gates["panel_agents"])
    node = WorkflowNode("assess", REGISTRY.get(SKILL), {})
    runner.executor.forget()  # the items, bindings and scenes loaded for the earlier steps
    runner.store.release_memory()  # and the table blocks the package step read
    invocation = runner.executor.invocation(node, {"package": package_id}, params)
    result = runner.executor.run([invocation], label=f"S5 {SKILL}")
    runner.results.setdefault("assess", type(result)()).merge(result)
    if not result.verified and result.errors:
        from forge.errors import SkillExecutionError

        raise SkillExecutionError(result.errors[0])
    runner.require("assess", result, "assessed package")
    return result.verified


def model_panel(runner: Any, package_id: str, roles: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                                               dict[str, Any]]:
    """The intent's panel models on every released item, asked as ``forge eval`` asks (their
    replies cached and stored in the build's store, so a stopped build asks only the rest):
    (members, scored response records, tokens per member). Their tokens are the evaluation's,
    not the construction's, and are reported apart from it."""
    if not roles:
        return [], [], {}
    from forge.evaluation import EvalOptions, evaluate, load_package
    from forge.evaluation import records as eval_records
    from forge.evaluation.spec import ModelSpec
    from forge.export import export

    members, rows, usage = [], [], {}
    with tempfile.TemporaryDirectory(prefix="forge-gate-e-") as tmp:
        folder, _ = export(runner.store, runner.executor.load(package_id), Path(tmp))
        pkg = load_package(folder)
        for name, role in roles.items():
            spec = ModelSpec(f"{role.base_url}@{role.model}", role=role)
            # A member that does not read images (vision: false) is asked the text alone.
            evaluate(pkg, spec, EvalOptions(store_dir=Path(tmp) / "records", media=bool(role.vision)),
                     store=runner.store)
            stored = eval_records.stored(runner.store, pkg.digest, spec.key)
            mine = [stored[it["id"]] for it in pkg.items]
            members.append({"model": spec.spec, "label": f"model ({name})"})
            rows += [response_record(r) for r in mine]
            usage[spec.spec] = {"items": len(mine), "tokens_in": sum(r.tokens_in for r in mine),
                                "tokens_out": sum(r.tokens_out for r in mine)}
    return members, rows, usage
