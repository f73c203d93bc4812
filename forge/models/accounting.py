"""Token, call and time accounting per role and stage, read back from the store."""

from __future__ import annotations

from dataclasses import astuple, dataclass
from datetime import datetime
from typing import Any, Iterable

from forge.models.tables import has_table, insert
from forge.store import Store

# Where an answer came from: an HTTP call to a model, the response cache, or a built-in backend.
SOURCES = ("model", "cache", "builtin")


@dataclass(frozen=True)
class UsageRow:
    """One question asked of a role (a row of ``model_usage``)."""

    build_id: str | None
    role: str
    stage: str
    artifact: str | None
    source: str
    model: str | None
    requests: int  # HTTP requests it took (retries and validation follow-ups included)
    tokens_in: int
    tokens_out: int
    seconds: float
    error: str | None
    asked_at: datetime


def record(store: Store, rows: Iterable[UsageRow]) -> None:
    insert(store, "model_usage", [astuple(r) for r in rows])


_FIELDS = ("asks", "calls", "cache_hits", "builtin", "tokens_in", "tokens_out", "seconds", "errors")


def usage(store: Store, build_id: str | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """``{role: {stage: {asks, calls, cache_hits, builtin, tokens_in, tokens_out, seconds, errors}}}``.

    ``asks`` counts questions, ``calls`` the HTTP requests sent to models (what costs), ``builtin``
    the questions answered without a model. ``build_id`` restricts it to one build.
    """
    if not has_table(store, "model_usage"):
        return {}
    where, params = ("WHERE build_id = ?", [build_id]) if build_id else ("", [])
    rows = store.execute(
        "SELECT role, stage, count(*), coalesce(sum(requests), 0), count(*) FILTER (source = 'cache'), "
        "count(*) FILTER (source = 'builtin'), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0), "
        f"coalesce(sum(seconds), 0), count(error) FROM model_usage {where} GROUP BY role, stage ORDER BY role, stage",
        params).fetchall()
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for role, stage, *values in rows:
        out.setdefault(role, {})[stage] = {f: (round(float(v), 6) if f == "seconds" else int(v))
                                           for f, v in zip(_FIELDS, values)}
    return out


def totals(summary: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """The sums of a :func:`usage` summary over roles and stages."""
    out: dict[str, Any] = {f: 0 for f in _FIELDS}
    for stages in summary.values():
        for counts in stages.values():
            for f in _FIELDS:
                out[f] += counts[f]
    return out


def tokens_per_item(summary: dict[str, dict[str, dict[str, Any]]], accepted_items: int) -> float | None:
    """Input plus output tokens per accepted item; None when no item was accepted."""
    if accepted_items <= 0:
        return None
    t = totals(summary)
    return (t["tokens_in"] + t["tokens_out"]) / accepted_items
