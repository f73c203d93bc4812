"""Intent validation: bad intents exit 2 with a message naming the file, field and line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from forge.errors import IntentError
from forge.intent import load_intent

from conftest import write_intent

GOOD = Path(__file__).resolve().parents[1] / "examples" / "tabletop_spatial.yaml"


def forge(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forge.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_example_intent_is_valid():
    loaded = load_intent(GOOD)
    assert loaded.intent.name == "tabletop-spatial"
    assert loaded.intent.oe.items == 2000


def test_wrong_type_names_field_and_line(tmp_path):
    p = tmp_path / "i.yaml"
    p.write_text("name: t\noe:\n  items: lots\n  capabilities: [visibility]\n  question_types: [yes_no]\n"
                 "sources:\n  - kind: pybullet_tabletop\n")
    with pytest.raises(IntentError) as err:
        load_intent(p)
    msg = str(err.value)
    assert f"{p}:3: oe.items" in msg
    assert "integer" in msg


def test_unknown_field_is_rejected(tmp_path):
    p = tmp_path / "i.yaml"
    p.write_text("name: t\noe:\n  items: 10\n  capabilities: [visibility]\n  question_types: [yes_no]\n"
                 "  colour: blue\nsources:\n  - kind: pybullet_tabletop\n")
    with pytest.raises(IntentError) as err:
        load_intent(p)
    assert f"{p}:6: oe.colour: unknown field" in str(err.value)


def test_nested_source_field_error_names_path(tmp_path):
    p = tmp_path / "i.yaml"
    p.write_text("name: t\noe:\n  items: 10\n  capabilities: [visibility]\n  question_types: [yes_no]\n"
                 "sources:\n  - kind: pybullet_tabletop\n    views: 1\n")
    with pytest.raises(IntentError) as err:
        load_intent(p)
    assert f"{p}:8: sources.0.views" in str(err.value)


def test_unknown_capability(tmp_path):
    p = write_intent(tmp_path, oe={"items": 10, "capabilities": ["telepathy"], "question_types": ["yes_no"]})
    with pytest.raises(IntentError) as err:
        load_intent(p)
    assert "oe.capabilities" in str(err.value) and "telepathy" in str(err.value)


@pytest.mark.parametrize("text, needle", [
    ("name: t\noe:\n  itmes: 10\n  capabilities: [visibility]\n  question_types: [yes_no]\nsources:\n"
     "  - kind: pybullet_tabletop\n", "oe.itmes: unknown field (did you mean 'items'?)"),
    ("name: t\noe:\n  items: 10\n  capabilities: [countng]\n  question_types: [yes_no]\nsources:\n"
     "  - kind: pybullet_tabletop\n", "unknown capabilities ['countng'] (did you mean 'counting'?)"),
    ("name: t\noe:\n  items: 10\n  capabilities: [visibility]\n  question_types: [yes_noo]\nsources:\n"
     "  - kind: pybullet_tabletop\n", "unknown question types ['yes_noo'] (did you mean 'yes_no'?)"),
    ("name: t\noe:\n  items: 10\n  capabilities: [visibility]\n  question_types: [yes_no]\nsources:\n"
     "  - kind: pybullet_tabletop\n    objetcs: {min: 4, max: 6}\n", "sources.0.objetcs: unknown field (did you mean 'objects'?)"),
    ("name: t\ngatse: {}\noe:\n  items: 10\n  capabilities: [visibility]\n  question_types: [yes_no]\nsources:\n"
     "  - kind: pybullet_tabletop\n", "gatse: unknown field (did you mean 'gates'?)"),
])
def test_misspelled_names_get_a_suggestion(tmp_path, text, needle):
    p = tmp_path / "i.yaml"
    p.write_text(text)
    with pytest.raises(IntentError) as err:
        load_intent(p)
    assert needle in str(err.value)


def test_missing_file():
    with pytest.raises(IntentError) as err:
        load_intent("/nonexistent/intent.yaml")
    assert "/nonexistent/intent.yaml: intent file not found" in str(err.value)


def test_yaml_syntax_error_names_line(tmp_path):
    p = tmp_path / "i.yaml"
    p.write_text("name: t\noe:\n  items: [1, 2\n  capabilities: x\n")
    with pytest.raises(IntentError) as err:
        load_intent(p)
    assert f"{p}:" in str(err.value) and "YAML syntax error" in str(err.value)


@pytest.mark.parametrize("content, needle", [
    ("name: t\noe:\n  items: lots\n  capabilities: [visibility]\n  question_types: [yes_no]\nsources:\n  - kind: pybullet_tabletop\n", "oe.items"),
    ("name: t\nbogus: 1\noe:\n  items: 3\n  capabilities: [visibility]\n  question_types: [yes_no]\nsources:\n  - kind: pybullet_tabletop\n", "bogus: unknown field"),
    ("name: t\noe: [unclosed\n", "YAML syntax error"),
])
def test_cli_exits_2_without_traceback(tmp_path, content, needle):
    p = tmp_path / "bad.yaml"
    p.write_text(content)
    proc = forge("build", str(p), "--store", str(tmp_path / "s"))
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (tmp_path / "s").exists(), "nothing may be created for an invalid intent"


def test_cli_missing_file_exits_2(tmp_path):
    proc = forge("build", str(tmp_path / "absent.yaml"))
    assert proc.returncode == 2
    assert "intent file not found" in proc.stderr and "Traceback" not in proc.stderr


def test_intent_schema_command(tmp_path):
    out = tmp_path / "schema.json"
    proc = forge("intent-schema", "-o", str(out))
    assert proc.returncode == 0
    schema = json.loads(out.read_text())
    assert schema["title"] == "forge intent"
    assert "oe" in schema["properties"] and "sources" in schema["properties"]
    assert schema["additionalProperties"] is False


def test_copied_intent_names_its_missing_data_folder(tmp_path):
    """An example copied away from its data: exit 2 before anything runs, naming the field, the
    folder it looked for and where relative paths are read from."""
    example = GOOD.parent / "uav_aerial.yaml"
    copy = tmp_path / "uav_aerial.yaml"
    copy.write_text(example.read_text())
    out = forge("build", str(copy), "--store", str(tmp_path / "s"), "--out", str(tmp_path / "o"))
    assert out.returncode == 2, out.stderr
    assert "sources.0.root: folder" in out.stderr and "not found" in out.stderr
    assert f"read from the intent's folder, {tmp_path}" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "s").exists()  # nothing ran


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(9))


@pytest.mark.parametrize("content, needle", [
    (BOMB, "once its aliases"),  # ten alias levels: 10^10 values once expanded
    ("a: &a [*a]\n", "once its aliases"),  # an alias inside itself
    ("x: " + "[" * 100 + "]" * 100 + "\n", "levels deep"),
])
def test_hostile_yaml_is_refused_quickly(tmp_path, content, needle):
    import time

    p = tmp_path / "i.yaml"
    p.write_text(content)
    t0 = time.perf_counter()
    done = forge("build", str(p), "--store", str(tmp_path / "s"))
    assert done.returncode == 2 and needle in done.stderr and "Traceback" not in done.stderr
    assert time.perf_counter() - t0 < 30
    assert not (tmp_path / "s").exists()


def test_a_huge_intent_is_refused_by_size_and_yaml_is_parsed_once_with_libyaml(tmp_path):
    import yaml

    from forge import yamlfile

    p = tmp_path / "i.yaml"
    p.write_text("k: [" + ", ".join(["1"] * 600_000) + "]\n")  # about 1.8 MB
    with pytest.raises(IntentError, match="may be at most 1.0 MB"):
        load_intent(p)
    assert yamlfile._Loader is yaml.CSafeLoader


def test_source_fields_are_checked_at_validation(tmp_path):
    p = write_intent(tmp_path, sources=[{"kind": "pybullet_tabletop", "categories": ["duk", "cube"]}])
    done = forge("build", str(p))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "sources.0.categories" in done.stderr and "did you mean 'duck'" in done.stderr
    p = write_intent(tmp_path, sources=[{"kind": "pybullet_ground", "altitude_m": [9, 7]}])
    assert "sources.0.altitude_m" in forge("build", str(p)).stderr


def test_a_data_root_resolving_to_the_filesystem_root_is_refused(tmp_path):
    p = tmp_path / "i.yaml"
    p.write_text("name: t\noe: {items: 10, capabilities: [visibility], question_types: [yes_no, single_choice]}\n"
                 "sources:\n  - kind: image_folder\n    adapter: frames\n    root: " + "../" * 30 + "\n")
    done = forge("build", str(p), "--store", str(tmp_path / "s"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "sources.0.root" in done.stderr and "not a dataset folder" in done.stderr


def test_template_links_out_of_their_folder_are_refused_unread(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:the contents must never be shown\n")
    (folder / "a.yaml").symlink_to(secret)
    p = write_intent(tmp_path, templates_dirs=["mine"])
    done = forge("build", str(p), "--store", str(tmp_path / "s"))
    assert done.returncode == 2 and "links outside" in done.stderr
    assert "never be shown" not in done.stderr + done.stdout


def test_a_template_folder_none_of_whose_templates_load_stops_the_build(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "a.yaml").write_text("id: a\ncapability: [unclosed\n")
    (folder / "b.yaml").write_text("id: b\n")
    p = write_intent(tmp_path, templates_dirs=["mine"])
    done = forge("build", str(p), "--store", str(tmp_path / "s"), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "no template of the folder" in done.stderr and "Traceback" not in done.stderr
    assert "a.yaml:3:1: YAML syntax error" in done.stderr and "b.yaml: invalid template" in done.stderr
