"""Programs that leave a process behind, and the check that it is gone (V16).

`leaver(...)` writes a small program that starts a daemon (a new session, a double fork,
sleeping, holding the program's stdout and stderr), which writes its own pid to a file; the
program then prints a line, and exits or becomes another program. `gone(pidfile)` is the
ground truth: the daemon has left /proc (or is a zombie), waited for with a bound.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

DEADLINE_S = 10.0
HANDSHAKE = Path(__file__).resolve().parent / "agents" / "handshake.py"


def leaver(
    folder: Path, name: str, *, say: str = "", then: list[str] | None = None,
    clear_env: bool = False, handshake: bool = False,
) -> list[str]:  # fmt: skip
    """argv of a program that leaves a daemon whose pid goes to `folder/<name>.pid`, prints
    `say`, then execs `then` (or exits 0). `clear_env`: the daemon runs with no environment
    (so nothing but a cgroup or its session can find it once its parent is gone);
    `handshake`: as a command agent over HTTP, it first opens its MCP session (a run whose
    agent never did fails to run, Q1)."""
    pidfile = folder / f"{name}.pid"
    sleep = "os.execve('/bin/sleep', ['sleep', '300'], {})" if clear_env else "time.sleep(300)"
    become = f"os.execv({then[0]!r}, {then!r})\n" if then else ""
    program = folder / f"{name}.py"
    opening = f"import runpy; runpy.run_path({str(HANDSHAKE)!r})\n" if handshake else ""
    program.write_text(
        opening + "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        open({str(pidfile)!r} + '.tmp', 'w').write(str(os.getpid()))\n"
        f"        os.rename({str(pidfile)!r} + '.tmp', {str(pidfile)!r})\n"
        f"        {sleep}\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        # The daemon has said who it is before anyone can end it: the test's ground truth.
        f"while not os.path.exists({str(pidfile)!r}):\n"
        "    time.sleep(0.01)\n"
        + (f"print({say!r}, flush=True)\n" if say else "")
        + become
    )
    return [sys.executable, str(program)]


def gone(pidfile: Path) -> bool:
    """Whether the process named in `pidfile` has ended (bounded wait); killed if not, so no
    test leaves it to the next."""
    deadline = time.monotonic() + DEADLINE_S
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    pid = int(pidfile.read_text())
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    return False
