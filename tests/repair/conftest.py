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

    def accepted(self) -> set[str]:
        """Items that passed every gate (the package then selects its composition from them)."""
        rows = self.store.execute("SELECT subject_id FROM gate_decisions WHERE gate = 'C1' AND subject_type = 'OEItem' "
                                  "AND decision = 'pass'").fetchall()
        return {r[0] for r in rows}

    def artifacts(self) -> dict[str, tuple[str, str]]:
        return {r[0]: (r[1], r[2]) for r in self.store.execute("SELECT id, type, status FROM artifacts").fetchall()}

    def clean_counterpart(self, faulted_id: str) -> str:
        """The id the artifact would have had without the planted defect."""
        run_key, key = self.store.one("SELECT run_key, output_key FROM artifacts WHERE id = ?", [faulted_id])
        return digest(run_key, key, length=32)

    def metadata(self, aid: str) -> dict[str, Any]:
        return json.loads(self.store.one("SELECT metadata FROM artifacts WHERE id = ?", [aid])[0] or "{}")


def faulted_build(root: Path, *faults: Fault, **intent_changes: Any) -> FaultedBuild:
    """The small test intent built in ``root`` with ``faults`` planted."""
    plan = FaultPlan(list(faults))
    summary = run_build(write_intent(root, **intent_changes), root / "store", root / "out", faults=plan)
    return FaultedBuild(root, plan, summary)


@pytest.fixture
def faulted(tmp_path):
    def build(*faults: Fault, **intent_changes: Any) -> FaultedBuild:
        return faulted_build(tmp_path, *faults, **intent_changes)
    return build


@pytest.fixture(scope="session")
def frame_join(tmp_path_factory) -> FaultedBuild:
    """One build with a wrong frame join planted in an evidence record; tests of two files read it
    (each marked with the xdist group "frame_join", so one worker builds it)."""
    return faulted_build(tmp_path_factory.mktemp("frame_join"), Fault("wrong_frame_join", "structure.rendered_evidence",
                                                                      limit=1))


def kept_check(built: dict[str, Any], fb: FaultedBuild, affected_clean: set[str]) -> int:
    """Repair kept everything outside its scope; returns how many verified artifacts it kept.

    - every artifact a repair created is in a repair record's rebuilt scope, and descends
      from a diagnosed artifact (nothing outside the scope was re-created);
    - every verified artifact of the build that no repair created is still there, verified;
    - upstream of synthesis, the build equals a clean build outside the affected lineage.
    """
    rows = fb.store.execute("SELECT id, type, status, metadata FROM artifacts").fetchall()
    made_by_repair = {aid for aid, _, _, meta in rows if json.loads(meta or "{}").get("repair")}
    scope = {a for r in fb.repairs() for a in r["rebuilt"]}
    assert made_by_repair == scope, "a repair re-created something outside its recorded scope"
    diagnosed = {d["artifact"] for d in fb.diagnoses()}
    assert scope <= fb.store.descendants(diagnosed), "a rebuilt artifact does not descend from a failure"
    kept = [aid for aid, _, status, _ in rows if status == "verified" and aid not in made_by_repair]
    # Both builds collect the same scenes, up to the smaller number either needed (a build that
    # the gates leave short collects more; repairs change what the gates see).
    units = min(fb.summary["units_collected"], built["summary"]["units_collected"])
    with Store(built["store"], read_only=True) as clean:
        upstream = clean.execute(
            "SELECT id, type FROM artifacts WHERE status = 'verified' AND type IN ('Blueprint', 'SceneSpec', "
            "'SourceRecord', 'EvidenceRecord', 'Template') AND coalesce(TRY_CAST(json_extract_string(content, "
            "'$.scene_index') AS INTEGER), -1) < ?", [units]).fetchall()
        lineage = set(affected_clean) | clean.descendants(affected_clean)
    have = {aid: (t, st) for aid, t, st, _ in rows}
    for aid, type_name in upstream:
        if aid not in lineage:
            assert have.get(aid) == (type_name, "verified"), f"{type_name} {aid} was lost or rebuilt"
    return len(kept)
