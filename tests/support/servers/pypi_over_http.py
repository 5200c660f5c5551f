"""mcp-server-git (PyPI) over the MCP SDK's streamable HTTP transport, for the e2e tests.

Run: python tests/support/servers/pypi_over_http.py --repository R [--host 127.0.0.1] [--port 0]

mcp-server-git speaks only stdio. This serves the package's OWN server object
(`mcp_server_git.server.create_server`: its tools, schemas, guards and middleware, nothing
reimplemented) behind the SDK's streamable HTTP app, which answers both protocol eras: the
2025-11-25 handshake with an `Mcp-Session-Id`, and 2026-07-28 without any session. It binds
the port (0: a free one) and prints `listening on http://HOST:PORT/mcp` on stderr before it
serves, so a test can start it and read where it is.

Standalone on purpose: it imports the package and the SDK, never the project under test.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

import uvicorn
from mcp_server_git.server import create_server


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repository", required=True, type=Path)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", default=0, type=int)
    a = p.parse_args(argv)
    app = create_server(a.repository.resolve()).streamable_http_app(host=a.host)
    sock = socket.socket(socket.AF_INET6 if ":" in a.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((a.host, a.port))
    sock.listen(128)  # before saying so: a client may connect the moment it reads the line
    shown = f"[{a.host}]" if ":" in a.host else a.host
    print(f"listening on http://{shown}:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])


if __name__ == "__main__":
    main()
