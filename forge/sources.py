"""What every source kind's intent section is: a strict pydantic model registered as
``source_kind:<kind>``, with a ``kind`` literal that tells the sections of an intent apart.

A source kind also has a resource descriptor (its workflow of plan, collect and structure
skills, its template families); the engine knows neither which kinds exist nor what their
fields mean beyond what this base class declares.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from forge.errors import DefinitionError


class SourceSpec(BaseModel):
    """Base of a source kind's intent section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Fields holding folders, read relative to the intent file: checked before anything runs,
    # and their listing is part of the blueprint's identity.
    FOLDERS: ClassVar[tuple[str, ...]] = ()

    kind: str
    scenes: int | None = Field(None, ge=1, le=5000, description="unit count; derived from items when absent")
    items: int | None = Field(None, ge=1, description="items of the package to draw from this source (with "
                                                      "several sources; those without share the rest)")

    # A kind may define ``views`` (a field or property): views or frames per unit, which sizes
    # the unit count from the item target (1 when absent).

    def fixed_units(self, entry: dict[str, Any]) -> int | None:
        """The unit count when the source decides it (a folder's contents), else None."""
        return None

    def no_units(self, entry: dict[str, Any]) -> str:
        """Why a source whose ``fixed_units`` is 0 gives nothing (what it looked for, and where)."""
        return "the source gives no unit to collect"

    def unavailable(self, capabilities: list[str]) -> dict[str, str]:
        """Asked capabilities this source cannot show, with the reason."""
        return {}


def source_kinds() -> dict[str, type[SourceSpec]]:
    from forge.registry import entries

    return entries("source_kind")


def own_section(sources: list[dict[str, Any]], kind: str, index: int | None) -> dict[str, Any]:
    """The intent section a source's plan reads: the one at ``index`` (the runner gives each
    source's plan its own index, whatever kind the section is), else the first of ``kind`` (a plan
    skill invoked on its own)."""
    if index is not None:
        return sources[index]
    try:
        return next(s for s in sources if s.get("kind") == kind)
    except StopIteration:
        raise DefinitionError(f"the blueprint has no {kind!r} source; its sources: "
                              f"{[s.get('kind') for s in sources]}") from None
