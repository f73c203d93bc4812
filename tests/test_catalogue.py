"""The capability catalogue: intent free text to capabilities, recorded in the blueprint."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from forge.capability_catalogue import catalogue, capabilities_from_text
from forge.errors import IntentError
from forge.intent import load_intent
from forge.vocabulary import capabilities


def test_free_text_maps_to_capabilities_with_the_phrases_that_chose_them():
    found = capabilities_from_text("Can the robot count the mugs, tell what is resting on the table, whether a "
                                   "duck has tipped over, and in what order things came into view while it walked?")
    assert set(found) == {"counting", "containment_support", "object_state", "temporal"}
    assert "resting on" in found["containment_support"] and "tipped" in found["object_state"]
    assert capabilities_from_text("How far apart are the crates, in metres?")["metric_distance"]
    assert capabilities_from_text("the weather is nice") == {}
    assert set(catalogue()) == set(capabilities())


def _intent(tmp_path, oe):
    path = tmp_path / "intent.yaml"
    path.write_text(yaml.safe_dump({"name": "cat", "oe": oe, "sources": [{"kind": "pybullet_tabletop"}]}))
    return path


def test_focus_fills_capabilities_and_unknown_focus_is_an_intent_error(tmp_path):
    loaded = load_intent(_intent(tmp_path, {"items": 10, "focus": "Which objects are closer, and how many are there?",
                                            "question_types": ["single_choice"]}))
    assert loaded.intent.oe.capabilities == ["counting", "depth_order"]
    with pytest.raises(IntentError, match="oe: focus names no capability"):
        load_intent(_intent(tmp_path, {"items": 10, "focus": "something vague", "question_types": ["yes_no"]}))
    with pytest.raises(IntentError, match="weights name capabilities"):
        load_intent(_intent(tmp_path, {"items": 10, "capabilities": ["counting"], "weights": {"visibility": 2},
                                       "question_types": ["numeric"]}))


def test_cli_capabilities(tmp_path):
    done = subprocess.run([sys.executable, "-m", "forge.cli", "capabilities", "--json", "is the mug inside the tray?"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) == {"containment_support"}
    bad = subprocess.run([sys.executable, "-m", "forge.cli", "capabilities", "nothing here"], capture_output=True, text=True)
    assert bad.returncode == 2 and "names no capability" in bad.stderr and "Traceback" not in bad.stderr
