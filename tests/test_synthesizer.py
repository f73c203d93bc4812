"""The synthesizer role against a scripted model on a real loopback OpenAI server: it writes a
template with a ``program`` answer rule for a pair the tabletop library lacks (size_scale asked
yes/no) after invalid proposals whose errors go back to the model; a real build binds it, passes
its contracts and grey batch, releases its items and re-verification accepts them. Malicious
programs in written templates are stopped by the sandbox and recorded; the build still finishes."""

from __future__ import annotations

import json
import socket
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from forge.intent import load_intent
from forge.models import ModelClient, ModelRole
from forge.models.loopback import LoopbackServer
from forge.store import Store
from forge_skills.oe.synthesizer import (SynthesisContext, dump_template, extra_realizations, template_problems,
                                         write_templates)
from forge_skills.oe.compatibility import missing_pairs
from forge_skills.oe.synthesize.rules_program import program_for
from forge_skills.oe.synthesize.templates import builtin_root, read_template
from forge_skills.oe.verify.reverify import reverify_package

from conftest import run_build, write_intent

# Apparent size: same-category pairs only (a category's size would otherwise give the answer away).
LARGER_CODE = textwrap.dedent('''\
    def _px(evidence, name, view):
        return evidence["facts"][name][str(view)]["visible_pixels"]

    def derive(evidence, view, slots, template):
        a, b = slots["a"], slots["b"]
        objects = {o["name"]: o for o in evidence["objects"]}
        if a == b or objects[a]["category"] != objects[b]["category"]:
            return None
        adm = template["admission"]
        pa, pb = _px(evidence, a, view), _px(evidence, b, view)
        if min(pa, pb) < adm["min_visible_pixels"] or abs(pa - pb) < adm["min_margin"]:
            return None
        return "yes" if pa > pb else "no"

    def candidates(evidence, view, template):
        names = [o["name"] for o in evidence["objects"] if o["referable"]]
        out = []
        for a in names:
            for b in names:
                answer = derive(evidence, view, {"a": a, "b": b}, template) if a != b else None
                if answer is not None:
                    margin = abs(_px(evidence, a, view) - _px(evidence, b, view))
                    out.append({"slots": {"a": a, "b": b}, "answer": answer, "margin": margin})
        return out
''')

REALIZATIONS = ["In this image, does the {a} look bigger than the {b}?",
                "Does the {a} take up more of the picture than the {b}?",
                "Is the {a} larger than the {b} as seen in this image?",
                "Does the {a} appear larger than the {b} in this picture?"]


def template(tid: str = "larger_yesno", code: str = LARGER_CODE, **changes: Any) -> dict[str, Any]:
    data = {"id": tid, "version": 1, "capability": "size_scale", "question_type": "yes_no", "scope": "view",
            "slots": {"a": {"kind": "object"}, "b": {"kind": "object"}},
            "answer_rule": {"rule": "program", "quantity": "field:visible_pixels", "slots": ["a", "b"],
                            "question_types": ["yes_no"], "whole_order": True, "code": code},
            "admission": {"min_visible_pixels": 100, "min_margin": 300},
            "visibility": {s: {"in": "view", "min_pixels": 100, "max_truncation": 0.25} for s in ("a", "b")},
            "options": {"kind": "yes_no"}, "realizations": list(REALIZATIONS),
            "media": {"layout": "single_view", "markers": False}, "scoring": {"protocol": "yes_no"},
            "max_per_evidence": 2}
    data.update(changes)
    return data


def role(server: LoopbackServer) -> ModelRole:
    return ModelRole(base_url=server.base_url, model="loop-synth", timeout_s=5.0, backoff_s=0.01, max_retries=1)


def last_user(request: dict[str, Any]) -> str:
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


def schema_name(request: dict[str, Any]) -> str:
    return (request.get("response_format") or {}).get("json_schema", {}).get("name", "")


INTENT_OE = {"items": 60, "capabilities": ["size_scale", "depth_order"], "question_types": ["yes_no"]}

# Malicious answer programs, as a model (or anyone) could write them into a template.
NETWORK = '''
def candidates(evidence, view, template):
    import socket
    socket.create_connection(("127.0.0.1", PORT), timeout=1)
    return []

def derive(evidence, view, slots, template):
    return None
'''
WRITE = '''
def candidates(evidence, view, template):
    names = [o["name"] for o in evidence["objects"] if o["referable"]]
    return [{"slots": {"a": a, "b": b}, "answer": "yes", "margin": 1000.0} for a in names for b in names if a != b]

def derive(evidence, view, slots, template):
    with open(TARGET, "w") as f:
        f.write("escaped")
    return "yes"
'''
LOOP = '''
def candidates(evidence, view, template):
    while True:
        pass

def derive(evidence, view, slots, template):
    return None
'''
HOG = '''
def candidates(evidence, view, template):
    blob = bytearray(16 * 1024 ** 3)
    return []

def derive(evidence, view, slots, template):
    return None
'''


def test_synthesizer_writes_a_program_template_that_builds_releases_and_reverifies(tmp_path):
    root = tmp_path
    intent = write_intent(root, name="size-yesno.yaml", oe=INTENT_OE)
    loaded = load_intent(intent)
    missing = missing_pairs(loaded)
    assert missing == [("size_scale", "yes_no")]  # the tabletop library asks size only as a single choice

    good = template()

    def script(request: dict[str, Any]) -> Any:
        assert schema_name(request) == "TemplateDraft"
        said = last_user(request)
        if "That template was rejected" in said:
            return good
        if "That reply was rejected" in said:  # fits the schema now, but fails the template contract
            return template(realizations=REALIZATIONS[:2] + ["Is the {a} bigger than the {c}?"])
        return {"id": "larger_yesno", "capability": "size_scale"}  # does not fit the schema

    folder = root / "generated"
    with LoopbackServer(script) as server, Store(root / "model-store") as store, \
            ModelClient(store, build_id="synth", seed=0) as client:
        written = write_templates(missing, SynthesisContext.for_intent(loaded), client, role(server), folder)
        requests = server.chat_requests()
    assert [p.name for p in written] == ["larger_yesno.yaml"] and not written.failures
    assert len(requests) == 3
    assert "does not fit the schema" in last_user(requests[1])
    rejected = last_user(requests[2])
    assert "That template was rejected" in rejected and "undeclared slots ['c']" in rejected
    assert "at least 4" in rejected
    first = requests[0]["messages"]
    prompt = first[-1]["content"]
    assert "size_scale" in prompt and "yes_no" in prompt and "closer_yesno" in prompt  # an example of the family
    assert "compare: slots ['a', 'b']" in prompt and "visible_pixels" in prompt  # rules and evidence fields
    tpl = read_template(written[0])
    assert tpl.answer_rule["rule"] == "program" and tpl.answer_rule["code"] == LARGER_CODE

    # Malicious templates beside it (a program that reaches for the network, one that writes outside
    # its folder when deriving, one that loops, one that allocates far past its memory limit).
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.3)
    target = root / "escaped.txt"
    bad = {"net_yesno": NETWORK.replace("PORT", str(listener.getsockname()[1])),
           "write_yesno": WRITE.replace("TARGET", repr(str(target))), "loop_yesno": LOOP, "hog_yesno": HOG}
    for tid, code in bad.items():
        (folder / f"{tid}.yaml").write_text(dump_template(template(tid, code)))

    intent = write_intent(root, name="size-yesno.yaml", oe=INTENT_OE, templates_dirs=[str(folder)])
    summary = run_build(intent, root / "store", root / "out")
    package = Path(summary["package_path"])

    # the written template: contracts, grey batch, released items
    assert summary["templates"]["larger_yesno"]["grey_batch"] == "pass"
    items = [json.loads(line) for line in (package / "items.jsonl").read_text().splitlines()]
    sized = [r for r in items if r["capability"] == "size_scale"]
    assert len(sized) >= 10, summary
    assert all(r["question_type"] == "yes_no" and r["options"] == ["yes", "no"] for r in sized)
    program = program_for({"id": "larger_yesno", "answer_rule": {"code": LARGER_CODE}})
    calls_in_build = program.box.calls
    with Store(root / "store", read_only=True) as s:
        contents = {k: json.loads(v) for k, v in s.artifact_column([r["id"] for r in sized], "content").items()}
        assert {c["template"] for c in contents.values()} == {"larger_yesno"}
        report = reverify_package(s, package)
        errors = [r[0] for r in s.execute("SELECT error FROM skill_runs WHERE status = 'error'").fetchall()]
        refusals = [r[0] for r in s.execute("SELECT diagnostics FROM verifications WHERE NOT passed "
                                            "AND diagnostics LIKE '%Sandbox%'").fetchall()]
    assert report["invalid"] == 0, report["reasons"]
    assert program.box.calls >= calls_in_build + len(sized)  # re-verification ran the program again
    print(f"program template: {len(sized)} items released of {summary['items_released']}; "
          f"{calls_in_build} sandbox calls in the build, {program.box.calls - calls_in_build} in re-verification")

    # the malicious ones: stopped, recorded with the sandbox's reason, nothing escaped
    for tid in bad:
        assert summary["templates"].get(tid, {}).get("grey_batch") != "pass"

    def recorded(tid: str, *words: str) -> bool:
        found = [e for e in errors + refusals if f"template {tid!r}" in e and all(w in e for w in words)]
        if found:
            print(f"{tid}: {len(found)} recorded, e.g. {found[0][:300]}")
        return bool(found)

    assert recorded("net_yesno", "SandboxRefused", "socket"), errors
    assert recorded("write_yesno", "SandboxRefused", "outside the sandbox folder"), refusals[:3]
    assert recorded("loop_yesno", "SandboxTimeout", "time limit"), errors
    assert recorded("hog_yesno", "SandboxMemoryError"), errors
    assert not target.exists()
    with pytest.raises((socket.timeout, TimeoutError)):
        listener.accept()
    listener.close()


def test_a_refused_program_goes_back_to_the_model_and_the_builtin_writes_nothing(tmp_path):
    context = SynthesisContext.for_sources(["pybullet_tabletop"])
    sneaky = template("sneaky_yesno", code=LARGER_CODE.replace(
        "def candidates(evidence, view, template):",
        "def candidates(evidence, view, template):\n    open('/tmp/forge-sneaky.txt', 'w')"))

    def script(request: dict[str, Any]) -> Any:
        return sneaky if len(request["messages"]) == 2 else template("larger_yesno")

    with LoopbackServer(script) as server, ModelClient(None) as client:
        written = write_templates([("size_scale", "yes_no")], context, client, role(server), tmp_path / "out")
        feedback = last_user(server.chat_requests()[1])
    assert [p.name for p in written] == ["larger_yesno.yaml"]
    assert "SandboxRefused" in feedback and "outside the sandbox folder" in feedback
    assert not Path("/tmp/forge-sneaky.txt").exists()

    none = write_templates([("size_scale", "yes_no")], context, ModelClient(None), None, tmp_path / "none")
    assert list(none) == [] and "built-in synthesizer writes no templates" in none.notes[0]
    assert not (tmp_path / "none").exists()


def test_a_library_id_is_not_reused_and_wording_is_checked(tmp_path):
    context = SynthesisContext.for_sources(["pybullet_tabletop"])
    clash = template("closer_yesno")  # a library id
    problems = template_problems(template(realizations=REALIZATIONS[:3] + ["Is the {a} an bigger one than {b}"]))
    assert any("does not end as a question" in p for p in problems)
    assert any("use a" in p for p in problems)

    with LoopbackServer(lambda r: clash) as server, ModelClient(None) as client:
        written = write_templates([("size_scale", "yes_no")], context, client, role(server), tmp_path)
    assert [p.name for p in written] == ["closer_yesno_gen.yaml"]
    assert read_template(written[0]).id == "closer_yesno_gen"


def test_extra_realizations_overlay_library_templates(tmp_path):
    path = builtin_root() / "tabletop" / "closer_yesno.yaml"
    original = read_template(path)

    def script(request: dict[str, Any]) -> Any:
        assert schema_name(request) == "MoreRealizations"
        if len(request["messages"]) == 2:
            return {"realizations": ["Would you say the {a} is nearer the camera than the {b}?",
                                     "Is the {a} closer than the {c}?",  # a placeholder the template lacks
                                     original.realizations[0]]}  # a repeat
        return {"realizations": ["Seen from the camera, is the {a} in front of the {b}?"]}

    with LoopbackServer(script) as server, ModelClient(None) as client:
        written = extra_realizations([path], 2, client, role(server), tmp_path)
        feedback = last_user(server.chat_requests()[1])
    assert "exactly {a, b}" in feedback and "repeats an existing realization" in feedback
    assert [p.name for p in written] == [path.name] and not written.failures
    overlay = read_template(written[0])
    assert overlay.id == original.id
    assert overlay.realizations == original.realizations + [
        "Would you say the {a} is nearer the camera than the {b}?",
        "Seen from the camera, is the {a} in front of the {b}?"]
    assert {k: v for k, v in overlay.model_dump().items() if k != "realizations"} == \
        {k: v for k, v in original.model_dump().items() if k != "realizations"}
    assert yaml.safe_load(written[0].read_text())["id"] == "closer_yesno"
