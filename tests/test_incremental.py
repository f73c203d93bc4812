"""Identity and memoization: no-op rebuilds, one-template edits, forced subtrees, status."""

from __future__ import annotations

import json
from pathlib import Path

from forge.export import verify_package
from forge.store import Store
from forge.status import stale_report

from conftest import copy_build, copy_templates, run_build, write_intent


def _items_by_template(store_dir):
    with Store(store_dir, read_only=True) as s:
        rows = s.execute("SELECT id, json_extract_string(content, '$.template') FROM artifacts "
                         "WHERE type = 'OEItem'").fetchall()
    out: dict[str, set[str]] = {}
    for aid, t in rows:
        out.setdefault(t, set()).add(aid)
    return out


def _bound(store_dir, template: str, first_version: bool) -> set[tuple]:
    """(evidence, view, slots, difficulty) of a template's bindings, of its first or last artifact."""
    with Store(store_dir, read_only=True) as s:
        rows = s.execute("SELECT json_extract_string(content, '$.template_artifact'), content, created_at FROM artifacts "
                         "WHERE type = 'Binding' AND json_extract_string(content, '$.template') = ?", [template]).fetchall()
    first = min(rows, key=lambda r: r[2])[0] if first_version else max(rows, key=lambda r: r[2])[0]
    out = set()
    for artifact, content, _ in rows:
        if artifact == first:
            b = json.loads(content)
            out.add((b["evidence"], b["view"], json.dumps(b["slots"], sort_keys=True), b["difficulty"]))
    return out


def test_noop_rebuild_executes_nothing(built):
    again = run_build(built["intent"], built["store"], built["out"])
    assert again["skills_executed"] == 0
    assert again["artifacts_created"] == 0
    assert again["artifacts_reused"] == built["summary"]["artifacts_created"]
    assert again["items_released"] == built["summary"]["items_released"]
    assert again["package_written"] is False
    assert stale_report(Store(built["store"], read_only=True))["stale_artifacts"] == 0


def test_a_moved_project_with_its_own_template_folder_rebuilds_nothing(tmp_path):
    """Template ids say which template a file holds, not where the folder lies: a project moved
    with its store rebuilds nothing, and the same intent built afresh elsewhere releases the
    same items under the same ids."""
    import shutil

    first_home, moved_home, elsewhere = tmp_path / "lab", tmp_path / "moved" / "lab", tmp_path / "elsewhere"
    copy_templates(first_home)
    first = run_build(write_intent(first_home, templates_dirs=["my_templates"]), first_home / "store", first_home / "out")
    shutil.move(first_home, moved_home)
    again = run_build(moved_home / "intent.yaml", moved_home / "store", moved_home / "out")
    assert again["skills_executed"] == 0 and again["artifacts_created"] == 0
    with Store(moved_home / "store", read_only=True) as s:
        report = stale_report(s)
        assert report["stale_artifacts"] == 0, report["causes"][:3]
    copy_templates(elsewhere)
    fresh = run_build(write_intent(elsewhere, templates_dirs=["my_templates"]), elsewhere / "store", elsewhere / "out")
    shipped = (Path(first["package_path"].replace(str(first_home), str(moved_home))) / "items.jsonl").read_text()
    assert first["items_released"] > 0 and (Path(fresh["package_path"]) / "items.jsonl").read_text() == shipped


def test_template_edit_rebuilds_only_that_template(tmp_path):
    templates = copy_templates(tmp_path)
    intent = write_intent(tmp_path, templates_dirs=["my_templates"])
    first = run_build(intent, tmp_path / "store", tmp_path / "out")
    before = _items_by_template(tmp_path / "store")
    edited = "closest_choice"
    n_edited = len(before[edited])
    assert n_edited > 0
    evidence_records = first["nodes"]["structure"]["created"]

    path = templates / f"{edited}.yaml"
    # Every realization changes: which of them an item draws depends on its identity.
    text = path.read_text()
    path.write_text(text.replace('\n  - "', '\n  - "In this scene: '))
    assert path.read_text().count("In this scene: ") >= 4
    with Store(tmp_path / "store", read_only=True) as s:
        report = stale_report(s)
    causes = {(c["cause"], c["root"]) for c in report["causes"]}
    assert any(c == "data" and edited in root for c, root in causes)
    assert all(edited in root for _, root in causes)
    stale_types = {a["type"] for a in report["artifacts"]}
    assert stale_types == {"Template", "Binding", "OEItem", "Package"}

    package = Path(first["package_path"])
    inodes = {p.name: p.stat().st_ino for p in (package / "media").iterdir()}
    second = run_build(intent, tmp_path / "store", tmp_path / "out")
    after = _items_by_template(tmp_path / "store")
    new_items = after[edited] - before[edited]
    # That template's items are re-created; another template's item is realized only to refill
    # what the gates set aside (its items on the same views may now depend on the new ones) ...
    others = sum(len(after[t] - before.get(t, set())) for t in after if t != edited)
    assert len(new_items) >= 0.7 * n_edited
    # A new wording asks the same questions: the template binds the same candidates, so its
    # items keep their difficulty and its capability's band mix stays where it was.
    assert _bound(tmp_path / "store", edited, first_version=True) == _bound(tmp_path / "store", edited, first_version=False)
    assert others <= second["items_refilled"] and others <= 0.5 * n_edited, (second["notes"], first["units_collected"], second["units_collected"])
    realized = len(new_items) + others
    assert second["nodes"]["realize"]["executed"] == second["nodes"]["realize"]["created"] == realized
    # ... from re-bound evidence (one bind invocation per evidence record) and one template load,
    assert second["nodes"]["template"]["executed"] == 1
    assert second["nodes"]["bind"]["executed"] == evidence_records
    # ... and the package; everything upstream and every other template's items are reused.
    assert second["nodes"]["package"]["executed"] == 1
    for role in ("blueprint", "plan", "collect", "structure"):
        assert second["nodes"][role]["executed"] == 0
    assert second["nodes"]["assess"]["executed"] == 1  # gates E and F on the new package
    assert second["skills_executed"] == 1 + evidence_records + realized + 1 + 1
    released = [json.loads(line) for line in open(second["package_path"] + "/items.jsonl")]
    templates_of = {json.loads(line)["id"]: json.loads(line)["template"] for line in open(second["package_path"] + "/answers.jsonl")}
    edited_questions = [r["question"] for r in released if templates_of[r["id"]] == edited]
    assert edited_questions and all(q.startswith("In this scene: ") for q in edited_questions)
    assert not [r for r in released if templates_of[r["id"]] != edited and r["question"].startswith("In this scene: ")]
    # Unchanged media are carried over from the previous version of the package, not copied again.
    kept = [p for p in (package / "media").iterdir() if p.name in inodes]
    assert kept and all(p.stat().st_ino == inodes[p.name] for p in kept)
    assert verify_package(package) == []
    # The panel answered the unchanged items from the memo of the first assessment: its records
    # are those a panel with no memo gives.
    assert _panel_records(package) == _shipped_panel_records(package)


def _panel_records(package: Path) -> list[dict]:
    from forge.evaluation import load_package
    from forge.evaluation.solvers import DEFAULT_PANEL
    from forge_skills.package.panel import solver_responses

    _, rows = solver_responses(load_package(package), DEFAULT_PANEL)
    return sorted(rows, key=lambda r: (r["model"], r["item_id"]))


def _shipped_panel_records(package: Path) -> list[dict]:
    rows = [json.loads(line) for line in (package / "evaluation" / "responses.jsonl").read_text().splitlines()]
    return sorted((r for r in rows if r["simulated"]), key=lambda r: (r["model"], r["item_id"]))


def test_rebuild_from_template_forces_its_subtree_only(built, tmp_path):
    b = copy_build(built, tmp_path, with_package=True)  # the shared build is the first build
    first = built["summary"]
    n = len(_items_by_template(b["store"])["left_of_yesno"])
    forced = run_build(b["intent"], b["store"], b["out"], rebuild_from=["left_of_yesno"])
    evidence_records = first["nodes"]["structure"]["created"]
    assert forced["nodes"]["template"]["executed"] == 1
    assert forced["nodes"]["bind"]["executed"] == evidence_records
    assert forced["nodes"]["realize"]["executed"] == n
    assert forced["nodes"]["collect"]["executed"] == 0
    # Same code, same inputs: the forced subtree reproduces the same package.
    assert Path(forced["package_path"]) == b["out"] / Path(first["package_path"]).name
    assert forced["package_written"] is False


def test_rebuild_from_stage_reexecutes_that_stage_and_below(tmp_path):
    intent = write_intent(tmp_path, sources=[{"kind": "pybullet_tabletop", "scenes": 3, "views": 3}],
                          oe={"items": 40, "capabilities": ["image_plane_relation", "depth_order"],
                              "question_types": ["single_choice", "yes_no", "ordered_list"]})
    first = run_build(intent, tmp_path / "store", tmp_path / "out")
    forced = run_build(intent, tmp_path / "store", tmp_path / "out", rebuild_from=["S3"])
    assert forced["nodes"]["structure"]["executed"] == first["nodes"]["structure"]["executed"]
    assert forced["nodes"]["collect"]["executed"] == 0
    assert forced["nodes"]["template"]["executed"] == 0
    assert forced["items_released"] == first["items_released"]
