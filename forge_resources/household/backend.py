"""The household backend: AI2-THOR's high-level actions executed on AI2-THOR-schema object
metadata, with no engine. Deterministic: nothing here draws a random number."""

from __future__ import annotations

from typing import Any

from . import actions as act
from .catalog import LIQUIDS
from .protocol import Action, ActionSpec, Observation, StepResult
from .scene import Scene
from .world import Pose, World

STATE_FORMAT = 1
_PER_OBJECT = ("PickupObject", "OpenObject", "CloseObject", "ToggleObjectOn", "ToggleObjectOff", "SliceObject",
               "CleanObject", "DirtyObject", "EmptyLiquidFromObject", "BreakObject")


class HouseholdEnv:
    """An :class:`~.protocol.Environment` over a :class:`~.scene.Scene`."""

    def __init__(self, scene: Scene | None = None) -> None:
        self.scene: Scene | None = None
        self.world: World | None = None
        self.steps = 0
        self.invalid = 0
        self.last: dict[str, Any] = {"action": None, "valid": None, "message": ""}
        if scene is not None:
            self.reset(scene)

    # ---- episode
    def reset(self, scene: Scene) -> Observation:
        self.scene = scene
        start = Pose.parse(scene.start) if scene.start else None
        self.world = World.from_scene(scene, start)
        self.steps, self.invalid = 0, 0
        self.last = {"action": None, "valid": None, "message": ""}
        return self.observation()

    def _world(self) -> World:
        if self.world is None:
            raise RuntimeError("reset the environment with a scene first")
        return self.world

    def get_state(self) -> dict[str, Any]:
        world = self._world()
        return {"format": STATE_FORMAT, "scene": world.scene.to_dict(), "world": world.to_dict(),
                "steps": self.steps, "invalid": self.invalid, "last": dict(self.last)}

    def set_state(self, state: dict[str, Any]) -> None:
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"unknown household state format {state.get('format')!r}")
        scene = self.scene if self.scene is not None and self.scene.to_dict() == state["scene"] \
            else Scene.from_dict(state["scene"])
        self.scene = scene
        self.world = World.from_dict(scene, state["world"])
        self.steps, self.invalid = state["steps"], state["invalid"]
        self.last = dict(state["last"])

    # ---- actions
    def action_space(self) -> list[ActionSpec]:
        return list(act.SPECS)

    def candidate_actions(self, agent: int = 0) -> list[Action]:
        """Every grounding worth checking now: navigation anywhere, interaction within reach."""
        world = self._world()
        held = world.agents[agent].held
        out = [Action("GotoLocation", (loc,), agent) for loc in world.scene.locations]
        out += [Action("GotoObject", (o,), agent) for o in world.order
                if world.exists(o) and world.holder(o) is None]
        for oid in world.order:
            if not world.exists(oid) or not world.in_reach(agent, oid):
                continue
            out += [Action(name, (oid,), agent) for name in _PER_OBJECT]
            out += [Action("FillObjectWithLiquid", (oid, liquid), agent) for liquid in LIQUIDS]
            if held is not None and oid != held:
                out.append(Action("PutObject", (held, oid), agent))
        if held is not None:
            out.append(Action("DropObject", (held,), agent))
        return out

    def valid_actions(self, agent: int = 0) -> list[Action]:
        """Grounded actions that would change something now (no-ops a lenient scene allows are left out)."""
        world, rules = self._world(), self._world().scene.rules
        with world.unchanged():
            return [a for a in self.candidate_actions(agent) if act.check_grounded(world, a, rules)[0] == "ok"]

    def step(self, action: Action) -> StepResult:
        world = self._world()
        valid, message = act.execute(world, action, world.scene.rules)
        self.steps += 1
        self.invalid += 0 if valid else 1
        self.last = {"action": str(action), "valid": valid, "message": message}
        return StepResult(self.observation(action.agent), valid, message)

    # ---- views
    def objects(self) -> list[dict[str, Any]]:
        return self._world().metadata(0)

    def observation(self, agent: int = 0) -> Observation:
        world = self._world()
        me = world.agents[agent]
        with world.unchanged():
            seen = tuple(o for o in world.order if world.exists(o) and world.visible(agent, o) and o != me.held)
        where = (me.location.name or f"({me.location.x:.2f}, {me.location.z:.2f})") if me.location else None
        place = "where you started; you have not moved yet" if where is None else \
            where if where.startswith("beside") else f"at {where}"
        lines = [f"You are {place}.",
                 f"You hold {_describe(world, me.held)}." if me.held else "Your hand is empty."]
        lines.append("Within reach you see: " + ("; ".join(_describe(world, o) for o in seen) or "nothing") + ".")
        if self.last["action"] is not None:
            outcome = "done" if self.last["valid"] else "failed"
            lines.append(f"Last action {self.last['action']}: {outcome} ({self.last['message']}).")
        return Observation(text="\n".join(lines), agent=agent, location=where, holding=me.held, visible=seen,
                           last_action=self.last["action"], last_valid=self.last["valid"],
                           last_message=self.last["message"])


def _describe(world: World, oid: str) -> str:
    state, tags = world.dyn[oid], []
    if world.can(oid, "openable"):
        tags.append("open" if state["isOpen"] else "closed")
    if world.can(oid, "toggleable"):
        tags.append("on" if state["isToggled"] else "off")
    for flag, word in (("isDirty", "dirty"), ("isCooked", "cooked"), ("isBroken", "broken")):
        if state[flag]:
            tags.append(word)
    if state["temperature"] not in (None, "RoomTemp"):
        tags.append(str(state["temperature"]).lower())
    if state["fillLiquid"]:
        tags.append(f"filled with {state['fillLiquid']}")
    inside = [c for c in world.children(oid) if world.exists(c)]
    if inside and world.closed_around(inside[0]) is None:
        tags.append("holding " + ", ".join(inside))
    return f"{oid}" + (f" [{'; '.join(tags)}]" if tags else "")
