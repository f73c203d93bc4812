"""Helpers for the model-layer tests: an output type, roles on a loopback server, messages."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from forge.models import ModelRole
from forge.models.loopback import LoopbackServer


class Verdict(BaseModel):
    answer: str
    confidence: float = Field(ge=0, le=1)


def role_for(server: LoopbackServer, model: str = "loop-model", **kw: Any) -> ModelRole:
    """A role on the loopback server with test-sized timeouts and backoff."""
    settings: dict[str, Any] = {"timeout_s": 2.0, "backoff_s": 0.01, "max_retries": 2}
    settings.update(kw)
    return ModelRole(base_url=server.base_url, model=model, **settings)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You judge benchmark items."}, {"role": "user", "content": text}]


def last_user_text(request: dict[str, Any]) -> str:
    content = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)


def first_user_text(request: dict[str, Any]) -> str:
    content = [m for m in request["messages"] if m["role"] == "user"][0]["content"]
    return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
