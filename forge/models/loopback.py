"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions API, driven by a script.

For tests and cost benchmarks: it answers ``POST /v1/chat/completions`` and ``GET /v1/models``
from a queue of :class:`Reply` objects and/or a function of the request, and records every
request. A reply can be a completion (content, token counts, model id), an HTTP error (429 with
Retry-After, 500, 503), a delay past the client's timeout, or any content at all (malformed or
schema-invalid JSON). ``reject_json_schema=True`` answers every ``json_schema`` request with
a 400, as llama.cpp's servers do. Standard library only::

    with LoopbackServer(lambda request: Reply.json({"answer": "yes"})) as server:
        ModelRole(base_url=server.base_url, model="m")
"""

from __future__ import annotations

import collections
import json
import threading
import time
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable

from pydantic import BaseModel

from forge.models.prompt import estimate_tokens

Script = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class Reply:
    """What the server answers to one chat-completions request."""

    content: str = ""
    status: int = 200
    model: str | None = None  # the model id reported; default: the server's, else the one requested
    prompt_tokens: int | None = None  # default: an estimate from the request
    completion_tokens: int | None = None  # default: an estimate from the content
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # the error message of a non-200 reply

    @classmethod
    def json(cls, value: BaseModel | dict | list, **kw: Any) -> "Reply":
        text = value.model_dump_json() if isinstance(value, BaseModel) else json.dumps(value)
        return cls(content=text, **kw)

    @classmethod
    def failure(cls, status: int, message: str | None = None, *, retry_after: float | None = None,
                retry_after_ms: int | None = None, **kw: Any) -> "Reply":
        headers = {}
        if retry_after is not None:
            headers["Retry-After"] = f"{retry_after:g}"
        if retry_after_ms is not None:
            headers["retry-after-ms"] = str(retry_after_ms)
        return cls(status=status, error=message or f"loopback: scripted HTTP {status}", headers=headers, **kw)

    @classmethod
    def rate_limited(cls, retry_after: float = 1, **kw: Any) -> "Reply":
        return cls.failure(429, "Rate limit reached (scripted)", retry_after=retry_after, **kw)

    @classmethod
    def rejecting_json_schema(cls) -> "Reply":
        return cls.failure(400, 'response_format type must be "text" or "json_object", not "json_schema"')

    def after(self, delay_s: float) -> "Reply":
        return replace(self, delay_s=delay_s)


@dataclass(frozen=True)
class Received:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: dict[str, Any] | None
    at: float


class LoopbackServer:
    """A threaded OpenAI-compatible server on an ephemeral port; a context manager."""

    def __init__(self, script: Script | Iterable[Reply] | None = None, *, model: str | None = None,
                 reject_json_schema: bool = False) -> None:
        self.model = model
        self.reject_json_schema = reject_json_schema
        self.script: Script | None = None
        self._queue: collections.deque[Reply] = collections.deque()
        if callable(script):
            self.script = script
        elif script is not None:
            self._queue.extend(script)
        self._log: list[Received] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._counter = 0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> "LoopbackServer":
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False  # handlers blocked on idle keep-alive connections must not hold close()
        httpd.loopback = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"loopback-{self.port}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None

    def __enter__(self) -> "LoopbackServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "the server is not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- the script and the log -----------------------------------------------------------

    def push(self, *replies: Reply) -> None:
        """Queue replies; they are used, in order, before the script function."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def requests(self) -> list[Received]:
        with self._lock:
            return list(self._log)

    def chat_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat-completions requests received, in order."""
        return [r.body for r in self.requests if r.path.endswith("/chat/completions") and r.body is not None]

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()

    def _record(self, received: Received) -> None:
        with self._lock:
            self._log.append(received)

    def _reply_to(self, request: dict[str, Any]) -> Reply:
        fmt = request.get("response_format") or {}
        if self.reject_json_schema and fmt.get("type") == "json_schema":
            return Reply.rejecting_json_schema()
        with self._lock:
            queued = self._queue.popleft() if self._queue else None
        if queued is not None:
            return queued
        if self.script is None:
            return Reply.failure(500, "loopback: no scripted reply left")
        try:
            result = self.script(request)
        except Exception as exc:  # a broken script shows up as a server error, not a hang
            return Reply.failure(500, f"loopback script raised {type(exc).__name__}: {exc}")
        if isinstance(result, Reply):
            return result
        if isinstance(result, (BaseModel, dict, list)):
            return Reply.json(result)
        return Reply(content=str(result))

    def _completion(self, request: dict[str, Any], reply: Reply) -> dict[str, Any]:
        with self._lock:
            self._counter += 1
            number = self._counter
        prompt_tokens = reply.prompt_tokens
        if prompt_tokens is None:
            prompt_tokens = estimate_tokens(request.get("messages") or [])
        completion_tokens = reply.completion_tokens
        if completion_tokens is None:
            completion_tokens = max(1, len(reply.content) // 4)
        return {
            "id": f"chatcmpl-loopback-{number}", "object": "chat.completion", "created": int(time.time()),
            "model": reply.model or self.model or request.get("model") or "loopback",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "forge-loopback/1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    @property
    def loopback(self) -> LoopbackServer:
        return self.server.loopback  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        self.loopback._record(Received("GET", self.path, self._headers(), None, time.time()))
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            name = self.loopback.model or "loopback"
            self._send(200, {"object": "list", "data": [{"id": name, "object": "model", "created": 0,
                                                         "owned_by": "forge-loopback"}]})
        else:
            self._send(404, _error(404, f"no route GET {self.path}"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except json.JSONDecodeError:
            body = None
        self.loopback._record(Received("POST", self.path, self._headers(), body, time.time()))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, _error(404, f"no route POST {self.path}"))
            return
        if not isinstance(body, dict):
            self._send(400, _error(400, "the request body is not a JSON object"))
            return
        reply = self.loopback._reply_to(body)
        if reply.delay_s and self.loopback._stop.wait(reply.delay_s):
            return  # the server is closing
        if reply.status != 200:
            self._send(reply.status, _error(reply.status, reply.error or "error"), reply.headers)
        else:
            self._send(200, self.loopback._completion(body, reply), reply.headers)

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout it was meant to hit)


def _error(status: int, message: str) -> dict[str, Any]:
    kind = {400: "invalid_request_error", 404: "not_found_error", 429: "rate_limit_error"}.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "code": status}}
