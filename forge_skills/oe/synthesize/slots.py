"""What a binding's slots say about its item: the objects it names (the gates DEP and DUP compare
them) and the answer class of a select-all answer (allocation and gate BAL balance by it)."""

from __future__ import annotations

from typing import Any


def slot_objects(slots: dict[str, Any]) -> list[str]:
    """Every object named by a binding's slots (a slot of coordinates, such as numbered points a
    rule draws, names none)."""
    out: list[str] = []
    for v in slots.values():
        out.extend(x for x in v if not isinstance(x, (list, dict))) if isinstance(v, list) else out.append(v)
    return out


def chosen_class(n: int) -> str:
    """The answer class of a select-all answer: how many options it chooses. Which ones are
    chosen varies with the names listed; how many would otherwise be a guess that pays (one of
    three, when most lists hold one)."""
    return f"{n} chosen"
