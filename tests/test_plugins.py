"""Skills from the ``forge.skills`` entry-point group, and broken user definitions."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import copy_templates, run_build, write_intent

PLUGIN = '''
from forge_skills.oe.types import EvidenceRecord, SourceRecord
from forge.skills import SkillContext, skill


@skill("lab.coarse_evidence", stage="S3")
def coarse_evidence(ctx: SkillContext, source: SourceRecord) -> list[EvidenceRecord]:
    """A lab's own evidence structurer."""
    return []
'''


def test_entry_point_plugin_is_discovered(tmp_path):
    pkg = tmp_path / "labskills"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(PLUGIN)
    dist = tmp_path / "labskills-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: labskills\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[forge.skills]\nlab = labskills\n")
    env_path = f"{tmp_path}"
    proc = subprocess.run([sys.executable, "-c",
                           f"import sys; sys.path.insert(0, {env_path!r}); from forge.cli import main; main()",
                           "skills", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    skills = {s["name"]: s for s in json.loads(proc.stdout)}
    assert skills["lab.coarse_evidence"]["inputs"] == {"source": "SourceRecord"}
    assert skills["lab.coarse_evidence"]["output"] == "EvidenceRecord"
    assert "synthesize.realize_item" in skills


def test_broken_template_is_named_and_others_still_build(tmp_path):
    templates = copy_templates(tmp_path)
    (templates / "leftmost_choice.yaml").write_text("id: leftmost_choice\ncapability: [unclosed\n")
    intent = write_intent(tmp_path, templates_dirs=["my_templates"])
    summary = run_build(intent, tmp_path / "store", tmp_path / "out")
    assert summary["skills_failed"] == 1
    assert any("leftmost_choice.yaml" in e and "YAML syntax error" in e for e in summary["errors"])
    assert "leftmost_choice" not in summary["templates"]
    assert summary["items_released"] > 0
