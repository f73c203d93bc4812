"""The response cache: hits make no request; changing one judge's model re-asks exactly its
judgments; invalidation and staleness name the right rows."""

from __future__ import annotations

from forge.models import ModelClient, Question, invalidate, judgments_by_model, stale, usage
from forge.models.loopback import LoopbackServer, Reply

from .helpers import Verdict, role_for, user


def script(request):
    return Reply.json({"answer": request["model"], "confidence": 0.5}, model=f"{request['model']}-2024-06")


def test_a_second_identical_ask_is_a_cache_hit_without_a_request(client, server, store):
    server.script = script
    role = role_for(server)
    first = client.ask("verifier", role, user("q"), Verdict, stage="S5", artifact="item-1")
    second = client.ask("verifier", role, user("q"), Verdict, stage="S5", artifact="item-1")
    assert len(server.chat_requests()) == 1
    assert (first.source, second.source) == ("model", "cache") and second.cached
    assert second.output == first.output and second.model == "loop-model-2024-06"
    assert usage(store)["verifier"]["S5"]["cache_hits"] == 1
    # a new client on the same store (the next build) hits it too
    with ModelClient(store, build_id="b2") as again:
        assert again.ask("verifier", role, user("q"), Verdict, stage="S5", artifact="item-1").cached
    assert len(server.chat_requests()) == 1


def test_the_key_covers_sampling_schema_and_prompt(client, server):
    server.script = script
    role = role_for(server)
    client.ask("verifier", role, user("q"), Verdict, stage="S5", artifact="a")
    client.ask("verifier", role_for(server, temperature=0.7), user("q"), Verdict, stage="S5", artifact="a")
    client.ask("verifier", role_for(server, seed=1), user("q"), Verdict, stage="S5", artifact="a")
    client.ask("verifier", role, user("q!"), Verdict, stage="S5", artifact="a")
    client.ask("verifier", role, user("q"), stage="S5", artifact="a")  # text output: no schema
    client.ask("coordinator", role, user("q"), Verdict, stage="S5", artifact="a")
    assert len(server.chat_requests()) == 6
    # limits do not change an answer: same key
    client.ask("verifier", role_for(server, concurrency=9, timeout_s=5, token_budget=10**6), user("q"), Verdict,
               stage="S5", artifact="a")
    assert len(server.chat_requests()) == 6


def test_changing_one_judge_re_runs_exactly_its_judgments(store):
    items = [Question(user(f"rate item-{i}"), f"item-{i}") for i in range(5)]
    with LoopbackServer(script) as server:
        judges = {"judges/0": role_for(server, model="judge-a"), "judges/1": role_for(server, model="judge-b")}
        with ModelClient(store, build_id="b1") as client:
            for name, role in judges.items():
                client.ask_many(name, role, items, Verdict, stage="S5")
        assert len(server.chat_requests()) == 10
        before = judgments_by_model(store, "judges")
        assert {m: len(js) for m, js in before.items()} == {"judge-a": 5, "judge-b": 5}
        assert {j.model_reported for j in before["judge-b"]} == {"judge-b-2024-06"}

        judges["judges/1"] = role_for(server, model="judge-c")
        assert stale(store, judges) == {"judges/1": [f"item-{i}" for i in range(5)]}
        server.clear_log()
        with ModelClient(store, build_id="b2") as client:
            out = {name: client.ask_many(name, role, items, Verdict, stage="S5") for name, role in judges.items()}
        asked = server.chat_requests()
        assert len(asked) == 5 and {r["model"] for r in asked} == {"judge-c"}
        assert {a.source for a in out["judges/0"]} == {"cache"}
        assert [a.output.answer for a in out["judges/1"]] == ["judge-c"] * 5

    after = judgments_by_model(store, "judges/1")
    assert {m: len(js) for m, js in after.items()} == {"judge-b": 5, "judge-c": 5}
    assert judgments_by_model(store, "judges/0")["judge-a"] == before["judge-a"]  # untouched
    assert invalidate(store, "judges/1", model="judge-b") == 5
    assert stale(store, judges) == {}
    assert set(judgments_by_model(store, "judges")) == {"judge-a", "judge-c"}
    assert usage(store, "b2")["judges/0"]["S5"]["cache_hits"] == 5
    assert usage(store, "b2")["judges/1"]["S5"]["calls"] == 5


def test_invalidating_some_artifacts_re_asks_only_them(client, server, store):
    server.script = script
    role = role_for(server)
    items = [Question(user(f"item-{i}"), f"item-{i}") for i in range(4)]
    client.ask_many("verifier", role, items, Verdict, stage="S5")
    assert invalidate(store, "verifier", artifacts=["item-1", "item-3"]) == 2
    assert invalidate(store, "judges") == 0
    server.clear_log()
    answers = client.ask_many("verifier", role, items, Verdict, stage="S5")
    assert [a.source for a in answers] == ["cache", "model", "cache", "model"]
    assert len(server.chat_requests()) == 2
