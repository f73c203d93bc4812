"""Fault-injection fixtures: a clean reference build and builds with one planted defect."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conftest import run_build, write_intent  # noqa: E402
from forge.faults import Fault, FaultPlan  # noqa: E402
from forge.keys import digest  # noqa: E402
from forge.store import Store  # noqa: E402


class FaultedBuild:
    def __init__(self, root: Path, plan: FaultPlan, summary: dict[str, Any]) -> None:
        self.root, self.plan, self.summary = root, plan, summary
        self.store = Store(root / "store", read_only=True)

    @property
    def injected(self) -> list[str]:
        return [f["artifact"] for f in self.plan.injected]

    def diagnoses(self) -> list[dict[str, Any]]:
        rows = self.store.execute("SELECT artifact_id, artifact_type, requirement, category, operator, attempt, grp, "
                                  "cause FROM diagnoses ORDER BY round, artifact_id").fetchall()
        keys = ["artifact", "type", "requirement", "category", "operator", "attempt", "group", "cause"]
        return [dict(zip(keys, r)) for r in rows]

    def repairs(self) -> list[dict[str, Any]]:
        rows = self.store.execute("SELECT round, operator, priors, new, rebuilt, status, error FROM repairs "
                                  "ORDER BY round, operator").fetchall()
        return [{"round": r[0], "operator": r[1], "priors": json.loads(r[2]), "new": json.loads(r[3]),
                 "rebuilt": json.loads(r[4]), "status": r[5], "error": r[6]} for r in rows]

    def released(self) -> set[str]:
        return {json.loads(line)["id"] for line in open(Path(self.summary["package_path"]) / "items.jsonl")}

    def artifacts(self) -> dict[str, tuple[str, str]]:
        return {r[0]: (r[1], r[2]) for r in self.store.execute("SELECT id, type, status FROM artifacts").fetchall()}

    def clean_counterpart(self, faulted_id: str) -> str:
        """The id the artifact would have had without the planted defect."""
        run_key, key = self.store.one("SELECT run_key, output_key FROM artifacts WHERE id = ?", [faulted_id])
        return digest(run_key, key, length=32)

    def metadata(self, aid: str) -> dict[str, Any]:
        return json.loads(self.store.one("SELECT metadata FROM artifacts WHERE id = ?", [aid])[0] or "{}")


@pytest.fixture
def faulted(tmp_path):
    def build(*faults: Fault) -> FaultedBuild:
        plan = FaultPlan(list(faults))
        summary = run_build(write_intent(tmp_path), tmp_path / "store", tmp_path / "out", faults=plan)
        return FaultedBuild(tmp_path, plan, summary)
    return build


def kept_check(built: dict[str, Any], fb: FaultedBuild, affected_clean: set[str]) -> int:
    """Every verified artifact of the clean build outside the affected lineage is present
    and verified, unchanged, in the faulted build; returns how many."""
    with Store(built["store"], read_only=True) as clean:
        rows = clean.execute("SELECT id, type FROM artifacts WHERE status = 'verified' AND type != 'Package'").fetchall()
        lineage = set(affected_clean) | clean.descendants(affected_clean)
    have = fb.artifacts()
    kept = 0
    for aid, type_name in rows:
        if aid in lineage:
            continue
        assert have.get(aid) == (type_name, "verified"), f"{type_name} {aid} was lost or rebuilt"
        kept += 1
    return kept
