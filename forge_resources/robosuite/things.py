"""What the agent can name in each manipulation environment: objects it may pick up and places
it may put them, by what a person calls them and the model's body names.

Names say what the agent's camera shows: a kind, a colour or shape, a side of the image (PickPlace's
bins stand fixed, robosuite's ``bin1`` on the left of the agent's view); never the model's numbering
(see :mod:`.naming`, which also names things by what a state shows, such as the empty bin)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thing:
    """Something the agent can name: an object it may pick up, or a place it may put one."""

    name: str  # what a person calls it
    body: str  # the model's root body
    kind: str  # "object" or one of PLACE_KINDS
    grasp_site: str | None = None  # where to grasp it, when not at its centre (a nut's handle)
    compartments: bool = False  # a bin split by walls into four quarters (PickPlace's target bin)


PLACE_KINDS = ("bin", "peg", "object")  # a place inside, a place to slide around, an object's top
# What each environment offers, by the names robosuite gives the bodies.
THINGS: dict[str, tuple[Thing, ...]] = {
    "Lift": (Thing("cube", "cube_main", "object"),),
    "Stack": (Thing("red cube", "cubeA_main", "object"), Thing("green cube", "cubeB_main", "object")),
    "PickPlace": (Thing("milk carton", "Milk_main", "object"), Thing("bread loaf", "Bread_main", "object"),
                  Thing("cereal box", "Cereal_main", "object"), Thing("can", "Can_main", "object"),
                  Thing("bin on the left", "bin1", "bin"),
                  Thing("bin on the right", "bin2", "bin", compartments=True)),
    "NutAssembly": (Thing("square nut", "SquareNut_main", "object", "SquareNut_handle_site"),
                    Thing("round nut", "RoundNut_main", "object", "RoundNut_handle_site"),
                    Thing("square peg", "peg1", "peg"), Thing("round peg", "peg2", "peg")),
}
# PickPlace's quarter of the target bin for each object, as robosuite numbers them
COMPARTMENT_OF = {"Milk_main": 0, "Bread_main": 1, "Cereal_main": 2, "Can_main": 3}
