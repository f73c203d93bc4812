"""The sandbox for untrusted programs: results come back; loops, memory hogs, network, writes
outside its folder and new processes are stopped with an error naming what was refused; the
worker restarts and serves the next call; calls cost well under a millisecond."""

from __future__ import annotations

import json
import socket
import time

import pytest

from forge.sandbox import (SAFE_MODULES, Limits, ProgramError, Raw, Sandbox, SandboxMemoryError, SandboxRefused,
                           SandboxTimeout, run)

PROGRAM = '''
import math

def add(a, b):
    return a + b

def norm(evidence):
    return round(math.sqrt(sum(f["visible_pixels"] ** 2 for f in evidence["facts"])), 3)

def spin():
    while True:
        pass

def hog():
    return len(bytearray(8 * 1024 ** 3))

def connect(port):
    import socket
    s = socket.socket()
    s.settimeout(1)
    s.connect(("127.0.0.1", port))
    return "connected"

def try_connect(port):
    import socket
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect(("127.0.0.1", port))
    except OSError as exc:
        return "failed: %s" % exc
    return "connected"

def write(path):
    with open(path, "w") as f:
        f.write("escaped")
    return "written"

def try_write(path):
    try:
        with open(path, "w") as f:
            f.write("escaped")
    except OSError as exc:
        return "failed: %s" % exc
    return "written"

def swallow_write(path):
    try:
        open(path, "w").write("escaped")
    except BaseException:
        pass
    return "kept going"

def scratch():
    with open("scratch.txt", "w") as f:
        f.write("ok")
    with open("scratch.txt") as f:
        return f.read()

def shell():
    import os
    return os.system("true")

def spawn():
    import subprocess
    return subprocess.run(["true"]).returncode

def plain_import():
    import socket
    return "imported"

def boom(x):
    raise ValueError("bad input %r" % (x,))
'''

OFFERED = SAFE_MODULES | {"socket", "os", "subprocess"}
LIMITS = Limits(timeout_s=2.0, memory_mb=256)


@pytest.fixture
def box():
    with Sandbox(PROGRAM, limits=LIMITS, name="test program", modules=OFFERED) as b:
        yield b


@pytest.fixture
def listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    s.settimeout(0.3)
    yield s
    s.close()


def _nobody_connected(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except (socket.timeout, TimeoutError):
        return True
    conn.close()
    return False


def test_a_normal_program_returns(box):
    assert box.call("add", 2, 3) == 5
    evidence = {"facts": [{"visible_pixels": 3}, {"visible_pixels": 4}]}
    assert box.call("norm", Raw(json.dumps(evidence))) == 5.0
    assert box.call("scratch") == "ok"  # its own folder is writable
    assert {"process", "rlimits", "audit", "imports"} <= set(box.layers)
    print("sandbox layers:", box.layers)
    assert run(PROGRAM, "add", "a", "b") == "ab"


def test_an_infinite_loop_is_stopped_by_the_timeout_and_the_worker_restarts(box):
    box.call("add", 1, 1)
    start = time.perf_counter()
    with pytest.raises(SandboxTimeout, match="time limit of 2 s") as err:
        box.call("spin")
    assert time.perf_counter() - start < LIMITS.timeout_s + 2
    assert "test program: spin()" in str(err.value)
    assert box.call("add", 1, 1) == 2  # a fresh worker serves the next call
    assert box.starts == 2


def test_the_cpu_limit_stops_a_loop_the_wall_clock_would_allow():
    with Sandbox(PROGRAM, limits=Limits(timeout_s=30, cpu_s=1), name="cpu") as b:
        start = time.perf_counter()
        with pytest.raises(SandboxTimeout, match="CPU time limit of 1 s"):
            b.call("spin")
        assert time.perf_counter() - start < 25
        assert b.call("add", 2, 2) == 4


def test_a_huge_allocation_is_stopped_by_the_memory_limit(box):
    with pytest.raises(SandboxMemoryError, match="ran out of memory"):
        box.call("hog")
    assert box.call("add", 3, 4) == 7


def test_a_network_connection_is_refused(box, listener):
    port = listener.getsockname()[1]
    with pytest.raises(SandboxRefused, match="network access is refused") as err:
        box.call("connect", port)
    assert err.value.operation == "socket.connect" and "127.0.0.1" in str(err.value)
    assert _nobody_connected(listener)
    assert box.call("add", 1, 2) == 3
    # the modules a program may import are limited too: socket is not offered by default
    with Sandbox(PROGRAM, limits=LIMITS) as plain, pytest.raises(SandboxRefused, match="importing 'socket'"):
        plain.call("plain_import")


def test_a_write_outside_its_folder_is_refused(box, tmp_path):
    target = tmp_path / "escape.txt"
    with pytest.raises(SandboxRefused, match="outside the sandbox folder") as err:
        box.call("write", str(target))
    assert err.value.operation == "open"
    # catching the refusal does not help: the call ends at the refused operation
    with pytest.raises(SandboxRefused):
        box.call("swallow_write", str(target))
    assert not target.exists()
    assert box.call("scratch") == "ok"


def test_subprocesses_are_refused(box):
    with pytest.raises(SandboxRefused, match="os.system") as err:
        box.call("shell")
    assert err.value.operation == "os.system"
    with pytest.raises(SandboxRefused, match="_posixsubprocess|subprocess"):
        box.call("spawn")
    assert box.call("add", 5, 5) == 10


def test_program_errors_keep_the_worker_and_name_the_line(box):
    box.call("add", 0, 0)
    with pytest.raises(ProgramError, match=r"boom\(\) raised ValueError: bad input 7") as err:
        box.call("boom", 7)
    assert "line" in err.value.detail and "boom" in err.value.detail
    with pytest.raises(ProgramError, match="defines no function 'nothing'"):
        box.call("nothing")
    assert box.call("add", 1, 1) == 2 and box.starts == 1


def test_programs_that_do_not_load_fail_clearly():
    with pytest.raises(ProgramError, match="loading the program raised SyntaxError"):
        run("def broken(:\n    pass\n", "broken")
    with pytest.raises(SandboxTimeout, match="loading the program ran past"):
        run("while True:\n    pass\n", "f", limits=Limits(timeout_s=1))
    with pytest.raises(SandboxRefused, match="os.system"):
        run("import os\nos.system('true')\n", "f", modules=OFFERED)


def test_the_other_layers_hold_without_the_audit_hook(tmp_path, listener):
    """With the audit hook off, the network namespace and Landlock (where this machine has
    them) still stop a connection and a write outside the folder."""
    with Sandbox(PROGRAM, limits=Limits(timeout_s=5, audit_hook=False), modules=OFFERED) as b:
        b.start()
        print("layers without the audit hook:", b.layers)
        landlock = any(layer.startswith("landlock") for layer in b.layers)
        if "unshare-net" not in b.layers and not landlock:
            pytest.skip("neither a network namespace nor Landlock is available here")
        outcome = b.call("try_connect", listener.getsockname()[1])
        assert outcome.startswith("failed"), outcome
        assert _nobody_connected(listener)
        if landlock:
            target = tmp_path / "escape.txt"
            assert b.call("try_write", str(target)).startswith("failed")
            assert not target.exists()
            assert b.call("scratch") == "ok"


def test_thousands_of_calls_are_fast(box):
    evidence = Raw(json.dumps({"facts": [{"visible_pixels": i, "center_2d": [i * 1.5, i * 2.5]} for i in range(60)]}))
    box.call("add", 0, 0)  # started
    n = 3000
    start = time.perf_counter()
    for i in range(n):
        box.call("norm", evidence)
    elapsed = time.perf_counter() - start
    rate = n / elapsed
    print(f"sandbox: {n} calls with a {len(evidence)}-byte argument in {elapsed:.2f} s ({rate:.0f} calls/s, "
          f"{1e6 / rate:.0f} us a call)")
    assert rate > 300
    assert box.starts == 1
