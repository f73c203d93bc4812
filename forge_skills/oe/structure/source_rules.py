"""What a source's descriptor says its evidence must carry: the conventions it states about its
scenes and the thresholds for an object a person can make out (see ``conventions`` and
``admission``). Structure skills copy both into every evidence record they write, so a changed
descriptor re-structures (and so re-admits) that source's evidence."""

from __future__ import annotations

from typing import Any


def descriptor_reads(params: dict[str, Any]) -> dict[str, str]:
    """Every descriptor is a data file of the structure skills (a skill does not know its source
    kind before it runs)."""
    from forge.resources import descriptor_files

    return descriptor_files()


def source_rules(kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(conventions, referent rules) of a source kind; empty for a kind without a descriptor."""
    from forge.resources import descriptors

    d = descriptors().get(kind)
    if d is None:
        return {}, {}
    return dict(d.conventions), (d.referents.model_dump(exclude_none=True) if d.referents else {})
