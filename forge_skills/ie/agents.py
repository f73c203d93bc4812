"""Agents for IE episodes, and ``--agent SPEC``.

An agent (:class:`forge_skills.ie.episodes.Agent`) is told the task's visible fields, chooses one
action per step from the valid grounded actions it is shown, and answers the trajectory EQA
questions after its episode. Specs:

    reference        replays the task's reference plan, then stops; answers EQA from the logged
                     states (an oracle: it reads the hidden plan, and its answers are right)
    random[:SEED]    a uniformly random valid action (never Stop), seeded by SEED and the task id;
                     a random option (or number) for every question
    greedy           a heuristic over the instruction's words: switch on/off and open what it
                     names, pick up the objects it names (slicing with a knife, washing when it
                     says so) and put them into the last receptacle it names; EQA by a fixed rule
    BASE_URL@MODEL   a chat model on an OpenAI-compatible endpoint (``forge.models``), one request
    @FILE.yaml       per step with the instruction, the observation and the numbered valid
                     actions; images when the observation has one and the role reads images; all
                     EQA questions in one request with a summary of the episode
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from forge.errors import UsageError
from forge.keys import digest
from forge_resources.household.catalog import flags, type_from_id
from forge_resources.household.protocol import Action, Observation
from forge_skills.ie.episodes import STOP, Episode, Unreadable
from forge_skills.ie.spec import TaskSpec
from forge_skills.ie.trajectory_answers import LETTERS, answer_from_log

AGENT_VERSION = 1  # part of every agent key: a change to an agent's behaviour runs its episodes again
FORMS = "reference, random[:SEED], greedy, BASE_URL@MODEL (an OpenAI-compatible endpoint) or @FILE.yaml (a model role)"
ROLE = "eval"  # the model-layer role name agent requests are cached and accounted under
STAGE = "eval"


# -- built-in agents -----------------------------------------------------------------------


class ReferenceAgent:
    """Replays the reference plan; stops when it is spent."""

    name = "reference"

    def __init__(self, task: TaskSpec) -> None:
        self.plan = [Action.from_dict(a) for a in task.reference_plan]
        self.next = 0

    def start(self, task: dict[str, Any], observation: Observation) -> None:
        self.next = 0

    def act(self, observation: Observation, valid_actions: list[Action]) -> Action:
        if self.next >= len(self.plan):
            return STOP
        self.next += 1
        return self.plan[self.next - 1]

    def answer(self, questions: list[dict[str, Any]], history: Episode) -> list[str]:
        return answer_from_log(questions, history)


class RandomAgent:
    """A uniformly random valid action (Stop excluded, so it runs until success or the cap)."""

    def __init__(self, task: TaskSpec, seed: int = 0) -> None:
        self.name = f"random:{seed}"
        self.rng = random.Random(f"{seed}:{task.task_id}")

    def start(self, task: dict[str, Any], observation: Observation) -> None:
        pass

    def act(self, observation: Observation, valid_actions: list[Action]) -> Action:
        choices = [a for a in valid_actions if a != STOP]
        return self.rng.choice(choices) if choices else STOP

    def answer(self, questions: list[dict[str, Any]], history: Episode) -> list[str]:
        out = []
        for q in questions:
            options, kind = q.get("options") or [], q["question_type"]
            if kind == "numeric":
                out.append(str(self.rng.randint(0, 5)))
            elif kind == "yes_no":
                out.append(self.rng.choice(["yes", "no"]))
            elif kind == "single_choice":
                out.append(LETTERS[self.rng.randrange(len(options))])
            elif kind == "multiple_choice":
                picked = sorted(self.rng.sample(range(len(options)), self.rng.randint(1, len(options))))
                out.append(", ".join(LETTERS[i] for i in picked))
            else:
                order = list(range(len(options)))
                self.rng.shuffle(order)
                out.append(", ".join(LETTERS[i] for i in order))
        return out


# Words an instruction may use for a type, beyond its own name ("CounterTop": "counter top", "countertop").
SYNONYMS = {
    "CounterTop": ("counter",), "DiningTable": ("table",), "CoffeeTable": ("table",), "SideTable": ("table",),
    "SinkBasin": ("sink",), "BathtubBasin": ("bathtub", "tub"), "Fridge": ("refrigerator",), "Television": ("tv",),
    "CellPhone": ("phone", "cellphone"), "DeskLamp": ("lamp",), "FloorLamp": ("lamp",), "LightSwitch": ("light",),
    "GarbageCan": ("garbage", "trash", "bin"), "RemoteControl": ("remote",), "StoveBurner": ("stove", "burner"),
    "StoveKnob": ("stove",), "ShowerCurtain": ("curtain",), "KeyChain": ("keys",), "AlarmClock": ("clock",),
    "Laptop": ("computer",), "SoapBar": ("soap", "bar"), "SoapBottle": ("soap",), "Sofa": ("couch",),
    "ArmChair": ("armchair", "chair"),
}
KNIVES = ("Knife", "ButterKnife")


def _aliases(kind: str) -> list[str]:
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", kind).lower()
    return list(dict.fromkeys([words, words.replace(" ", ""), *SYNONYMS.get(kind, ())]))


def _mentions(text: str, kinds: set[str]) -> dict[str, int]:
    """Type -> where the text first names it (types it does not name are left out). A word inside
    a longer name ("soap" in "soap bottle") names only the longer one; a type's own name beats a
    synonym on the same words ("sink": Sink, not SinkBasin)."""
    low = text.lower()
    hits = []  # (start, end, own name?, type)
    for kind in kinds:
        for i, alias in enumerate(_aliases(kind)):
            hits += [(m.start(), m.end(), i < 2, kind)
                     for m in re.finditer(rf"\b{re.escape(alias)}(?:e?s)?\b", low)]
    kept = [h for h in hits if not any((o[0] <= h[0] and h[1] <= o[1]) and (o[1] - o[0] > h[1] - h[0] or
                                                                           (o[2] and not h[2])) for o in hits)]
    found: dict[str, int] = {}
    for start, _, _, kind in kept:
        found[kind] = min(found.get(kind, start), start)
    return found


class GreedyAgent:
    """A heuristic that acts on what the instruction names (see the module docstring)."""

    name = "greedy"

    def __init__(self, task: TaskSpec) -> None:
        self.macro = self.text = ""
        self.ready = False
        self.targets: list[str] = []
        self.dest: str | None = None
        self.on: list[str] = []
        self.off: list[str] = []
        self.opens: list[str] = []
        self.slice = self.wash = False
        self.done: set[str] = set()
        self.placed: set[str] = set()
        self.visits: dict[str, int] = {}

    def start(self, task: dict[str, Any], observation: Observation) -> None:
        ins = task.get("instruction") or {}
        self.macro = ins.get("macro", "")
        self.text = " ".join([self.macro, *ins.get("micro", [])])
        self.ready = False

    def _read(self, valid_actions: list[Action]) -> None:
        kinds = {type_from_id(a.args[0]) for a in valid_actions if a.args}
        named = _mentions(self.macro, kinds) or _mentions(self.text, kinds)  # the goal sentence first
        order = sorted(named, key=lambda k: (named[k], k))
        low = self.text.lower()
        pick = [k for k in order if "pickupable" in flags(k)]
        fixed = [k for k in order if "receptacle" in flags(k) and "pickupable" not in flags(k)]
        movable = [k for k in pick if "receptacle" in flags(k)]
        self.dest = fixed[-1] if fixed else (movable[-1] if movable and len(pick) > 1 else None)
        self.targets = [k for k in pick if k != self.dest and k not in KNIVES] or [k for k in pick if k != self.dest]
        switch = [k for k in order if "toggleable" in flags(k)]
        if re.search(r"\b(turn|switch|shut)\w*\s+(\w+\s+){0,4}off\b|\boff\b", low):
            self.off = switch
        elif re.search(r"\b(turn|switch)\w*\s+(\w+\s+){0,4}on\b|\bturn on|\bswitch on|\blight|\btoggle|\bexamine|"
                       r"\blook at", low):
            self.on = switch
        self.opens = [k for k in order if "openable" in flags(k)] if re.search(r"\bopen", low) else []
        self.slice = bool(re.search(r"\bslic|\bcut\b", low))
        self.wash = bool(re.search(r"\bclean|\bwash|\brinse", low))
        self.ready = True

    def _goto(self, valid_actions: list[Action], kinds: list[str] | str, skip: set[str] = frozenset()) -> Action | None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        options = [a for a in valid_actions if a.name == "GotoObject" and type_from_id(a.args[0]) in kinds
                   and a.args[0] not in skip and self.visits.get(a.args[0], 0) < 2]
        if not options:
            return None
        target = min(options, key=lambda a: (self.visits.get(a.args[0], 0), a.args[0]))
        self.visits[target.args[0]] = self.visits.get(target.args[0], 0) + 1
        return target

    def act(self, observation: Observation, valid_actions: list[Action]) -> Action:
        if not self.ready:
            self._read(valid_actions)

        def first(name: str, test=lambda a: True) -> Action | None:
            return next((a for a in valid_actions if a.name == name and test(a)), None)

        def kind(a: Action, i: int = 0) -> str:
            return type_from_id(a.args[i])

        held = observation.holding
        for verb, todo in (("ToggleObjectOn", self.on), ("ToggleObjectOff", self.off), ("OpenObject", self.opens)):
            pending = [k for k in todo if k not in self.done]
            a = first(verb, lambda a: kind(a) in pending)
            if a:
                self.done.add(kind(a))
                return a
            if pending and (held is None or not self.targets):
                go = self._goto(valid_actions, pending)
                if go:
                    return go
        whole = [k for k in self.targets if k not in ("AppleSliced", "BreadSliced")]
        if held is not None:
            hk = type_from_id(held)
            if hk in KNIVES and self.slice and "sliced" not in self.done:
                a = first("SliceObject", lambda a: kind(a) in whole)
                if a:
                    self.done.add("sliced")
                    return a
                return self._goto(valid_actions, whole) or first("DropObject") or STOP
            if self.wash and held not in self.done:
                a = first("CleanObject", lambda a: a.args[0] == held)
                if a:
                    self.done.add(held)
                    return a
            if hk in self.targets or type_from_id(held).removesuffix("Sliced") in self.targets:
                if self.dest is None:
                    return self._goto(valid_actions, self.on or self.off) or STOP
                a = first("PutObject", lambda a: kind(a, 1) == self.dest)
                if a:
                    self.placed.add(held)
                    return a
                a = first("OpenObject", lambda a: kind(a) == self.dest)
                if a:
                    return a
                return self._goto(valid_actions, self.dest) or first("DropObject") or STOP
            return first("PutObject") or first("DropObject") or STOP
        if self.slice and "sliced" not in self.done:
            a = first("PickupObject", lambda a: kind(a) in KNIVES)
            return a or self._goto(valid_actions, list(KNIVES)) or STOP
        a = first("PickupObject", lambda a: a.args[0] not in self.placed and
                  (kind(a) in self.targets or kind(a).removesuffix("Sliced") in self.targets))
        if a:
            return a
        if self.dest is None and self.placed:
            return STOP
        return self._goto(valid_actions, [*self.targets, *[k + "Sliced" for k in self.targets]], self.placed) \
            or STOP

    def answer(self, questions: list[dict[str, Any]], history: Episode) -> list[str]:
        """A fixed rule: the first option, "no", zero, the options in their listed order."""
        rule = {"single_choice": "A", "yes_no": "no", "numeric": "0", "multiple_choice": "A"}
        return [rule.get(q["question_type"]) or ", ".join(LETTERS[i] for i in range(len(q.get("options") or [])))
                for q in questions]


# -- a chat model --------------------------------------------------------------------------

SYSTEM = ("You control a household robot in a simulated home. Each turn you are told what the robot perceives "
          "and given a numbered list of the actions it can take now. Reply with the number of exactly one action.")
EQA_SYSTEM = ("You controlled a household robot through an episode. Answer questions about what happened, from "
              "the record of the episode. Reply with one line per question: its number, a period, then the answer "
              "in the format the question asks for.")
RECENT = 10  # actions recalled in each step's prompt
HISTORY_CHARS = 24_000  # beyond this the EQA summary keeps the actions and only the first and last observations
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_ACTION = re.compile(r"\b([A-Z][A-Za-z]+)\(([^()]*)\)")
_LINE = re.compile(r"^\s*(?:q(?:uestion)?\s*)?(\d+)\s*[.:)\-]\s*(.*?)\s*$", re.I)


def _png(image: Any) -> bytes | None:
    if image is None:
        return None
    if isinstance(image, (bytes, bytearray)):
        return bytes(image)
    import io

    try:
        from PIL import Image

        if not isinstance(image, Image.Image):
            image = Image.fromarray(image)
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        return buf.getvalue()
    except Exception:
        return None


def read_action(reply: str, valid_actions: list[Action]) -> Action | Unreadable:
    """The action a reply names: an action written out (``PickupObject(Mug|...)``, which the
    environment may refuse), else the number of one in the list, else :class:`Unreadable`."""
    text = _THINK.sub("", reply or "").strip()
    written = _ACTION.search(text)
    if written:
        args = tuple(a.strip().strip("'\"") for a in written.group(2).split(",") if a.strip())
        return Action(written.group(1), args)
    number = re.search(r"\b(\d+)\b", text)
    if number:
        n = int(number.group(1))
        if 1 <= n <= len(valid_actions):
            return valid_actions[n - 1]
        return Unreadable(reply=reply, reason=f"action {n} is not in the list of {len(valid_actions)} actions")
    return Unreadable(reply=reply)


def question_block(questions: list[dict[str, Any]]) -> str:
    lines = []
    for i, q in enumerate(questions, 1):
        lines.append(f"{i}. {q['question']}")
        lines += [f"   {LETTERS[j]}. {o}" for j, o in enumerate(q.get("options") or [])]
        lines.append(f"   ({q['response_format']})")
    return "\n".join(lines)


def episode_summary(history: Episode, *, limit: int = HISTORY_CHARS) -> str:
    """The record a model answers EQA from: every action with its outcome and what followed."""
    def build(with_observations: bool) -> str:
        out = ["At the start:", history.initial_observation, ""]
        for s in history.steps:
            out.append(f"Action {s.index}: {s.text} -> {'done' if s.valid else 'failed'} ({s.message})")
            if with_observations or s.index == len(history.steps):
                out.append(s.observation)
        out.append(f"The episode ended after {len(history.steps)} actions.")
        return "\n".join(out)

    full = build(True)
    return full if len(full) <= limit else build(False)


def parse_answers(reply: str, count: int) -> list[str]:
    """One answer per question from numbered lines; a missing one is empty (invalid)."""
    found: dict[int, str] = {}
    for line in _THINK.sub("", reply or "").splitlines():
        m = _LINE.match(line.replace("**", ""))
        if m and 1 <= int(m.group(1)) <= count and int(m.group(1)) not in found:
            found[int(m.group(1))] = m.group(2)
    return [found.get(i, "") for i in range(1, count + 1)]


class ModelAgent:
    """A chat model choosing actions (see the module docstring); ``last_reply`` is its reply."""

    def __init__(self, task: TaskSpec, role: Any, client: Any) -> None:
        self.role, self.client = role, client
        self.name = f"{role.base_url}@{role.model}"
        self.task: dict[str, Any] = {}
        self.recent: list[str] = []
        self.pending: str | None = None
        self.step = 0
        self.last_reply: str | None = None

    def start(self, task: dict[str, Any], observation: Observation) -> None:
        self.task, self.recent, self.pending, self.step = task, [], None, 0

    def _note(self, observation: Observation) -> None:
        if self.pending is not None:
            outcome = "done" if observation.last_valid else "failed"
            self.recent.append(f"{self.step}. {self.pending}: {outcome} ({observation.last_message})")
            self.pending = None

    def prompt(self, observation: Observation, valid_actions: list[Action]) -> str:
        ins = self.task.get("instruction") or {}
        lines = [f"Task {self.task.get('task_id')}", f"Instruction: {ins.get('macro', '')}"]
        if ins.get("micro"):
            lines += ["Steps:"] + [f"- {m}" for m in ins["micro"]]
        lines += ["", f"Step {self.step + 1} of at most {self.task.get('max_steps')}."]
        if self.recent:
            lines += ["Your recent actions:"] + [f"  {r}" for r in self.recent[-RECENT:]]
        lines += ["", "Observation:", observation.text, "", "Actions you can take now:"]
        lines += [f"{i}. {a}" + ("  (end the episode)" if a == STOP else "") for i, a in enumerate(valid_actions, 1)]
        lines += ["", "Reply with the number of one action."]
        return "\n".join(lines)

    def act(self, observation: Observation, valid_actions: list[Action]) -> Action | Unreadable:
        self._note(observation)
        text = self.prompt(observation, valid_actions)
        image = _png(observation.image) if getattr(self.role, "vision", False) else None
        answer = self.client.ask(ROLE, self.role, [{"role": "system", "content": SYSTEM},
                                                   {"role": "user", "content": text}], stage=STAGE,
                                 artifact=f"{self.task.get('task_id')}/step{self.step + 1}",
                                 images=[image] if image else [])
        self.last_reply = answer.text
        self.step += 1
        choice = read_action(answer.text, valid_actions)
        self.pending = str(choice) if isinstance(choice, Action) else f"(reply {choice.reply[:60]!r})"
        return choice

    def answer(self, questions: list[dict[str, Any]], history: Episode) -> list[str]:
        if not questions:
            return []
        ins = self.task.get("instruction") or {}
        text = "\n".join([f"Task {self.task.get('task_id')}", f"Instruction: {ins.get('macro', '')}", "",
                          "The episode:", episode_summary(history), "", "Questions:", question_block(questions), "",
                          "Reply with one line per question, as `<number>. <answer>`."])
        answer = self.client.ask(ROLE, self.role, [{"role": "system", "content": EQA_SYSTEM},
                                                   {"role": "user", "content": text}], stage=STAGE,
                                 artifact=f"{self.task.get('task_id')}/eqa")
        self.last_reply = answer.text
        return parse_answers(answer.text, len(questions))


# -- specs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentSpec:
    """A parsed ``--agent``: a built-in agent or a model role."""

    spec: str  # canonical: reference, random:SEED, greedy or BASE_URL@MODEL
    kind: str  # reference, random, greedy or model
    seed: int = 0
    role: Any = None  # forge.models.ModelRole for a model

    @property
    def simulated(self) -> bool:
        return self.kind != "model"

    @property
    def key(self) -> str:
        """What a stored episode is reused for: the same agent (and model, sampling parameters)."""
        if self.role is not None:
            return digest("ie-agent-model", self.role.base_url, self.role.model, self.role.sampling(), AGENT_VERSION)
        return digest("ie-agent", self.spec, AGENT_VERSION)

    @property
    def slug(self) -> str:
        if self.role is not None:
            from urllib.parse import urlparse

            url = urlparse(self.role.base_url)
            text = f"agent-{self.role.model}-{url.hostname or 'host'}-{url.port or url.scheme}-{self.key[:8]}"
        else:
            text = f"agent-{self.spec.replace(':', '-')}"
        return re.sub(r"[^A-Za-z0-9._=-]+", "-", text).strip("-.")[:120] or self.key

    def create(self, task: TaskSpec, client: Any = None) -> Any:
        if self.kind == "reference":
            return ReferenceAgent(task)
        if self.kind == "random":
            return RandomAgent(task, self.seed)
        if self.kind == "greedy":
            return GreedyAgent(task)
        if client is None:
            from forge.models import ModelClient

            client = ModelClient(None)
        return ModelAgent(task, self.role, client)


def parse_agent(text: str) -> AgentSpec:
    """``reference``, ``random[:SEED]``, ``greedy`` (``builtin:`` may prefix them),
    ``BASE_URL@MODEL`` or ``@FILE.yaml``."""
    raw = text.strip()
    name = raw[len("builtin:"):] if raw.startswith("builtin:") else raw
    if name in ("reference", "greedy"):
        return AgentSpec(name, name)
    if name == "random" or name.startswith("random:"):
        arg = name.partition(":")[2] or "0"
        if not re.fullmatch(r"-?\d+", arg):
            raise UsageError(f"--agent {raw!r}: the random agent's seed is an integer (random:7)")
        return AgentSpec(f"random:{int(arg)}", "random", seed=int(arg))
    if raw.startswith("@") or re.match(r"^https?://", raw):
        from forge.evaluation.spec import parse_spec

        model = parse_spec(raw)
        return AgentSpec(model.spec, "model", role=model.role)
    raise UsageError(f"--agent {raw!r}: expected {FORMS}")
