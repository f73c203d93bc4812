"""``--model SPEC``: which model answers.

    builtin:NAME[:ARG]   a built-in solver (simulated; see :mod:`forge.evaluation.solvers`)
    BASE_URL@MODEL       a model on an OpenAI-compatible endpoint, default settings
    @FILE.yaml           a model role in YAML: base_url, model, sampling, api_key_env, limits
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from pydantic import ValidationError

from forge.errors import UsageError
from forge.evaluation import solvers
from forge.keys import digest
from forge.models import ModelRole

FORMS = "builtin:NAME, BASE_URL@MODEL (an OpenAI-compatible endpoint) or @FILE.yaml (a model role)"
ROLE_FILE_BYTES = 64 << 10


@dataclass(frozen=True)
class ModelSpec:
    """A parsed ``--model``: an endpoint role or a built-in solver."""

    spec: str  # canonical: builtin:NAME[:ARG] or BASE_URL@MODEL
    role: ModelRole | None = None
    solver: solvers.Solver | None = None

    @property
    def simulated(self) -> bool:
        return self.solver is not None

    @property
    def label(self) -> str | None:
        return self.solver.label if self.solver is not None else None

    @property
    def key(self) -> str:
        """What a stored response is reused for: the same endpoint, model and sampling
        parameters, or the same built-in solver with the same argument."""
        if self.role is not None:
            return digest("eval-model", self.role.base_url, self.role.model, self.role.sampling())
        return digest("eval-builtin", self.spec)

    @property
    def slug(self) -> str:
        """A file name for the model's report."""
        if self.role is not None:
            url = urlparse(self.role.base_url)
            text = f"{self.role.model}-{url.hostname or 'host'}-{url.port or url.scheme}-{self.key[:8]}"
        else:
            text = self.spec.replace(":", "-")
        return re.sub(r"[^A-Za-z0-9._=-]+", "-", text).strip("-.")[:120] or self.key


def parse_spec(text: str) -> ModelSpec:
    text = text.strip()
    if text.startswith("builtin:"):
        made = solvers.solver(text[len("builtin:"):])
        return ModelSpec(f"builtin:{made.name}", solver=made)
    if text.startswith("@"):
        role = _role_file(Path(text[1:]))
        return ModelSpec(f"{role.base_url}@{role.model}", role=role)
    if re.match(r"^https?://", text) and "@" in text:
        base_url, _, model = text.rpartition("@")
        try:
            role = ModelRole(base_url=base_url, model=model)
        except ValidationError as exc:
            raise UsageError(f"--model {text}: {_problems(exc)}; expected {FORMS}") from None
        return ModelSpec(f"{role.base_url}@{role.model}", role=role)
    raise UsageError(f"--model {text!r}: expected {FORMS}")


def _role_file(path: Path) -> ModelRole:
    from forge.yamlfile import Limits, read_yaml

    if not path.is_file():
        raise UsageError(f"--model @{path}: no such file")
    data = read_yaml(path, Limits(ROLE_FILE_BYTES, 2_000), what="model role file", error=UsageError).data
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a model role file holds a mapping (base_url, model, ...)")
    try:
        return ModelRole.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{path}: not a model role: {_problems(exc)}") from None


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors())
