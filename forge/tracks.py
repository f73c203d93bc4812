"""What a track is: the roles of its workflow, the skills that fill them by default, what the
planner gives each node, the checks an intent of it must pass before anything runs, and the
stage runner that executes its workflow graph. Tracks are registered as ``track:<name>``; the
engine knows none by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from forge.executor import Executor
    from forge.gatelog import GateLog
    from forge.models.roles import RoleContext
    from forge.planner import Workflow
    from forge.progress import Progress
    from forge.repair import RepairLoop
    from forge.resources import ResourceDescriptor
    from forge.store import Store


@dataclass
class BuildContext:
    """What one build hands its track's runner: the planned workflow and the engine parts that
    run it. ``repair`` is None when repair is ablated; ``models`` None means the built-in backends."""

    workflow: Workflow
    executor: Executor
    store: Store
    progress: Progress
    gates: dict[str, Any] = field(default_factory=dict)  # the intent's gate settings
    gate_log: GateLog | None = None
    sources: list[ResourceDescriptor] = field(default_factory=list)  # one descriptor per intent source
    repair: RepairLoop | None = None
    ablate: str | None = None
    models: RoleContext | None = None


class TrackRunner(Protocol):
    """Runs one build's workflow (its stage graph) and reports on it."""

    def run(self) -> dict[str, Any]:
        """Execute the stage graph; returns the final graph state."""

    def package_id(self, state: dict[str, Any]) -> str:
        """The artifact id of the package the run produced."""

    def summary(self, state: dict[str, Any]) -> dict[str, Any]:
        """The track's own counters of what ran, was rejected, held and released (merged into the
        build summary; ``items_accepted`` and ``items_released`` count what the track releases)."""


@dataclass(frozen=True)
class Track:
    name: str
    description: str
    roles: tuple[str, ...]  # in workflow order
    source_roles: tuple[str, ...]  # roles every source fills with the skills its descriptor names
    defaults: dict[str, str]  # role -> skill, for the roles that are not a source's
    runner: Callable[[BuildContext], TrackRunner]  # builds the stage runner of one build
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
    # Summary counters `forge build` prints for this track, in order: (summary key, label).
    summary_rows: tuple[tuple[str, str], ...] = ()
    # Gates whose verdict falls on the item itself (no lineage to search for a cause) -> the
    # failure category repair routes it by.
    gate_categories: dict[str, str] = field(default_factory=dict)


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
