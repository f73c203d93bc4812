"""Run a model on a package's items, score every reply with the package's own scorer, store the
rows, and report.

Items go in batches (four times the role's concurrency): each batch is asked through the model
client, whose response cache keeps every answer as soon as its batch returns, even when other
questions of the batch failed; its scored rows are then written in one transaction. A run that
stops is resumed by running it again: items with a stored row are not asked, items whose answer
is in the cache are scored without a request, and only the rest go to the model.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Sequence

from forge.evaluation import records
from forge.evaluation.package import EvalPackage, load_package
from forge.evaluation.prompt import messages, read_reply
from forge.evaluation.records import EvalRow
from forge.evaluation.solvers import SolverContext, answer_form
from forge.evaluation.spec import ModelSpec, parse_spec
from forge.models import ModelClient, ModelError, Question
from forge.models import cache as response_cache
from forge.models.prompt import Prompt
from forge.evaluation.session import EvalOptions, evaluation_session, write_report
from forge.store import Store, now

ROLE = "eval"  # the model-layer role name evaluation answers are cached and accounted under
STAGE = "eval"
def track_evaluator(package: Any) -> Any:
    """The registered evaluator of the package's track (``package_evaluator:<track>``), if its
    track evaluates packages its own way; None for question items."""
    from forge.registry import entries

    for evaluator in entries("package_evaluator").values():
        if evaluator.is_package(package):
            return evaluator
    return None


def evaluate(package: str | Path | EvalPackage, model: str | ModelSpec, options: EvalOptions | None = None,
             *, store: Store | None = None, client: ModelClient | None = None) -> dict[str, Any]:
    """Evaluate one model on a package and return its report (also written as JSON)."""
    by_track = track_evaluator(package)
    if by_track is not None:  # a track that evaluates its packages otherwise (IE: the model runs episodes)
        return by_track.evaluate(package, model, options, store=store, client=client)
    options = options or EvalOptions()
    pkg = package if isinstance(package, EvalPackage) else load_package(package)
    spec = model if isinstance(model, ModelSpec) else parse_spec(model)
    with evaluation_session(pkg.path, options, store, client) as run:
        records.ensure_table(run.store)
        items = pkg.items[: options.limit] if options.limit is not None else pkg.items
        before = records.stored(run.store, pkg.digest, spec.key)
        todo = [it for it in items if it["id"] not in before]
        if spec.solver is not None:
            _run_solver(pkg, spec, todo, run.store, run.run_id, options)
        elif todo:
            _run_model(pkg, spec, todo, run.store, run.model_client(), run.run_id, options,
                       done_before=len(items) - len(todo), total=len(items))
        rows = records.stored(run.store, pkg.digest, spec.key)
        report = summarize(pkg, spec, [rows[it["id"]] for it in items], run_id=run.run_id,
                           reused=len(items) - len(todo))
    return write_report(report, pkg, spec, options)


# -- answering --------------------------------------------------------------------------------


def _form(pkg: EvalPackage, item: dict[str, Any]) -> str:
    return answer_form((pkg.keys[item["id"]].get("scoring") or {}).get("protocol"), item.get("question_type"))


def _run_solver(pkg: EvalPackage, spec: ModelSpec, todo: Sequence[dict[str, Any]], store: Store, run_id: str,
                options: EvalOptions) -> None:
    if not todo:
        return
    records.write(store, solver_rows(pkg, spec, todo, run_id))
    if options.progress:
        options.progress(spec.spec, len(todo), len(todo))


def solver_rows(pkg: EvalPackage, spec: ModelSpec, todo: Sequence[dict[str, Any]], run_id: str) -> list[EvalRow]:
    """A built-in solver's scored rows for the ``todo`` items."""
    start = time.perf_counter()
    responses = solver_answers(pkg, spec)
    each = (time.perf_counter() - start) / max(1, len(pkg.items))
    reported = f"builtin:{spec.solver.name}"  # type: ignore[union-attr]
    model_key, at = spec.key, now()  # one solver's answers arrive together
    # An item the solver left out is one it abstains on: its row has no response.
    return [_row(pkg, spec, it, responses.get(it["id"]), reported, "builtin", each, 0, 0, run_id,
                 model_key=model_key, at=at) for it in todo]


def solver_answers(pkg: EvalPackage, spec: ModelSpec) -> dict[str, str]:
    """A built-in solver's reply to every item of the package, by item id."""
    solver = spec.solver
    assert solver is not None
    # A solver answers the whole package, whatever the limit, so an item's response never depends
    # on which others were asked with it (a noisy oracle's error rates hold over the package).
    visible = pkg.memo.get(("visible",))
    if visible is None:  # the items with their answer form, the same for every solver
        visible = pkg.memo[("visible",)] = [{**it, "form": _form(pkg, it)} for it in pkg.items]
    context = SolverContext(seed=0, composition=pkg.composition,
                            keys=pkg.keys if solver.reads_key else None,
                            score=pkg.score if solver.reads_key else None,
                            memo=pkg.memo.setdefault(("solvers",), {}))
    return solver.answer(visible, context)


def _run_model(pkg: EvalPackage, spec: ModelSpec, todo: Sequence[dict[str, Any]], store: Store, client: ModelClient,
               run_id: str, options: EvalOptions, *, done_before: int, total: int) -> None:
    role = spec.role
    assert role is not None
    size = options.batch or max(1, 4 * role.concurrency)
    done = done_before
    for start in range(0, len(todo), size):
        batch = todo[start:start + size]
        questions = [Question(messages(it), it["id"], pkg.media(it) if options.media else []) for it in batch]
        try:
            answers = client.ask_many(ROLE, role, questions, None, stage=STAGE)
        except ModelError as exc:
            # The answers that did arrive are in the response cache: score and store them too.
            saved = _salvage(pkg, spec, batch, questions, store, run_id)
            raise type(exc)(f"{exc.problem}; {done + saved} of {total} items of {pkg.label} are answered and "
                            "stored", role=exc.role, endpoint=exc.endpoint, artifact=exc.artifact,
                            hint="run the same forge eval command again: it asks only the items with no stored "
                                 "answer") from None
        cached = response_cache.lookup(store, [a.key for a in answers if a.cached and a.key])
        rows = []
        for it, answer in zip(batch, answers):
            seconds, tokens_in, tokens_out = answer.seconds, answer.tokens_in, answer.tokens_out
            if answer.cached and answer.key in cached:  # what the answer cost when it was asked
                hit = cached[answer.key]
                seconds, tokens_in, tokens_out = hit.seconds, hit.tokens_in, hit.tokens_out
            rows.append(_row(pkg, spec, it, answer.text, answer.model, answer.source, seconds, tokens_in, tokens_out,
                             run_id))
        records.write(store, rows)
        done += len(batch)
        if options.progress:
            options.progress(spec.spec, done, total)


def _salvage(pkg: EvalPackage, spec: ModelSpec, batch: Sequence[dict[str, Any]], questions: Sequence[Question],
             store: Store, run_id: str) -> int:
    """Store the rows of a failed batch's items whose answers reached the cache; how many."""
    assert spec.role is not None
    keys = [response_cache.cache_key(ROLE, spec.role, Prompt(tuple(q.messages), tuple(q.images))) for q in questions]
    hits = response_cache.lookup(store, keys)
    rows = [_row(pkg, spec, it, hit.content, hit.model_reported, "model", hit.seconds, hit.tokens_in, hit.tokens_out,
                 run_id) for it, key in zip(batch, keys) if (hit := hits.get(key)) is not None]
    records.write(store, rows)
    return len(rows)


def scored_reply(pkg: EvalPackage, iid: str, reply: str | None) -> tuple[str | None, Any, bool, float]:
    """(the reading the package's scorer parsed, what it parsed to, valid, score) of one reply;
    each (item, reply) is read once per package. No reply (an abstention) scores 0."""
    if reply is None:
        return None, None, False, 0.0
    key = ("reply", iid, reply)
    found = pkg.memo.get(key)
    if found is not None:
        return found
    reading, parsed = read_reply(reply, lambda text: pkg.parse(iid, text))
    valid = reading is not None
    score = 0.0
    if valid:
        try:
            score = pkg.score(iid, reading)
        except Exception:  # the package's scorer cannot score what it parsed: invalid
            valid, reading, parsed = False, None, None
    out = pkg.memo[key] = (reading, parsed, valid, float(score))
    return out


def _metrics(pkg: EvalPackage, iid: str, text: str) -> str:
    """The scorer's extra metrics of one reading, as JSON."""
    key = ("metrics", iid, text)
    found = pkg.memo.get(key)
    if found is None:
        try:
            metrics = pkg.secondary(iid, text)
        except Exception:
            metrics = {}
        found = pkg.memo[key] = json.dumps(metrics, sort_keys=True, default=str)
    return found


def _row(pkg: EvalPackage, spec: ModelSpec, item: dict[str, Any], reply: str | None, reported: str, source: str,
         seconds: float, tokens_in: int, tokens_out: int, run_id: str, *, model_key: str | None = None,
         at: Any = None) -> EvalRow:
    iid = item["id"]
    reading, parsed, valid, score = scored_reply(pkg, iid, reply)
    metrics = _metrics(pkg, iid, reading if valid else (reply or ""))  # type: ignore[arg-type]
    return EvalRow(pkg.label, pkg.digest, spec.spec, model_key or spec.key, reported, spec.simulated, iid,
                   item.get("capability"), item.get("question_type"), reply, reading,
                   json.dumps(parsed, default=str) if valid else None, valid, score, metrics,
                   source, float(seconds), int(tokens_in), int(tokens_out), run_id, at or now())


# -- the report -------------------------------------------------------------------------------


def _group(rows: Sequence[EvalRow], field: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[EvalRow]] = {}
    for r in rows:
        groups.setdefault(str(getattr(r, field)), []).append(r)
    return {k: {"items": len(v), "accuracy": round(sum(r.score for r in v) / len(v), 6),
                "invalid": sum(not r.valid and r.response is not None for r in v),
                "abstained": sum(r.response is None for r in v)} for k, v in sorted(groups.items())}


def summarize(pkg: EvalPackage, spec: ModelSpec, rows: Sequence[EvalRow], *, run_id: str | None = None,
              reused: int = 0) -> dict[str, Any]:
    """Accuracy overall, per capability and per question type, the invalid-response rate, the
    scorer's extra metrics (means over the items reporting them), tokens and time."""
    n = len(rows)
    abstained = sum(r.response is None for r in rows)  # a solver that has no way to answer: not invalid
    invalid = sum(not r.valid for r in rows) - abstained
    metrics: dict[str, list[float]] = {}
    for r in rows:
        for name, value in r.metric_values().items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                metrics.setdefault(name, []).append(float(value))
    tokens_in, tokens_out = sum(r.tokens_in for r in rows), sum(r.tokens_out for r in rows)
    return {
        "package": {"name": pkg.name, "version": pkg.version, "path": str(pkg.path), "digest": pkg.digest,
                    "scorer": f"{pkg.module}/score.py"},
        "model": spec.spec,
        "model_key": spec.key,
        "models_reported": sorted({r.model_reported for r in rows}),
        "simulated": spec.simulated,
        "label": spec.label or "model",
        "items": n,
        "valid": n - invalid - abstained,
        "invalid": invalid,
        "invalid_rate": round(invalid / n, 6) if n else 0.0,
        "abstained": abstained,
        "accuracy": round(sum(r.score for r in rows) / n, 6) if n else 0.0,
        "by_capability": _group(rows, "capability"),
        "by_question_type": _group(rows, "question_type"),
        "metrics": {f"mean_{k}": round(sum(v) / len(v), 6) for k, v in sorted(metrics.items())},
        "tokens": {"in": tokens_in, "out": tokens_out, "total": tokens_in + tokens_out,
                   "per_item": round((tokens_in + tokens_out) / n, 2) if n else 0.0},
        "seconds": round(sum(r.seconds for r in rows), 3),
        "run": {"run_id": run_id, "answered_now": n - reused, "from_store": reused,
                "from_cache": sum(1 for r in rows if r.source == "cache" and r.run_id == run_id)},
    }


def render(report: dict[str, Any]) -> str:
    """The report as text for a terminal."""
    from forge.registry import entries

    by_track = entries("package_evaluator").get(str(report.get("track", "")))
    if by_track is not None:
        return by_track.render(report)
    tag = f"  [{report['label']}]" if report["simulated"] else ""
    pkg = report["package"]
    tokens = report["tokens"]
    lines = [f"{pkg['name']} {pkg['version']}: {report['model']}{tag}",
             f"  accuracy {report['accuracy']:.4f} over {report['items']} items; invalid responses "
             f"{report['invalid']} ({report['invalid_rate']:.1%})"
             + (f"; abstained on {report['abstained']}" if report.get("abstained") else "")
             + f"; tokens {tokens['total']} "
             f"({tokens['per_item']:g} per item); {report['run']['answered_now']} answered now, "
             f"{report['run']['from_store']} from the store"]
    for title, key in (("capability", "by_capability"), ("question type", "by_question_type")):
        lines.append(f"  {title:<26} {'items':>6} {'accuracy':>9} {'invalid':>8}")
        for name, row in report[key].items():
            lines.append(f"    {name:<24} {row['items']:>6} {row['accuracy']:>9.4f} {row['invalid']:>8}")
    for name, value in report["metrics"].items():
        lines.append(f"  {name} {value:.4f}")
    if report["simulated"]:
        lines.append("  simulated: a built-in solver answered, not a model")
    lines.append(f"  report: {report.get('report_path', '-')}")
    return "\n".join(lines)
