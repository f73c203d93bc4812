"""Accounting per role and stage, built-in backends, and tokens per accepted item."""

from __future__ import annotations

from forge.models import BuiltinBackend, ModelClient, ModelRole, Question, resolve, tokens_per_item, usage
from forge.models.accounting import totals
from forge.models.loopback import Reply

from .helpers import Verdict, role_for, user


def test_tokens_calls_and_hits_sum_per_role_and_stage(store, server):
    server.script = lambda r: Reply.json({"answer": "ok", "confidence": 1}, prompt_tokens=100, completion_tokens=20)
    role = role_for(server)
    with ModelClient(store, build_id="b1") as client:
        client.ask_many("judges/0", role, [Question(user(f"q{i}"), f"i{i}") for i in range(3)], Verdict,
                        stage="S5")
        client.ask("judges/0", role, user("q0"), Verdict, stage="S5", artifact="i0")  # hit
        client.ask("synthesizer", role, user("template"), Verdict, stage="S4", artifact="t1")
        server.push(Reply(content="{bad", prompt_tokens=100), Reply.json({"answer": "ok", "confidence": 1}, prompt_tokens=150,
                                                      completion_tokens=20))
        client.ask("synthesizer", role, user("template 2"), Verdict, stage="S4", artifact="t2")
    with ModelClient(store, build_id="b2") as client:
        client.ask("synthesizer", role, user("template 3"), Verdict, stage="S4", artifact="t3")
    u = usage(store, "b1")
    j = u["judges/0"]["S5"]
    got = (j["asks"], j["calls"], j["cache_hits"], j["tokens_in"], j["tokens_out"], j["errors"])
    assert got == (4, 3, 1, 300, 60, 0)
    s = u["synthesizer"]["S4"]
    # the invalid reply's tokens count too (what was spent), and it took two requests
    assert (s["asks"], s["calls"], s["tokens_in"], s["tokens_out"]) == (2, 3, 100 + 100 + 150, 20 + 1 + 20)
    assert s["seconds"] > 0
    assert usage(store)["synthesizer"]["S4"]["asks"] == 3 and usage(store, "b2")["synthesizer"]["S4"]["asks"] == 1
    t = totals(u)
    assert t["tokens_in"] + t["tokens_out"] == 300 + 60 + 350 + 41
    assert tokens_per_item(u, 10) == (300 + 60 + 350 + 41) / 10
    assert tokens_per_item(u, 0) is None


def test_errors_are_counted(store, server):
    server.script = lambda r: Reply.failure(503)
    with ModelClient(store, build_id="b1") as client:
        try:
            client.ask("verifier", role_for(server, max_retries=1), user("q"), Verdict, stage="S5", artifact="x")
        except Exception:
            pass
    v = usage(store)["verifier"]["S5"]
    assert (v["errors"], v["calls"], v["tokens_in"]) == (1, 2, 0)
    assert "HTTP 503" in store.one("SELECT error FROM model_usage")[0]


def _rule(messages, output_model):
    return output_model(answer=str(len(messages[-1]["content"])), confidence=1.0)


def test_a_role_without_an_endpoint_runs_its_builtin_and_says_so(store, server):
    backend = resolve(None, _rule)
    assert isinstance(backend, BuiltinBackend)
    role = ModelRole(base_url="http://127.0.0.1:9/v1", model="m")
    assert resolve(role, _rule) is role
    with ModelClient(store, build_id="b1") as client:
        a = client.ask("verifier", backend, user("four"), Verdict, stage="S5", artifact="x")
        answers = client.ask_many("verifier", backend, [Question(user("abc"), "y")], Verdict, stage="S5")
    assert a.output.answer == "4" and a.source == "builtin" and a.model == "builtin:builtin"
    assert answers[0].output.answer == "3"
    v = usage(store)["verifier"]["S5"]
    assert (v["asks"], v["builtin"], v["calls"], v["tokens_in"]) == (2, 2, 0, 0)
    assert store.one("SELECT DISTINCT source, model FROM model_usage") == ("builtin", "builtin:builtin")
    assert server.chat_requests() == []


def test_usage_of_a_store_without_model_calls_is_empty(store):
    assert usage(store) == {}
