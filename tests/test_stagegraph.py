"""The stage graph is the planner's workflow: its nodes and order come from the workflow, a
track adds steps and routes, and a track that only names roles runs on the engine's default
handlers."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.contracts import ContractBook
from forge.executor import Executor
from forge.gatelog import GateLog
from forge.intent import load_intent
from forge.planner import compose, validate
from forge.progress import Progress
from forge.resources import descriptor
from forge.skills import discover
from forge.stagegraph import Route, Step, WorkflowRunner
from forge.store import Store
from forge.tracks import BuildContext
from forge.executor import WorkflowNode
from forge_skills.oe.stages import StageRunner

from conftest import write_intent

ROOT = Path(__file__).resolve().parents[1]
DOTA = ROOT.parent / "shared" / "data" / "aerial_dota"


def _oe_runner(path: Path) -> StageRunner:
    loaded = load_intent(path)
    workflow = compose(loaded, discover())
    sources = [descriptor(s.kind) for s in loaded.intent.sources]
    return StageRunner(BuildContext(workflow, None, None, Progress(enabled=False), gate_log=GateLog("test"),
                                    sources=sources))


@pytest.mark.skipif(not DOTA.is_dir(), reason="../shared/data/aerial_dota is absent")
def test_graph_nodes_are_the_workflow_nodes_of_every_source_plus_the_tracks_steps():
    runner = _oe_runner(ROOT / "examples" / "uav_mixed.yaml")
    roles = [n.role for n in runner.workflow.nodes]
    assert {"plan", "plan@1", "collect", "collect@1", "structure", "structure@1"} <= set(roles)
    order = runner.sequence()
    assert [n for n in order if n not in ("verify", "assess")] == roles  # the workflow's order, untouched
    assert order.index("verify") == order.index("realize") + 1  # the gate step follows the role it names
    assert order.index("assess") == order.index("package") + 1
    graph = runner.compile().get_graph()
    assert set(graph.nodes) == set(roles) | {"verify", "repair", "assess", "__start__", "__end__"}
    edges = {(e.source, e.target) for e in graph.edges}
    # The workflow's typed edges within a source chain appear in order...
    assert ("collect", "structure") in edges or roles.index("collect") < roles.index("structure")
    for a, b in zip(order, order[1:]):
        assert (a, b) in edges, f"{a} -> {b} missing"
    # ...and the track's routes loop back: more evidence to the first plan node, repair and back.
    assert ("bind", "plan") in edges and ("verify", "plan") in edges
    assert ("verify", "repair") in edges and ("repair", "verify") in edges
    assert ("package", "assess") in edges and ("assess", "__end__") in edges


def test_a_step_after_an_unknown_role_is_a_definition_error(tmp_path):
    from forge.errors import DefinitionError

    runner = _oe_runner(write_intent(tmp_path))

    class Odd(StageRunner):
        steps = (Step("verify", "S5", "gates", after="nowhere"),)

    odd = Odd(BuildContext(runner.workflow, None, None, Progress(enabled=False), gate_log=GateLog("t"),
                           sources=[descriptor("pybullet_tabletop")]))
    with pytest.raises(DefinitionError, match="step 'verify' follows 'nowhere'"):
        odd.sequence()


def test_a_track_that_only_names_roles_runs_on_the_default_handlers(tmp_path):
    """Blueprint -> plan -> collect -> structure with no handler of its own: each node runs its
    skill over what the graph state holds and hands its verified ids on; a route repeats plan
    once with more units, and only the new units execute."""
    registry = discover()
    loaded = load_intent(write_intent(tmp_path))
    nodes = [WorkflowNode("blueprint", registry.get("blueprint.from_intent"), {"intent": loaded.raw}),
             WorkflowNode("plan", registry.get("collect.plan_tabletop_scenes"), {},
                          [{"scene_index": k} for k in range(2)], source=0),
             WorkflowNode("collect", registry.get("collect.render_scene"), {}, source=0),
             WorkflowNode("structure", registry.get("structure.rendered_evidence"), {}, source=0)]
    workflow = validate(nodes)

    class Collector(WorkflowRunner):
        steps = (Step("grow", "S3", "more scenes once", after="structure"),)
        rounds = 0

        def step_handlers(self):
            return {"grow": self.grow}

        def grow(self, state):
            self.rounds += 1
            if self.rounds == 1:
                workflow.node("plan").fanout = [{"scene_index": k} for k in range(3)]
            return {}

        def routes(self):
            return [Route("grow", lambda state: "plan" if self.rounds == 1 else None, ("plan",))]

    def run(build_id: str):
        workflow.node("plan").fanout = [{"scene_index": k} for k in range(2)]
        with Store(tmp_path / "store") as store:
            executor = Executor(store, ContractBook.load([]), build_id, workers=1)
            runner = Collector(BuildContext(workflow, executor, store, Progress(enabled=False)))
            state = runner.run()
            executor.close()
        return runner, state

    runner, state = run("b1")
    assert len(state["ids"]["SceneSpec"]) == 3 and len(state["ids"]["SourceRecord"]) == 3
    assert state["source_ids"]["0"]["EvidenceRecord"] == state["ids"]["EvidenceRecord"]
    assert len(state["ids"]["EvidenceRecord"]) == 3
    assert runner.results["collect"].executed == 3  # two scenes, then only the third
    assert set(state["stage_seconds"]) == {"S1", "S2", "S3"}
    again, state2 = run("b2")  # a second build finds every run stored
    assert {t: sorted(v) for t, v in state2["ids"].items()} == {t: sorted(v) for t, v in state["ids"].items()}
    assert again.results["collect"].executed == 0 and again.results["collect"].reused == 3


def test_a_skill_that_keeps_no_outputs_leaves_them_in_the_store_only(tmp_path):
    """``keep_outputs=False``: the outputs are recorded and checked, not held by the driver; a
    later load reads them back from the store equal to what a kept run holds."""
    from dataclasses import replace

    registry = discover()
    loaded = load_intent(write_intent(tmp_path))
    structure = registry.get("structure.rendered_evidence")

    def run(build_id: str, keep: bool):
        nodes = [WorkflowNode("blueprint", registry.get("blueprint.from_intent"), {"intent": loaded.raw}),
                 WorkflowNode("plan", registry.get("collect.plan_tabletop_scenes"), {},
                              [{"scene_index": k} for k in range(2)], source=0),
                 WorkflowNode("collect", registry.get("collect.render_scene"), {}, source=0),
                 WorkflowNode("structure", replace(structure, keep_outputs=keep), {}, source=0)]
        with Store(tmp_path / f"store-{keep}") as store:
            executor = Executor(store, ContractBook.load([]), build_id, workers=1)
            state = WorkflowRunner(BuildContext(validate(nodes), executor, store, Progress(enabled=False))).run()
            ids = state["ids"]["EvidenceRecord"]
            held = [executor.holds(i) for i in ids]
            contents = {i: executor.load(i).model_dump(mode="json") for i in ids}
            assert all(executor.holds(i) for i in ids)  # loaded from the store on demand
            executor.close()
        return ids, held, contents

    kept_ids, kept_held, kept = run("b1", True)
    ids, held, loaded_back = run("b2", False)
    assert len(ids) == 2 and sorted(ids) == sorted(kept_ids)
    assert all(kept_held) and not any(held)
    assert loaded_back == kept


def test_planned_run_keys_are_the_digest_of_their_parts(tmp_path):
    """Invocations planned in bulk (parameters validated once per distinct set) have the run keys
    one invocation made alone has: the digest of engine format, skill, code version, parameters,
    inputs and repair."""
    from forge import ENGINE_FORMAT_VERSION
    from forge.codeversion import data_identity
    from forge.invocation import make_invocation
    from forge.keys import digest

    registry = discover()
    node = WorkflowNode("plan", registry.get("collect.plan_tabletop_scenes"), {},
                        [{"scene_index": k} for k in range(3)] + [{"scene_index": 0}])
    with Store(tmp_path / "store") as store:
        executor = Executor(store, ContractBook.load([]), "b", workers=1)
        bp = ["bp-1", "bp-2"]
        for repair in (None, {"operator": "regenerate", "attempt": 1}):
            invs = executor.invocations(node, {"Blueprint": bp}, repair=repair)
            assert len(invs) == 8 and len({i.run_key for i in invs}) == 6  # the repeated set gives the same keys
            for inv in invs:
                spec = node.skill
                code = digest(spec.module_version(), data_identity(spec.data_files(inv.params)))
                parts = [ENGINE_FORMAT_VERSION, spec.name, code, inv.params, inv.inputs] + ([{"repair": repair}] if repair else [])
                assert inv.run_key == digest(*parts, length=32)
                alone = make_invocation(node, inv.inputs, inv.params, repair=repair)
                assert alone.run_key == inv.run_key and alone.params == inv.params
        executor.close()


@pytest.mark.skipif(not DOTA.is_dir(), reason="../shared/data/aerial_dota is absent")
def test_each_sources_plan_is_told_which_section_it_reads():
    """A plan skill declaring ``source_index`` is given its source's index, so it reads its own
    section of the intent: a plugin's source kind can reuse a built-in plan (which otherwise looks
    its section up by the built-in kind's name), and each source's units are its own invocations."""
    from types import SimpleNamespace

    from forge_skills.oe.collect.layout import start_plan

    runner = _oe_runner(ROOT / "examples" / "uav_mixed.yaml")
    ground, images = runner.workflow.node("plan"), runner.workflow.node("plan@1")
    assert runner.unit_fanout(ground, "scene_index", 2) == [{"scene_index": 0, "source_index": 0},
                                                            {"scene_index": 1, "source_index": 0}]
    assert runner.unit_fanout(images, "scene_index", 1) == [{"scene_index": 0, "source_index": 1}]
    own = {"kind": "lab_tabletop", "objects": {"min": 3, "max": 3}, "categories": None}
    bp = SimpleNamespace(seed=1, name="lab", sources=[{"kind": "image_folder"}, own])
    assert start_plan(0, bp, "pybullet_tabletop", "tabletop", source_index=1).source is own
    # ... and draws its own layouts, not those of the built-in kind at the same index.
    builtin = SimpleNamespace(seed=1, name="lab", sources=[{**own, "kind": "pybullet_tabletop"}])
    assert start_plan(0, bp, "pybullet_tabletop", "tabletop", source_index=1).seed != \
        start_plan(0, builtin, "pybullet_tabletop", "tabletop", source_index=0).seed
    with pytest.raises(Exception, match="no 'pybullet_tabletop' source"):
        start_plan(0, bp, "pybullet_tabletop", "tabletop")
