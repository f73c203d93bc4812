"""Staleness: what the next build would rebuild, and the root cause of each (like git status).

A run of the last completed build is stale when its skill's code changed (``code``), a data
file it read changed (``data``: a template, the intent), or an input came from a stale run
(``dependency``, with the upstream root cause). Artifacts whose contract changed only need
re-verification (``contract``).
"""

from __future__ import annotations

import json
from typing import Any

from forge.codeversion import CODE_LABEL, code_label_file, data_files_version
from forge.contracts import ContractBook
from forge.errors import ForgeError
from forge.intent import load_intent
from forge.keys import canonical_json
from forge.planner import compose, extra_contract_dirs
from forge.skills import discover
from forge.store import Store


def stale_report(store: Store) -> dict[str, Any]:
    build_id = store.last_build_id()
    if build_id is None:
        return {"build_id": None, "stale_artifacts": 0, "causes": [], "artifacts": [],
                "message": "no completed build in this store"}
    intent_path = store.one("SELECT intent_path FROM builds WHERE build_id = ?", [build_id])[0]
    registry = discover()
    current_params: dict[str, str] = {}
    current_files: dict[str, str] = {}  # data-file label -> where the current intent finds it
    contracts = None
    try:
        loaded = load_intent(intent_path)
        for node in compose(loaded, registry).nodes:
            if not node.skill.inputs:
                current_params[node.skill.name] = canonical_json(node.skill.validate_params(node.params))
            if node.skill.reads and node.fanout:  # parameter sets known before the build runs
                for extra in node.fanout:
                    current_files.update(node.skill.reads(node.skill.validate_params({**node.params, **extra})))
        contracts = ContractBook.load(extra_contract_dirs(loaded))
    except ForgeError as exc:
        current_params["__error__"] = str(exc)
    runs = store.execute(
        "SELECT r.run_key, r.skill, r.module_version, r.data_files, r.params, r.inputs, r.outputs "
        "FROM skill_runs r JOIN build_runs b ON r.run_key = b.run_key WHERE b.build_id = ? AND r.status = 'ok'",
        [build_id]).fetchall()
    producer: dict[str, str] = {}
    info: dict[str, dict[str, Any]] = {}
    for key, skill, mver, data_files, params, inputs, outputs in runs:
        outs = json.loads(outputs)
        for o in outs:
            producer[o] = key
        flat_inputs: list[str] = []
        for v in json.loads(inputs).values():
            flat_inputs.extend(v if isinstance(v, list) else [v])
        info[key] = {"skill": skill, "module_version": mver, "data_files": json.loads(data_files),
                     "params": params, "inputs": flat_inputs, "outputs": outs}

    module_versions: dict[str, str | None] = {}
    own: dict[str, tuple[str, str] | None] = {}
    for key, r in info.items():
        skill = r["skill"]
        if skill not in module_versions:
            module_versions[skill] = registry.get(skill).module_version() if skill in registry else None
        own[key] = _own_cause(r, module_versions[skill], current_params, current_files, intent_path)

    memo: dict[str, tuple[str, str] | None] = {}

    def cause(key: str) -> tuple[str, str] | None:
        if key in memo:
            return memo[key]
        memo[key] = None
        c = own[key]
        if c is None:
            for inp in info[key]["inputs"]:
                up = producer.get(inp)
                if up and cause(up):
                    c = ("dependency", cause(up)[1])
                    break
        memo[key] = c
        return c

    artifacts = []
    for key in info:
        c = cause(key)
        if c:
            for o in info[key]["outputs"]:
                artifacts.append({"id": o, "skill": info[key]["skill"], "cause": c[0], "root": c[1]})
    types = store.artifact_column([a["id"] for a in artifacts], "type") if artifacts else {}
    for a in artifacts:
        a["type"] = types.get(a["id"], "?")
    stale_ids = {a["id"] for a in artifacts}
    if contracts is not None:
        produced = list(producer)
        rows = store.artifact_columns(produced, "type", "contract_version")
        for aid, (type_name, cver) in rows.items():
            if aid not in stale_ids and cver != contracts.version(type_name):
                artifacts.append({"id": aid, "skill": info[producer[aid]]["skill"], "type": type_name,
                                  "cause": "contract", "root": f"contract for {type_name} changed (re-verify only)"})
    groups: dict[tuple[str, str], dict[str, int]] = {}
    for a in artifacts:
        g = groups.setdefault((a["cause"], a["root"]), {})
        g[a["type"]] = g.get(a["type"], 0) + 1
    causes = [{"cause": c, "root": root, "artifacts": sum(t.values()), "types": dict(sorted(t.items()))}
              for (c, root), t in sorted(groups.items())]
    return {"build_id": build_id, "intent": intent_path, "artifacts_in_build": len(producer),
            "stale_artifacts": len(artifacts), "causes": causes,
            "artifacts": sorted(artifacts, key=lambda a: (a["cause"], a["type"], a["id"])),
            **({"warning": current_params["__error__"]} if "__error__" in current_params else {})}


def _own_cause(run: dict[str, Any], module_version: str | None, current_params: dict[str, str],
               current_files: dict[str, str], intent_path: str) -> tuple[str, str] | None:
    skill = run["skill"]
    if module_version is None:
        return ("code", f"skill {skill} no longer exists")
    if module_version != run["module_version"]:
        return ("code", f"code of skill {skill} changed")
    if run["data_files"]:
        # A file is compared where the intent finds it now: a moved folder is not a change.
        now = data_files_version({label: code_label_file(label, current_files.get(label, e["path"]))
                                  for label, e in run["data_files"].items()})
        for label, entry in run["data_files"].items():
            if now[label]["hash"] != entry["hash"]:
                if label.startswith(CODE_LABEL):  # registered code the skill found through the registry
                    return ("code", f"code of {label[len(CODE_LABEL):]} changed")
                return ("data", f"{label} changed")
    if not run["inputs"] and skill in current_params and current_params[skill] != run["params"]:
        return ("data", f"intent {intent_path} changed")
    return None
