"""What a build's stages ask of the model roles: the client, the roles the intent configured, and a
record of which checks ran on a model and which on a built-in backend (the summary, the package
README and its manifest say so)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from forge.models.config import ModelRole, ModelRoles


@dataclass
class RoleContext:
    client: Any  # forge.models.client.ModelClient (imported lazily: it brings the OpenAI client)
    roles: ModelRoles
    ran: dict[str, dict[str, Any]] = field(default_factory=dict)  # check -> {role, backend: [models] | "builtin"}

    def single(self, name: str) -> ModelRole | None:
        """The coordinator, synthesizer or verifier, or None (its built-in backend then)."""
        return getattr(self.roles, name)

    def members(self, group: str) -> dict[str, ModelRole]:
        """``panel/<name>`` or ``judges/<name>`` -> role, in the intent's order."""
        return {f"{group}/{m.name or i}": m for i, m in enumerate(getattr(self.roles, group))}

    def note(self, check: str, role: str, models: list[str] | None, detail: str | None = None) -> None:
        """Record that ``check`` ran with ``role`` on these models (None: its built-in backend);
        ``detail`` says what limited it (a configured role that had nothing to answer)."""
        self.ran[check] = {"role": role, "models": models or [], "builtin": not models}
        if detail:
            self.ran[check]["detail"] = detail

    def without_model(self) -> list[str]:
        return sorted(c for c, r in self.ran.items() if r["builtin"])

    def report(self) -> dict[str, Any]:
        return {"checks": dict(sorted(self.ran.items())), "without_model": self.without_model()}
