"""What a build records for its package's report: which skills it used (and whether other tracks
or sources use them too), its repairs by operator and cause, and its blind-solver margins.

Only what the build decided goes in, never how long it took or what the store already held, so
the same build from an empty store, a resumed one and one on another executor record the same.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping


def skill_settings() -> dict[str, set[str]]:
    """Skill name -> the registered source kinds whose workflow invokes it (a descriptor's own
    skills, and its track's default and repair skills for roles the descriptor leaves to them)."""
    from forge.registry import entries
    from forge.resources import descriptors

    tracks = entries("track")
    out: dict[str, set[str]] = {}
    for kind, d in descriptors().items():
        track = tracks.get(d.track)
        named = dict(getattr(track, "defaults", {}) or {}) if track is not None else {}
        named.update(d.workflow)
        skills = set(named.values()) | set((getattr(track, "repair_skills", {}) or {}).values())
        for s in skills:
            out.setdefault(s, set()).add(kind)
    return out


def skill_use(store: Any, build_id: str, also: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """The skills this build invoked (and ``also``: (skill, stage) pairs it is about to), each
    counted once as the paper's reuse accounting does: reused when another source kind's workflow
    invokes it too, specific otherwise."""
    rows = store.execute(
        "SELECT DISTINCT r.skill, r.stage FROM skill_runs r JOIN build_runs b ON r.run_key = b.run_key "
        "WHERE b.build_id = ?", [build_id]).fetchall()
    rows = sorted(set(map(tuple, rows)) | set(also))
    from forge.resources import descriptors

    settings = skill_settings()
    shared = {name for name, _ in also}  # steps every track runs: every source kind uses them
    used = []
    for name, stage in rows:
        n = len(descriptors()) if name in shared else len(settings.get(name, ()))
        used.append({"skill": name, "stage": stage, "settings": n, "specific": n < 2})
    reused = sum(not u["specific"] for u in used)
    return {"used": used, "summary": {"used": len(used), "reused": reused, "specific": len(used) - reused,
                                      "reuse_rate": round(reused / len(used), 4) if used else None}}


def repairs_by_cause(records: Iterable[Any]) -> dict[str, Any]:
    """Repaired artifacts per operator and cause (the failed requirement and its category)."""
    counts: dict[str, Counter] = {}
    records = list(records)
    for rec in records:
        for d in rec.diagnoses:
            counts.setdefault(rec.operator, Counter())[f"{d.requirement} ({d.category})"] += 1
    return {"by_operator_and_cause": {op: dict(sorted(c.items())) for op, c in sorted(counts.items())},
            "repairs": len(records), "artifacts": sum(len(r.diagnoses) for r in records)}


def blind_margins(reports: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per template C1 tested: its best blind solver's accuracy minus chance."""
    out = []
    for template, r in sorted(reports.items()):
        if r.get("best_accuracy") is None or r.get("chance") is None:
            continue
        out.append({"template": template, "items": r.get("items"), "chance": round(float(r["chance"]), 6),
                    "best_solver": r.get("best_solver"), "best_accuracy": round(float(r["best_accuracy"]), 6),
                    "margin": round(float(r["best_accuracy"]) - float(r["chance"]), 6)})
    return out
