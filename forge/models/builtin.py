"""Deterministic built-in backends: a role with no endpoint answers from a plain function, offline."""

from __future__ import annotations

from typing import Callable, Protocol, Sequence, TypeVar, runtime_checkable

from pydantic import BaseModel

from forge.models.config import ModelRole
from forge.models.prompt import Message

T = TypeVar("T", bound=BaseModel)


@runtime_checkable
class Backend(Protocol):
    """Answers a role's questions without a model server."""

    name: str

    def complete(self, messages: Sequence[Message], output_model: type[T]) -> T: ...


class BuiltinBackend:
    """A backend that calls ``fn(messages, output_model)``; it must be deterministic."""

    def __init__(self, fn: Callable[[Sequence[Message], type[BaseModel]], BaseModel], name: str = "builtin") -> None:
        self.fn = fn
        self.name = name

    def complete(self, messages: Sequence[Message], output_model: type[T]) -> T:
        out = self.fn(messages, output_model)
        return out if isinstance(out, output_model) else output_model.model_validate(out)

    def __repr__(self) -> str:
        return f"BuiltinBackend({getattr(self.fn, '__qualname__', self.fn)!r})"


def resolve(role: ModelRole | None, builtin: Backend | Callable[..., BaseModel]) -> ModelRole | Backend:
    """The configured endpoint if there is one, else the built-in backend (what ``ask`` takes)."""
    if role is not None:
        return role
    return builtin if isinstance(builtin, Backend) else BuiltinBackend(builtin)
