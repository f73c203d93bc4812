"""What a person looking at the agent's camera image calls the things of a manipulation scene,
and which things a name picks out in a given state.

A name is a noun ("bin", "cube", "peg") with words that single one out: words of the thing's own
name ("cereal", "red", "square"), what the scene shows of it ("empty": a bin holding no object)
and where it is in the agent's image ("left bin", "bin on the right"). Instructions use these
names, never the model's numbering ("bin 2", "peg1"), which nothing in the agent's view shows.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from forge_resources.robosuite.outcomes import in_bin
from forge_resources.robosuite.things import Thing

AGENT_CAMERA = "agentview"  # the camera whose image the agent observes (ManipulationEnv.render)
SIDES = ("left", "right", "middle")
ARTICLES = ("the", "a", "an")


class Name(NamedTuple):
    words: tuple[str, ...]  # the words before the noun that are not a side
    noun: str
    side: str | None  # left, right or middle in the agent's image


def parse(phrase: str) -> Name:
    """"the empty bin" -> (("empty",), "bin", None); "bin on the left" and "left bin" -> ((), "bin", "left")."""
    tokens = phrase.lower().split()
    if tokens and tokens[0] in ARTICLES:
        tokens = tokens[1:]
    side = None
    if len(tokens) > 3 and tokens[-3] in ("on", "in") and tokens[-2] == "the" and tokens[-1] in SIDES:
        side, tokens = tokens[-1], tokens[:-3]
    sides = [t for t in tokens if t in SIDES]
    if sides:
        side, tokens = sides[0], [t for t in tokens if t not in SIDES]
    return Name(tuple(tokens[:-1]), tokens[-1] if tokens else "", side)


def image_column(scene: Any, body: str) -> float:
    """Where the body's origin falls across the agent's image: 0 at its centre, negative to the
    left (in units of the vertical half field of view)."""
    import mujoco

    cam = scene._id(mujoco.mjtObj.mjOBJ_CAMERA, AGENT_CAMERA)
    offset = scene.body_position(body) - scene.data.cam_xpos[cam]
    x, _, z = scene.data.cam_xmat[cam].reshape(3, 3).T @ offset  # camera frame: x right, looking down -z
    return float(x / -z / math.tan(math.radians(scene.model.cam_fovy[cam]) / 2))


def contents(scene: Any, place: Thing) -> list[Thing]:
    """The objects inside a bin (none for another kind of place)."""
    if place.kind != "bin":
        return []
    return [t for t in scene.things() if t.kind == "object" and in_bin(scene, t.body, place.body)]


# What the scene shows of a thing, by the word that says it.
STATES = {"empty": lambda scene, thing: thing.kind == "bin" and not contents(scene, thing)}


def side_of(scene: Any, thing: Thing) -> str:
    """Left, right or middle among the things sharing its noun in the agent's image (a thing
    alone: the half of the image it is in)."""
    group = sorted((t for t in scene.things() if parse(t.name).noun == parse(thing.name).noun),
                   key=lambda t: image_column(scene, t.body))
    if len(group) == 1:
        return "left" if image_column(scene, thing.body) < 0 else "right"
    return "left" if group[0] is thing else "right" if group[-1] is thing else "middle"


def referents(scene: Any, phrase: str) -> list[Thing]:
    """The things of the scene, in its current state, that the phrase picks out."""
    name = parse(phrase)
    found = []
    for t in scene.things():
        own = parse(t.name)
        if own.noun != name.noun:
            continue
        if all(w in own.words or (w in STATES and STATES[w](scene, t)) for w in name.words) and (
                name.side is None or side_of(scene, t) == name.side):
            found.append(t)
    return found


def describe(scene: Any, thing: Thing) -> str:
    """What a person seeing the scene calls the thing (no article): "empty bin" for the one bin
    holding nothing, else its own name when that picks out only it, else its side in the agent's
    image ("bin on the left")."""
    noun = parse(thing.name).noun
    if referents(scene, f"empty {noun}") == [thing]:
        return f"empty {noun}"
    if referents(scene, thing.name) == [thing]:
        return thing.name
    return f"{noun} on the {side_of(scene, thing)}"


def mentions(text: str, things: tuple[Thing, ...]) -> list[str]:
    """The phrases of the text that name a thing of the scene: its noun with the words before it
    that may single one out, and a side after it ("the empty bin", "bin on the left")."""
    names = [parse(t.name) for t in things]
    nouns = sorted({n.noun for n in names}, key=len, reverse=True)
    words = sorted({w for n in names for w in n.words} | set(STATES) | set(SIDES), key=len, reverse=True)
    pattern = (rf"\b(?:(?:{'|'.join(map(re.escape, words))})\s+)*(?:{'|'.join(map(re.escape, nouns))})"
               rf"(?:\s+(?:on|in) the (?:{'|'.join(SIDES)}))?\b")
    return [m.group(0) for m in re.finditer(pattern, text.lower())]
