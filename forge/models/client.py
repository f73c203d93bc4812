"""The model client: one question (or a batch) to a role, answered by the cache, a model on an
OpenAI-compatible endpoint, or a built-in backend; typed, validated, retried, accounted for.

Typed outputs use ``response_format: json_schema``; an endpoint that refuses it is switched to
``json_object`` (with the schema in the prompt) once and remembered. A reply that is not JSON or
does not fit its type goes back to the model with the error, a bounded number of times. 429, 5xx,
timeouts and connection errors are retried with jittered backoff (honouring Retry-After), then fail
with an error naming the role, the endpoint and the artifact. Answers are cached in the store as
they are written, so a failed batch resumes with only its unanswered questions.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from pydantic import BaseModel

from forge.models import accounting, cache, retry
from forge.models.builtin import Backend
from forge.models.config import ModelRole
from forge.models.errors import (ModelError, ModelOutputError, ModelRequestError, ModelUnavailableError,
                                 TokenBudgetError)
from forge.models.prompt import (InvalidOutput, Message, Prompt, estimate_tokens, feedback, instructed,
                                 parse_output, response_format)
from forge.models.tables import ensure_tables
from forge.store import Store, now

if TYPE_CHECKING:  # the OpenAI client is imported on the first model call, not with forge
    import openai
    from openai.types.chat import ChatCompletion


@dataclass(frozen=True)
class Question:
    """One question of a batch: its messages, the artifact it is about, its images (PNG/JPEG bytes)."""

    messages: Sequence[Message]
    artifact: str | None = None
    images: Sequence[bytes] = ()


@dataclass(frozen=True)
class Answer:
    role: str
    artifact: str | None
    output: BaseModel | None  # the validated output; None for a text question
    text: str
    model: str  # the model id the server reported; ``builtin:<name>`` for a built-in backend
    source: str  # "model", "cache" or "builtin"
    tokens_in: int
    tokens_out: int
    seconds: float
    requests: int
    key: str | None

    @property
    def cached(self) -> bool:
        return self.source == "cache"


@dataclass
class _Tally:
    requests: int = 0
    tokens_in: int = 0
    tokens_out: int = 0


@dataclass
class _Outcome:
    answer: Answer | None
    error: ModelError | None
    tally: _Tally
    seconds: float
    mode: str = "text"
    row: cache.Response | None = None


@dataclass
class _Budget:
    spent: int = 0
    reserved: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class ModelClient:
    """Asks roles questions. One per build; ``store`` holds the cache and the accounting (without
    one nothing is cached or recorded). Token budgets count what this client spent."""

    def __init__(self, store: Store | None = None, *, build_id: str | None = None, seed: int | None = None) -> None:
        self.store = store
        self.build_id = build_id
        if store is not None:
            ensure_tables(store)
        self._clients: dict[tuple[str, str, float], openai.OpenAI] = {}
        self._modes: dict[str, str] = {}
        self._budgets: dict[str, _Budget] = {}
        self._lock = threading.Lock()
        self._rng = random.Random(seed)

    # -- public ---------------------------------------------------------------------------

    def ask(self, role_name: str, role: ModelRole | Backend, messages: Sequence[Message],
            output_model: type[BaseModel] | None = None, *, stage: str, artifact: str | None = None,
            images: Sequence[bytes] = ()) -> Answer:
        return self.ask_many(role_name, role, [Question(messages, artifact, images)], output_model, stage=stage)[0]

    def ask_many(self, role_name: str, role: ModelRole | Backend, questions: Sequence[Question],
                 output_model: type[BaseModel] | None = None, *, stage: str) -> list[Answer]:
        """Answers in the order of ``questions``; up to ``role.concurrency`` requests at a time."""
        if not isinstance(role, ModelRole):
            return self._ask_builtin(role_name, role, questions, output_model, stage)
        prompts = [Prompt(tuple(q.messages), tuple(q.images), output_model) for q in questions]
        keys = [cache.cache_key(role_name, role, p) for p in prompts]
        hits = cache.lookup(self.store, keys) if self.store is not None else {}
        answers: dict[str, Answer] = {}
        for key in keys:
            if key in hits and key not in answers:
                found = self._from_cache(hits[key], output_model)
                if found is not None:
                    answers[key] = found
        todo = {k: i for i, k in reversed(list(enumerate(keys))) if k not in answers}  # first index per key
        outcomes: dict[str, _Outcome] = {}
        if todo:
            client = self._openai(role, role.api_key(role_name))  # a fully cached batch needs no key
            work = [(k, prompts[i], questions[i].artifact) for k, i in sorted(todo.items(), key=lambda kv: kv[1])]

            def run(item: tuple[str, Prompt, str | None]) -> _Outcome:
                return self._ask_model(client, role_name, role, *item, stage=stage)

            if len(work) == 1:
                outcomes = {work[0][0]: run(work[0])}
            else:
                with ThreadPoolExecutor(max_workers=min(role.concurrency, len(work))) as pool:
                    outcomes = dict(zip([w[0] for w in work], pool.map(run, work)))
        self._write(role_name, role, stage, questions, keys, answers, outcomes)
        failed = [o.error for o in outcomes.values() if o.error is not None]
        if failed:
            first = failed[0]
            if len(questions) > 1:
                kept = "; the answered ones are stored and are not asked again" if self.store is not None else ""
                raise type(first)(f"{first.problem} ({len(failed)} of {len(questions)} questions failed{kept})",
                                  role=first.role, endpoint=first.endpoint, artifact=first.artifact, hint=first.hint)
            raise first
        answers.update({k: o.answer for k, o in outcomes.items() if o.answer is not None})
        self._check_spent(role_name, role)
        return [self._for(answers[k], q.artifact) for k, q in zip(keys, questions)]

    def output_mode(self, base_url: str) -> str:
        """``json_schema`` until the endpoint refused it, then ``json_object``."""
        with self._lock:
            return self._modes.get(base_url, "json_schema")

    def spent(self, role_name: str) -> int:
        return self._budget(role_name).spent

    def close(self) -> None:
        for c in self._clients.values():
            c.close()
        self._clients.clear()

    def __enter__(self) -> "ModelClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- a model call ---------------------------------------------------------------------

    def _ask_model(self, client: openai.OpenAI, role_name: str, role: ModelRole, key: str, prompt: Prompt,
                   artifact: str | None, *, stage: str) -> _Outcome:
        start = time.perf_counter()
        tally = _Tally()
        conversation = prompt.chat()
        mode = "text"
        try:
            for _ in range(role.validation_retries + 1):
                completion, mode = self._complete(client, role_name, role, prompt.output_model, conversation,
                                                  artifact, tally)
                text = (completion.choices[0].message.content if completion.choices else None) or ""
                if prompt.output_model is None:
                    output = None
                    break
                try:
                    output = parse_output(text, prompt.output_model)
                    break
                except InvalidOutput as problem:
                    last = problem
                    conversation = conversation + feedback(text, problem)
            else:
                raise ModelOutputError(f"{role.validation_retries + 1} replies were invalid; the last: {last}",
                                       role=role_name, endpoint=role.endpoint, artifact=artifact,
                                       hint="a larger model, a lower temperature or a simpler output type helps")
        except ModelError as err:
            return _Outcome(None, err, tally, time.perf_counter() - start, mode)
        seconds = time.perf_counter() - start
        reported = completion.model or role.model
        row = cache.Response(key, role_name, stage, artifact, role.model, role.base_url, reported, prompt.hash, mode,
                             text, output.model_dump_json() if output is not None else None, tally.tokens_in,
                             tally.tokens_out, seconds, tally.requests, self.build_id, now())
        answer = Answer(role_name, artifact, output, text, reported, "model", tally.tokens_in, tally.tokens_out,
                        seconds, tally.requests, key)
        return _Outcome(answer, None, tally, seconds, mode, row)

    def _complete(self, client: openai.OpenAI, role_name: str, role: ModelRole,
                  output_model: type[BaseModel] | None, conversation: list[Message], artifact: str | None,
                  tally: _Tally) -> tuple[ChatCompletion, str]:
        """One reply, through retries on transient failures and the json_schema fallback."""
        import openai

        attempt = 0
        while True:
            mode = self.output_mode(role.base_url) if output_model is not None else "text"
            messages = instructed(conversation, output_model) if mode == "json_object" else conversation
            params: dict[str, Any] = {k: v for k, v in role.sampling().items() if v is not None}
            if output_model is not None:
                params["response_format"] = response_format(output_model, mode)
            estimate = estimate_tokens(messages)
            self._reserve(role_name, role, estimate, artifact)
            tally.requests += 1
            try:
                completion = client.chat.completions.create(model=role.model, messages=messages, **params)
            except openai.APIError as exc:
                self._settle(role_name, estimate, 0)
                if mode == "json_schema" and retry.rejects_json_schema(exc):
                    with self._lock:
                        self._modes[role.base_url] = "json_object"
                    continue
                if not retry.retryable(exc):
                    raise ModelRequestError(f"the server refused the request: {retry.describe(exc)}", role=role_name,
                                            endpoint=role.endpoint, artifact=artifact) from None
                if attempt >= role.max_retries:
                    raise ModelUnavailableError(f"gave up after {attempt + 1} attempts; the last: "
                                                f"{retry.describe(exc)}", role=role_name, endpoint=role.endpoint,
                                                artifact=artifact, hint="the next build asks only the questions "
                                                                        "that have no stored answer") from None
                headers = exc.response.headers if isinstance(exc, openai.APIStatusError) else None
                with self._lock:
                    wait = retry.delay(attempt, role.backoff_s, retry.retry_after(headers), self._rng)
                time.sleep(wait)
                attempt += 1
                continue
            usage = completion.usage
            text = (completion.choices[0].message.content if completion.choices else None) or ""
            tokens_in = usage.prompt_tokens if usage else estimate
            tokens_out = usage.completion_tokens if usage else len(text) // 4
            tally.tokens_in += tokens_in
            tally.tokens_out += tokens_out
            self._settle(role_name, estimate, tokens_in + tokens_out)
            return completion, mode

    def _openai(self, role: ModelRole, api_key: str) -> openai.OpenAI:
        import openai

        key = (role.base_url, api_key, role.timeout_s)
        with self._lock:
            if key not in self._clients:
                # Retries are ours (bounded, jittered, accounted), so the SDK's are off.
                self._clients[key] = openai.OpenAI(base_url=role.base_url, api_key=api_key, max_retries=0,
                                                   timeout=role.timeout_s)
            return self._clients[key]

    # -- budgets --------------------------------------------------------------------------

    def _budget(self, role_name: str) -> _Budget:
        with self._lock:
            return self._budgets.setdefault(role_name, _Budget())

    def _reserve(self, role_name: str, role: ModelRole, estimate: int, artifact: str | None) -> None:
        budget = self._budget(role_name)
        with budget.lock:
            if role.token_budget is not None and budget.spent + budget.reserved + estimate > role.token_budget:
                raise TokenBudgetError(f"its token budget of {role.token_budget} would be exceeded: {budget.spent} "
                                       f"spent, about {estimate} more needed for this request", role=role_name,
                                       endpoint=role.endpoint, artifact=artifact,
                                       hint="raise token_budget for this role, or ask fewer or shorter questions")
            budget.reserved += estimate

    def _settle(self, role_name: str, estimate: int, actual: int) -> None:
        budget = self._budget(role_name)
        with budget.lock:
            budget.reserved -= estimate
            budget.spent += actual

    def _check_spent(self, role_name: str, role: ModelRole) -> None:
        spent = self.spent(role_name)
        if role.token_budget is not None and spent > role.token_budget:
            raise TokenBudgetError(f"its token budget of {role.token_budget} was exceeded: {spent} tokens spent "
                                   "(the answers are stored)", role=role_name, endpoint=role.endpoint, artifact=None,
                                   hint="raise token_budget for this role")

    # -- cache, built-in backends, the store ----------------------------------------------

    @staticmethod
    def _from_cache(row: cache.Response, output_model: type[BaseModel] | None) -> Answer | None:
        output = None
        if output_model is not None:
            try:
                output = output_model.model_validate_json(row.output or "")
            except ValueError:
                return None  # a stored answer that no longer fits its type is asked again
        return Answer(row.role, row.artifact, output, row.content, row.model_reported, "cache", 0, 0, 0.0, 0, row.key)

    @staticmethod
    def _for(answer: Answer, artifact: str | None) -> Answer:
        """The answer as seen by a question about ``artifact`` (identical questions share one answer)."""
        if answer.artifact == artifact:
            return answer
        return Answer(answer.role, artifact, answer.output, answer.text, answer.model, "cache", 0, 0, 0.0, 0,
                      answer.key)

    def _ask_builtin(self, role_name: str, backend: Backend, questions: Sequence[Question],
                     output_model: type[BaseModel] | None, stage: str) -> list[Answer]:
        answers, rows = [], []
        model = f"builtin:{backend.name}"
        try:
            for q in questions:
                start = time.perf_counter()
                error = None
                try:
                    output = backend.complete(Prompt(tuple(q.messages), tuple(q.images)).chat(), output_model)
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    raise
                finally:
                    seconds = time.perf_counter() - start
                    rows.append(accounting.UsageRow(self.build_id, role_name, stage, q.artifact, "builtin", model, 0,
                                                    0, 0, seconds, error, now()))
                is_model = isinstance(output, BaseModel)
                text = output.model_dump_json() if is_model else str(output)
                answers.append(Answer(role_name, q.artifact, output if is_model else None, text, model, "builtin",
                                      0, 0, seconds, 0, None))
        finally:
            if self.store is not None:
                accounting.record(self.store, rows)
        return answers

    def _write(self, role_name: str, role: ModelRole, stage: str, questions: Sequence[Question], keys: list[str],
               answers: dict[str, Answer], outcomes: dict[str, _Outcome]) -> None:
        """The new answers into the cache and every question into the accounting, in one transaction."""
        if self.store is None or self.store.read_only:
            return
        at = now()
        final = {**answers, **{k: o.answer for k, o in outcomes.items() if o.answer is not None}}
        usage = []
        seen: set[str] = set()
        for key, q in zip(keys, questions):
            o = outcomes.get(key) if key not in seen else None
            seen.add(key)
            if o is not None:
                usage.append(accounting.UsageRow(
                    self.build_id, role_name, stage, q.artifact, "model", o.answer.model if o.answer else role.model,
                    o.tally.requests, o.tally.tokens_in, o.tally.tokens_out, o.seconds,
                    str(o.error) if o.error else None, at))
            elif key in final:  # from the cache, or the answer to an identical question in this batch
                usage.append(accounting.UsageRow(self.build_id, role_name, stage, q.artifact, "cache",
                                                 final[key].model, 0, 0, 0, 0.0, None, at))
            else:  # an identical question in this batch failed
                usage.append(accounting.UsageRow(self.build_id, role_name, stage, q.artifact, "model", role.model,
                                                 0, 0, 0, 0.0, str(outcomes[key].error), at))
        if not usage:
            return
        store = self.store
        store.execute("BEGIN TRANSACTION")
        try:
            cache.put(store, [o.row for o in outcomes.values() if o.row is not None])
            accounting.record(store, usage)
            store.execute("COMMIT")
        except Exception:
            store.execute("ROLLBACK")
            raise
