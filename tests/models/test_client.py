"""The client against a real loopback HTTP server: typed outputs, the json_schema fallback,
retries, validation follow-ups, images, budgets, concurrency."""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest

from forge.models import (ModelClient, ModelOutputError, ModelRequestError, ModelUnavailableError, Question,
                          TokenBudgetError)
from forge.models.loopback import LoopbackServer, Reply

from .helpers import Verdict, first_user_text, last_user_text, role_for, user

GOOD = Reply.json({"answer": "yes", "confidence": 0.9}, prompt_tokens=30, completion_tokens=7)


def test_scripted_answers_parse_into_the_output_type(client, server):
    server.script = lambda req: {"answer": first_user_text(req).upper(), "confidence": 0.5}
    role = role_for(server)
    a = client.ask("verifier", role, user("is it red?"), Verdict, stage="S5", artifact="item-1")
    assert a.output == Verdict(answer="IS IT RED?", confidence=0.5)
    assert (a.source, a.requests, a.artifact, a.model) == ("model", 1, "item-1", "loop-model")
    [req] = server.chat_requests()
    fmt = req["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == Verdict.model_json_schema()
    assert req["temperature"] == 0.0 and req["seed"] == 0
    text = client.ask("verifier", role, user("free text"), stage="S5", artifact="item-2")
    assert text.output is None and "FREE TEXT" in text.text
    assert "response_format" not in server.chat_requests()[-1]


def test_a_refused_json_schema_falls_back_to_json_object_once_per_endpoint(client):
    with LoopbackServer(lambda r: GOOD, reject_json_schema=True) as llama, LoopbackServer(lambda r: GOOD) as other:
        strict = role_for(llama)
        for i in range(3):
            a = client.ask("panel/0", strict, user(f"q{i}"), Verdict, stage="S5", artifact=f"i{i}")
            assert a.output.answer == "yes" and a.requests == 2 if i == 0 else a.requests == 1
        kinds = [r["response_format"]["type"] for r in llama.chat_requests()]
        assert kinds == ["json_schema", "json_object", "json_object", "json_object"]
        sent = llama.chat_requests()[1]
        assert sent["response_format"]["schema"] == Verdict.model_json_schema()
        assert sent["messages"][0]["role"] == "system" and '"confidence"' in sent["messages"][0]["content"]
        assert client.output_mode(llama.base_url) == "json_object"
        # another endpoint keeps json_schema
        client.ask("panel/1", role_for(other), user("q"), Verdict, stage="S5", artifact="i0")
        assert other.chat_requests()[0]["response_format"]["type"] == "json_schema"
        assert client.output_mode(other.base_url) == "json_schema"


def test_429_then_success_waits_as_retry_after_asks(client, server):
    server.push(Reply.rate_limited(retry_after=1), GOOD)
    start = time.perf_counter()
    a = client.ask("verifier", role_for(server), user("q"), Verdict, stage="S5", artifact="item-1")
    elapsed = time.perf_counter() - start
    assert a.output.answer == "yes" and a.requests == 2
    assert 1.0 <= elapsed < 2.5  # waited what the server asked, not the 0.01 s backoff
    times = [r.at for r in server.requests]
    assert times[1] - times[0] >= 0.95


def test_429_forever_is_bounded(client, server):
    server.script = lambda r: Reply.failure(429, "slow down", retry_after_ms=20)
    with pytest.raises(ModelUnavailableError, match="gave up after 3 attempts") as err:
        client.ask("verifier", role_for(server, max_retries=2), user("q"), Verdict, stage="S5", artifact="item-9")
    assert len(server.chat_requests()) == 3
    assert "HTTP 429" in str(err.value) and "item-9" in str(err.value)


def test_500s_fail_clearly_store_nothing_and_a_rerun_asks_only_the_rest(store, server):
    broken = {"on": True}

    def script(req):
        if broken["on"] and "item-2" in first_user_text(req):
            return Reply.failure(500 if len(server.chat_requests()) % 2 else 503)
        return GOOD

    server.script = script
    role = role_for(server, max_retries=3)
    questions = [Question(user(f"judge item-{i}"), f"item-{i}") for i in range(4)]
    with ModelClient(store, build_id="b1") as client:
        with pytest.raises(ModelUnavailableError) as err:
            client.ask_many("judges/0", role, questions, Verdict, stage="S5")
    message = str(err.value)
    assert "'judges/0'" in message and server.base_url in message and "(loop-model)" in message
    assert "item-2" in message and "1 of 4 questions failed" in message
    assert err.value.artifact == "item-2" and err.value.role == "judges/0"
    cached = store.execute("SELECT artifact FROM model_responses ORDER BY artifact").fetchall()
    assert [r[0] for r in cached] == ["item-0", "item-1", "item-3"]
    failed = [r for r in server.chat_requests() if "item-2" in first_user_text(r)]
    assert len(failed) == 4  # one try and three retries

    broken["on"] = False
    server.clear_log()
    with ModelClient(store, build_id="b2") as client:
        answers = client.ask_many("judges/0", role, questions, Verdict, stage="S5")
    assert [a.source for a in answers] == ["cache", "cache", "model", "cache"]
    assert [first_user_text(r) for r in server.chat_requests()] == ["judge item-2"]


def test_a_timeout_is_retried_then_fails_clearly(client, server):
    server.script = lambda r: GOOD.after(3.0)
    role = role_for(server, timeout_s=0.25, max_retries=1)
    start = time.perf_counter()
    with pytest.raises(ModelUnavailableError, match="timed out") as err:
        client.ask("verifier", role, user("q"), Verdict, stage="S5", artifact="item-3")
    assert time.perf_counter() - start < 2.0
    assert len(server.chat_requests()) == 2 and "item-3" in str(err.value)


def test_a_timeout_then_an_answer_succeeds(client, server):
    server.push(GOOD.after(3.0), GOOD)
    a = client.ask("verifier", role_for(server, timeout_s=0.25), user("q"), Verdict, stage="S5", artifact="x")
    assert a.output.answer == "yes" and a.requests == 2


@pytest.mark.parametrize("bad, complaint", [
    ('{"answer": "yes", "confidence": ', "not valid JSON"),
    ('{"answer": "yes", "confidence": 7}', "confidence: Input should be less than or equal to 1"),
    ('{"verdict": "yes"}', "answer: Field required"),
])
def test_an_invalid_reply_goes_back_to_the_model_and_the_correction_is_accepted(client, server, bad, complaint):
    server.push(Reply(content=bad), GOOD)
    a = client.ask("verifier", role_for(server), user("q"), Verdict, stage="S5", artifact="item-4")
    assert a.output == Verdict(answer="yes", confidence=0.9) and a.requests == 2
    first, second = server.chat_requests()
    assert len(second["messages"]) == len(first["messages"]) + 2
    assert second["messages"][-2] == {"role": "assistant", "content": bad}
    assert complaint in second["messages"][-1]["content"] and second["messages"][-1]["role"] == "user"


def test_a_fenced_json_reply_is_accepted(client, server):
    server.push(Reply(content='```json\n{"answer": "no", "confidence": 0.1}\n```'))
    a = client.ask("verifier", role_for(server), user("q"), Verdict, stage="S5", artifact="x")
    assert a.output.answer == "no"


def test_validation_retries_are_bounded(client, server, store):
    server.script = lambda r: Reply(content="not json at all")
    with pytest.raises(ModelOutputError, match="3 replies were invalid") as err:
        client.ask("verifier", role_for(server, validation_retries=2), user("q"), Verdict, stage="S5",
                   artifact="item-5")
    assert len(server.chat_requests()) == 3 and "item-5" in str(err.value)
    assert store.one("SELECT count(*) FROM model_responses")[0] == 0
    assert store.one("SELECT requests, error IS NOT NULL FROM model_usage") == (3, True)


def test_a_refused_request_is_not_retried(client, server):
    server.script = lambda r: Reply.failure(401, "invalid api key")
    with pytest.raises(ModelRequestError, match="HTTP 401: invalid api key"):
        client.ask("verifier", role_for(server), user("q"), Verdict, stage="S5", artifact="x")
    assert len(server.chat_requests()) == 1


def test_images_arrive_as_data_urls(client, server):
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    jpeg = b"\xff\xd8\xff\xe0" + bytes(20)
    server.script = lambda r: GOOD
    client.ask("panel/0", role_for(server), user("which is nearer?"), Verdict, stage="S5", artifact="item-6",
               images=[png, jpeg])
    content = server.chat_requests()[0]["messages"][-1]["content"]
    assert content[0] == {"type": "text", "text": "which is nearer?"}
    urls = [p["image_url"]["url"] for p in content[1:]]
    assert urls == [f"data:image/png;base64,{base64.b64encode(png).decode()}",
                    f"data:image/jpeg;base64,{base64.b64encode(jpeg).decode()}"]
    # other images make another question (another cache key)
    client.ask("panel/0", role_for(server), user("which is nearer?"), Verdict, stage="S5", artifact="item-6",
               images=[jpeg])
    assert len(server.chat_requests()) == 2


def test_a_budget_refuses_a_call_that_would_exceed_it(client, server):
    server.script = lambda r: Reply.json({"answer": "yes", "confidence": 1}, prompt_tokens=40, completion_tokens=10)
    role = role_for(server, token_budget=60)
    client.ask("verifier", role, user("q1"), Verdict, stage="S5", artifact="a")
    assert client.spent("verifier") == 50
    with pytest.raises(TokenBudgetError, match="token budget of 60 would be exceeded: 50 spent") as err:
        client.ask("verifier", role, user("q2"), Verdict, stage="S5", artifact="b")
    assert err.value.artifact == "b" and len(server.chat_requests()) == 1


def test_a_budget_exceeded_by_a_reply_fails_right_after_it(client, server, store):
    server.script = lambda r: Reply.json({"answer": "yes", "confidence": 1}, prompt_tokens=40, completion_tokens=500)
    with pytest.raises(TokenBudgetError, match="was exceeded: 540 tokens spent"):
        client.ask("verifier", role_for(server, token_budget=100), user("q"), Verdict, stage="S5", artifact="a")
    assert store.one("SELECT count(*) FROM model_responses")[0] == 1  # what was paid for is kept


def test_concurrency_per_role_is_bounded(client, server):
    lock, state = threading.Lock(), {"now": 0, "max": 0}

    def script(req):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.15)
        with lock:
            state["now"] -= 1
        return {"answer": last_user_text(req), "confidence": 0.5}

    server.script = script
    questions = [Question(user(f"q{i}"), f"item-{i}") for i in range(8)]
    start = time.perf_counter()
    answers = client.ask_many("panel/0", role_for(server, concurrency=3), questions, Verdict, stage="S5")
    assert [a.output.answer for a in answers] == [f"q{i}" for i in range(8)]
    assert 1 < state["max"] <= 3 and time.perf_counter() - start < 8 * 0.15


def test_identical_questions_in_a_batch_are_asked_once(client, server):
    server.script = lambda r: GOOD
    answers = client.ask_many("judges/0", role_for(server), [Question(user("same"), "a"), Question(user("same"), "b")],
                              Verdict, stage="S5")
    assert [a.artifact for a in answers] == ["a", "b"] and len(server.chat_requests()) == 1
    assert json.loads(answers[1].text)["answer"] == "yes"


@pytest.mark.parametrize("status", [400, 422, 500])
def test_a_json_schema_refusal_is_recognised_whatever_its_status(client, server, status):
    # llama-cpp-python answers 500 with a validation message naming the literal it wanted
    server.push(Reply.failure(status, "response_format.type: Input should be 'text' or 'json_object', "
                                      "got 'json_schema'"), GOOD)
    a = client.ask("panel/0", role_for(server, max_retries=0), user("q"), Verdict, stage="S5", artifact="x")
    assert a.output.answer == "yes" and client.output_mode(server.base_url) == "json_object"
    assert [r["response_format"]["type"] for r in server.chat_requests()] == ["json_schema", "json_object"]
