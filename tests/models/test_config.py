"""Role configuration: strict, keys by variable name, member names."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from forge.models import ModelClient, ModelKeyError, ModelRole, ModelRoles

from .helpers import Verdict, role_for, user

URL = "http://127.0.0.1:8000/v1"


def test_roles_are_strict():
    with pytest.raises(ValidationError, match="extra"):
        ModelRole(base_url=URL, model="m", api_key="sk-secret")
    with pytest.raises(ValidationError, match="never the key"):
        ModelRole(base_url=URL, model="m", api_key_env="sk-abc123")
    with pytest.raises(ValidationError):
        ModelRole(base_url="localhost:8000", model="m")
    with pytest.raises(ValidationError, match="extra"):
        ModelRoles.model_validate({"judge": {"base_url": URL, "model": "m"}})
    with pytest.raises(ValidationError, match="unique"):
        ModelRoles.model_validate({"judges": [{"base_url": URL, "model": "a", "name": "x"},
                                              {"base_url": URL, "model": "b", "name": "x"}]})


def test_members_are_named_by_role_and_position_or_name():
    roles = ModelRoles.model_validate({
        "verifier": {"base_url": URL, "model": "v"},
        "panel": [{"base_url": URL, "model": "p", "name": "smol"}],
        "judges": [{"base_url": URL, "model": "a"}, {"base_url": URL, "model": "b"}],
    })
    assert list(roles.members()) == ["verifier", "panel/smol", "judges/0", "judges/1"]
    assert roles.members()["judges/1"].model == "b"
    assert roles.coordinator is None


def test_a_missing_key_variable_is_a_clear_error_before_any_request(client, server, monkeypatch):
    monkeypatch.delenv("FORGE_TEST_JUDGE_KEY", raising=False)
    role = role_for(server, api_key_env="FORGE_TEST_JUDGE_KEY")
    with pytest.raises(ModelKeyError, match="FORGE_TEST_JUDGE_KEY") as err:
        client.ask("judges/0", role, user("q"), Verdict, stage="S5", artifact="x")
    assert "'judges/0'" in str(err.value) and err.value.exit_code == 3
    with pytest.raises(ModelKeyError, match="FORGE_TEST_JUDGE_KEY"):
        ModelRoles(judges=[role]).check_keys()
    assert server.chat_requests() == []

    monkeypatch.setenv("FORGE_TEST_JUDGE_KEY", "secret-123")
    server.script = lambda r: {"answer": "y", "confidence": 1}
    client.ask("judges/0", role, user("q"), Verdict, stage="S5", artifact="x")
    assert server.requests[-1].headers["authorization"] == "Bearer secret-123"


def test_a_client_without_a_store_still_answers(server):
    server.script = lambda r: {"answer": "y", "confidence": 1}
    with ModelClient() as client:
        assert client.ask("verifier", role_for(server), user("q"), Verdict, stage="S5").output.answer == "y"
        assert client.ask("verifier", role_for(server), user("q"), Verdict, stage="S5").source == "model"
