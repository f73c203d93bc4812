"""Running untrusted Python source (a model's answer program) in a separate, limited process.

A :class:`Sandbox` holds one long-lived worker per program source. The worker loads the source
once, then serves calls as JSON lines over its stdin/stdout, so a call costs a round trip through
a pipe (tens of microseconds), not a process start. A call that is refused, loops, exhausts its
memory or crashes the worker is stopped and raised as one of the errors below; the next call
starts a fresh worker. The caller never hangs: every exchange has a wall-clock deadline.

Layers (each works as root and as an ordinary user on Linux; :attr:`Sandbox.layers` says which
ones a worker got):

- ``process``: a fresh interpreter (``-I -S -B``: no site-packages, no user environment, no
  bytecode written), a clean environment, its own session, a private temporary folder as its
  working directory, ``HOME`` and ``TMPDIR``; stdout goes nowhere (replies use a private pipe).
- ``rlimits``: address space (RLIMIT_AS), CPU seconds over the worker's life (RLIMIT_CPU; the
  worker retires itself at half of it), file size, open files, no core files, no new processes
  for an ordinary user (RLIMIT_NPROC 0).
- ``unshare-net``: the worker runs in a new network namespace (``unshare --net``, with a user
  namespace where needed), found by a probe: it has no interface but a down loopback.
- ``landlock``: where the kernel offers Landlock, writes only beneath the temporary folder, no
  program executed, no TCP bind or connect (ABI 4), no signals to processes outside (ABI 6).
- ``audit``: a ``sys.addaudithook`` hook installed before the untrusted code runs refuses network
  calls (``socket.connect``, ``bind``, ``getaddrinfo``...), opening for writing or changing
  anything outside the temporary folder (``open``, ``os.remove``, ``os.rename``, ``os.mkdir``...),
  new processes (``subprocess.Popen``, ``os.system``, ``os.exec``, ``os.fork``,
  ``os.posix_spawn``), signals, ``ctypes``, rlimit changes, and imports of modules that bypass
  the hooks (ctypes, _posixsubprocess, sqlite3, subinterpreters...). A refused event ends the call
  at once: the worker reports it and exits, whatever the code would have caught.
- ``imports``: the program's own ``import`` statements reach only the modules offered
  (:data:`SAFE_MODULES` by default); asking for another is refused like an audit event.

Errors::

    ForgeError
    +-- SandboxError            a sandboxed call did not return a result
        +-- SandboxRefused        the code tried something refused; ``operation`` names it
        +-- SandboxTimeout        the call ran past its wall-clock or CPU limit
        +-- SandboxMemoryError    the call ran out of its memory limit
        +-- SandboxCrash          the worker died otherwise (a signal, an unreadable reply)
        +-- ProgramError          the code raised, does not load, lacks the function or returned
                                  something that is not JSON
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

from forge import sandbox_worker
from forge.errors import ForgeError

SAFE_MODULES = frozenset({
    "math", "cmath", "statistics", "itertools", "functools", "operator", "collections", "heapq", "bisect",
    "json", "re", "string", "fractions", "decimal", "random", "dataclasses", "typing", "copy", "enum", "numbers",
})

REFUSED_EXIT = sandbox_worker.REFUSED_EXIT  # the worker's exit status after reporting a refused operation


class SandboxError(ForgeError):
    """A sandboxed call failed; ``program`` names the program (a template id, say)."""

    kind = "error"

    def __init__(self, message: str, *, program: str = "program", operation: str | None = None,
                 detail: str | None = None) -> None:
        super().__init__(f"{program}: {message}")
        self.problem = message
        self.program = program
        self.operation = operation
        self.detail = detail  # a traceback, or the worker's last words on stderr


class SandboxRefused(SandboxError):
    kind = "refused"


class SandboxTimeout(SandboxError):
    kind = "timeout"


class SandboxMemoryError(SandboxError):
    kind = "memory"


class SandboxCrash(SandboxError):
    kind = "crash"


class ProgramError(SandboxError):
    kind = "error"


ERRORS: dict[str, type[SandboxError]] = {c.kind: c for c in (SandboxRefused, SandboxTimeout, SandboxMemoryError,
                                                               SandboxCrash, ProgramError)}


@dataclass(frozen=True)
class Limits:
    """What one worker may use. ``timeout_s`` bounds each call (and loading the program)."""

    timeout_s: float = 5.0
    memory_mb: int = 512
    cpu_s: int = 600  # CPU seconds over a worker's life; it retires itself at half
    file_mb: int = 16
    open_files: int = 64
    reply_mb: int = 16
    network_namespace: bool = True  # unshare --net when the probe finds it works
    landlock: bool = True
    audit_hook: bool = True  # off only to test the other layers on their own


class Raw(str):
    """An argument already serialized as JSON (sent as is: big inputs are serialized once)."""


# -- the worker (forge/sandbox_worker.py, standard library only; runs as ``python -I -S -B -c WORKER``)

WORKER = Path(sandbox_worker.__file__).read_text()


# -- the parent side ------------------------------------------------------------------------------

_UNSHARE: list[str] | None | bool = False  # False: not probed yet
_PROBE_LOCK = threading.Lock()


def network_namespace_prefix() -> list[str] | None:
    """The ``unshare`` command line that gives a child its own network namespace here, or None
    (probed once per process)."""
    global _UNSHARE
    with _PROBE_LOCK:
        if _UNSHARE is not False:
            return _UNSHARE  # type: ignore[return-value]
        found = None
        tool = shutil.which("unshare")
        if tool and sys.platform.startswith("linux"):
            variants = [[tool, "--net"]] if os.geteuid() == 0 else []
            variants += [[tool, "--map-current-user", "--net"], [tool, "--map-root-user", "--net"]]
            true = shutil.which("true") or "/bin/true"
            for prefix in variants:
                try:
                    done = subprocess.run(prefix + [true], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, timeout=5, env=_clean_env("/"))
                except (OSError, subprocess.TimeoutExpired):
                    continue
                if done.returncode == 0:
                    found = prefix
                    break
        _UNSHARE = found
        return found


def _clean_env(folder: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": folder, "TMPDIR": folder,
            "MALLOC_ARENA_MAX": "2"}


_LIVE: "weakref.WeakSet[Sandbox]" = weakref.WeakSet()


class Sandbox:
    """One program source served by one worker process at a time (restarted after a failure).
    Thread-safe: calls are serialized. Use as a context manager, or call :meth:`close`."""

    def __init__(self, source: str, *, limits: Limits = Limits(), name: str = "program",
                 modules: Iterable[str] = SAFE_MODULES) -> None:
        self.source = source
        self.limits = limits
        self.name = name
        self.modules = sorted(set(modules))
        self.calls = 0
        self.starts = 0
        self.layers: list[str] = []
        self.functions: list[str] = []
        self.load_error: SandboxError | None = None  # why the program last failed to load
        self._proc: subprocess.Popen | None = None
        self._folder: str | None = None
        self._stderr: Any = None
        self._pid = os.getpid()
        self._buffer = b""
        self._lock = threading.Lock()
        _LIVE.add(self)

    # -- public --------------------------------------------------------------------------

    def call(self, function: str, *args: Any) -> Any:
        """``function(*args)`` in the worker; args and result are JSON (a :class:`Raw` arg is sent as is)."""
        parts = [a if isinstance(a, Raw) else json.dumps(a, allow_nan=False) for a in args]
        line = ('{"fn": %s, "args": [%s]}\n' % (json.dumps(function), ", ".join(parts))).encode()
        with self._lock:
            self._ensure()
            self.calls += 1
            reply = self._exchange(line, f"{function}()")
            if reply.get("retire"):
                self._stop()
            if reply.get("ok"):
                return reply.get("result")
            raise self._error(reply, f"{function}()")

    def start(self) -> "Sandbox":
        with self._lock:
            self._ensure()
        return self

    def close(self) -> None:
        with self._lock:
            self._stop()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._pid == os.getpid():
                self._stop()
        except Exception:
            pass

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self._pid == os.getpid()

    # -- the worker ----------------------------------------------------------------------

    def _ensure(self) -> None:
        if self._pid != os.getpid():  # a forked copy: the worker belongs to the parent process
            self._proc, self._folder, self._stderr, self._pid = None, None, None, os.getpid()
        if self._proc is not None and self._proc.poll() is None:
            return
        self._stop()
        self._launch()

    def _launch(self) -> None:
        folder = os.path.realpath(tempfile.mkdtemp(prefix="forge-sandbox-"))
        prefix = network_namespace_prefix() if self.limits.network_namespace else None
        stderr = open(os.path.join(folder, ".worker-stderr"), "w+b")
        cmd = (prefix or []) + [sys.executable, "-I", "-S", "-B", "-c", WORKER]
        self._folder, self._stderr, self._buffer = folder, stderr, b""
        try:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=folder,
                                          env=_clean_env(folder), start_new_session=True, close_fds=True, bufsize=0)
        except OSError as exc:
            self._stop()
            raise SandboxCrash(f"the sandbox worker could not start: {exc}", program=self.name) from None
        self.starts += 1
        os.set_blocking(self._proc.stdin.fileno(), False)
        setup = {"source": self.source, "filename": f"<{self.name}>", "limits": asdict(self.limits),
                 "folder": folder, "modules": self.modules, "unshared": prefix is not None}
        try:
            reply = self._exchange(json.dumps(setup).encode() + b"\n", "loading the program")
        except SandboxError as exc:
            self.load_error = exc
            raise
        if not reply.get("ok"):
            error = self.load_error = self._error(reply, "loading the program")
            self._stop()
            raise error
        self.load_error = None
        self.layers = list(reply.get("layers", []))
        self.functions = list(reply.get("functions", []))

    def _exchange(self, data: bytes, what: str) -> dict[str, Any]:
        """Send one line and read one reply line within the time limit."""
        proc = self._proc
        assert proc is not None
        deadline = time.monotonic() + self.limits.timeout_s
        out_fd, in_fd = proc.stdin.fileno(), proc.stdout.fileno()
        pending = memoryview(data)
        limit = (self.limits.reply_mb << 20) + 4096
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line, self._buffer = self._buffer[:newline], self._buffer[newline + 1:]
                try:
                    reply = json.loads(line)
                except ValueError:
                    self._stop()
                    raise SandboxCrash(f"{what}: the worker's reply is not JSON", program=self.name) from None
                if not isinstance(reply, dict):
                    self._stop()
                    raise SandboxCrash(f"{what}: the worker's reply is not an object", program=self.name)
                if reply.get("kind") == "refused":
                    self._stop()  # it exits after a refusal; reap it now
                return reply
            left = deadline - time.monotonic()
            if left <= 0:
                self._stop()
                raise SandboxTimeout(f"{what} ran past its time limit of {self.limits.timeout_s:g} s and was stopped",
                                     program=self.name, operation="timeout")
            poller = select.poll()  # poll, not select: a busy driver may hold descriptors past 1024
            poller.register(in_fd, select.POLLIN)
            if pending:
                poller.register(out_fd, select.POLLOUT)
            for fd, event in poller.poll(max(1, int(left * 1000))):
                if fd == out_fd:
                    if event & select.POLLOUT:
                        try:
                            pending = pending[os.write(out_fd, pending):]
                        except BlockingIOError:
                            pass
                        except OSError:
                            pending = memoryview(b"")  # it died; reading says how
                    else:
                        pending = memoryview(b"")
                    continue
                chunk = os.read(in_fd, 1 << 16)
                if not chunk:
                    raise self._died(what)
                self._buffer += chunk
                if len(self._buffer) > limit:
                    self._stop()
                    raise SandboxCrash(f"{what}: the reply is larger than {self.limits.reply_mb} MB",
                                       program=self.name)

    def _died(self, what: str) -> SandboxError:
        proc = self._proc
        try:
            code = proc.wait(timeout=2) if proc is not None else None
        except subprocess.TimeoutExpired:
            code = None
        words = self._stderr_tail()
        self._stop()
        if code is not None and code < 0:
            sig = -code
            if sig == signal.SIGXCPU:
                return SandboxTimeout(f"{what} used up the worker's CPU time limit of {self.limits.cpu_s} s and was "
                                      "stopped", program=self.name, operation="cpu", detail=words)
            if sig == signal.SIGKILL:
                return SandboxMemoryError(f"{what}: the worker was killed (SIGKILL; out of memory?)",
                                          program=self.name, operation="memory", detail=words)
            name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
            return SandboxCrash(f"{what}: the worker died of {name}", program=self.name, detail=words)
        if "MemoryError" in words or "Cannot allocate memory" in words:
            return SandboxMemoryError(f"{what} ran out of memory", program=self.name, operation="memory", detail=words)
        return SandboxCrash(f"{what}: the worker exited (status {code}) without a reply", program=self.name,
                            detail=words)

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - 2000))
            return self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def _error(self, reply: dict[str, Any], what: str) -> SandboxError:
        cls = ERRORS.get(str(reply.get("kind")), ProgramError)
        message = str(reply.get("message") or f"{what} failed")
        if cls is SandboxRefused:
            message = f"{what} was stopped: {message}"
        return cls(message, program=self.name, operation=reply.get("operation"), detail=reply.get("detail"))

    def _stop(self) -> None:
        if self._pid != os.getpid():  # a forked copy never touches the parent's worker
            self._proc, self._folder, self._stderr, self._pid = None, None, None, os.getpid()
            return
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            for pipe in (proc.stdin, proc.stdout):
                try:
                    pipe.close()
                except (OSError, AttributeError):
                    pass
        if self._stderr is not None:
            try:
                self._stderr.close()
            except OSError:
                pass
            self._stderr = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
        self._buffer = b""


def run(source: str, function: str, *args: Any, limits: Limits = Limits(), name: str = "program",
        modules: Iterable[str] = SAFE_MODULES) -> Any:
    """One call in a fresh worker (a Sandbox for a single call)."""
    with Sandbox(source, limits=limits, name=name, modules=modules) as box:
        return box.call(function, *args)


@atexit.register
def _close_all() -> None:
    for box in list(_LIVE):
        try:
            if box._pid == os.getpid():
                box.close()
        except Exception:
            pass
