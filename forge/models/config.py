"""How a model role is configured: an OpenAI-compatible endpoint, sampling parameters, limits.

``ModelRoles`` is the shape of the intent's ``models:`` section. A role that is absent runs on
its deterministic built-in backend.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from forge.models.errors import ModelKeyError

NO_KEY = "no-key"  # what servers that want no key (llama.cpp, vLLM, the loopback) are sent


class ModelRole(BaseModel):
    """One model serving a role. ``api_key_env`` is the NAME of an environment variable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(pattern=r"^https?://\S+$")
    model: str = Field(min_length=1)
    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$",
                             description="a panel member's or judge's stable name (default: its position)")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=512, ge=1)
    seed: int | None = 0
    api_key_env: str | None = None
    concurrency: int = Field(default=4, ge=1, le=64)
    token_budget: int | None = Field(default=None, ge=1)
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=10)
    validation_retries: int = Field(default=2, ge=0, le=5)
    backoff_s: float = Field(default=1.0, ge=0, description="first backoff delay; doubles per retry, jittered")
    vision: bool = Field(default=False, description="the model reads images: it gets the items' media")

    @field_validator("api_key_env")
    @classmethod
    def _a_variable_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError("api_key_env names an environment variable (such as OPENAI_API_KEY), never the key "
                             "itself")
        return value

    @property
    def endpoint(self) -> str:
        return f"{self.base_url} ({self.model})"

    def sampling(self) -> dict[str, Any]:
        """The parameters that change an answer (and so are part of its cache key)."""
        return {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens,
                "seed": self.seed}

    def api_key(self, role: str) -> str:
        if self.api_key_env is None:
            return NO_KEY
        value = os.environ.get(self.api_key_env)
        if not value:
            raise ModelKeyError(role, self.endpoint, self.api_key_env)
        return value


class ModelRoles(BaseModel):
    """The intent's ``models:`` section: single roles and lists of panel members and judges."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    coordinator: ModelRole | None = None
    synthesizer: ModelRole | None = None
    verifier: ModelRole | None = None
    panel: list[ModelRole] = Field(default_factory=list)
    judges: list[ModelRole] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> "ModelRoles":
        for group in ("panel", "judges"):
            names = [m.name for m in getattr(self, group) if m.name]
            if len(names) != len(set(names)):
                raise ValueError(f"{group}: member names must be unique, got {names}")
        return self

    def members(self) -> dict[str, ModelRole]:
        """Every configured role by its name: ``coordinator``, ``panel/<name or index>``, ``judges/1``..."""
        out = {n: r for n in ("coordinator", "synthesizer", "verifier") if (r := getattr(self, n)) is not None}
        for group in ("panel", "judges"):
            for i, member in enumerate(getattr(self, group)):
                out[f"{group}/{member.name or i}"] = member
        return out

    def check_keys(self) -> None:
        """Fail now, naming the variable, if any role's API key is missing from the environment."""
        for name, role in self.members().items():
            role.api_key(name)
