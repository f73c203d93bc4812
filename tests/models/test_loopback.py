"""The loopback server itself, over plain HTTP (urllib): routes, scripts, the request log."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from forge.models.loopback import LoopbackServer, Reply


def post(server, body, path="/v1/chat/completions"):
    request = urllib.request.Request(server.base_url.removesuffix("/v1") + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status, dict(response.headers), json.loads(response.read())


def test_models_and_completions_speak_the_openai_shape():
    with LoopbackServer(lambda req: "hello", model="smol-135m") as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.base_url + "/models", timeout=5) as r:
            assert json.loads(r.read())["data"][0]["id"] == "smol-135m"
        status, _, body = post(server, {"model": "x", "messages": [{"role": "user", "content": "hi there"}]})
        assert status == 200 and body["object"] == "chat.completion" and body["model"] == "smol-135m"
        assert body["choices"][0]["message"] == {"role": "assistant", "content": "hello"}
        assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
        assert [r.method for r in server.requests] == ["GET", "POST"]
        assert server.chat_requests()[0]["messages"][0]["content"] == "hi there"


def test_queued_replies_come_first_then_the_script():
    with LoopbackServer([Reply(content="one")]) as server:
        server.push(Reply(content="two", model="m2", prompt_tokens=5, completion_tokens=6))
        server.script = lambda req: Reply.json({"n": len(server.chat_requests())})
        got = [post(server, {"model": "m", "messages": []})[2] for _ in range(3)]
        assert [g["choices"][0]["message"]["content"] for g in got] == ["one", "two", '{"n": 3}']
        assert got[1]["model"] == "m2" and got[1]["usage"]["completion_tokens"] == 6


def test_errors_carry_their_status_headers_and_openai_error_body():
    with LoopbackServer([Reply.rate_limited(retry_after=2), Reply.failure(503)]) as server:
        with pytest.raises(urllib.error.HTTPError) as err:
            post(server, {"model": "m", "messages": []})
        assert err.value.code == 429 and err.value.headers["Retry-After"] == "2"
        assert json.loads(err.value.read())["error"]["type"] == "rate_limit_error"
        with pytest.raises(urllib.error.HTTPError) as err:
            post(server, {"model": "m", "messages": []})
        assert err.value.code == 503
        with pytest.raises(urllib.error.HTTPError) as err:  # script exhausted
            post(server, {"model": "m", "messages": []})
        assert err.value.code == 500 and "no scripted reply" in err.value.read().decode()


def test_it_can_refuse_json_schema_like_llama_cpp():
    with LoopbackServer(lambda req: "{}", reject_json_schema=True) as server:
        with pytest.raises(urllib.error.HTTPError) as err:
            post(server, {"model": "m", "messages": [], "response_format": {"type": "json_schema", "json_schema": {}}})
        assert err.value.code == 400 and "json_schema" in err.value.read().decode()
        assert post(server, {"model": "m", "messages": [], "response_format": {"type": "json_object"}})[0] == 200


def test_a_broken_script_is_a_500_and_closing_does_not_wait_for_slow_replies():
    import time

    def boom(req):
        raise RuntimeError("bad script")

    with LoopbackServer(boom) as server:
        with pytest.raises(urllib.error.HTTPError) as err:
            post(server, {"model": "m", "messages": []})
        assert "RuntimeError: bad script" in err.value.read().decode()
    slow = LoopbackServer([Reply(content="late").after(30)]).start()
    try:
        urllib.request.urlopen(urllib.request.Request(slow.base_url + "/chat/completions", data=b"{}"), timeout=0.2)
    except OSError:
        pass
    start = time.perf_counter()
    slow.close()
    assert time.perf_counter() - start < 2
