"""A stdio MCP server for end-to-end tests that records every tool call it really executed.

Run: python tests/support/servers/counting_server.py --ground-truth PATH [options]
(over stdio; with --http HOST:PORT over the SDK's streamable HTTP transport instead)

Each executed call appends one JSON line to PATH (`tool`, `arguments`, `ts`, `pid`, plus
`booking_id` for create_booking), flushed and fsynced BEFORE the answer leaves, so a test can
compare what really happened with what a proxy in front of this server claims. A call that is
not executed (reject_write, fail_rpc without --fail-after-write) leaves no line. With
--spawn-child the file also gets one line `{"child_pid": N}`; readers filter on "tool".

Tools and how a proxy should classify them (SPEC C3-C6):
  create_booking   write by name pattern, no annotations; optional idempotency_key and
                   room_type (schema default "standard", which the server applies)
  apply_discount   write by annotation readOnlyHint=false
  search_bookings  read by prefix; lists the executed create_booking calls
  get_booking      read by annotation readOnlyHint=true
  sync_ledger      unclassified (no annotation, no pattern); sends a log notification
  reject_write     write; answers isError true WITHOUT executing
  fail_rpc         write; answers a JSON-RPC error (executes first with --fail-after-write)
  slow_write       write; executes, then waits --slow-ms before answering
  crash_write      write; executes, then the process exits with code 3 without answering
  big_answer       write; executes and answers --big-bytes bytes of text
  structured       read; answers structuredContent and _meta, declares an outputSchema
  create_note      writes, but is annotated readOnlyHint=true: a name/annotation conflict (C9)
  payments__process_payment  write by its namespaced name's last segment (C8), no annotation
Also one resource (counting://executions) and one prompt (booking_request), for pass-through.

Standalone on purpose: it imports only the MCP SDK, never the project under test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

# Logging notifications are deprecated only in the 2026 protocol; we still want to send one.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

CRASH_EXIT_CODE = 3
RESOURCE_URI = "counting://executions"


class GroundTruth:
    """The append-only file of executed calls."""

    def __init__(self, path: Path, *, fsync: bool) -> None:
        self.path = path
        self.fsync = fsync
        path.touch()

    def append(self, entry: dict[str, Any]) -> None:
        """Write one line and make it durable before the caller answers anyone."""
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())

    def record(self, tool: str, arguments: dict[str, Any], **extra: Any) -> None:
        """Record one executed tool call."""
        self.append(
            {"tool": tool, "arguments": arguments, "ts": time.time(), "pid": os.getpid(), **extra}
        )

    def executions(self) -> list[dict[str, Any]]:
        """Every executed call recorded so far, in order."""
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [e for e in map(json.loads, filter(None, lines)) if "tool" in e]


@dataclass(frozen=True)
class Options:
    """The command line, validated once."""

    ground_truth: Path
    page_size: int
    instructions: str | None
    stderr_noise: str | None
    spawn_child: bool
    fail_after_write: bool
    slow_ms: int
    big_bytes: int
    fsync: bool
    http: tuple[str, int] | None = None
    json_response: bool = False
    require_header: tuple[str, str] | None = None
    forget_session_after: int = 0


Handler = Callable[[ServerRequestContext[Any], dict[str, Any]], Awaitable[types.CallToolResult]]
WRITE = types.ToolAnnotations(read_only_hint=False)
READ = types.ToolAnnotations(read_only_hint=True)


def _ok(payload: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(payload))])


def _schema(**props: str) -> dict[str, Any]:
    return {"type": "object", "properties": {k: {"type": t} for k, t in props.items()}}


class CountingServer:
    """The tools, their behaviour and the MCP wiring."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.truth = GroundTruth(opts.ground_truth, fsync=opts.fsync)
        self.tools: dict[str, tuple[types.Tool, Handler]] = {}
        self._declare_tools()

    def _tool(
        self,
        name: str,
        description: str,
        schema: dict[str, Any],
        handler: Handler,
        annotations: types.ToolAnnotations | None = None,
        output_schema: dict[str, Any] | None = None,
    ) -> None:
        tool = types.Tool(
            name=name,
            description=description,
            input_schema=schema,
            annotations=annotations,
            output_schema=output_schema,
        )
        self.tools[name] = (tool, handler)

    def _declare_tools(self) -> None:
        booking = _schema(guest="string", date="string", idempotency_key="string")
        booking["properties"]["room_type"] = {"type": "string", "default": "standard"}
        booking["required"] = ["guest", "date"]
        item = _schema(item="string")
        self._tool("create_booking", "Create a booking.", booking, self.create_booking)
        self._tool(
            "apply_discount",
            "Apply a discount to a booking.",
            _schema(booking_id="string", percent="number"),
            self.apply_discount,
            WRITE,
        )
        self._tool(
            "search_bookings",
            "Search executed bookings by guest and/or date.",
            _schema(guest="string", date="string"),
            self.search_bookings,
        )
        self._tool(
            "get_booking",
            "Get one booking by id.",
            _schema(booking_id="string"),
            self.get_booking,
            READ,
        )
        self._tool(
            "sync_ledger", "Synchronise the ledger.", _schema(note="string"), self.sync_ledger
        )
        self._tool(
            "reject_write",
            "A write the server always rejects.",
            item,
            self.reject_write,
            types.ToolAnnotations(read_only_hint=False, destructive_hint=True),
        )
        self._tool(
            "fail_rpc", "A write that fails with a JSON-RPC error.", item, self.fail_rpc, WRITE
        )
        self._tool("slow_write", "A write that answers slowly.", item, self.slow_write, WRITE)
        self._tool(
            "crash_write",
            "A write that crashes the server after executing.",
            item,
            self.crash_write,
            WRITE,
        )
        self._tool("big_answer", "A write with a very large answer.", item, self.big_answer, WRITE)
        self._tool(
            "create_note",
            "Create a note (wrongly annotated as read-only).",
            _schema(text="string"),
            self.create_note,
            READ,
        )
        self._tool(
            "payments__process_payment",
            "Charge a payment.",
            _schema(customer="string", amount="number"),
            self.process_payment,
        )
        self._tool(
            "structured",
            "Answers with structuredContent and _meta.",
            _schema(value="string"),
            self.structured,
            READ,
            output_schema={
                "type": "object",
                "properties": {"value": {"type": "string"}, "count": {"type": "integer"}},
                "required": ["value", "count"],
            },
        )

    # -- tools ----------------------------------------------------------------------------

    async def create_booking(self, ctx: ServerRequestContext[Any], args: dict[str, Any]):
        booking_id = "BK-" + uuid.uuid4().hex[:8].upper()
        self.truth.record(
            "create_booking",
            args,
            booking_id=booking_id,
            room_type=args.get("room_type", "standard"),
        )
        return _ok({"booking_id": booking_id, "guest": args.get("guest"), "date": args.get("date")})

    async def create_note(self, ctx: ServerRequestContext[Any], args: dict[str, Any]):
        self.truth.record("create_note", args)
        return _ok({"note_id": "N-" + uuid.uuid4().hex[:6].upper(), **args})

    async def process_payment(self, ctx: ServerRequestContext[Any], args: dict[str, Any]):
        self.truth.record("payments__process_payment", args)
        return _ok({"payment_id": "PAY-" + uuid.uuid4().hex[:6].upper(), **args})

    async def apply_discount(self, ctx: ServerRequestContext[Any], args: dict[str, Any]):
        self.truth.record("apply_discount", args)
        return _ok({"applied": True, **args})

    def _bookings(self) -> list[dict[str, Any]]:
        return [
            {"booking_id": e["booking_id"], **e["arguments"]}
            for e in self.truth.executions()
            if e["tool"] == "create_booking"
        ]

    async def search_bookings(self, ctx: ServerRequestContext[Any], args: dict[str, Any]):
        self.truth.record("search_bookings", args)
        found = [
            b
            for b in self._bookings()
            if all(b.get(k) == args[k] for k in ("guest", "date") if k in args)
        ]
        return _ok({"bookings": found, "count": len(found)})

    async def get_booking(self, ctx: ServerRequestContext[Any], args: dict[str, Any]):
        self.truth.record("get_booking", args)
        for b in self._bookings():
            if b["booking_id"] == args.get("booking_id"):
                return _ok(b)
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps({"error": "not_found"}))], is_error=True
        )

    async def sync_ledger(self, ctx: ServerRequestContext[Any], args: dict[str, Any]):
        self.truth.record("sync_ledger", args)
        await ctx.session.send_log_message(
            level="info",
            data={"event": "ledger synced"},
            logger="counting_server",
            related_request_id=ctx.request_id,
        )
        return _ok({"synced": True})

    async def reject_write(self, ctx: ServerRequestContext[Any], args: dict[str, Any]):
        # Not executed, so nothing recorded: the ground truth must show no line for it.
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps({"error": "rejected by upstream"}))],
            is_error=True,
        )

    async def fail_rpc(self, ctx: ServerRequestContext[Any], args: dict[str, Any]):
        if self.opts.fail_after_write:
            self.truth.record("fail_rpc", args)
        raise MCPError(code=types.INTERNAL_ERROR, message="fail_rpc failed on purpose")

    async def slow_write(self, ctx: ServerRequestContext[Any], args: dict[str, Any]):
        self.truth.record("slow_write", args)
        await anyio.sleep(self.opts.slow_ms / 1000)
        return _ok({"done": True, **args})

    async def crash_write(self, ctx: ServerRequestContext[Any], args: dict[str, Any]):
        self.truth.record("crash_write", args)
        print("counting_server: crash_write executed, exiting hard", file=sys.stderr, flush=True)
        os._exit(CRASH_EXIT_CODE)

    async def big_answer(self, ctx: ServerRequestContext[Any], args: dict[str, Any]):
        self.truth.record("big_answer", args)
        return types.CallToolResult(content=[types.TextContent(text="x" * self.opts.big_bytes)])

    async def structured(self, ctx: ServerRequestContext[Any], args: dict[str, Any]):
        self.truth.record("structured", args)
        payload = {"value": str(args.get("value", "")), "count": len(self.truth.executions())}
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(payload))],
            structured_content=payload,
            _meta={"counting/pid": os.getpid()},
        )

    # -- MCP wiring -----------------------------------------------------------------------

    async def on_list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = [tool for tool, _ in self.tools.values()]
        size = self.opts.page_size
        if size <= 0:
            return types.ListToolsResult(tools=tools)
        cursor = params.cursor if params is not None else None
        try:
            start = int(cursor) if cursor is not None else 0
        except ValueError:
            raise MCPError(code=types.INVALID_PARAMS, message=f"bad cursor {cursor!r}") from None
        end = start + size
        next_cursor = str(end) if end < len(tools) else None
        return types.ListToolsResult(tools=tools[start:end], next_cursor=next_cursor)

    async def on_call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        entry = self.tools.get(params.name)
        if entry is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {params.name!r}")
        return await entry[1](ctx, params.arguments or {})

    async def on_list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ):
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=RESOURCE_URI,
                    name="executions",
                    mime_type="application/json",
                    description="Every tool call this server executed.",
                )
            ]
        )

    async def on_read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ):
        if str(params.uri) != RESOURCE_URI:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown resource {params.uri}")
        text = json.dumps(self.truth.executions())
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=RESOURCE_URI, mime_type="application/json", text=text
                )
            ]
        )

    async def on_list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ):
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name="booking_request",
                    description="Ask for a booking.",
                    arguments=[types.PromptArgument(name="guest", required=True)],
                )
            ]
        )

    async def on_get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ):
        if params.name != "booking_request":
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown prompt {params.name!r}")
        guest = (params.arguments or {}).get("guest", "a guest")
        return types.GetPromptResult(
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(text=f"Please book a room for {guest}.")
                )
            ]
        )

    def server(self) -> Server[Any]:
        """The mcp lowlevel server with every handler wired."""
        return Server(
            "counting-server",
            version="1.0.0",
            instructions=self.opts.instructions,
            on_list_tools=self.on_list_tools,
            on_call_tool=self.on_call_tool,
            on_list_resources=self.on_list_resources,
            on_read_resource=self.on_read_resource,
            on_list_prompts=self.on_list_prompts,
            on_get_prompt=self.on_get_prompt,
        )


def parse(argv: list[str] | None = None) -> Options:
    """Parse and check the command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ground-truth", required=True, type=Path, help="JSON-lines file to append")
    p.add_argument("--page-size", type=int, default=0, help="tools per tools/list page (0: all)")
    p.add_argument("--instructions", default=None, help="server instructions")
    p.add_argument("--stderr-noise", default=None, help="text printed to stderr at start")
    p.add_argument("--spawn-child", action="store_true", help="start a long-lived child process")
    p.add_argument(
        "--fail-after-write",
        action="store_true",
        help="fail_rpc records an execution before failing",
    )
    p.add_argument("--slow-ms", type=int, default=1000, help="slow_write delay (ms)")
    p.add_argument("--big-bytes", type=int, default=1_000_000, help="big_answer size (bytes)")
    p.add_argument(
        "--no-fsync",
        action="store_true",
        help="flush without fsync (benchmarks only; a crash may lose lines)",
    )
    p.add_argument(
        "--http",
        default=None,
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: "
        "any; the URL is printed on stderr as 'listening on URL')",
    )
    p.add_argument(
        "--json-response",
        action="store_true",
        help="with --http: answer requests with plain JSON instead of SSE streams",
    )
    p.add_argument(
        "--require-header",
        default=None,
        metavar="NAME:VALUE",
        help="with --http: answer 401 to any request without this header",
    )
    p.add_argument(
        "--forget-session-after",
        type=int,
        default=0,
        metavar="N",
        help="with --http: after N POSTs in a session, answer 404 for its id (as a "
        "server whose session expired does); 0: never",
    )
    a = p.parse_args(argv)
    if a.page_size < 0 or a.slow_ms < 0 or a.big_bytes < 0:
        p.error("--page-size, --slow-ms and --big-bytes must not be negative")
    return Options(
        ground_truth=a.ground_truth,
        page_size=a.page_size,
        instructions=a.instructions,
        stderr_noise=a.stderr_noise,
        spawn_child=a.spawn_child,
        fail_after_write=a.fail_after_write,
        slow_ms=a.slow_ms,
        big_bytes=a.big_bytes,
        fsync=not a.no_fsync,
        json_response=a.json_response,
        require_header=tuple(a.require_header.split(":", 1)) if a.require_header else None,
        forget_session_after=a.forget_session_after,
        http=(a.http.rpartition(":")[0] or "127.0.0.1", int(a.http.rpartition(":")[2]))
        if a.http
        else None,
    )


def main(argv: list[str] | None = None) -> None:
    """Start the server on stdio."""
    opts = parse(argv)
    counting = CountingServer(opts)
    if opts.stderr_noise is not None:
        print(opts.stderr_noise, file=sys.stderr, flush=True)
    if opts.spawn_child:
        # Same process group, own stdio: only a group kill ends it, never our own exit.
        child = subprocess.Popen(
            ["sleep", "1000"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        counting.truth.append({"child_pid": child.pid})
    server = counting.server()
    if opts.http is not None:
        serve_http(server, opts)
        return

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)


class _RequireHeader:
    """ASGI wrapper: 401 unless the request carries the header (a stand-in for auth)."""

    def __init__(self, app: Any, name: str, value: str) -> None:
        self.app, self.name, self.value = app, name.strip().lower().encode(), value.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (self.name, self.value) not in scope["headers"]:
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [(b"www-authenticate", b"Bearer")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


class _ForgetSessions:
    """ASGI wrapper: a session's id is unknown (404) after it carried N POSTs."""

    def __init__(self, app: Any, after: int) -> None:
        self.app, self.after = app, after
        self.posts: dict[bytes, int] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        sid = dict(scope.get("headers", [])).get(b"mcp-session-id")
        if scope["type"] == "http" and sid is not None:
            if scope["method"] == "POST":
                self.posts[sid] = self.posts.get(sid, 0) + 1
            if self.posts.get(sid, 0) > self.after:
                body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 404,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve_http(server: Server[Any], opts: Options) -> None:
    """The same server over the SDK's streamable HTTP transport (both protocol eras)."""
    import socket

    import uvicorn

    assert opts.http is not None
    host, port = opts.http
    app: Any = server.streamable_http_app(json_response=opts.json_response, host=host)
    if opts.require_header is not None:
        app = _RequireHeader(app, *opts.require_header)
    if opts.forget_session_after > 0:
        app = _ForgetSessions(app, opts.forget_session_after)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)  # before saying so: a client may connect the moment it reads the line
    shown = f"[{host}]" if ":" in host else host
    print(f"listening on http://{shown}:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
