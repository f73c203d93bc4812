"""Audit: an artifact's whole lineage back to its sources, with every skill run, code
version, parameter set, data file, verification record and gate decision."""

from __future__ import annotations

import json
from typing import Any

from forge.refs import resolve
from forge.store import Store



def _depth(aid: str, parents: dict[str, list[dict[str, str]]], memo: dict[str, int]) -> int:
    """How many steps from a source an artifact is: lineage reads from the sources down."""
    if aid not in memo:
        memo[aid] = 0  # a cycle (there is none in a build) would stop here
        memo[aid] = 1 + max((_depth(p["parent"], parents, memo) for p in parents.get(aid, [])), default=-1)
    return memo[aid]


def audit(store: Store, ref: str) -> dict[str, Any]:
    target = resolve(store, ref)[0]
    ancestors = store.ancestors([target])
    ids = [target, *sorted(ancestors)]
    arts = store.artifacts(ids)
    runs = store.runs_for_artifacts(ids)
    verifications = store.verifications(ids)
    gates = store.gate_decisions_for(ids + [arts[target].content.get("template", "")])
    parents: dict[str, list[dict[str, str]]] = {}
    for p, c, role in store.parents(ids):
        parents.setdefault(c, []).append({"parent": p, "role": role})
    lineage = []
    for aid in ids:
        a = arts[aid]
        r = runs.get(aid, {})
        lineage.append({
            "id": aid, "type": a.type, "status": a.status, "skill": a.skill, "stage": r.get("stage"),
            "code_version": r.get("code_version"), "module_version": r.get("module_version"),
            "params": r.get("params"), "data_files": r.get("data_files"), "run_key": a.run_key,
            "started_at": r.get("started_at"), "ended_at": r.get("ended_at"),
            "parents": sorted(parents.get(aid, []), key=lambda x: (x["role"], x["parent"])),
            "verifications": verifications.get(aid, []),
            "gate_decisions": gates.get(aid, []),
            "summary": _summarize(a.type, a.content),
        })
    depths: dict[str, int] = {}
    lineage.sort(key=lambda x: (_depth(x["id"], parents, depths), x["type"], x["id"]))
    target_art = arts[target]
    sources = [x for x in lineage if not x["parents"]]
    data_files = sorted({label for x in lineage for label in (x["data_files"] or {})})
    template_gates = gates.get(target_art.content.get("template", ""), [])
    return {"artifact": target, "type": target_art.type, "status": target_art.status,
            "content": target_art.content, "lineage": lineage,
            "sources": [{"id": s["id"], "type": s["type"], "skill": s["skill"]} for s in sources],
            "data_files": data_files, "template_gate_decisions": template_gates,
            "repairs": repair_history(store, ids)}


def repair_history(store: Store, ids: list[str]) -> list[dict[str, Any]]:
    """Every repair in the lineage: operator, violated requirement, prior version, the fields
    that changed (before/after) and the scope that was re-executed."""
    edges = [(p, c) for p, c, role in store.parents(ids) if role == "repairs"]
    if not edges:
        return []
    arts = store.artifacts([x for e in edges for x in e])
    meta = store.artifact_column([c for _, c in edges], "metadata")
    records = store.execute("SELECT new, rebuilt, round, status FROM repairs").fetchall()
    out = []
    for prior, new in edges:
        info = json.loads(meta.get(new) or "{}").get("repair", {})
        before, after = arts[prior].content, arts[new].content
        changed = {k: {"before": before.get(k), "after": after.get(k)}
                   for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)}
        scope = next((json.loads(r[1]) for r in records if new in json.loads(r[0])), [])
        out.append({"artifact": new, "prior": prior, "type": arts[new].type, "operator": info.get("operator"),
                    "violated": info.get("violated"), "attempt": info.get("attempt"), "changed": changed,
                    "rebuilt": scope})
    return out


def _summarize(type_name: str, content: dict[str, Any]) -> str:
    """The artifact type's own one-line summary (what it is, where it came from)."""
    from forge.artifact_types import content_type
    from forge.registry import load_plugins

    load_plugins()  # plugins define their artifact types
    try:
        return content_type(type_name).model_validate(content).summary()
    except Exception:  # a record this code can no longer read: its type name is all we can say
        return type_name
