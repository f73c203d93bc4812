"""Frozen key objects and the canonical hashing every identity in forge is built from."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_default)


def _default(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot hash value of type {type(value).__name__}")


def digest(*parts: Any, length: int = 24) -> str:
    """A short stable hex digest of the canonical JSON of ``parts``."""
    h = hashlib.sha256()
    for part in parts:
        h.update(canonical_json(part).encode())
        h.update(b"\x1f")
    return h.hexdigest()[:length]


def bytes_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True, order=True)
class ArtifactKey:
    """Identity of one artifact: its type and its content-independent id."""

    type: str
    id: str

    def __str__(self) -> str:
        return f"{self.type}:{self.id}"


@dataclass(frozen=True, order=True)
class RequirementId:
    """A contract requirement, e.g. ``OE-ITEM-3``."""

    value: str

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, order=True)
class GateId:
    """A quality gate, e.g. ``A``, ``B1``, ``C1``."""

    value: str

    def __str__(self) -> str:
        return f"gate {self.value}"
