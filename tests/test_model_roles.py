"""The model roles in a build, against a real loopback OpenAI server: the coordinator's proposal is
type-checked (a wrong one goes back with the error), the verifier holds back a template it doubts,
the panel is a blind solver and the full condition of C1, the judges score a sample per template
and the benchmark; changing one judge re-asks only that judge. Without models every role runs on
its built-in backend and the package says so."""

from __future__ import annotations

import json
import re
from pathlib import Path

from forge.models.loopback import LoopbackServer, Reply
from forge.store import Store

from conftest import run_build, write_intent

ITEM_ID = re.compile(r"^\[([0-9a-f]{32})\]", re.M)


def _schema_name(body: dict) -> str:
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("name", "")


def _user_text(body: dict) -> str:
    parts = []
    for m in body["messages"]:
        c = m.get("content")
        parts.extend([c] if isinstance(c, str) else [p.get("text", "") for p in c or [] if p.get("type") == "text"])
    return "\n".join(parts)


class Script:
    """A scripted model for every role; records what each role was asked."""

    def __init__(self, doubt_template: str | None = None) -> None:
        self.doubt_template = doubt_template
        self.asked: dict[str, int] = {}

    def __call__(self, body: dict) -> Reply:
        text = _user_text(body)
        name = _schema_name(body)
        model = body["model"]
        ids = ITEM_ID.findall(text)
        if name == "CapabilityProposal":
            kind = "coordinator"
            if "does not type-check" in text:
                reply = {"capabilities": ["depth_order", "image_plane_relation"], "rationale": "relative position"}
            else:
                reply = {"capabilities": ["depth_order", "teleportation"], "rationale": "first try"}
        elif name == "Verdicts":
            kind = "verifier"
            doubt = self.doubt_template is not None and f"Template {self.doubt_template}." in text
            reply = {"items": [{"id": i, "consistent": True, "ambiguous": doubt, "reason": "two readings" if doubt
                                else ""} for i in ids]}
        elif name == "ItemRubrics":
            kind = f"judge {model}"
            reply = {"items": [{"id": i, "UIA": 90, "FSQ": 95, "QAC": 88, "EGC": 92, "SGC": 85, "AFC": None,
                                "TSD": 80, "SSC": 70} for i in ids]}
        elif name == "BenchmarkRubric":
            kind = f"benchmark judge {model}"
            reply = {"UIA": 90, "FSQ": 90, "QAC": 90, "EGC": 90, "SGC": 90, "AFC": None, "TSD": 85, "SSC": 75,
                     "summary": "fine"}
        elif name == "PanelAnswers":
            kind = "panel"
            reply = {"answers": [{"id": i, "answer": "A"} for i in ids]}
        else:
            kind = "other"
            reply = {"answer": "A"}
        self.asked[kind] = self.asked.get(kind, 0) + 1
        return Reply.json(reply)


def _role(server: LoopbackServer, model: str, **kw) -> dict:
    return {"base_url": server.base_url, "model": model, "backoff_s": 0.01, "timeout_s": 20, **kw}


SMALL_OE = {"items": 60, "capabilities": ["visibility", "image_plane_relation", "depth_order"],
            "question_types": ["single_choice", "yes_no", "ordered_list"]}


def test_every_role_on_a_model(tmp_path):
    script = Script(doubt_template="left_of_yesno")
    with LoopbackServer(script) as server:
        models = {"verifier": _role(server, "verifier-m"), "panel": [_role(server, "panel-m", name="p1")],
                  "judges": [_role(server, "judge-a", name="a"), _role(server, "judge-b", name="b")]}
        intent = write_intent(tmp_path, oe=SMALL_OE, models=models)
        summary = run_build(intent, tmp_path / "store", tmp_path / "out")
        pkg = Path(summary["package_path"])
        # The verifier doubted one template's grey batch: it is held back like a failed gate A.
        assert summary["templates"]["left_of_yesno"]["grey_batch"] == "fail"
        assert summary["templates"]["leftmost_choice"]["grey_batch"] == "pass"
        released = [json.loads(line) for line in open(pkg / "answers.jsonl")]
        assert released and not [r for r in released if r["template"] == "left_of_yesno"]
        with Store(tmp_path / "store", read_only=True) as s:
            doubted = s.execute("SELECT count(*), min(backend) FROM verifications WHERE verification = "
                                "'model-assisted' AND NOT passed").fetchone()
        assert doubted[0] >= 1 and doubted[1] == "verifier-m"
        # The panel answered a sample per template without media; its report is in C1's.
        assert script.asked["panel"] >= 1
        # Gate E: the panel model also answered every released item, beside the simulated solvers.
        member = f"{server.base_url}@panel-m"
        panel = json.loads((pkg / "evaluation" / "panel.json").read_text())
        assert {"model": member, "label": "model (panel/p1)", "simulated": False} in panel["members"]
        answered = [json.loads(line) for line in open(pkg / "evaluation" / "responses.jsonl")]
        mine = [r for r in answered if r["model"] == member]
        assert len(mine) == len(released) and {r["model_reported"] for r in mine} == {"panel-m"}
        assert summary["gate_E_models"][member]["items"] == len(released)
        report = json.loads((pkg / "report.json").read_text())
        assert member in report["irt"]["theta"] and script.asked["other"] >= len(released)
        # Both judges scored every template's sample and the benchmark; the package averages them.
        quality = json.loads((pkg / "quality.json").read_text())
        assert set(quality["judges"]) == {"judges/a", "judges/b"}
        assert quality["average"]["items"]["overall"] is not None and quality["average"]["judges"] == 2
        assert "Judged quality" in (pkg / "README.md").read_text()
        manifest = json.loads((pkg / "manifest.json").read_text())
        assert "verifier: question/answer consistency and ambiguity" not in manifest["model_checks"]["without_model"]
        models_summary = summary["models"]
        assert models_summary["totals"]["calls"] > 0 and models_summary["tokens_per_accepted_item"] > 0

        # Changing one judge re-asks exactly that judge; nothing else runs again.
        before = dict(script.asked)
        models["judges"][1] = _role(server, "judge-c", name="b")
        write_intent(tmp_path, oe=SMALL_OE, models=models)
        again = run_build(intent, tmp_path / "store", tmp_path / "out")
        new = {k: script.asked.get(k, 0) - before.get(k, 0) for k in script.asked}
        templates = len({r["template"] for r in released}) + 0
        assert new.get("judge judge-c", 0) >= templates and new.get("benchmark judge judge-c") == 1
        assert all(v == 0 for k, v in new.items() if "judge-c" not in k), new
        assert again["nodes"]["realize"]["executed"] == 0 and again["nodes"]["bind"]["executed"] == 0
        assert json.loads((pkg / "quality.json").read_text())["judges"]["judges/b"]["model"] == "judge-c"


def test_the_coordinator_proposal_is_type_checked_and_corrected(tmp_path):
    script = Script()
    with LoopbackServer(script) as server:
        oe = {"items": 40, "focus": "which object is in front of which, and left or right of it",
              "question_types": ["single_choice", "yes_no", "ordered_list"]}
        intent = write_intent(tmp_path, oe=oe, models={"coordinator": _role(server, "coord-m")})
        summary = run_build(intent, tmp_path / "store", tmp_path / "out")
        asked = [r for r in server.chat_requests() if "does not type-check" in _user_text(r)]
    assert script.asked["coordinator"] == 2 and asked, "the wrong proposal went back with its error"
    assert "teleportation" in _user_text(asked[0])
    comp = json.loads((Path(summary["package_path"]) / "composition.json").read_text())
    assert set(comp["capabilities"]) == {"depth_order", "image_plane_relation"}
    assert all(any("coordinator coord-m" in r for r in row["chosen_by"]) for row in comp["capabilities"].values())


def test_without_models_every_role_runs_on_its_builtin_backend(built):
    pkg = built["package"]
    manifest = json.loads((pkg / "manifest.json").read_text())
    without = manifest["model_checks"]["without_model"]
    assert "quality rubric (judges)" in without and "verifier: question/answer consistency and ambiguity" in without
    quality = json.loads((pkg / "quality.json").read_text())
    assert list(quality["judges"]) == ["builtin"] and "no judge model" in quality["note"]
    assert "without a model" in (pkg / "README.md").read_text()
    assert built["summary"]["models"]["totals"]["calls"] == 0


def test_a_panel_with_no_template_to_test_is_not_asked_and_the_summary_says_so():
    """Templates below min_blind_items are not tested by C1, so the panel has nothing to answer:
    no call is made (the endpoint does not exist) and the check records why."""
    from forge.models.config import ModelRoles
    from forge.models.roles import RoleContext
    from forge_skills.oe.roles import panel_blind_and_full

    roles = ModelRoles(panel=[{"base_url": "http://127.0.0.1:9/v1", "model": "nowhere", "name": "p"}])
    ctx = RoleContext(client=None, roles=roles)
    reports = {"t": {"tested": False, "items": 3, "chance": 0.5, "accuracies": {}}}
    flagged = panel_blind_and_full(ctx, None, {"t": [("a", None)]}, reports, None,
                                   {"min_blind_items": 8, "blind_margin": 0.15, "blind_alpha": 0.01})
    check = ctx.report()["checks"]["C1 full condition and model blind solver (panel)"]
    assert flagged == set() and "panel" not in reports["t"]
    assert check["models"] == ["nowhere"] and "8 items (min_blind_items)" in check["detail"]
