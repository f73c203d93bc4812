"""Composition: a type or precondition mismatch fails before any skill runs."""

from __future__ import annotations

import pytest

from forge.artifact_types import Binding, EvidenceRecord, SourceRecord
from forge.errors import CompositionError, PrerequisiteError
from forge.executor import WorkflowNode
from forge.intent import load_intent
from forge.planner import OE_ROLES, compose, validate
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
