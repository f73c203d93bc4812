"""The sandbox's worker program (standard library only). ``forge.sandbox`` runs this file's
source as ``python -I -S -B -c SOURCE``; importing it does nothing (its streams are opened in
:func:`main`), so its code counts for the code version of what runs it."""

import json, os, resource, signal, sys, threading, time, traceback

REFUSED_EXIT = 86  # the exit status after reporting a refused operation (forge.sandbox reads it)
PROTO_IN = PROTO_OUT = PARENT = None  # the protocol's streams and the parent's pid, set by main()
BUSY = [None]
FILENAME = [None]


def send(message):
    PROTO_OUT.write(json.dumps(message).encode() + b"\n")


def refuse(operation, message):
    try:
        send({"ok": False, "kind": "refused", "operation": operation, "message": message})
    finally:
        os._exit(REFUSED_EXIT)


def set_limits(lim):
    mb = 1 << 20
    for name, soft, hard in (("RLIMIT_AS", lim["memory_mb"] * mb, lim["memory_mb"] * mb),
                             ("RLIMIT_CPU", lim["cpu_s"], lim["cpu_s"] + 5),
                             ("RLIMIT_FSIZE", lim["file_mb"] * mb, lim["file_mb"] * mb),
                             ("RLIMIT_NOFILE", lim["open_files"], lim["open_files"]),
                             ("RLIMIT_CORE", 0, 0)):
        old_soft, old_hard = resource.getrlimit(getattr(resource, name))
        if old_hard != resource.RLIM_INFINITY:
            hard = min(hard, old_hard)
            soft = min(soft, hard)
        resource.setrlimit(getattr(resource, name), (soft, hard))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the size limit fails instead of killing


def landlock(folder):
    """Writes only beneath ``folder``, nothing executed, no TCP, no signals out (what the ABI offers)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    sc = libc.syscall
    sc.restype = ctypes.c_long
    abi = sc(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return None
    execute, make_char, make_block = 1 << 0, 1 << 6, 1 << 11
    fs = ((1 << 13) - 1) & ~((1 << 2) | (1 << 3))  # every right up to MAKE_SYM but reading
    if abi >= 2:
        fs |= 1 << 13  # REFER
    if abi >= 3:
        fs |= 1 << 14  # TRUNCATE
    net = 3 if abi >= 4 else 0  # BIND_TCP | CONNECT_TCP, with no rule allowing any port
    scoped = 3 if abi >= 6 else 0  # abstract unix sockets and signals

    class Attr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    class Beneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    attr = Attr(fs, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = sc(444, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return None
    home = os.open(folder, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = Beneath(fs & ~(execute | make_char | make_block), home)
        if sc(445, ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            return None
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            return None
        if sc(446, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return None
    finally:
        os.close(home)
        os.close(ruleset)
    return abi


BLOCKED_IMPORTS = {"ctypes", "_ctypes", "_posixsubprocess", "sqlite3", "_sqlite3", "dbm", "_dbm", "_gdbm",
                   "syslog", "readline", "multiprocessing", "_multiprocessing", "_posixshmem", "pty", "termios",
                   "_xxsubinterpreters", "_xxinterpchannels", "_interpreters", "_tkinter", "_curses", "_lsprof",
                   "faulthandler", "tracemalloc"}
SOCKET_OK = {"socket.__new__", "socket.gethostname"}
PROCESS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.fork", "os.forkpty", "pty.spawn",
           "os.kill", "os.killpg", "signal.pthread_kill", "os.startfile", "webbrowser.open")
ALWAYS = ("resource.setrlimit", "resource.prlimit", "sys.addaudithook", "fcntl.ioctl", "builtins.input",
          "gc.get_referrers", "gc.get_referents", "gc.get_objects", "os.link", "os.symlink", "os.chroot",
          "os.setxattr", "os.removexattr")
PREFIXES = ("ctypes.", "syslog.", "sqlite3.", "ftplib.", "http.client.", "imaplib.", "nntplib.", "poplib.",
            "smtplib.", "telnetlib.", "ensurepip.", "urllib.Request")
# path-changing events: (positions of paths, position of their dir_fd or None)
PATHS = {"os.remove": ((0, 1),), "os.rmdir": ((0, 1),), "os.mkdir": ((0, 2),), "os.chmod": ((0, 2),),
         "os.chown": ((0, 3),), "os.utime": ((0, 3),), "os.truncate": ((0, None),),
         "os.rename": ((0, 2), (1, 3))}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC | getattr(os, "O_TMPFILE", 0)


def make_hook(folder):
    realpath, join, isdir = os.path.realpath, os.path.join, os.path.isdir

    def where(path, dir_fd=None):
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return None
        base = os.getcwd() if dir_fd in (None, -100) else os.readlink("/proc/self/fd/%d" % dir_fd)
        return realpath(join(base, path))

    def inside(full):
        return full is not None and (full == folder or full.startswith(folder + os.sep))

    def hook(event, args):
        if event == "open":
            path, mode, flags = args[0], args[1], args[2] if len(args) > 2 else 0
            if path is None or isinstance(path, int):
                if isinstance(path, int) and (flags or 0) & WRITE_FLAGS:
                    refuse("open", "writing to an inherited file descriptor %d is refused" % path)
                return
            full = where(path)
            writing = bool((flags or 0) & WRITE_FLAGS) or (isinstance(mode, str) and any(c in mode for c in "wax+"))
            if writing and not inside(full):
                refuse("open", "opening %r for writing outside the sandbox folder is refused" % (path,))
            if not writing and full is not None and not inside(full) and isdir(full):
                refuse("open", "opening the folder %r outside the sandbox folder is refused" % (path,))
            return
        if event == "import":
            name = str(args[0]) if args else ""
            if name.split(".")[0] in BLOCKED_IMPORTS:
                refuse("import", "importing %r is refused in the sandbox" % name)
            return
        if event.startswith("socket."):
            if event not in SOCKET_OK:
                refuse(event, "network access is refused (%s %r)" % (event, args[1:] if len(args) > 1 else args))
            return
        if event in PATHS:
            for pos, fd_pos in PATHS[event]:
                path = args[pos] if pos < len(args) else None
                fd = args[fd_pos] if fd_pos is not None and fd_pos < len(args) else None
                if isinstance(path, int) and event != "os.truncate":
                    refuse(event, "%s on a file descriptor is refused" % event)
                if not isinstance(path, int) and not inside(where(path, fd)):
                    refuse(event, "%s of %r outside the sandbox folder is refused" % (event, path))
            return
        if event in PROCESS or event.startswith(PROCESS):
            refuse(event, "starting or signalling processes is refused (%s)" % event)
        if event in ALWAYS or event.startswith(PREFIXES):
            refuse(event, "%s is refused in the sandbox" % event)

    return hook


def limited_import(offered, real_import):
    def importer(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name.split(".")[0] not in offered:
            refuse("import", "importing %r is refused: the sandbox offers %s" % (name, ", ".join(sorted(offered))))
        return real_import(name, globals, locals, fromlist, level)
    return importer


class Sink:
    def write(self, text):
        return len(text)

    def flush(self):
        pass


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def watchdog(backstop):
    while True:
        time.sleep(0.25)
        if os.getppid() != PARENT:
            os._exit(1)
        since = BUSY[0]
        if since is not None and time.monotonic() - since > backstop:
            os._exit(1)


def failure(exc, where):
    if isinstance(exc, MemoryError):
        return {"ok": False, "kind": "memory", "message": "%s ran out of memory (MemoryError)" % where}
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == FILENAME[0]]
    text = ("".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(type(exc), exc)))[-4000:]
    return {"ok": False, "kind": "error", "message": "%s raised %s: %s" % (where, type(exc).__name__, str(exc)[:500]),
            "detail": text}


def main():
    global PROTO_IN, PROTO_OUT, PARENT
    PROTO_IN = sys.stdin.buffer
    PROTO_OUT = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_WRONLY)  # what the program prints goes nowhere; replies use PROTO_OUT
    os.dup2(null, 1)
    os.close(null)
    PARENT = os.getppid()
    setup = json.loads(PROTO_IN.readline())
    lim, folder = setup["limits"], os.path.realpath(setup["folder"])
    FILENAME[0] = setup["filename"]
    layers = ["process"]
    set_limits(lim)
    layers.append("rlimits")
    if setup.get("unshared"):
        layers.append("unshare-net")
    if lim["landlock"]:
        try:
            abi = landlock(folder)
        except Exception:
            abi = None
        if abi:
            layers.append("landlock-abi%d" % abi)
        for name in [m for m in sys.modules if m == "ctypes" or m.startswith("ctypes.") or m == "_ctypes"]:
            del sys.modules[name]
    for name in ("mkfifo", "mknod"):  # they create files without an audit event
        for module in (os, sys.modules.get("posix")):
            if module is not None and hasattr(module, name):
                delattr(module, name)
    threading.Thread(target=watchdog, args=(2 * lim["timeout_s"] + 5,), daemon=True).start()
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))  # no new process or thread (ordinary users)
    except (ValueError, OSError):
        pass
    import builtins
    namespace = {"__name__": "sandboxed", "__builtins__": dict(builtins.__dict__)}
    for name in ("input", "breakpoint", "exit", "quit", "help", "copyright", "credits", "license"):
        namespace["__builtins__"].pop(name, None)
    namespace["__builtins__"]["__import__"] = limited_import(frozenset(setup["modules"]), builtins.__import__)
    sys.stdout = sys.stderr = Sink()
    sys.stdin = None
    sys.dont_write_bytecode = True
    if lim["audit_hook"]:
        sys.addaudithook(make_hook(folder))
        layers.append("audit")
    layers.append("imports")
    BUSY[0] = time.monotonic()
    try:
        code = compile(setup["source"], setup["filename"], "exec")
        exec(code, namespace)
        reply = {"ok": True, "layers": layers,
                 "functions": sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_"))}
    except BaseException as exc:
        reply = failure(exc, "loading the program")
    BUSY[0] = None
    send(reply)
    if not reply["ok"]:
        os._exit(0)
    limit = lim["reply_mb"] << 20
    while True:
        line = PROTO_IN.readline()
        if not line:
            os._exit(0)
        BUSY[0] = time.monotonic()
        request, reply = None, None
        try:
            request = json.loads(line)
            fn = namespace.get(request["fn"])
            if not callable(fn):
                reply = {"ok": False, "kind": "error", "message": "the program defines no function %r" % request["fn"]}
            else:
                result = fn(*request["args"])
                text = json.dumps({"ok": True, "result": result}, allow_nan=False)
        except BaseException as exc:
            where = "%s()" % request["fn"] if isinstance(request, dict) and "fn" in request else "the call"
            reply = failure(exc, where)
        used = cpu()
        BUSY[0] = None
        if reply is not None:
            text = json.dumps(reply)
        elif len(text) > limit:
            text = json.dumps({"ok": False, "kind": "error", "message": "the result is larger than %d MB" % lim["reply_mb"]})
        retire = used > lim["cpu_s"] / 2
        if retire:
            text = text[:-1] + ', "retire": true}'
        PROTO_OUT.write(text.encode() + b"\n")
        if retire:
            os._exit(0)



if __name__ == "__main__":
    main()
