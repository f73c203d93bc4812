"""When to retry a model request and how long to wait first."""

from __future__ import annotations

import random
from email.utils import parsedate_to_datetime
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:  # imported on the first model call, not with forge
    import openai

MAX_WAIT_S = 60.0  # the longest single wait, whatever a Retry-After header asks for
RETRYABLE_STATUS = frozenset({408, 409, 429})  # and every 5xx


def retryable(exc: Exception) -> bool:
    import openai

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    return isinstance(exc, openai.APIStatusError) and (exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500)


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms`` or ``Retry-After``: seconds or a date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max((when - datetime.now(timezone.utc)).total_seconds(), 0.0)


def delay(attempt: int, base_s: float, asked_s: float | None, rng: random.Random) -> float:
    """The wait before retry ``attempt`` (0-based): what the server asked, else exponential backoff
    with jitter (half to all of ``base_s * 2**attempt``); never more than :data:`MAX_WAIT_S`."""
    if asked_s is not None:
        return min(asked_s, MAX_WAIT_S)
    return min(base_s * 2 ** attempt * rng.uniform(0.5, 1.0), MAX_WAIT_S)


def describe(exc: Exception) -> str:
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "the request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection failed ({exc.__cause__ or exc})"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {server_message(exc)}"
    return f"{type(exc).__name__}: {exc}"


def server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        return str(body.get("detail", body))[:300]
    return str(exc.message)[:300]


def rejects_json_schema(exc: Exception) -> bool:
    """Whether an error is the server refusing ``response_format: json_schema`` (llama.cpp-style
    servers answer 400, FastAPI-based ones 422, some 500, each naming the format)."""
    import openai

    if not isinstance(exc, openai.APIStatusError) or exc.status_code == 429:
        return False
    text = f"{server_message(exc)} {exc.body}".lower()
    return ("json_schema" in text or "response_format" in text) and exc.status_code in (400, 422, 500)
