"""H1: a built-in upstream served over HTTP accepts connections from the moment it says where
it listens (the runner hands that URL to the proxy at once).

Found in a fresh-clone CI run: the line came after bind() but before uvicorn's listen(), so on
a loaded machine the proxy's first connection was refused and both runs of
test_runner_http[stdio-http] failed to run. The server is stopped (SIGSTOP) right after its
line: only a socket that already listens still completes a TCP handshake then.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)/mcp")


def test_h1_a_builtin_http_upstream_accepts_connections_as_soon_as_it_says_it_listens(
    tmp_path: Path,
) -> None:
    argv = [sys.executable, "-m", "runner.upstreams", "booking", "--db", str(tmp_path / "b.db"),
            "--http", "127.0.0.1:0"]  # fmt: skip
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # blocks until the line (or EOF, then the match fails)
        found = LISTENING.search(line)
        assert found, line
        os.kill(proc.pid, signal.SIGSTOP)  # it does nothing more from here on
        with socket.create_connection(("127.0.0.1", int(found.group(1))), timeout=30):
            pass  # the kernel completed the handshake: the socket was listening
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        proc.wait(timeout=30)
