"""The response cache: answers keyed by (role, model, base_url, sampling parameters, prompt hash).

Every cached answer records the model id the server reported, so the judgments a model made can be
listed, and changing one judge's model re-asks exactly its questions (their keys change; no other
row is touched). Invalidation deletes rows so a question is asked again even with the same key.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass
from datetime import datetime
from typing import Iterable, Mapping

import pyarrow as pa

from forge.keys import digest
from forge.models.config import ModelRole
from forge.models.prompt import Prompt
from forge.models.tables import COLUMNS, has_table, insert
from forge.store import Store


def cache_key(role_name: str, role: ModelRole, prompt: Prompt) -> str:
    return digest("model-response", role_name, role.model, role.base_url, role.sampling(), prompt.hash, length=32)


@dataclass(frozen=True)
class Response:
    """One cached answer (a row of ``model_responses``)."""

    key: str
    role: str
    stage: str
    artifact: str | None
    model: str
    base_url: str
    model_reported: str
    prompt_hash: str
    output_mode: str
    content: str
    output: str | None  # the validated output as JSON; None for a text answer
    tokens_in: int
    tokens_out: int
    seconds: float
    requests: int
    build_id: str | None
    created_at: datetime


def lookup(store: Store, keys: Iterable[str]) -> dict[str, Response]:
    keys = list(dict.fromkeys(keys))
    if not keys or not has_table(store, "model_responses"):
        return {}
    store.con.register("_cache_keys", pa.table({"k": keys}))
    try:
        rows = store.execute(f"SELECT {', '.join(COLUMNS['model_responses'])} FROM model_responses "
                             "WHERE key IN (SELECT k FROM _cache_keys)").fetchall()
    finally:
        store.con.unregister("_cache_keys")
    return {r[0]: Response(*r) for r in rows}


def put(store: Store, responses: Iterable[Response]) -> None:
    rows = {r.key: astuple(r) for r in responses}
    if not rows:
        return
    store.con.register("_cache_new", pa.table({"k": list(rows)}))
    try:
        store.execute("DELETE FROM model_responses WHERE key IN (SELECT k FROM _cache_new)")
    finally:
        store.con.unregister("_cache_new")
    insert(store, "model_responses", list(rows.values()))


_ROLE = "(role = ? OR starts_with(role, ? || '/'))"


@dataclass(frozen=True)
class Judgment:
    """A cached answer seen from its artifact: which model of which role made it."""

    role: str
    model: str
    model_reported: str
    base_url: str
    stage: str
    artifact: str | None
    key: str


def judgments_by_model(store: Store, role: str) -> dict[str, list[Judgment]]:
    """The cached answers of a role (``judges`` means every judge; ``judges/1`` one of them),
    grouped by the configured model that made them."""
    if not has_table(store, "model_responses"):
        return {}
    rows = store.execute(f"SELECT role, model, model_reported, base_url, stage, artifact, key FROM model_responses "
                         f"WHERE {_ROLE} ORDER BY role, model, artifact, key", [role, role]).fetchall()
    out: dict[str, list[Judgment]] = {}
    for r in rows:
        out.setdefault(r[1], []).append(Judgment(*r))
    return out


def stale(store: Store, members: Mapping[str, ModelRole]) -> dict[str, list[str]]:
    """Per role, the artifacts whose cached answers came from another model or endpoint than the one
    configured now: the questions a build with this configuration will ask again."""
    out: dict[str, list[str]] = {}
    for name, role in members.items():
        for model, judgments in judgments_by_model(store, name).items():
            old = [j.artifact or j.key for j in judgments if j.role == name and (model, j.base_url) !=
                   (role.model, role.base_url)]
            if old:
                out.setdefault(name, []).extend(old)
    return {k: sorted(set(v)) for k, v in out.items()}


def invalidate(store: Store, role: str, *, model: str | None = None,
               artifacts: Iterable[str] | None = None) -> int:
    """Delete a role's cached answers (optionally only one model's, or only some artifacts');
    the next build asks them again. Returns how many were deleted."""
    if not has_table(store, "model_responses"):
        return 0
    where, params = [_ROLE], [role, role]
    if model is not None:
        where.append("model = ?")
        params.append(model)
    if artifacts is not None:
        where.append("list_contains(?, artifact)")
        params.append(sorted(set(artifacts)))
    sql = " AND ".join(where)
    count = store.one(f"SELECT count(*) FROM model_responses WHERE {sql}", params)[0]
    store.execute(f"DELETE FROM model_responses WHERE {sql}", params)
    return int(count)
