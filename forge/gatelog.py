"""The gate decision log: the latest decision per (gate, subject) of one build, written to the
store's ``gate_decisions`` table once, at the end. Tracks define their gates; the log is theirs
to fill."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from forge.keys import GateId
from forge.store import Batch, now

_DETAILS = json.JSONEncoder(sort_keys=True, default=str)  # as json.dumps(..., sort_keys=True, default=str)


@dataclass
class GateLog:
    """The latest decision per (gate, subject) in this build; written once, at the end.

    Verification rounds after repairs decide again on the same subjects; the last word counts.
    """

    build_id: str
    rows: dict[tuple[str, str], tuple] = field(default_factory=dict)

    def decide(self, gate: GateId, subject_id: str, subject_type: str, template: str, decision: str,
               details: dict[str, Any] | None = None) -> None:
        # Details are serialized at flush: most decisions are overwritten by a later round.
        self.rows[(gate.value, subject_id)] = (self.build_id, gate.value, subject_id, subject_type, template, decision,
                                              details, now())

    def forget(self, gates: tuple[GateId, ...], subjects: set[str] | None = None) -> None:
        """Drop these gates' decisions (on these subjects): a new screening round decides again,
        and an item that no longer reaches a gate keeps no stale verdict of it."""
        names = {g.value for g in gates}
        self.rows = {k: v for k, v in self.rows.items()
                     if not (k[0] in names and (subjects is None or k[1] in subjects or _on_template(v)))}

    @property
    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (gate, _), row in sorted(self.rows.items()):
            if not _on_template(row):
                bucket = out.setdefault(gate, {})
                bucket[row[5]] = bucket.get(row[5], 0) + 1
        return out

    def flush(self, store) -> None:
        batch = Batch()
        for r in self.rows.values():  # most decisions have no details: "{}" without the encoder
            batch.add("gate_decisions", (*r[:6], _DETAILS.encode(r[6]) if r[6] else "{}", r[7]))
        store.execute("DELETE FROM gate_decisions WHERE build_id = ?", [self.build_id])
        store.write(batch)


def _on_template(row: tuple) -> bool:
    """A decision on a whole template (its subject is the template itself), not on one item."""
    return row[2] == row[4]
