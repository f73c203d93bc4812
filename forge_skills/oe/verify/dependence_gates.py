"""Gates DEP and DUP: items that share what decides their answers are held back to one, and
near-duplicate items to one."""

from __future__ import annotations

import json
from typing import Any, Mapping

from forge.gatelog import GateLog
from forge.keys import GateId, digest
from forge_skills.oe.synthesize.slots import slot_objects
from forge_skills.oe.types import OEItem

GATE_DUP = GateId("DUP")
GATE_DEP = GateId("DEP")


def independent_items(log: GateLog, items: dict[str, OEItem]) -> list[str]:
    """DEP: no two released items whose answers determine each other. Two items do when they
    show the same media of one evidence record, their answers read the same quantity (a
    coordinate, a first-seen frame, a support, a count) and they name the same referents, or
    one orders all of its referents and the other's are among them (the order of A, B, C by
    first appearance settles which of A and B came first). Lists of scene facts (which of these
    rest in a tray) are the same from every view, so two on one record depend on each other
    whenever they share an object; of those, the one naming more objects is kept first.
    Otherwise items are kept in the order of a digest of their determinants (stable when another
    template is edited); one that depends on a kept item is held back."""
    kept, twins = independent({iid: items[iid].determinant for iid in items})
    for iid in sorted(items):
        if iid in twins:
            log.decide(GATE_DEP, iid, "OEItem", items[iid].template, "fail",
                       {"determined_by": twins[iid], "quantity": items[iid].determinant.get("quantity")})
        else:
            log.decide(GATE_DEP, iid, "OEItem", items[iid].template, "pass")
    return kept


def independent(determinants: Mapping[str, dict[str, Any]], first: frozenset[str] | set[str] = frozenset()
                ) -> tuple[list[str], dict[str, str]]:
    """(kept ids in the order they were kept, dropped id -> the kept id it depends on); the ids in
    ``first`` are kept before any other (items already accepted, when more are drawn beside them)."""
    kept: list[str] = []
    twins: dict[str, str] = {}
    groups: dict[tuple, list[tuple[str, set[str], bool]]] = {}
    # Of lists of scene facts that share an object, the one that asks about more objects is kept;
    # otherwise the order is a digest of what each determinant says, not of the id: an id changes
    # with its template's text, and an edit to one template must not change which of another
    # template's items on the same view are kept.
    def order(i: str) -> tuple:
        d = determinants[i] or {}
        return (i not in first, -len(d.get("referents") or ()) if d.get("scene_fact") else 0,
                digest(d) if d else "", i)

    for iid in sorted(determinants, key=order):
        d = determinants[iid]
        if not d:
            kept.append(iid)
            continue
        key = (d.get("evidence"), tuple(d.get("views") or ()), d.get("quantity"))
        refs, whole = set(d.get("referents") or ()), bool(d.get("whole_order", True))
        shared_fact = bool(d.get("scene_fact"))  # any object in common is the same fact asked again
        group = groups.setdefault(key, [])
        twin = next((other for other, theirs, their_whole in group
                     if refs == theirs or (their_whole and refs <= theirs) or (whole and theirs <= refs)
                     or (shared_fact and refs & theirs)), None)
        if twin is None:
            group.append((iid, refs, whole))
            kept.append(iid)
        else:
            twins[iid] = twin
    return sorted(kept), twins


def near_duplicates(log: GateLog, items: dict[str, OEItem], facts: dict[str, dict[str, Any]],
                    min_overlap: float = 0.5) -> list[str]:
    """Drop near-duplicates: same template, same view of the same scene, same answer, and
    slot objects overlapping by at least ``min_overlap`` (Jaccard). The lowest id is kept.

    ``facts``: binding id -> {scene, view, slots} (read from the store, not loaded)."""
    kept: list[str] = []
    seen: dict[tuple, list[tuple[str, set[str]]]] = {}
    for iid in sorted(items):
        it = items[iid]
        f = facts[it.binding]
        objects = set(slot_objects(json.loads(f["slots"] or "{}")))
        group = seen.setdefault((it.template, f["scene"], f["view"], it.answer), [])
        twin = next((other for other, objs in group
                     if objects == objs or (objects and len(objects & objs) / len(objects | objs) >= min_overlap)), None)
        if twin is None:
            group.append((iid, objects))
            kept.append(iid)
            log.decide(GATE_DUP, iid, "OEItem", it.template, "pass")
        else:
            log.decide(GATE_DUP, iid, "OEItem", it.template, "fail", {"near_duplicate_of": twin})
    return kept

