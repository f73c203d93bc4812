"""What an interactive world is to the IE track: the simulator that runs a task, and what the
track asks of it to check, package, re-verify and evaluate its tasks. Worlds are registered as
``ie_world:<name>`` (a task's ``environment`` names its world); the track's skills and checks
ask the registry for the task's world and never branch on a world's name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class IEWorld:
    name: str
    # Contract check name -> this world's version of the check (``fn(task, ctx, **args)``).
    checks: dict[str, Callable[..., Any]]
    # A released task re-run from its own files: (hidden answer, initial state) -> problem or None.
    reverify: Callable[[dict[str, Any], dict[str, Any]], str | None]
    # One episode: (task, state, agent, *, max_steps, image) -> Episode.
    run_episode: Callable[..., Any]
    # The trajectory questions of a task's episode, and the right reply to each from its log.
    questions: Callable[[Any, Any], list[dict[str, Any]]]
    answer_from_log: Callable[[list[dict[str, Any]], Any], list[str]]
    # What a package of this world ships beside its tasks: ``files`` (a function giving name ->
    # bytes), ``scenes``, ``kind``, ``licence``, and README lines ``run``, ``check``, ``episodes``.
    package: dict[str, Any]
    # Task fields the visible task shows beyond the common ones and ``environment`` (which every
    # task of a world other than the default shows): a world with its own budget shows it.
    shows: tuple[str, ...] = field(default_factory=tuple)


def world(name: str) -> IEWorld:
    """The registered world ``name`` (a clear error naming the known ones otherwise)."""
    from forge.registry import lookup

    return lookup("ie_world", name)


def default_environment() -> str:
    """The world a task that names none runs in (tasks built before worlds were named)."""
    from forge_skills.ie.types import IETask

    return IETask.model_fields["environment"].default
