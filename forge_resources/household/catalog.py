"""What each AI2-THOR object type can do, and which receptacles accept it.

Two sources, named where they are used:

* ``TYPE_FLAGS``: the actionable properties of every object type seen in the real AI2-THOR
  metadata dumps of iTHOR FloorPlan 6, 9, 207, 306 and 404 (``../shared/data/ai2thor``), a
  flag set when any instance of the type carries it; the types those dumps lack are filled in
  from ALFRED's ``gen/constants.py`` (its object, receptacle, openable and action lists).
* ``ALFRED_RECEPTACLES``: ALFRED's receptacle constraints, ``VAL_RECEPTACLE_OBJECTS`` in
  askforalfred/alfred ``gen/constants.py`` (the table its PDDL problems draw ``canContain`` from).
"""

from __future__ import annotations

import struct
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

FLAG_NAMES = ("pickupable", "receptacle", "openable", "toggleable", "sliceable", "dirtyable", "cookable",
              "canFillWithLiquid", "breakable", "isHeatSource", "isColdSource", "moveable")


def _table(rows: dict[str, str]) -> dict[str, frozenset[str]]:
    return {name: frozenset(value.split()) for name, value in rows.items()}


TYPE_FLAGS: dict[str, frozenset[str]] = _table({
    # from the AI2-THOR dumps
    "AlarmClock": "pickupable", "Apple": "pickupable sliceable", "ArmChair": "moveable receptacle",
    "Bathtub": "receptacle", "BathtubBasin": "receptacle", "Bed": "dirtyable moveable receptacle",
    "Blinds": "openable", "Book": "openable pickupable",
    "Bowl": "breakable canFillWithLiquid dirtyable pickupable receptacle",
    "Box": "openable pickupable receptacle", "Bread": "pickupable sliceable", "ButterKnife": "pickupable",
    "CD": "pickupable", "Cabinet": "openable receptacle", "Candle": "pickupable toggleable",
    "CellPhone": "breakable pickupable toggleable", "Chair": "moveable receptacle", "Cloth": "dirtyable pickupable",
    "CoffeeMachine": "breakable isHeatSource moveable receptacle toggleable", "CoffeeTable": "moveable receptacle",
    "CounterTop": "receptacle", "CreditCard": "pickupable",
    "Cup": "breakable canFillWithLiquid dirtyable pickupable receptacle", "Desk": "moveable receptacle",
    "DeskLamp": "moveable toggleable", "DiningTable": "moveable receptacle", "DishSponge": "pickupable",
    "Drawer": "openable receptacle", "Egg": "breakable pickupable sliceable", "Faucet": "toggleable",
    "Floor": "receptacle", "FloorLamp": "moveable toggleable", "Fork": "pickupable",
    "Fridge": "isColdSource openable receptacle", "GarbageCan": "moveable receptacle", "HandTowel": "pickupable",
    "HandTowelHolder": "receptacle", "HousePlant": "canFillWithLiquid moveable",
    "Kettle": "canFillWithLiquid openable pickupable", "KeyChain": "pickupable", "Knife": "pickupable",
    "Laptop": "breakable openable pickupable toggleable", "LaundryHamper": "moveable openable receptacle",
    "Lettuce": "pickupable sliceable", "LightSwitch": "toggleable",
    "Microwave": "isHeatSource moveable openable receptacle toggleable", "Mirror": "breakable dirtyable",
    "Mug": "breakable canFillWithLiquid dirtyable pickupable receptacle", "Painting": "",
    "Pan": "dirtyable pickupable receptacle", "PaperTowelRoll": "pickupable", "Pen": "pickupable",
    "Pencil": "pickupable", "PepperShaker": "pickupable", "Pillow": "pickupable",
    "Plate": "breakable dirtyable pickupable receptacle", "Plunger": "pickupable",
    "Pot": "canFillWithLiquid dirtyable pickupable receptacle", "Potato": "cookable pickupable sliceable",
    "RemoteControl": "pickupable", "SaltShaker": "pickupable", "ScrubBrush": "pickupable", "Shelf": "receptacle",
    "ShelvingUnit": "moveable", "ShowerCurtain": "openable", "ShowerHead": "toggleable",
    "SideTable": "moveable receptacle", "Sink": "receptacle", "SinkBasin": "receptacle", "SoapBar": "pickupable",
    "SoapBottle": "pickupable", "Sofa": "moveable receptacle", "Spatula": "pickupable", "Spoon": "pickupable",
    "SprayBottle": "pickupable", "Statue": "breakable pickupable", "Stool": "moveable receptacle",
    "StoveBurner": "isHeatSource receptacle", "StoveKnob": "toggleable", "TVStand": "moveable receptacle",
    "TeddyBear": "pickupable", "Television": "breakable moveable toggleable", "TissueBox": "pickupable",
    "Toaster": "isHeatSource moveable receptacle toggleable", "Toilet": "openable receptacle",
    "ToiletPaper": "pickupable", "ToiletPaperHanger": "receptacle", "Tomato": "pickupable sliceable",
    "Towel": "pickupable", "TowelHolder": "receptacle", "Vase": "breakable pickupable", "Watch": "pickupable",
    "Window": "breakable",
    # absent from the dumps: from ALFRED's lists
    "BaseballBat": "pickupable", "BasketBall": "pickupable", "Boots": "pickupable", "Cart": "receptacle",
    "Curtains": "", "Dresser": "receptacle", "Footstool": "moveable", "Glassbottle": "pickupable",
    "Ladle": "pickupable", "LaundryHamperLid": "", "Newspaper": "pickupable", "Ottoman": "receptacle",
    "PaintingHanger": "receptacle", "PaperTowel": "pickupable", "Poster": "", "Safe": "openable receptacle",
    "ShowerDoor": "openable", "ShowerGlass": "", "TennisRacket": "pickupable", "ToiletPaperRoll": "pickupable",
    "WateringCan": "pickupable", "WineBottle": "pickupable",
    # the pieces slicing creates (AI2-THOR spawns them; toast and fried egg are cookable)
    "AppleSliced": "pickupable", "BreadSliced": "cookable pickupable", "LettuceSliced": "pickupable",
    "PotatoSliced": "cookable pickupable", "TomatoSliced": "pickupable", "EggCracked": "cookable pickupable",
})

# What slicing a type leaves behind (AI2-THOR's names; an Egg cracks instead of slicing).
SLICED_TYPE = {"Apple": "AppleSliced", "Bread": "BreadSliced", "Lettuce": "LettuceSliced",
               "Potato": "PotatoSliced", "Tomato": "TomatoSliced", "Egg": "EggCracked"}
BASE_TYPE = {piece: whole for whole, piece in SLICED_TYPE.items()}
# AI2-THOR's piece count differs per asset; one fixed count keeps the backend deterministic.
PIECES_PER_SLICE = {"Egg": 1}
DEFAULT_PIECES = 3
CUTTERS = frozenset({"Knife", "ButterKnife"})
LIQUIDS = ("water", "coffee", "wine")

_TABLETOP = ("AlarmClock Apple AppleSliced BaseballBat BasketBall Book Bowl Box Bread BreadSliced ButterKnife "
             "Candle CD CellPhone Cloth CreditCard Cup DishSponge Glassbottle Egg Fork Kettle KeyChain Knife "
             "Ladle Laptop Lettuce LettuceSliced Mug Newspaper Pan PaperTowel Pen Pencil PepperShaker Plate Pot "
             "Potato PotatoSliced RemoteControl SaltShaker SoapBar SoapBottle Spatula Spoon SprayBottle Statue "
             "TennisRacket TissueBox ToiletPaper ToiletPaperRoll Tomato TomatoSliced Vase Watch WateringCan "
             "WineBottle HandTowel")
_COOKWARE = ("Apple AppleSliced ButterKnife DishSponge Egg Fork Knife Ladle Lettuce LettuceSliced Potato "
             "PotatoSliced Spatula Spoon Tomato TomatoSliced")
_SEATING = "BasketBall Book Box CellPhone Cloth CreditCard KeyChain Laptop Newspaper Pillow RemoteControl"
_DESK = ("AlarmClock BasketBall Book Bowl Box Candle CD CellPhone Cloth CreditCard Cup Glassbottle KeyChain "
         "Laptop Mug Newspaper Pen Pencil Plate RemoteControl SprayBottle Statue TennisRacket TissueBox "
         "ToiletPaper ToiletPaperRoll Vase Watch WateringCan WineBottle")

ALFRED_RECEPTACLES: dict[str, frozenset[str]] = _table({
    "Pot": _COOKWARE,
    "Pan": _COOKWARE,
    "Bowl": _COOKWARE + " Candle CD CellPhone Cloth CreditCard KeyChain Mug PaperTowel Pen Pencil "
                        "RemoteControl Watch",
    "CoffeeMachine": "Mug",
    "Microwave": "Apple AppleSliced Bowl Bread BreadSliced Cup Egg Glassbottle Mug Plate Potato PotatoSliced "
                 "Tomato TomatoSliced",
    "StoveBurner": "Kettle Pan Pot",
    "Fridge": "Apple AppleSliced Bowl Bread BreadSliced Cup Egg Glassbottle Lettuce LettuceSliced Mug Pan "
              "Plate Pot Potato PotatoSliced Tomato TomatoSliced WineBottle",
    "Mug": "ButterKnife Fork Knife Pen Pencil Spoon KeyChain Watch",
    "Plate": _COOKWARE + " Mug AlarmClock Book Candle CD CellPhone Cloth CreditCard Glassbottle KeyChain "
                         "PaperTowel Pen Pencil TissueBox Watch",
    "Cup": "ButterKnife Fork Spoon",
    "Sofa": _SEATING,
    "ArmChair": _SEATING,
    "Box": "AlarmClock Book Candle CD CellPhone Cloth CreditCard DishSponge Glassbottle KeyChain Mug "
           "PaperTowel Pen Pencil RemoteControl Statue TissueBox Vase Watch",
    "Ottoman": _SEATING,
    "Dresser": _DESK,
    "LaundryHamper": "Cloth",
    "Desk": _DESK + " SoapBottle",
    "Bed": "BaseballBat BasketBall Book CellPhone Laptop Newspaper Pillow TennisRacket",
    "Toilet": "Candle Cloth DishSponge Newspaper PaperTowel SoapBar SoapBottle SprayBottle TissueBox "
              "ToiletPaper ToiletPaperRoll HandTowel",
    "ToiletPaperHanger": "ToiletPaper ToiletPaperRoll",
    "TowelHolder": "Towel",
    "HandTowelHolder": "HandTowel",
    "Cart": "Candle Cloth DishSponge Mug PaperTowel Plunger SoapBar SoapBottle SprayBottle Statue TissueBox "
            "ToiletPaper ToiletPaperRoll Vase HandTowel",
    "BathtubBasin": "Cloth DishSponge SoapBar HandTowel",
    "SinkBasin": "Apple AppleSliced Bowl ButterKnife Cloth Cup DishSponge Egg Glassbottle Fork Kettle Knife "
                 "Ladle Lettuce LettuceSliced Mug Pan Plate Pot Potato PotatoSliced SoapBar Spatula Spoon "
                 "Tomato TomatoSliced HandTowel",
    "Cabinet": "Book Bowl Box Candle CD Cloth Cup DishSponge Glassbottle Kettle Ladle Mug Newspaper Pan "
               "PepperShaker Plate Plunger Pot SaltShaker SoapBar SoapBottle SprayBottle TissueBox ToiletPaper "
               "ToiletPaperRoll Vase WateringCan WineBottle HandTowel",
    "DiningTable": _TABLETOP,
    "CoffeeTable": _TABLETOP,
    "SideTable": _TABLETOP,
    "CounterTop": _TABLETOP,
    "Shelf": "AlarmClock Book Bowl Box Candle CD CellPhone Cloth CreditCard Cup DishSponge Glassbottle Kettle "
             "KeyChain Mug Newspaper PaperTowel Pen Pencil PepperShaker Plate Pot RemoteControl SaltShaker "
             "SoapBar SoapBottle SprayBottle Statue TissueBox ToiletPaper ToiletPaperRoll Vase Watch "
             "WateringCan WineBottle HandTowel",
    "Drawer": "Book ButterKnife Candle CD CellPhone Cloth CreditCard DishSponge Fork KeyChain Knife Ladle "
              "Newspaper Pen Pencil PepperShaker RemoteControl SaltShaker SoapBar SoapBottle Spatula Spoon "
              "SprayBottle TissueBox ToiletPaper ToiletPaperRoll Watch WateringCan HandTowel",
    "GarbageCan": "Apple AppleSliced Bread BreadSliced CD Cloth DishSponge Egg Lettuce LettuceSliced Newspaper "
                  "PaperTowel Pen Pencil Potato PotatoSliced SoapBar SoapBottle SprayBottle TissueBox ToiletPaper "
                  "ToiletPaperRoll Tomato TomatoSliced WineBottle HandTowel",
    "Safe": "CD CellPhone CreditCard KeyChain Statue Vase Watch",
    "TVStand": "TissueBox",
    "Toaster": "BreadSliced",
})

SCENE_KINDS = (("kitchen", range(1, 31)), ("living_room", range(201, 231)),
               ("bedroom", range(301, 331)), ("bathroom", range(401, 431)))


def flags(object_type: str) -> frozenset[str]:
    """The actionable properties of a type; an unknown type can do nothing."""
    return TYPE_FLAGS.get(object_type, frozenset())


def scene_kind(floor_plan: int) -> str:
    """kitchen, living_room, bedroom or bathroom, from the iTHOR floor plan number."""
    for kind, numbers in SCENE_KINDS:
        if floor_plan in numbers:
            return kind
    raise ValueError(f"FloorPlan{floor_plan} is not an iTHOR floor plan (1-30, 201-230, 301-330, 401-430)")


def format_object_id(object_type: str, position: dict[str, float], suffix: str = "") -> str:
    """AI2-THOR's objectId: type and position to two decimals, e.g. ``Cup|+01.25|+00.92|-01.13``."""
    coords = "|".join(thor_coordinate(position[axis]) for axis in ("x", "y", "z"))
    return f"{object_type}|{coords}" + (f"|{suffix}" if suffix else "")


def thor_coordinate(value: float) -> str:
    """One coordinate as AI2-THOR writes it in an objectId. Unity holds positions as 32-bit
    floats, shown to 7 significant digits, then rounded half away from zero (-1.835 is
    ``-01.84``, where Python's rounding of the double gives ``-01.83``); a negative value that
    rounds to zero is written ``00.00``, with no sign (a positive one ``+00.00``)."""
    single = struct.unpack("f", struct.pack("f", value))[0]  # standard library only: packages ship this module
    shown = Decimal(f"{single:.7g}")
    rounded = shown.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)  # away from zero either side
    if rounded == 0:
        return "00.00" if shown < 0 else "+00.00"
    return f"{rounded:+06.2f}"


def position_from_id(object_id: str) -> dict[str, float]:
    """The position an objectId encodes (static objects keep the position they were named for)."""
    parts = object_id.split("|")
    return {"x": float(parts[1]), "y": float(parts[2]), "z": float(parts[3])}


def type_from_id(object_id: str) -> str:
    """``Sink|...|SinkBasin`` is a SinkBasin; ``Apple|...|AppleSliced_1`` an AppleSliced."""
    parts = object_id.split("|")
    return parts[4].split("_")[0] if len(parts) > 4 else parts[0]


def default_record(object_type: str, object_id: str, name: str, position: dict[str, float]) -> dict[str, Any]:
    """A THOR-schema metadata record for an object known only by type, id and position."""
    f = flags(object_type)
    return {
        "name": name, "position": dict(position), "rotation": {"x": 0.0, "y": 0.0, "z": 0.0},
        "visible": False, "isInteractable": False,
        "receptacle": "receptacle" in f, "toggleable": "toggleable" in f, "isToggled": False,
        "breakable": "breakable" in f, "isBroken": False,
        "canFillWithLiquid": "canFillWithLiquid" in f, "isFilledWithLiquid": False, "fillLiquid": None,
        "dirtyable": "dirtyable" in f, "isDirty": False, "canBeUsedUp": False, "isUsedUp": False,
        "cookable": "cookable" in f, "isCooked": False, "temperature": "RoomTemp",
        "isHeatSource": "isHeatSource" in f, "isColdSource": "isColdSource" in f,
        "sliceable": "sliceable" in f, "isSliced": False,
        "openable": "openable" in f, "isOpen": False, "openness": 0.0,
        "pickupable": "pickupable" in f, "isPickedUp": False, "moveable": "moveable" in f,
        "mass": 0.0, "salientMaterials": None,
        "receptacleObjectIds": [] if "receptacle" in f else None, "distance": 0.0,
        "objectType": object_type, "objectId": object_id, "parentReceptacles": None,
    }
