"""The contract every household environment meets: the symbolic backend and live AI2-THOR alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class ActionSpec:
    """One action of the space: its argument kinds (object, receptacle, location, liquid), the
    preconditions it needs and the effects it has, in words."""

    name: str
    arg_kinds: tuple[str, ...]
    preconditions: tuple[str, ...]
    effects: tuple[str, ...]


@dataclass(frozen=True)
class Action:
    """A grounded action: ``PutObject("Mug|...", "CoffeeMachine|...")`` for agent 0."""

    name: str
    args: tuple[str, ...] = ()
    agent: int = 0

    def __str__(self) -> str:
        who = f"@{self.agent}" if self.agent else ""
        return f"{self.name}({', '.join(self.args)}){who}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "args": list(self.args), "agent": self.agent}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Action:
        return cls(data["name"], tuple(data.get("args", ())), int(data.get("agent", 0)))


@dataclass(frozen=True)
class Observation:
    """What a model receives: text about what is in reach and visible, what is held and what
    the last action did. ``image`` is a rendered frame where a backend has one."""

    text: str
    agent: int = 0
    location: str | None = None
    holding: str | None = None
    visible: tuple[str, ...] = ()
    last_action: str | None = None
    last_valid: bool | None = None
    last_message: str = ""
    image: Any = None


@dataclass(frozen=True)
class StepResult:
    observation: Observation
    valid: bool
    message: str


@runtime_checkable
class Environment(Protocol):
    def reset(self, scene: Any) -> Observation:
        """Start an episode in ``scene``."""

    def get_state(self) -> dict[str, Any]:
        """Everything needed to restore this moment, JSON-serializable."""

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a state from ``get_state`` exactly."""

    def action_space(self) -> list[ActionSpec]:
        """The typed action space."""

    def valid_actions(self, agent: int = 0) -> list[Action]:
        """Grounded actions whose preconditions hold now."""

    def step(self, action: Action) -> StepResult:
        """Run one action; an invalid one changes nothing and says why."""

    def objects(self) -> list[dict[str, Any]]:
        """The terminal-state view: every object as AI2-THOR metadata."""

    def observation(self, agent: int = 0) -> Observation:
        """What ``agent`` perceives now."""
