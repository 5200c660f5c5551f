"""A warm launcher for `agent-harness` commands in tests: the same command, without paying its
imports again in every process.

A fresh `agent-harness run` spends 4-5 s of CPU importing litellm before it does anything; the
suite starts a few hundred `agent-harness` processes. The launcher is a fork server: one per
test worker (pytest-xdist), started on first use, that has imported the command line and its
heavy modules (litellm, the MCP SDK, duckdb; not polars or pyarrow, which start threads) and
has no thread when it forks. A request carries argv, the environment, the working folder and
the three standard fds (SCM_RIGHTS over a Unix socket); the forked child takes them (dup2,
chdir, os.environ replaced, signal handlers and process group as a fresh process has them),
calls the console script's entry point, runs the atexit handlers, flushes, and exits with the
code the command gave. The server reaps it and relays its wait status (and its CPU) to the
caller, whose handle is a `subprocess.Popen` (`Popen`, `run`) or an asyncio process
(`create_subprocess_exec`).

Use it where a test pins what a command does once it runs (exit codes, output, files, the
store, ground truth). Where start-up is the subject (which modules a command imports, start-up
time, Ctrl-C or SIGTERM during start-up, process groups, orphans) a test starts a real process
with `subprocess`/`asyncio` directly. Anything the launcher cannot do as a fresh process would
falls back to a real process by itself: another program than the installed `agent-harness`,
`pass_fds`/`preexec_fn`/`user`..., or an environment that differs from the server's in a
variable read while modules import (`import_time_variable`). AGENT_HARNESS_TEST_LAUNCHER=0
turns it off (every process fresh); AGENT_HARNESS_TEST_LAUNCHER_LOG=FILE appends a line to FILE
for every `agent-harness` command that started fresh, and why.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import types
from typing import Any

from runner.processes import forkserver
from tests.support.paths import BIN, ROOT

READY = b"launcher ready\n"
START_TIMEOUT_S = 280  # the server's imports: 5-6 s of CPU, minutes at load 50 on 2 cores
MAX_REQUEST = 16 * 1024 * 1024

# The modules the server imports before it forks: every command's own imports, so a child
# imports (almost) nothing. Which ones: `python -X importtime` of run, report, merge and proxy.
WARM_MODULES = (
    "runner.cli",
    "runner.models.scripted",
    "runner.models._provider",  # litellm: 4-5 s of CPU
    "runner.models.loop",
    "runner.cli.run",
    "runner.execute.experiment",
    "runner.cli.sweep",
    "runner.cli.report",
    "runner.cli.merge",
    "runner.cli.judge",
    "runner.cli.proxy",
    "runner.execute",
    "runner.experiment",
    "runner.upstreams",
    "harness.proxy.main",
    "harness.judge",
    "mcp.client.session",
    "mcp.server",
    "duckdb",
)
# Never imported by the server: polars starts three threads at import (jemalloc's and its
# out-of-core cleaner) and pyarrow one; a child imports them itself when its command needs them.
THREADED_MODULES = ("polars", "pyarrow")

# Variables read while modules import (so a child would see the server's value, not the
# request's): the interpreter's, the locale's, litellm's (module-level reads in its package),
# typer's and rich's. A request whose environment differs from the server's in one of them
# runs as a fresh process.
IMPORT_TIME_PREFIXES = ("PYTHON", "LITELLM_", "LC_", "POLARS_", "DUCKDB_", "OTEL_", "_TYPER_")
IMPORT_TIME_NAMES = frozenset(
    {
        "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP", "HOME",
        "TERMINAL_WIDTH", "TYPER_USE_RICH", "GITHUB_ACTIONS", "FORCE_COLOR", "PY_COLORS",
        "NO_COLOR", "TERM", "COLUMNS", "LINES", "JUPYTER_COLUMNS", "JUPYTER_LINES", "TTY_COMPATIBLE",
        "TTY_INTERACTIVE", "DEFER_PYDANTIC_BUILD", "AIOHTTP_NO_EXTENSIONS", "AIOHTTP_SO_KEEPALIVE",
        "MCP_TOOL_PREFIX_SEPARATOR", "MCP_NPM_CACHE_DIR", "CUSTOM_TIKTOKEN_CACHE_DIR",
        "JSON_LOGS", "PROXY_BASE_URL", "SERVER_ROOT_PATH",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "HF_HOME",
    }
)  # fmt: skip
# What the server sets for itself, as every `agent-harness` process does for itself at import
# (runner/__init__.py: os.environ.setdefault): a request without it is the same.
SERVER_DEFAULTS = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


# Read when used, not at import, though their prefix says otherwise (pytest sets the first).
RUNTIME_NAMES = frozenset({"PYTHONBREAKPOINT"})


def import_time_variable(name: str) -> bool:
    if name in RUNTIME_NAMES:
        return False
    return name in IMPORT_TIME_NAMES or name.startswith(IMPORT_TIME_PREFIXES)


def differing_import_time_variables(
    env: dict[str, str], server_env: dict[str, str], effects: dict[str, str]
) -> list[str]:
    """The import-time variables whose value in `env` is not the server's (after its imports;
    what the imports set themselves, `effects`, a fresh process's imports set too)."""
    wanted = {**SERVER_DEFAULTS, **effects, **env}
    names = {n for n in (*wanted, *server_env) if import_time_variable(n)}
    return sorted(n for n in names if wanted.get(n) != server_env.get(n))


# -- the server ----------------------------------------------------------------------------


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _serve(path: str) -> None:
    os.environ.update(SERVER_DEFAULTS)
    before = dict(os.environ)
    import importlib

    for name in WARM_MODULES:
        importlib.import_module(name)
    _entry_point()  # the console script's own module, and importlib.metadata
    threaded = [m for m in THREADED_MODULES if m in sys.modules]
    assert not threaded, f"the server imported {threaded}: it would fork with their threads"
    gc.collect()
    gc.freeze()  # the imported objects stay shared with the children (no copy when gc scans)
    # A fork copies only the calling thread: a lock another thread held would stay locked in
    # the child forever. Nothing imported may have started one.
    assert threading.active_count() == 1 and _threads() == 1, f"{_threads()} threads"

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    owner = os.pidfd_open(os.getppid())  # the test worker: its end is the server's end
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(owner, selectors.EVENT_READ, "owner")
    server_fds = [listener.fileno(), owner, selector.fileno()]
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, connection)

    # What the imports set in the environment (runner's LITELLM_LOCAL_MODEL_COST_MAP, litellm's
    # TIKTOKEN_CACHE_DIR): a fresh process has them after its imports, so a child gets them.
    effects = {k: v for k, v in os.environ.items() if before.get(k) != v}
    sys.stdout.buffer.write(READY)
    sys.stdout.buffer.write(
        json.dumps({"env": dict(os.environ), "effects": effects}).encode() + b"\n"
    )
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)

    while True:
        for key, _ in selector.select():
            if key.data == "owner":
                for pid, _conn in children.values():
                    _kill(pid)
                return
            if key.data == "accept":
                conn, _ = listener.accept()
                try:
                    request, fds = forkserver.receive(conn)
                except (OSError, ValueError):
                    conn.close()
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                open_fds = [
                    *server_fds,
                    *(k for k in children),
                    *(c.fileno() for _, c in children.values()),
                ]
                set_up, set_up_w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(set_up)
                    request["env"] = {**SERVER_DEFAULTS, **effects, **request["env"]}
                    _child(request, fds, [*open_fds, conn.fileno()], set_up_w)  # never returns
                os.close(set_up_w)
                for fd in fds:
                    os.close(fd)
                # as Popen returns once the child exec'd: the caller gets the pid once the
                # child has its fds, session, folder and environment (or has died trying)
                os.read(set_up, 1)
                os.close(set_up)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = (pid, conn)
                selector.register(pidfd, selectors.EVENT_READ, "child")
                forkserver.send(conn, {"pid": pid})
            else:  # a child ended: reap it, relay its status
                pidfd = key.fd
                pid, conn = children.pop(pidfd)
                selector.unregister(pidfd)
                os.close(pidfd)
                _, status, usage = os.wait4(pid, 0)
                forkserver.send(conn, {"status": status, "cpu": usage.ru_utime + usage.ru_stime})
                conn.close()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _child(request: dict[str, Any], fds: list[int], server_fds: list[int], set_up: int) -> None:
    """In the forked child: become the requested process, run the command, exit."""
    code = 70
    try:
        forkserver.take_stdio(fds, server_fds)
        if request.get("session"):
            os.setsid()
        elif (request.get("process_group") or -1) >= 0:  # Popen: -1 is "not given"
            os.setpgid(0, request["process_group"])
        forkserver.reset_signals()
        if request.get("umask", -1) >= 0:
            os.umask(request["umask"])
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        argv = request["argv"]
        sys.argv = [argv[0].removesuffix(".exe"), *argv[1:]]
        sys.path[0] = os.path.dirname(argv[0])  # a console script's own folder, as when run
        # __main__ as a console script's (click names the program after it: a `python -m`
        # main module would make it "python -m ...")
        main = types.ModuleType("__main__")
        main.__file__ = argv[0]
        main.__builtins__ = __builtins__  # type: ignore[attr-defined]
        sys.modules["__main__"] = main
        os.close(set_up)  # the server answers the caller with the pid now
        forkserver.reconfigure_streams()
        code = forkserver.run_main(_entry_point())
    except BaseException:  # noqa: BLE001 - the launcher's own failure, on the child's stderr
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _entry_point() -> Any:
    """The function the installed `agent-harness` console script calls (its entry point in
    the package's metadata: `runner.cli:main`, or a wrapper around it)."""
    from importlib.metadata import entry_points

    [script] = entry_points(group="console_scripts", name="agent-harness")
    return script.load()


# -- the client (a test worker) -------------------------------------------------------------


class _Server:
    """The worker's fork server, started on first use, ended with the worker."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.path = ""
        self.env: dict[str, str] = {}  # the server's, after its imports
        self.effects: dict[str, str] = {}  # what its imports set
        self.failed: str | None = None

    def address(self) -> str | None:
        with self.lock:
            if self.proc is None and self.failed is None:
                try:
                    self._start()
                except Exception as exc:  # noqa: BLE001 - every process fresh, said once
                    self.failed = str(exc)
                    print(f"tests.support.launcher: off: {exc}", file=sys.stderr)
            return None if self.failed else self.path

    def _start(self) -> None:
        folder = tempfile.mkdtemp(prefix="ah-launcher-")
        self.path = os.path.join(folder, "sock")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.launcher", self.path],
            cwd=ROOT,
            env={**_WORKER_ENV, **SERVER_DEFAULTS},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        line = _readline_bounded(self.proc.stdout, START_TIMEOUT_S)
        if line != READY:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"the launcher did not start: {line!r}")
        state = json.loads(self.proc.stdout.readline())
        self.env, self.effects = state["env"], state["effects"]
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None


def _readline_bounded(stream: Any, timeout: float) -> bytes:
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        if not sel.select(timeout):
            return b""
    return stream.readline()


# The worker's environment before any test changed it (or an in-process import: litellm sets
# TIKTOKEN_CACHE_DIR when it loads); the server starts with it whenever it is first needed.
_WORKER_ENV = dict(os.environ)
SERVER = _Server()
LAUNCHED_CPU: list[
    float
] = []  # CPU seconds of every launched child that ended (tests.support.cputime)


def enabled() -> bool:
    return os.environ.get("AGENT_HARNESS_TEST_LAUNCHER", "1") != "0"


def _warm_argv(args: Any) -> list[str] | None:
    if isinstance(args, (str, bytes, os.PathLike)):
        return None
    argv = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else a for a in args]
    if not argv or not all(isinstance(a, str) for a in argv):
        return None
    return argv if argv[0] == str(BIN) else None


def _launch(argv: list[str], env: dict[str, str], cwd: str, fds: tuple[int, int, int], *,
            session: bool = False, process_group: int | None = None, umask: int = -1,
            ) -> tuple[socket.socket, int]:  # fmt: skip
    address = SERVER.address()
    assert address is not None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(address)
        body = json.dumps(
            {"argv": argv, "env": env, "cwd": cwd, "session": session,
             "process_group": process_group, "umask": umask}
        ).encode()  # fmt: skip
        if len(body) > MAX_REQUEST:
            raise ValueError("request too large")
        data = struct.pack("!I", len(body)) + body
        socket.send_fds(sock, [data[:65536]], list(fds))
        if len(data) > 65536:
            sock.sendall(data[65536:])
        reader = sock.makefile("rb")
        line = reader.readline()
        reader.close()
        return sock, int(json.loads(line)["pid"])
    except BaseException:
        sock.close()
        raise


def _fresh_reason(
    argv: list[str] | None, env: dict[str, str] | None, **unsupported: Any
) -> str | None:
    if not enabled():
        return "launcher off"
    if argv is None:
        return "not the installed agent-harness"
    if any(unsupported.values()):
        return "options a fork cannot give: " + ", ".join(k for k, v in unsupported.items() if v)
    if SERVER.address() is None:
        return "no launcher"
    differing = differing_import_time_variables(
        dict(os.environ if env is None else env), SERVER.env, SERVER.effects
    )
    if differing:
        return "import-time variables differ: " + ", ".join(differing)
    return None


def _log_fresh(argv: list[str] | None, reason: str | None) -> None:
    """AGENT_HARNESS_TEST_LAUNCHER_LOG=FILE: a line per `agent-harness` command started fresh."""
    path = os.environ.get("AGENT_HARNESS_TEST_LAUNCHER_LOG")
    if path and reason is not None and argv is not None:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{argv[1:2]} {reason}\n")


class _Status:
    """The child's end as the server relays it, read from the request's connection."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""
        self.status: int | None = None

    def read(self, timeout: float | None) -> int | None:
        """The wait status, waiting up to `timeout` (0: do not wait; None: forever)."""
        while self.status is None:
            if b"\n" in self.buffer:
                line, _, self.buffer = self.buffer.partition(b"\n")
                message = json.loads(line)
                self.status = int(message["status"])
                LAUNCHED_CPU.append(float(message.get("cpu", 0.0)))
                self.sock.close()
                break
            self.sock.settimeout(timeout)
            try:
                chunk = self.sock.recv(4096)
            except (BlockingIOError, TimeoutError):
                return None
            if not chunk:  # the server is gone: the child's end is unknown
                self.status = 255 << 8
                self.sock.close()
                break
            self.buffer += chunk
        return self.status


class Popen(subprocess.Popen):  # type: ignore[type-arg]
    """`subprocess.Popen` whose `agent-harness` child comes from the fork server (or is a fresh
    process when it cannot: see the module's docstring). `fresh_reason` says which and why."""

    fresh_reason: str | None = None
    _status: _Status | None = None

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,  # type: ignore[no-untyped-def]
                       startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite,
                       errread, errwrite, restore_signals, gid, gids, uid, umask,
                       start_new_session, process_group):  # fmt: skip
        argv = _warm_argv(args)
        reason = _fresh_reason(
            argv, env, executable=executable, preexec_fn=preexec_fn, pass_fds=pass_fds,
            shell=shell, user=uid is not None, group=gid is not None or gids is not None,
        )  # fmt: skip
        self.fresh_reason = reason
        _log_fresh(argv, reason)
        if reason is not None:
            return super()._execute_child(
                args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                restore_signals, gid, gids, uid, umask, start_new_session, process_group,
            )  # fmt: skip
        assert argv is not None
        cputime = sys.modules.get("tests.support.cputime")
        if cputime is not None:
            cputime.started_warm(argv)
        fds = (p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1,
               errwrite if errwrite != -1 else 2)  # fmt: skip
        try:
            sock, self.pid = _launch(
                argv, dict(os.environ if env is None else env),
                os.fspath(cwd) if cwd is not None else os.getcwd(), fds,
                session=start_new_session, process_group=process_group, umask=umask,
            )  # fmt: skip
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)
        self._status = _Status(sock)

    def _internal_poll(self, _deadstate=None, **_kw):  # type: ignore[no-untyped-def, override]
        if self._status is None:
            return super()._internal_poll(_deadstate=_deadstate, **_kw)
        if self.returncode is None:
            status = self._status.read(0)
            if status is not None:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def _wait(self, timeout):  # type: ignore[no-untyped-def]
        if self._status is None:
            return super()._wait(timeout)
        if self.returncode is None:
            status = self._status.read(timeout)
            if status is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def run(*popenargs: Any, input: Any = None, capture_output: bool = False,
        timeout: float | None = None, check: bool = False, **kwargs: Any,
        ) -> subprocess.CompletedProcess[Any]:  # fmt: skip
    """`subprocess.run` with the launcher's `Popen` (same arguments, same result)."""
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        kwargs["stdout"] = subprocess.PIPE
        kwargs["stderr"] = subprocess.PIPE
    with Popen(*popenargs, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        except BaseException:
            process.kill()
            raise
        retcode = process.poll()
        if check and retcode:
            raise subprocess.CalledProcessError(retcode, process.args, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(process.args, retcode, stdout, stderr)


# -- asyncio --------------------------------------------------------------------------------


class AsyncProcess:
    """What `asyncio.create_subprocess_exec` returns, for a launched child: pid, stdin
    (StreamWriter), stdout/stderr (StreamReader), wait(), returncode, signals."""

    def __init__(self, popen: Popen, stdin: Any, stdout: Any, stderr: Any) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self._transports: list[asyncio.BaseTransport] = []

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        popen = self._popen
        if popen.returncode is None:
            assert popen._status is not None
            loop = asyncio.get_running_loop()
            sock = popen._status.sock
            while popen.poll() is None:
                ended = loop.create_future()
                loop.add_reader(sock.fileno(), ended.set_result, None)
                try:
                    await ended
                finally:
                    loop.remove_reader(sock.fileno())
        return popen.returncode  # type: ignore[return-value]

    async def communicate(self, input: bytes | None = None) -> tuple[bytes | None, bytes | None]:
        if input is not None and self.stdin is not None:
            self.stdin.write(input)
            await self.stdin.drain()
        if self.stdin is not None:
            self.stdin.close()
        out = await self.stdout.read() if self.stdout is not None else None
        err = await self.stderr.read() if self.stderr is not None else None
        await self.wait()
        return out, err

    def send_signal(self, sig: int) -> None:
        self._popen.send_signal(sig)

    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()


async def create_subprocess_exec(program: Any, *args: Any, stdin: Any = None, stdout: Any = None,
                                 stderr: Any = None, limit: int = 2**16, **kwargs: Any) -> Any:  # fmt: skip
    """`asyncio.create_subprocess_exec`, with the child from the fork server when it can."""
    argv = _warm_argv([program, *args])
    env = kwargs.get("env")
    unsupported = {
        k: kwargs.get(k) for k in ("executable", "preexec_fn", "pass_fds", "user", "group")
    }
    reason = _fresh_reason(argv, env, **unsupported)
    _log_fresh(argv, reason)
    if reason is not None:
        return await asyncio.create_subprocess_exec(
            program, *args, stdin=stdin, stdout=stdout, stderr=stderr, limit=limit, **kwargs
        )
    loop = asyncio.get_running_loop()
    popen = Popen([program, *args], stdin=stdin, stdout=stdout, stderr=stderr, **kwargs)
    writer = out_reader = err_reader = None
    if popen.stdin is not None:
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop),
            popen.stdin,
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
    if popen.stdout is not None:
        out_reader = asyncio.StreamReader(limit=limit, loop=loop)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(out_reader, loop=loop), popen.stdout
        )
    if popen.stderr is not None:
        err_reader = asyncio.StreamReader(limit=limit, loop=loop)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(err_reader, loop=loop), popen.stderr
        )
    return AsyncProcess(popen, writer, out_reader, err_reader)


if __name__ == "__main__":
    _serve(sys.argv[1])
