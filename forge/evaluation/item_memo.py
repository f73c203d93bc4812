"""What a package's evaluation computes for one item alone, kept between assessments.

A built-in panel member's reply to an item, and the package scorer's reading of a reply, depend
only on the item (its id is a digest of its content), the answer key, the solvers' and the
scorer's code. A rebuild that changes one template re-releases a package whose other items are
unchanged: their replies and readings are read back instead of computed again. What depends on
the whole package (which items an evidence reader gets wrong, the answer prior) is always
computed afresh. The memo is a cache: an assessment gives the same records with or without it.
"""

from __future__ import annotations

import json
from itertools import repeat
from pathlib import Path
from typing import Any, Iterable

from forge.evaluation.package import EvalPackage
from forge.keys import digest

# pkg.memo kinds kept: ("reply", item id, reply) -> (reading, parsed, valid, score)
KEPT = frozenset({"reply"})
SOLVERS = ("solvers",)  # pkg.memo entry holding the solvers' shared memo (SolverContext.memo)
_CODE = ("solvers.py", "responses.py", "run.py", "session.py", "prompt.py", "package.py", "item_memo.py")  # beside this module
_PLAIN = (str, int, float, bool, type(None))
_KEY_PARTS = frozenset({str, int, bool})  # what JSON gives back as it was and a tuple can hash


def memo_key(pkg: EvalPackage) -> str:
    """The memo's name: the evaluation code and the package's scorer (its folder's modules)."""
    here = Path(__file__).parent
    scorer = Path(pkg.scorer.__file__).parent
    code = [(here / name).read_bytes() for name in _CODE]
    code += [p.read_bytes() for p in sorted(scorer.rglob("*.py"))]
    return digest("item-memo", [c.decode("utf-8", "replace") for c in code])


def dump(pkg: EvalPackage, item_ids: Iterable[str]) -> bytes:
    """The item-scoped entries that mention one of these items (the released ones), as JSON
    columns: a hundred thousand entries read back in a few tens of milliseconds, where a record
    per entry takes ten times as long. A solver memo entry is kept when its key is a tuple of
    plain values naming an item and its value is text."""
    ids = set(item_ids)
    replies = [(k[1], k[2]) + v for k, v in pkg.memo.items()
               if k[0] in KEPT and len(k) == 3 and k[1] in ids and _json_exact(v[1])]
    groups: dict[tuple[Any, int], list[tuple]] = {}  # solver memo entries by kind and key length
    for k, v in pkg.memo.get(SOLVERS, {}).items():
        if type(v) is str and type(k) is tuple and not ids.isdisjoint(k):
            rows = groups.get((k[0], len(k)))
            if rows is None:
                rows = groups[(k[0], len(k))] = []
            rows.append((*k[1:], v))
    kept = {f"{kind}/{size}": [list(c) for c in zip(*rows)] for (kind, size), rows in groups.items()
            if type(kind) is str and all(type(p) in _KEY_PARTS for p in rows[0])}  # a kind's keys are alike
    try:
        return json.dumps({"reply": [list(c) for c in zip(*replies)] or [[]] * 6, "solvers": kept},
                          separators=(",", ":")).encode()
    except (TypeError, ValueError):  # a kind whose keys are not alike after all: no memo this time
        return b""


def load(pkg: EvalPackage, data: bytes | None) -> int:
    """Add a dumped memo's entries to the package's memo; how many (a damaged memo adds none)."""
    if not data:
        return 0
    try:
        found = json.loads(data)
        columns = found["reply"]
        if len(columns) != 6 or len({len(c) for c in columns}) > 1:
            return 0
        iids, replies, *reading = columns
        kept = dict(zip(zip(repeat("reply"), iids, replies), zip(*reading)))
        solvers: dict[tuple, str] = {}
        for group, columns in found["solvers"].items():
            kind, _, size = group.rpartition("/")
            if len(columns) == int(size) and len({len(c) for c in columns}) == 1:
                solvers.update(zip(zip(repeat(kind), *columns[:-1]), columns[-1]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return 0
    pkg.memo.update(kept)
    pkg.memo.setdefault(SOLVERS, {}).update(solvers)
    return len(kept) + len(solvers)


def _json_exact(value: Any) -> bool:
    """Whether JSON gives the value back as it is (a parsed reading may be a tuple: not kept)."""
    if isinstance(value, _PLAIN):
        return not isinstance(value, float) or value == value
    if isinstance(value, list):
        return all(_json_exact(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_exact(v) for k, v in value.items())
    return False
