"""Audit: an item's lineage reaches its source records, template file and every check."""

from __future__ import annotations

import json
import subprocess
import sys

from forge.audit import audit
from forge.store import Store


def _an_item(built) -> str:
    return json.loads(open(built["package"] / "items.jsonl").readline())["id"]


def test_audit_reaches_sources(built):
    item = _an_item(built)
    with Store(built["store"], read_only=True) as s:
        report = audit(s, item[:10])
    assert report["artifact"] == item and report["type"] == "OEItem"
    types = [x["type"] for x in report["lineage"]]
    for t in ("Blueprint", "SceneSpec", "SourceRecord", "EvidenceRecord", "Template", "Binding", "OEItem"):
        assert t in types
    assert {s["type"] for s in report["sources"]} == {"Blueprint"}
    assert any(label.startswith("template:builtin:tabletop/") for label in report["data_files"])
    source = next(x for x in report["lineage"] if x["type"] == "SourceRecord")
    assert source["skill"] == "collect.render_scene" and source["code_version"]
    for x in report["lineage"]:
        assert x["verifications"], f"{x['type']} has no verification records"
        assert x["skill"] and x["code_version"]
    me = next(x for x in report["lineage"] if x["id"] == item)
    assert {g["gate"] for g in me["gate_decisions"]} >= {"B1", "C1"}


def test_audit_cli_json(built):
    item = _an_item(built)
    proc = subprocess.run([sys.executable, "-m", "forge.cli", "audit", item, "--store", str(built["store"]), "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["artifact"] == item
    assert all({"type", "skill", "code_version", "verifications"} <= set(x) for x in report["lineage"])


def test_audit_unknown_item_exits_cleanly(built):
    proc = subprocess.run([sys.executable, "-m", "forge.cli", "audit", "ffffffffffff", "--store", str(built["store"])],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "matches nothing" in proc.stderr and "Traceback" not in proc.stderr
