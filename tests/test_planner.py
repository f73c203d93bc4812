"""Composition: a type or precondition mismatch fails before any skill runs."""

from __future__ import annotations

import pytest

from forge_skills.oe.types import Binding, EvidenceRecord, SourceRecord
from forge.errors import CompositionError, PrerequisiteError
from forge.executor import WorkflowNode
from forge.intent import load_intent
from forge.planner import compose, validate
from forge_skills.oe.track import ROLES as OE_ROLES
from forge.skills import SkillContext, SkillRegistry, discover, skill

from conftest import run_build, write_intent


def test_default_workflow_is_typed_and_ordered(tmp_path):
    wf = compose(load_intent(write_intent(tmp_path)), discover())
    assert [n.role for n in wf.nodes] == list(OE_ROLES)
    assert wf.graph.edges["collect", "structure"]["type"] == "SourceRecord"
    assert wf.graph.edges["bind", "realize"]["type"] == "Binding"


def test_type_mismatch_names_both_skills_and_types(tmp_path):
    # Put the item synthesizer where evidence structuring belongs: it needs a Binding,
    # but the upstream collector produces SourceRecords.
    intent = write_intent(tmp_path, skills={"structure": "synthesize.realize_item"})
    with pytest.raises(CompositionError) as err:
        run_build(intent, tmp_path / "store", tmp_path / "out")
    msg = str(err.value)
    assert "synthesize.realize_item" in msg and "Binding" in msg
    assert "collect.render_scene" in msg and "SourceRecord" in msg
    assert not (tmp_path / "store").exists(), "composition must fail before the store is touched"


def test_unknown_role_is_rejected(tmp_path):
    with pytest.raises(CompositionError, match="unknown roles"):
        compose(load_intent(write_intent(tmp_path, skills={"paint": "x"})), discover())


def test_private_registry_mismatch_and_missing_module():
    reg = SkillRegistry()

    @skill("t.collect", stage="S2", registry=reg)
    def collect(ctx: SkillContext) -> list[SourceRecord]:
        return []

    @skill("t.realize", stage="S4", registry=reg)
    def realize(ctx: SkillContext, binding: Binding) -> list[EvidenceRecord]:
        return []

    @skill("t.needs_module", stage="S3", requires=("no_such_module_xyz",), registry=reg)
    def needs(ctx: SkillContext, source: SourceRecord) -> list[EvidenceRecord]:
        return []

    with pytest.raises(CompositionError) as err:
        validate([WorkflowNode("collect", reg.get("t.collect"), {}), WorkflowNode("realize", reg.get("t.realize"), {})])
    assert "'t.realize'" in str(err.value) and "Binding" in str(err.value)
    assert "'t.collect' produces SourceRecord" in str(err.value)

    with pytest.raises(PrerequisiteError, match="no_such_module_xyz"):
        validate([WorkflowNode("collect", reg.get("t.collect"), {}), WorkflowNode("s", reg.get("t.needs_module"), {})])


def test_skill_signature_must_be_typed():
    reg = SkillRegistry()
    from forge.errors import DefinitionError

    with pytest.raises(DefinitionError, match="artifact type"):
        @skill("t.bad", stage="S3", registry=reg)
        def bad(ctx: SkillContext, x: int) -> list[EvidenceRecord]:
            return []


def test_capability_and_question_type_mismatch_fails_before_anything_runs(tmp_path):
    intent = write_intent(tmp_path, oe={"items": 50, "capabilities": ["counting", "visibility"],
                                        "question_types": ["yes_no"]})
    with pytest.raises(CompositionError) as err:
        run_build(intent, tmp_path / "store", tmp_path / "out")
    msg = str(err.value)
    assert "capability 'counting': its templates for pybullet_tabletop ask ['interval_choice', 'numeric']" in msg
    assert "counting/numeric" in msg and "visibility/yes_no" in msg  # the compatible pairs are offered
    assert not (tmp_path / "store").exists()
    with pytest.raises(CompositionError, match=r"oe.templates: no template \['no_such_template'\]"):
        compose(load_intent(write_intent(tmp_path, oe={"items": 50, "capabilities": ["visibility"],
                                                      "question_types": ["yes_no"],
                                                      "templates": ["no_such_template"]})), discover())


def test_cli_templates_lists_capability_question_type_and_sources():
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "forge.cli", "templates", "--source", "image_folder", "--json"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = {r["id"]: r for r in json.loads(done.stdout)}
    assert rows and all(r["sources"] == ["image_folder"] for r in rows.values())
    assert {"capability", "question_type", "label"} <= set(next(iter(rows.values())))
    bad = subprocess.run([sys.executable, "-m", "forge.cli", "templates", "--source", "nope"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "unknown resource kind 'nope'" in bad.stderr and "Traceback" not in bad.stderr


def test_the_blueprint_does_not_depend_on_where_the_intent_lies(tmp_path):
    """Two copies of an intent naming the same data (one relatively, one absolutely) from different
    folders plan the same blueprint, so they build the same package; other data plans another."""
    from forge.registry import lookup

    data = tmp_path / "data" / "frames"
    data.mkdir(parents=True)
    (data / "frame_0001.png").write_bytes(b"\x89PNG")
    source = {"kind": "image_folder", "adapter": "frames", "root": "../data/frames"}
    near = write_intent(tmp_path / "near", sources=[source])
    far = write_intent(tmp_path / "far" / "deeper", sources=[{**source, "root": str(data)}])
    other = tmp_path / "other" / "frames"
    other.mkdir(parents=True)
    elsewhere = write_intent(tmp_path / "elsewhere", sources=[{**source, "root": str(other)}])
    params = lookup("track", "oe").node_params
    a, b, c = (params("blueprint", load_intent(p)) for p in (near, far, elsewhere))
    assert a == b
    assert a["intent"]["sources"][0]["root"] == str(data.resolve())
    assert c != a
