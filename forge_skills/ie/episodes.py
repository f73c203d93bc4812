"""One episode: an agent acting on a household environment restored to a task's initial state.

The agent sees the task's visible fields (``TaskSpec.visible()``), then, at every step, the
observation and the grounded actions valid now (plus :data:`STOP`). What it chooses is stepped
in the environment; an action the environment refuses, or a reply no action can be read from
(:class:`Unreadable`), is recorded as an invalid step with the reason and the episode goes on.
The episode ends when

* the verifier holds after a step (``success``): ``goals.evaluate`` on ``env.objects()``;
* the agent chooses ``Stop`` (or ``Done``/``End``) (``stop``); the stop is not a step;
* ``max_steps`` steps (``task.max_steps``, 150) were taken without success (``timeout``).

Every step counts towards the cap and towards the episode's step count, invalid ones included.
Success is judged on the terminal state, whatever ended the episode.

For trajectory-grounded EQA the episode keeps the object states compactly: the full AI2-THOR
metadata at the start and at the end, and for each step only what changed in the EQA view
(:data:`VIEW_FIELDS` per object, plus ``present``: false once an object is gone, as a sliced
whole is) together with what the agent holds and where it stands. :func:`states` replays those
changes into the view after every step; the replay ends in the view of the final metadata.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from forge_resources.household import HouseholdEnv, Verifier, evaluate
from forge_resources.household.protocol import Action, Observation
from forge_skills.ie.spec import TaskSpec

EPISODE_FORMAT = 1
STOP = Action("Stop")
STOP_NAMES = frozenset({"Stop", "Done", "End"})
# What an object's EQA view holds: where it is and the states questions ask about.
VIEW_FIELDS = ("objectType", "parent", "isPickedUp", "isOpen", "isToggled", "isSliced", "isDirty", "isCooked",
               "temperature", "fillLiquid", "isBroken", "isCleaned", "isHeated", "isCooled", "present")
Ended = Literal["success", "stop", "timeout"]


class Unreadable(BaseModel):
    """What an agent returns when it has no action to give (a model reply naming none)."""

    reply: str
    reason: str = "no valid action could be read from the reply"


class Agent(Protocol):
    """What the harness drives (see :mod:`forge_skills.ie.agents`)."""

    name: str

    def start(self, task: dict[str, Any], observation: Observation) -> None: ...

    def act(self, observation: Observation, valid_actions: list[Action]) -> Action | Unreadable: ...

    def answer(self, questions: list[dict[str, Any]], history: Episode) -> list[str]: ...


class Step(BaseModel):
    index: int = Field(description="1-based")
    action: dict[str, Any] | None = Field(description="Action.to_dict(); None when the reply named no action")
    text: str = Field(description="the action as text, or the reply that named none")
    valid: bool
    message: str
    held: str | None = Field(default=None, description="what the agent holds after the step")
    location: str | None = None
    changes: dict[str, dict[str, Any]] = Field(default_factory=dict, description="object id -> changed view fields")
    progress: float = 0.0
    observation: str = ""
    reply: str | None = Field(default=None, description="a model's raw reply")


class Episode(BaseModel):
    """An episode's record; JSON in the eval store and in the package's evaluation records."""

    format: int = EPISODE_FORMAT
    task_id: str
    scene: str
    scene_type: str
    split: str
    agent: str
    max_steps: int
    steps: list[Step] = Field(default_factory=list)
    ended: Ended = "stop"
    success: bool = False
    progress: float = 0.0
    unmet: list[str] = Field(default_factory=list)
    initial: list[dict[str, Any]] = Field(description="the full object metadata at the start")
    initial_absent: list[str] = Field(default_factory=list, description="ids in the metadata of objects not present")
    initial_held: str | None = None
    initial_location: str | None = None
    initial_observation: str = ""
    final: list[dict[str, Any]] = Field(default_factory=list, description="the full object metadata at the end")
    final_absent: list[str] = Field(default_factory=list)
    environment: str = Field("household", description="the IE world the episode ran in")

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    @property
    def invalid(self) -> int:
        return sum(not s.valid for s in self.steps)

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> Episode:
        return cls.model_validate_json(text)


# -- the EQA view --------------------------------------------------------------------------


def view(objects: list[dict[str, Any]], absent: set[str] | frozenset[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """Object id -> its EQA view fields, from AI2-THOR metadata."""
    out = {}
    for o in objects:
        parents = o.get("parentReceptacles") or []
        out[o["objectId"]] = {
            "objectType": o.get("objectType"), "parent": parents[0] if parents else None,
            "isPickedUp": bool(o.get("isPickedUp")), "isOpen": bool(o.get("isOpen")),
            "isToggled": bool(o.get("isToggled")), "isSliced": bool(o.get("isSliced")),
            "isDirty": bool(o.get("isDirty")), "isCooked": bool(o.get("isCooked")),
            "temperature": o.get("temperature"), "fillLiquid": o.get("fillLiquid"),
            "isBroken": bool(o.get("isBroken")), "isCleaned": bool(o.get("isCleaned")),
            "isHeated": bool(o.get("isHeated")), "isCooled": bool(o.get("isCooled")),
            "present": o["objectId"] not in absent}
    return out


def diff(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What changed from one view to the next: new objects whole, others field by field."""
    out: dict[str, dict[str, Any]] = {}
    for oid, now in after.items():
        old = before.get(oid)
        if old is None:
            out[oid] = dict(now)
            continue
        changed = {k: v for k, v in now.items() if old.get(k) != v}
        if changed:
            out[oid] = changed
    for oid in before.keys() - after.keys():
        out[oid] = {"present": False}
    return out


def states(episode: Episode) -> list[dict[str, dict[str, Any]]]:
    """The view at the start and after each step (``len(steps) + 1`` views), replayed from the log."""
    current = view(episode.initial, set(episode.initial_absent))
    out = [current]
    for step in episode.steps:
        if step.changes:
            current = {oid: dict(v) for oid, v in current.items()}
            for oid, fields in step.changes.items():
                current.setdefault(oid, {}).update(fields)
        out.append(current)
    return out


def held_sequence(episode: Episode) -> list[str | None]:
    """What the agent holds at the start and after each step."""
    return [episode.initial_held, *(s.held for s in episode.steps)]


def absent(env: Any) -> set[str]:
    """Ids in the environment's metadata of objects that are gone (the household backend keeps a
    sliced whole in its metadata; a live THOR drops it, so there is nothing to mark)."""
    world = getattr(env, "world", None)
    if world is None:
        return set()
    return {oid for oid in world.dyn if not world.exists(oid)}


# -- running -------------------------------------------------------------------------------


def _refused(observation: Observation, choice: Unreadable) -> Observation:
    """The observation after a reply that named no action: nothing changed, and it says why."""
    lines = [ln for ln in observation.text.splitlines() if not ln.startswith("Last action ")]
    lines.append(f"Your last reply named no valid action ({choice.reason}).")
    return replace(observation, text="\n".join(lines), last_action=None, last_valid=False,
                   last_message=choice.reason)


def run_episode(task: TaskSpec, initial_state: dict[str, Any], agent: Agent, *, env: Any = None,
                max_steps: int | None = None) -> Episode:
    """Run ``agent`` on ``task`` from ``initial_state`` (see the module docstring)."""
    env = env if env is not None else HouseholdEnv()
    env.set_state(initial_state)
    verifier = Verifier.from_dict(task.verifier)
    cap = task.max_steps if max_steps is None else max_steps
    objects = env.objects()
    gone = absent(env)
    before = view(objects, gone)
    progress = evaluate(verifier, objects)[1]
    observation = env.observation(0)
    held, location = observation.holding, observation.location
    episode = Episode(task_id=task.task_id, scene=task.scene, scene_type=task.scene_type, split=task.split,
                      agent=getattr(agent, "name", type(agent).__name__), max_steps=cap, initial=objects,
                      initial_absent=sorted(gone), initial_held=held, initial_location=location,
                      initial_observation=observation.text)
    agent.start(task.visible(), observation)
    ended: Ended = "timeout"
    while len(episode.steps) < cap:
        valid_now = [*env.valid_actions(0), STOP]
        choice = agent.act(observation, valid_now)
        reply = getattr(agent, "last_reply", None)
        if isinstance(choice, Action) and choice.name in STOP_NAMES:
            ended = "stop"
            break
        index = len(episode.steps) + 1
        if isinstance(choice, Unreadable):
            observation = _refused(env.observation(0), choice)
            episode.steps.append(Step(index=index, action=None, text=choice.reply[:500], valid=False,
                                      message=choice.reason, held=held, location=location, progress=progress,
                                      observation=observation.text, reply=reply))
            continue
        result = env.step(choice)
        observation = result.observation
        objects = env.objects()
        now = view(objects, absent(env))
        ok, progress, _ = evaluate(verifier, objects)
        held, location = observation.holding, observation.location
        episode.steps.append(Step(index=index, action=choice.to_dict(), text=str(choice), valid=result.valid,
                                  message=result.message, held=held, location=location, changes=diff(before, now),
                                  progress=progress, observation=observation.text, reply=reply))
        before = now
        if ok:
            ended = "success"
            break
    final = env.objects()
    episode.final = final
    episode.final_absent = sorted(absent(env))
    episode.success, episode.progress, episode.unmet = evaluate(verifier, final)
    episode.ended = ended
    return episode
