"""A built-in upstream over streamable HTTP: the same server, the SDK's HTTP transport (H1).

`python -m runner.upstreams KIND --db PATH --http 127.0.0.1:0` binds the address (port 0: any
free port), prints `listening on http://HOST:PORT/mcp` on stderr, and serves until it is
terminated. Both protocol eras are served (2025 sessions, sessionless 2026-07-28).
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from runner.upstreams._plumbing import build_server, open_db
from runner.upstreams._registry import builtin


def serve_http(kind: str, db_path: str | Path, host: str, port: int) -> None:
    """Serve KIND over HTTP until the process is terminated."""
    import uvicorn

    upstream = builtin(kind)
    conn = open_db(db_path, upstream.ledger.schema)
    server = build_server(
        f"agent-harness-{kind}", upstream.instructions, list(upstream.ledger.tools), conn
    )
    app = server.streamable_http_app(host=host)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)  # before the line: a client that reads it may connect at once (uvicorn
    # would listen only after its own start-up, which is slow on a loaded machine)
    shown = f"[{host}]" if ":" in host else host
    print(f"listening on http://{shown}:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])
    finally:
        conn.close()
