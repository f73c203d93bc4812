"""Repair invariants, independent re-verification, and resuming a build killed mid-repair."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from forge.faults import Fault
from forge.repair import Diagnosis, RepairInvariantError
from forge.store import Store
from forge_skills.oe.verify.reverify import reverify_package

from conftest import write_intent


def test_clean_release_reverifies_fully(built):
    with Store(built["store"], read_only=True) as s:
        report = reverify_package(s, built["package"])
    assert report["items"] == built["summary"]["items_released"]
    assert report["invalid"] == 0, report["reasons"]


def test_repaired_versions_pass_the_same_contracts(faulted):
    fb = faulted(Fault("wrong_answer_key", "synthesize.realize_item", rate=0.05))
    new = [a for r in fb.repairs() for a in r["new"]]
    assert new
    priors = [fb.metadata(aid)["repair"]["prior"] for aid in new]
    checks = fb.store.verifications(new + fb.injected + priors)
    for aid in new:
        prior = fb.metadata(aid)["repair"]["prior"]
        assert [c["requirement"] for c in checks[aid]] == [c["requirement"] for c in checks[prior]]
        assert all(c["passed"] for c in checks[aid])
    assert fb.summary["repair"]["guard"], "contracts and gates were fingerprinted"
    with Store(fb.root / "store", read_only=True) as s:
        assert reverify_package(s, Path(fb.summary["package_path"]))["invalid"] == 0


@pytest.mark.xdist_group("frame_join")
def test_evidence_is_never_edited_in_place(frame_join, tmp_path):
    fb = frame_join
    [bad] = fb.injected
    from forge.repair import RepairLoop, RepairSettings
    from forge.contracts import ContractBook
    from forge.executor import Executor
    from forge.intent import load_intent
    from forge.planner import compose
    from forge.skills import discover

    workflow = compose(load_intent(fb.root / "intent.yaml"), discover())
    with Store(tmp_path / "store2") as store:
        loop = RepairLoop(store, Executor(store, ContractBook.load(), "x"), workflow, RepairSettings(), "x", {})
        d = Diagnosis(bad, "EvidenceRecord", "EV-3", "invalid_evidence", bad, "structure.rendered_evidence", "",
                      "local_field_repair", 1, bad)
        with pytest.raises(RepairInvariantError, match="never edited"):
            loop._apply("local_field_repair", [d])


def _forge(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "forge.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)


@pytest.mark.slow
def test_build_killed_during_repair_resumes(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"kind": "systematic_wrong_answer", "skill": "synthesize.bind_template",
                                 "where": {"template": "left_of_yesno"}}]))
    intent = write_intent(tmp_path)
    ref = _forge("build", str(intent), "--store", str(tmp_path / "ref"), "--out", str(tmp_path / "ref_out"),
                 "--faults", str(plan), "--json", "--workers", "1")
    out, err = ref.communicate()
    assert ref.returncode == 0, err
    expected = json.loads(out)
    reexecutions = expected["repair"]["operators"]["skill_reexecution"]["repairs"]
    assert reexecutions >= 1  # one per round that meets the fault (a top-up brings bindings it spoils too)

    args = ["build", str(intent), "--store", str(tmp_path / "s"), "--out", str(tmp_path / "o"), "--faults", str(plan),
            "--workers", "1"]
    proc = _forge(*args)
    for line in proc.stderr:
        if "diagnosis and repair" in line:
            import time

            time.sleep(0.5)
            os.killpg(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    assert proc.returncode != 0, "the build must have been killed inside the repair stage"
    with Store(tmp_path / "s", read_only=True) as s:
        partial = s.one("SELECT count(*) FROM repairs")[0]
    final = _forge(*args, "--json")
    out, err = final.communicate()
    assert final.returncode == 0, err
    name = Path(expected["package_path"]).name
    assert (tmp_path / "o" / name / "manifest.json").read_bytes() == \
        (tmp_path / "ref_out" / name / "manifest.json").read_bytes()
    assert partial <= reexecutions
