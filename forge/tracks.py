"""What a track is: the roles of its workflow, the skills that fill them by default, what the
planner gives each node, the checks an intent of it must pass before anything runs, and the
stage runner that executes its workflow graph. Tracks are registered as ``track:<name>``; the
engine knows none by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol


class TrackRunner(Protocol):
    """Runs one build's workflow (its stage graph) and reports on it."""

    def run(self) -> dict[str, Any]:
        """Execute the stage graph; returns the final graph state."""

    def package_id(self, state: dict[str, Any]) -> str:
        """The artifact id of the package the run produced."""

    def summary(self, state: dict[str, Any]) -> dict[str, Any]:
        """Counters of what ran, was rejected, held and released (merged into the build summary)."""


@dataclass(frozen=True)
class Track:
    name: str
    description: str
    roles: tuple[str, ...]  # in workflow order
    source_roles: tuple[str, ...]  # roles every source fills with the skills its descriptor names
    defaults: dict[str, str]  # role -> skill, for the roles that are not a source's
    # Builds the stage runner: (workflow, executor, store, gate settings, progress, gate log,
    # source descriptors, repair loop or None, ablation or None, model roles) -> TrackRunner.
    runner: Callable[..., TrackRunner]
    # Parameters and fan-out (one invocation per parameter set) of a role's node, from the intent.
    node_params: Callable[[str, Any], dict[str, Any]] = lambda role, loaded: {}
    node_fanout: Callable[[str, Any], list[dict[str, Any]] | None] = lambda role, loaded: None
    # Raises a CompositionError when the intent asks for what the track cannot build from its sources.
    check_intent: Callable[[Any], None] = lambda loaded: None
    # Repair operators' skills by operator step, and routes for the track's own failure categories
    # (category -> operator, escalation; see forge.repair).
    repair_skills: dict[str, str] = field(default_factory=dict)
    repair_routes: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    # The intent section holding what this track should build, and its schema.
    section: str | None = None
    section_model: type | None = None
    # Model roles asked before planning (a coordinator choosing what to build, a synthesizer writing
    # what the library lacks): whether a parsed intent needs them, and the step that asks them and
    # returns the intent to plan: (intent path, model client, store folder, progress) -> LoadedIntent.
    asks_before_planning: Callable[[dict[str, Any]], bool] = lambda raw: False
    plan_with_models: Callable[..., Any] | None = None
    # The artifact type of what the track releases, one per package entry (what `forge review`
    # takes verdicts on and an item reference resolves to).
    item_type: str = ""


def track(name: str) -> Track:
    from forge.registry import lookup

    return lookup("track", name)


def item_types() -> set[str]:
    """The artifact types the registered tracks release as items."""
    from forge.registry import entries

    return {t.item_type for t in entries("track").values() if t.item_type}


def default_track() -> str:
    """The track an intent without a ``track`` field builds: the first registered."""
    from forge.errors import DefinitionError
    from forge.registry import entries

    known = entries("track")
    if not known:
        raise DefinitionError("no track is registered (is the builtin plugin installed?)")
    return next(iter(known))
