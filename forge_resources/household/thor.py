"""The same protocol over a live AI2-THOR controller, and the pure conversions between THOR
metadata and the backend (tested on real dumps; ``ai2thor`` is imported only to start one).

AI2-THOR API used: ``Controller(scene=..., visibilityDistance=1.5, gridSize=0.25)``,
``controller.step(action="PickupObject", objectId=...)``, ``event.metadata["objects"]``,
``["lastActionSuccess"]``, ``["errorMessage"]``, ``["agent"]``, ``["inventoryObjects"]``,
``GetReachablePositions``, ``TeleportFull``, ``SetObjectPoses``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

from . import actions as act
from .protocol import Action, ActionSpec, Observation, StepResult
from .scene import Rules, Scene
from .world import TRACKED, Pose, World

# The backend's action names that AI2-THOR spells differently.
THOR_NAMES = {"DropObject": "DropHandObject"}


def scene_from_thor(objects: list[dict[str, Any]], floor_plan: str, *, rules: Rules | None = None, agents: int = 1,
                    locations: tuple[str, ...] = (), source: str = "thor", start: str | None = None) -> Scene:
    """A backend scene from THOR ``metadata['objects']``: the records as they are (the backend
    reduces contact lists to one direct parent when it loads them)."""
    return Scene(floor_plan=floor_plan, objects=tuple(copy.deepcopy(objects)), locations=locations, agents=agents,
                 rules=rules or Rules(), source=source, start=start)


def thor_objects(objects: list[dict[str, Any]], tracked: dict[str, set[str]] | None = None) -> list[dict[str, Any]]:
    """THOR metadata as the protocol's ``objects()``: the records unchanged, plus ALFRED's
    bookkeeping flags (``isCleaned``, ``isHeated``, ``isCooled``) from the tracked id sets."""
    tracked = tracked or {}
    out = []
    for obj in objects:
        rec = copy.deepcopy(obj)
        for flag in TRACKED:
            rec[flag] = obj["objectId"] in tracked.get(flag, set())
        out.append(rec)
    return out


def thor_step_args(action: Action) -> dict[str, Any]:
    """The ``controller.step`` keywords for an interaction action (navigation is handled apart)."""
    name = THOR_NAMES.get(action.name, action.name)
    if action.name == "PutObject":
        return {"action": name, "objectId": action.args[1]}
    if action.name == "DropObject":
        return {"action": name}
    if action.name == "FillObjectWithLiquid":
        return {"action": name, "objectId": action.args[0], "fillLiquid": action.args[1]}
    return {"action": name, "objectId": action.args[0]}


def track(tracked: dict[str, set[str]], action: Action, objects: list[dict[str, Any]]) -> None:
    """ALFRED's ``ThorEnv.update_states`` after a successful action: what a Faucet washed, a
    Microwave heated, a closed Fridge cooled."""
    by_id = {o["objectId"]: o for o in objects}
    target = by_id.get(action.args[0]) if action.args else None
    if target is None:
        return
    kind = target["objectType"]
    if action.name == "ToggleObjectOn" and kind == "Faucet":
        basins = [o for o in objects if o["objectType"] == "SinkBasin"]
        here = target["position"]
        if basins:
            basin = min(basins, key=lambda o: math.dist([here[k] for k in "xyz"], [o["position"][k] for k in "xyz"]))
            tracked.setdefault("isCleaned", set()).update(basin.get("receptacleObjectIds") or ())
    elif action.name == "ToggleObjectOn" and kind == "Microwave":
        tracked.setdefault("isHeated", set()).update(target.get("receptacleObjectIds") or ())
    elif action.name == "CloseObject" and kind == "Fridge":
        tracked.setdefault("isCooled", set()).update(target.get("receptacleObjectIds") or ())


class ThorEnv:
    """An :class:`~.protocol.Environment` over ``ai2thor.controller.Controller``."""

    def __init__(self, controller_factory: Callable[..., Any] | None = None, **controller_kwargs: Any) -> None:
        self._factory = controller_factory
        self._kwargs = {"visibilityDistance": 1.5, "gridSize": 0.25, "width": 300, "height": 300,
                        "fieldOfView": 90, **controller_kwargs}
        self.controller: Any = None
        self.scene: Scene | None = None
        self.tracked: dict[str, set[str]] = {}
        self.last: dict[str, Any] = {"action": None, "valid": None, "message": ""}

    def _start(self, floor_plan: str) -> Any:
        if self.controller is None:
            if self._factory is None:
                from ai2thor.controller import Controller  # lazy: only a live run needs the package

                self._factory = Controller
            self.controller = self._factory(scene=floor_plan, **self._kwargs)
        else:
            self.controller.reset(scene=floor_plan)
        return self.controller.last_event

    def close(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None

    @property
    def _meta(self) -> dict[str, Any]:
        return self.controller.last_event.metadata

    # ---- episode
    def reset(self, scene: Scene | str) -> Observation:
        self.scene = scene if isinstance(scene, Scene) else Scene(floor_plan=scene, objects=())
        self._start(self.scene.floor_plan)
        poses = [{"objectName": o["name"], "position": o["position"], "rotation": o["rotation"]}
                 for o in self.scene.objects if o.get("pickupable") or o.get("moveable")]
        if poses:
            self.controller.step(action="SetObjectPoses", objectPoses=poses)
        for obj in self.scene.objects:
            self._force_state(obj)
        if self.scene.start:
            self._teleport(Pose.parse(self.scene.start))
        self.tracked = {flag: set() for flag in TRACKED}
        self.last = {"action": None, "valid": None, "message": ""}
        return self.observation()

    def _force_state(self, want: dict[str, Any]) -> None:
        now = next((o for o in self._meta["objects"] if o["objectId"] == want["objectId"]), None)
        if now is None:
            return
        for field, on, off in (("isOpen", "OpenObject", "CloseObject"), ("isToggled", "ToggleObjectOn", "ToggleObjectOff"),
                               ("isDirty", "DirtyObject", "CleanObject"), ("isBroken", "BreakObject", None),
                               ("isSliced", "SliceObject", None)):
            if field in want and bool(want[field]) != bool(now.get(field)):
                name = on if want[field] else off
                if name:
                    self.controller.step(action=name, objectId=want["objectId"], forceAction=True)
        if want.get("fillLiquid") != now.get("fillLiquid"):
            if want.get("fillLiquid"):
                self.controller.step(action="FillObjectWithLiquid", objectId=want["objectId"],
                                     fillLiquid=want["fillLiquid"], forceAction=True)
            else:
                self.controller.step(action="EmptyLiquidFromObject", objectId=want["objectId"], forceAction=True)

    def _teleport(self, pose: Pose) -> Any:
        y = self._meta["agent"]["position"]["y"]
        return self.controller.step(action="TeleportFull", x=pose.x, y=y, z=pose.z,
                                    rotation={"x": 0, "y": pose.rotation or 0, "z": 0},
                                    horizon=pose.horizon or 0, standing=True)

    def get_state(self) -> dict[str, Any]:
        meta = self._meta
        held = meta.get("inventoryObjects") or []
        return {"scene": self.scene.floor_plan if self.scene else meta.get("sceneName"),
                "objects": copy.deepcopy(meta["objects"]),
                "agent": copy.deepcopy(meta["agent"]),
                "held": held[0]["objectId"] if held else None,
                "tracked": {k: sorted(v) for k, v in self.tracked.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        """Best effort, as THOR allows: poses, open/toggle/dirty/liquid states, the agent pose and
        the held object are restored; slicing and breaking cannot be undone."""
        self.reset(scene_from_thor(state["objects"], state["scene"]))
        agent = state["agent"]
        self.controller.step(action="TeleportFull", x=agent["position"]["x"], y=agent["position"]["y"],
                             z=agent["position"]["z"], rotation=agent["rotation"], horizon=agent["cameraHorizon"],
                             standing=True)
        if state.get("held"):
            self.controller.step(action="PickupObject", objectId=state["held"], forceAction=True)
        self.tracked = {k: set(v) for k, v in state["tracked"].items()}

    # ---- actions
    def action_space(self) -> list[ActionSpec]:
        return list(act.SPECS)

    def _mirror(self) -> Any:
        from .backend import HouseholdEnv

        agent = self._meta["agent"]
        pose = Pose(agent["position"]["x"], agent["position"]["z"], agent["rotation"]["y"], agent["cameraHorizon"])
        env = HouseholdEnv(scene_from_thor(thor_objects(self._meta["objects"], self.tracked), self.scene.floor_plan,
                                           locations=self.scene.locations, rules=self.scene.rules))
        world: World = env._world()
        world.agents[0].location = pose
        world.agents[0].held = (self._meta.get("inventoryObjects") or [{}])[0].get("objectId")
        return env

    def valid_actions(self, agent: int = 0) -> list[Action]:
        """The backend's precondition checks on a mirror of the live metadata."""
        return self._mirror().valid_actions(agent)

    def step(self, action: Action) -> StepResult:
        if action.name == "GotoLocation":
            event = self._teleport(Pose.parse(action.args[0]))
        elif action.name == "GotoObject":
            event = self._go_near(action.args[0])
        else:
            event = self.controller.step(**thor_step_args(action))
        valid = bool(event.metadata["lastActionSuccess"])
        message = event.metadata.get("errorMessage") or ("done" if valid else "failed")
        if valid:
            track(self.tracked, action, event.metadata["objects"])
        self.last = {"action": str(action), "valid": valid, "message": message}
        return StepResult(self.observation(), valid, message)

    def _go_near(self, object_id: str) -> Any:
        target = next(o for o in self._meta["objects"] if o["objectId"] == object_id)["position"]
        points = self.controller.step(action="GetReachablePositions").metadata["actionReturn"]
        best = min(points, key=lambda p: math.hypot(p["x"] - target["x"], p["z"] - target["z"]))
        heading = math.degrees(math.atan2(target["x"] - best["x"], target["z"] - best["z"])) % 360
        return self.controller.step(action="TeleportFull", x=best["x"], y=best["y"], z=best["z"],
                                    rotation={"x": 0, "y": round(heading / 90) * 90 % 360, "z": 0},
                                    horizon=30, standing=True)

    # ---- views
    def objects(self) -> list[dict[str, Any]]:
        return thor_objects(self._meta["objects"], self.tracked)

    def observation(self, agent: int = 0) -> Observation:
        seen = tuple(o["objectId"] for o in self._meta["objects"] if o.get("visible"))
        held = self._meta.get("inventoryObjects") or []
        holding = held[0]["objectId"] if held else None
        text = (f"You hold {holding}." if holding else "Your hand is empty.") + \
            "\nYou see: " + ("; ".join(seen) or "nothing") + "."
        if self.last["action"]:
            outcome = "done" if self.last["valid"] else "failed"
            text += f"\nLast action {self.last['action']}: {outcome} ({self.last['message']})."
        return Observation(text=text, agent=agent, holding=holding, visible=seen, last_action=self.last["action"],
                           last_valid=self.last["valid"], last_message=self.last["message"],
                           image=self.controller.last_event.frame)
