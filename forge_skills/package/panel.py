"""Gate E: a panel answers every released item; the response matrix it gives.

The built-in panel is simulated (computed here, not by a model, and labelled so in every output):
a uniform guess, the answer prior, a text-only heuristic, and evidence readers that read the
answer key and are wrong on a set share of each capability's items (``DEFAULT_PANEL``). Models on OpenAI-compatible endpoints (the
intent's ``models.panel``) answer through ``forge eval``'s client; their scored rows arrive here
as records.

The response-matrix contract: every (model, item) pair has exactly one row, attributed to a
model id, scored in [0, 1]; a response the package's scorer cannot parse is invalid, scores 0
and stays in the matrix.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from json.encoder import encode_basestring as _quoted  # the C encoder's quoting, as ensure_ascii=False writes
from typing import Any, Iterable, Iterator, Sequence

import numpy as np


RESPONSE_FIELDS = ("model", "model_reported", "simulated", "item_id", "response", "answer", "valid", "score")
_FIELDS = frozenset(RESPONSE_FIELDS)
_ANY_RECORD = json.JSONEncoder(sort_keys=True, ensure_ascii=False)
_LINES_AT_ONCE = 4096


@dataclass(frozen=True)
class PanelMember:
    """One column group of the matrix: a spec and how it is labelled."""

    model: str  # builtin:NAME[:ARG] or BASE_URL@MODEL
    simulated: bool
    label: str  # what every output shows beside its results


def solver_responses(pkg: Any, specs: Sequence[str]) -> tuple[list[PanelMember], list[dict[str, Any]]]:
    """The built-in members' scored responses on a package (an ``EvalPackage``, as
    ``forge.evaluation.load_package`` reads one)."""
    from forge.evaluation import parse_spec
    from forge.evaluation.run import scored_reply, solver_answers

    members, rows = [], []
    for text in specs:
        spec = parse_spec(text)
        if spec.solver is None:
            raise ValueError(f"{text}: the built-in panel takes builtin:NAME solvers; models answer as the "
                             "intent's models.panel")
        members.append(PanelMember(spec.spec, True, spec.label or "simulated"))
        replies, reported = solver_answers(pkg, spec), f"builtin:{spec.solver.name}"
        for it in pkg.items:  # scored as forge eval scores them (one EvalRow each there)
            reply = replies.get(it["id"])  # None: the solver abstains on it
            reading, _, valid, score = scored_reply(pkg, it["id"], reply)
            rows.append(_record(spec.spec, reported, True, it["id"], reply, reading, valid, score))
    return members, rows


def response_record(row: Any) -> dict[str, Any]:
    """The released form of one scored response (an ``EvalRow``): what and who, not when."""
    return _record(row.model, row.model_reported, row.simulated, row.item_id, row.response, row.answer, row.valid,
                   row.score)


def _record(model: str, reported: str, simulated: bool, item_id: str, response: str | None, answer: str | None,
            valid: bool, score: float) -> dict[str, Any]:
    return {"model": model, "model_reported": reported, "simulated": bool(simulated), "item_id": item_id,
            "response": response, "answer": answer, "valid": bool(valid), "score": float(score) if valid else 0.0}


def response_lines(rows: Iterable[dict[str, Any]]) -> bytearray:
    """``evaluation/responses.jsonl``: each record on a line as ``json.dumps(sort_keys=True,
    ensure_ascii=False)`` writes it. A record of the released layout is laid out directly (a
    package's panel gives a hundred thousand); any other goes through the encoder. The text is
    encoded a few thousand lines at a time: the lines, their join and its bytes of the whole file
    at once would be three copies of it (50 MB at a hundred thousand records)."""
    data, out = bytearray(), []
    for r in rows:
        a, score, sim, valid = r.get("answer"), r.get("score"), r.get("simulated"), r.get("valid")
        if (r.keys() == _FIELDS and score.__class__ is float and 0.0 <= score <= 1.0 and sim.__class__ is bool
                and valid.__class__ is bool and (a is None or a.__class__ is str)):
            try:
                out.append(f'{{"answer": {"null" if a is None else _quoted(a)}, "item_id": {_quoted(r["item_id"])}, '
                           f'"model": {_quoted(r["model"])}, "model_reported": {_quoted(r["model_reported"])}, '
                           f'"response": {_quoted(r["response"])}, "score": {score!r}, '
                           f'"simulated": {"true" if sim else "false"}, "valid": {"true" if valid else "false"}}}\n')
            except TypeError:  # an id or a response that is not a string
                out.append(_ANY_RECORD.encode(r) + "\n")
        else:
            out.append(_ANY_RECORD.encode(r) + "\n")
        if len(out) == _LINES_AT_ONCE:
            data += "".join(out).encode()
            out.clear()
    data += "".join(out).encode()
    return data  # not bytes(data): that would copy it once more


def matrix_problems(members: Sequence[dict[str, Any]], item_ids: Sequence[str],
                    rows: Iterable[dict[str, Any]]) -> list[str]:
    """What breaks the response-matrix contract (empty when it holds)."""
    models = [m["model"] for m in members]
    problems: list[str] = []
    if len(set(models)) != len(models):
        problems.append("a panel member is listed twice")
    # Each model's answered items as a set of positions: 110,000 rows checked without a set of
    # every expected (model, item) pair.
    answered: dict[Any, set[int]] = {m: set() for m in models}
    position = {i: k for k, i in enumerate(item_ids)}
    for n, r in enumerate(rows, 1):
        model, item = r.get("model"), r.get("item_id")
        mine, at = answered.get(model), position.get(item)
        if mine is None or at is None:
            problems.append(f"row {n}: ({model}, {item}) is not a panel member and released item")
        elif at in mine:
            problems.append(f"row {n}: ({model}, {item}) is answered twice")
        else:
            mine.add(at)
        if not r.get("model_reported"):
            problems.append(f"row {n}: no model id the response is attributed to")
        score = r.get("score")
        if not isinstance(score, (int, float)) or not 0.0 <= float(score) <= 1.0:
            problems.append(f"row {n}: score {score!r} is not in [0, 1]")
        elif not r.get("valid") and float(score) != 0.0:
            problems.append(f"row {n}: an invalid response scored {score}")
        if len(problems) >= 20:
            break
    missing = len(set(models)) * len(position) - sum(len(v) for v in answered.values())
    if missing:
        problems.append(f"{missing} (model, item) pairs have no scored response")
    return problems


def score_matrix(models: Sequence[str], item_ids: Sequence[str], rows: Iterable[dict[str, Any]]) -> np.ndarray:
    """models x items scores; a partial score (ordered lists, numbers) counts as correct from 0.5
    up, so the matrix is the 0/1 one a 2PL model fits."""
    m_index = {m: k for k, m in enumerate(models)}
    i_index = {i: k for k, i in enumerate(item_ids)}
    y = np.full((len(models), len(item_ids)), np.nan)
    for r in rows:
        y[m_index[r["model"]], i_index[r["item_id"]]] = 1.0 if float(r["score"]) >= 0.5 else 0.0
    return y


def read_responses(data: bytes) -> list[dict[str, Any]]:
    return list(iter_responses(data))


def iter_responses(data: bytes) -> Iterator[dict[str, Any]]:
    """The records of ``evaluation/responses.jsonl`` one at a time (a package's panel gives a
    hundred thousand of them; a check that reads each once need not hold them all)."""
    decode = json.JSONDecoder().decode
    for line in io.BytesIO(data):
        if line.strip():
            yield decode(line.decode("utf-8"))
