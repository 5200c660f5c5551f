"""`python -m runner.upstreams KIND --db PATH [--http HOST:PORT]`: serve a built-in upstream
over stdio, or over streamable HTTP."""

from __future__ import annotations

import argparse
import sys
import tempfile

import anyio
from mcp.server.stdio import stdio_server

from harness.base.errors import no_space
from runner.upstreams._registry import BUILTIN_UPSTREAMS, serve

PROG = "python -m runner.upstreams"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    kinds = "\n".join(f"  {k}: {u.description}" for k, u in BUILTIN_UPSTREAMS.items())
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Serve a built-in reference MCP server over stdio (or HTTP).\n\nkinds:\n"
        + kinds,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("kind", choices=sorted(BUILTIN_UPSTREAMS))
    parser.add_argument(
        "--db", required=True, help="SQLite ledger file; created with its schema if missing"
    )
    parser.add_argument(
        "--http", metavar="HOST:PORT", default=None,
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: any free "
        "port; the URL is printed on stderr)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.http is not None:
        host, colon, port = args.http.rpartition(":")
        if not colon or not port.isdigit():
            parser.error(f"--http expects HOST:PORT, got {args.http!r}")
        args.http = (host.strip("[]") or "127.0.0.1", int(port))
    return args


async def _serve_stdio(kind: str, db: str) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await serve(kind, db, read_stream, write_stream)


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until stdin closes."""
    args = _parse(argv)
    try:
        if args.http is not None:
            from runner.upstreams._http import serve_http

            serve_http(args.kind, args.db, *args.http)
            return
        anyio.run(_serve_stdio, args.kind, args.db)
    except Exception as exc:  # noqa: BLE001 - only a full disk is said here; the rest re-raised
        full = _full_disk(exc, args.db)
        if full is None:
            raise
        # V20: one line, short enough to reach the proxy's stderr on that same disk
        print(f"{PROG}: error: {full}", file=sys.stderr, flush=True)
        sys.exit(1)


def _full_disk(exc: BaseException, db: str) -> str | None:
    """The one line for a full disk met anywhere under `exc` (the server's task groups wrap
    it), naming the ledger file or the temporary folder its first copy is made in; None for
    any other error."""
    if isinstance(exc, BaseExceptionGroup):
        return next((f for e in exc.exceptions if (f := _full_disk(e, db)) is not None), None)
    return next((f for p in (db, tempfile.gettempdir()) if (f := no_space(exc, p)) is not None),
                None)  # fmt: skip


if __name__ == "__main__":
    main()
