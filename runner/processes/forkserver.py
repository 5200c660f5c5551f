"""A warm start for the runner's own subprocesses: the proxy and the built-in upstream of a run
with `--in-process never` are forks of one server that has imported them, not fresh
interpreters.

A fresh `python -m runner.upstreams` spends about 1 s of CPU importing the MCP SDK, a fresh
`agent-harness proxy` about 0.4 s; forked from a process that has imported both, each costs
about 0.04 s (docs/performance.md). The runner starts one server on first use
(`python -m runner.forkentry SOCKET PID`, in a session of its own, single-threaded when it
forks; runner/forkentry.py says which programs it forks and what it imports for them). Each process is still a separate real process: the runner (and the proxy, for its
upstream) starts `runner/processes/forkclient.py` as the command, which hands its stdin, stdout and
stderr, environment and working folder to the server; the server forks the program with
them in a new session (its own process group), with signal handlers as a fresh interpreter
has them, and relays its exit status back, which the client exits with. A signal the client
gets is passed on; a client that is killed gets its process killed; a runner that dies takes
the server and every forked process with it; a server that dies takes its forked processes
with it (their clients exit 70), and later clients start their command fresh. The proxy knows
nothing of this: its upstream command is the client.

AGENT_HARNESS_FORK_SERVER=0 turns it off (every process fresh, as before).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.base.reaper import follow_cgroup

READY = b"fork server ready\n"
START_TIMEOUT_S = 120.0
CLIENT = Path(__file__).with_name("forkclient.py")
PROGRAMS = ("agent-harness", "upstream")
# The server's own process: it imports the programs it forks, which stand above this room.
ENTRY = "runner.forkentry"
# A program: its arguments -> the function a forked child runs as its `main`.
Program = Callable[[list[str]], Callable[[], Any]]
# Variables read while the warm modules import: a request whose value differs from the server's
# starts fresh (the fork would see the server's).
IMPORT_TIME_PREFIXES = ("PYTHON", "LC_", "MCP_")
IMPORT_TIME_NAMES = frozenset({"LANG", "LANGUAGE", "TZ", "TERM", "COLUMNS", "NO_COLOR",
                               "FORCE_COLOR", "TERMINAL_WIDTH", "TYPER_USE_RICH", "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"})  # fmt: skip
RUNTIME_NAMES = frozenset({"PYTHONBREAKPOINT"})
PR_SET_PDEATHSIG = 1


def import_time_variable(name: str) -> bool:
    """Whether the forked modules read `name` while they import."""
    if name in RUNTIME_NAMES:
        return False
    return name in IMPORT_TIME_NAMES or name.startswith(IMPORT_TIME_PREFIXES)


def differing(env: dict[str, str], server_env: dict[str, str]) -> list[str]:
    """The import-time variables whose value in `env` is not the server's."""
    names = {n for n in (*env, *server_env) if import_time_variable(n)}
    return sorted(n for n in names if env.get(n) != server_env.get(n))


# -- the server ----------------------------------------------------------------------------


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def serve(
    path: str, runner_pid: int, programs: Mapping[str, Program], warm_modules: Sequence[str]
) -> None:
    """Fork each requested process until the runner (`runner_pid`, this process's parent) ends:
    `programs` by name, once `warm_modules` are imported (so a forked one imports nothing)."""
    import ctypes
    import importlib

    # The runner is watched from the start: killed while the modules below import, it would
    # leave this process to init, and `getppid()` would no longer name it.
    try:
        owner = os.pidfd_open(runner_pid)
    except ProcessLookupError:
        return
    if os.getppid() != runner_pid:
        return
    for name in warm_modules:
        importlib.import_module(name)
    libc = ctypes.CDLL(None, use_errno=True)
    gc.collect()
    gc.freeze()  # the imported objects stay shared with the children (no copy when gc scans)
    # A fork copies only the calling thread: a lock another thread held would stay locked.
    assert threading.active_count() == 1 and _threads() == 1, f"{_threads()} threads"
    server_env = dict(os.environ)

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, ("accept", None))
    selector.register(owner, selectors.EVENT_READ, ("owner", None))
    own_fds = [listener.fileno(), owner, selector.fileno()]
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, client connection)
    by_conn: dict[int, tuple[int, int]] = {}  # connection fd -> (pid, pidfd)

    sys.stdout.buffer.write(READY)
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    os.close(devnull)

    def end(pidfd: int) -> None:
        pid, conn = children.pop(pidfd)
        selector.unregister(pidfd)
        by_conn.pop(conn.fileno(), None)
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(conn)
        os.close(pidfd)
        _, status, _ = os.wait4(pid, 0)
        send(conn, {"status": status})
        conn.close()

    def _fork(request: dict, fds: list[int], conn: socket.socket, libc: Any) -> tuple[int, int]:
        """Fork the requested process; its (pid, pidfd) once it has set itself up."""
        open_fds = [*own_fds, *children, *(c.fileno() for _, c in children.values())]
        # V16: the child joins its client's process tree (its cgroup), as a fresh process
        # started by the client would be in it.
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        request["client_pid"] = struct.unpack("3i", creds)[0]
        set_up, set_up_w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(set_up)
            os.close(set_up_w)
            raise
        if pid == 0:
            os.close(set_up)
            _child(request, fds, [*open_fds, conn.fileno()], set_up_w, libc, programs)
        os.close(set_up_w)
        os.read(set_up, 1)  # the child has its fds, session, folder and environment
        os.close(set_up)
        try:
            return pid, os.pidfd_open(pid)
        except OSError:  # it cannot be watched: it does not run, the client starts fresh
            _kill_group(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise

    while True:
        for key, _ in selector.select():
            if selector.get_map().get(key.fd) is not key:
                continue  # ended by an earlier event of this round (its fd may be reused)
            what, _data = key.data
            if what == "owner":  # the runner ended (SIGKILL too): nothing of this stays
                for pid, _conn in children.values():
                    _kill_group(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.unlink(path)
                    os.rmdir(os.path.dirname(path))
                return
            if what == "accept":
                try:
                    conn, _ = listener.accept()
                except OSError:  # out of descriptors: the client waits for the next round
                    continue
                try:
                    request, fds = receive(conn)
                except (OSError, ValueError):
                    conn.close()
                    continue
                try:
                    reason = _refusal(request, server_env, programs)
                    started = None if reason is not None else _fork(request, fds, conn, libc)
                except OSError as exc:  # no descriptor, process or memory left for a fork
                    reason, started = f"cannot fork: {exc.strerror or exc}", None
                finally:
                    for fd in fds:
                        os.close(fd)
                if started is None:
                    send(conn, {"fresh": reason})
                    conn.close()
                    continue
                pid, pidfd = started
                children[pidfd] = (pid, conn)
                by_conn[conn.fileno()] = (pid, pidfd)
                selector.register(pidfd, selectors.EVENT_READ, ("child", None))
                selector.register(conn, selectors.EVENT_READ, ("client", None))
                send(conn, {"pid": pid})
            elif what == "client":  # a signal to pass on, or the client is gone
                pid, pidfd = by_conn[key.fd]
                try:
                    data = key.fileobj.recv(4096)  # type: ignore[union-attr]
                except OSError:
                    data = b""
                if not data:  # killed: its process goes with it
                    _kill_group(pid, signal.SIGKILL)
                    selector.unregister(key.fileobj)
                    continue
                for line in data.splitlines():
                    try:
                        os.kill(pid, int(json.loads(line)["signal"]))
                    except (ValueError, KeyError, TypeError, ProcessLookupError):
                        pass
            else:  # a child ended: reap it, relay its status
                end(key.fd)


def _refusal(
    request: dict[str, Any], server_env: dict[str, str], programs: Mapping[str, Program]
) -> str | None:
    if request.get("program") not in programs:
        return f"unknown program {request.get('program')!r}"
    names = differing(request.get("env", {}), server_env)
    return "import-time variables differ: " + ", ".join(names) if names else None


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the child leads its own session and group
    except (ProcessLookupError, PermissionError):
        pass


def receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 65536, 3)
    if len(data) < 4 or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError("bad request")
    (size,) = struct.unpack("!I", data[:4])
    body = bytearray(data[4:])
    while len(body) < size:
        more = conn.recv(min(65536, size - len(body)))
        if not more:
            for fd in fds:
                os.close(fd)
            raise ValueError("short request")
        body += more
    return json.loads(body), fds


def send(conn: socket.socket, message: dict[str, Any]) -> None:
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the client is gone


def _child(
    request: dict[str, Any],
    fds: list[int],
    server_fds: list[int],
    set_up: int,
    libc: Any,
    programs: Mapping[str, Program],
) -> None:
    """In the forked child: become the requested process, run the program, exit."""
    code = 70
    try:
        take_stdio(fds, server_fds)
        os.setsid()
        follow_cgroup(request["client_pid"])
        server = os.getppid()
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the server's death is this one's
        if os.getppid() != server:
            os._exit(code)
        reset_signals()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        main = types.ModuleType("__main__")
        main.__builtins__ = __builtins__  # type: ignore[attr-defined]
        sys.modules["__main__"] = main
        os.close(set_up)  # the server answers the client with the pid now
        reconfigure_streams()
        code = run_main(programs[request["program"]](request["argv"]))
    except BaseException:  # noqa: BLE001 - the server's own failure, on the child's stderr
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def take_stdio(fds: list[int], server_fds: list[int]) -> None:
    """In a forked child: close the server's fds, make `fds` its stdin, stdout and stderr."""
    for fd in server_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)


def reset_signals() -> None:
    """Signal handlers and mask as a fresh Python process has them (SIGPIPE and SIGXFSZ stay
    ignored, as Python sets them; an inherited SIG_IGN stays)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE, signal.SIGXFSZ):
            continue
        try:
            if callable(signal.getsignal(sig)):  # a Python handler
                signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, signal.default_int_handler)


def reconfigure_streams() -> None:
    """sys.std* buffered as a fresh process's on the fds it now has (stderr line-buffered,
    stdout line-buffered only on a terminal)."""
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(line_buffering=stream is sys.stderr or stream.isatty())
            except (OSError, ValueError):
                pass


def run_main(main: Any) -> int:
    """`sys.exit(main())` and what the interpreter does at its end: the exit code."""
    import atexit
    import traceback

    interrupted = False
    try:
        sys.exit(main())
    except SystemExit as exc:
        code = exit_code(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        interrupted, code = True, 130
    except BaseException:  # noqa: BLE001 - the interpreter prints it and exits 1
        sys.excepthook(*sys.exc_info())
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads, as at exit
    except Exception:  # noqa: BLE001
        pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            code = 120  # Python's code when it cannot flush stdout at exit
    if interrupted:  # CPython ends an uncaught KeyboardInterrupt by the signal itself
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


def exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:  # noqa: BLE001
        pass
    return 1


# -- the runner's side ------------------------------------------------------------------------


class ForkServer:
    """The runner's fork server, started on first use, ended with the runner."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.path: str | None = None
        self.failed = False

    def address(self) -> str | None:
        """The server's socket (starting it, waiting until it is ready), or None: off."""
        with self.lock:
            if self.proc is None and not self.failed:
                try:
                    self._start()
                except (OSError, RuntimeError):
                    self.failed = True
            if self.proc is not None and self.proc.poll() is not None:
                self.failed = True  # it died: every later process starts fresh
            return None if self.failed else self.path

    def _start(self) -> None:
        import atexit
        import selectors as _selectors

        from runner.processes.workdirs import socket_folder

        folder = socket_folder()
        self.path = os.path.join(folder, "sock")
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", ENTRY, self.path, str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C at the runner's terminal is the runner's
        )  # fmt: skip
        atexit.register(self.stop)
        assert self.proc.stdout is not None
        with _selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, _selectors.EVENT_READ)
            ready = sel.select(START_TIMEOUT_S) and self.proc.stdout.readline() == READY
        self.proc.stdout.close()
        if not ready:
            self.stop()
            raise RuntimeError("the fork server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.path is not None:
            for leftover in (self.path, os.path.dirname(self.path)):
                try:
                    os.rmdir(leftover) if leftover != self.path else os.unlink(leftover)
                except OSError:
                    pass

    def command(self, program: str, skip: int, fresh: list[str]) -> list[str]:
        """The command that runs `fresh` as a fork (FRESH[SKIP:] are PROGRAM's arguments)."""
        assert program in PROGRAMS and self.path is not None
        return [sys.executable, "-I", "-S", str(CLIENT), self.path, program, str(skip), *fresh]


SERVER = ForkServer()


def enabled() -> bool:
    return os.environ.get("AGENT_HARNESS_FORK_SERVER", "1") != "0"

