"""The proxy core in memory: an MCP SDK client <-> `Proxy` <-> an in-process SDK upstream.

    async with proxied(scenario="F1") as h:
        await h.client.call_tool("create_booking", BOOK)
    h.upstream.executed          # ground truth: what the upstream REALLY executed
    h.session.judgement()        # what the proxy judged

Four `MemoryPipe`s connect the three parties, the same seam the runner uses; two of them are
taps that keep every line, so a test can compare what the upstream sent with what the client
got, byte for byte. The upstream is the mcp lowlevel `Server`: the proxy must cope with what a
real SDK server writes, not with hand-made JSON.
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from harness.faults import PlanConfig
from harness.operations.classify import ClassifierConfig
from harness.proxy.args import ProxyConfig
from harness.proxy.router import Proxy
from harness.session import EventList, Session
from harness.wire.transport import MemoryPipe, mcp_streams
from tests.support.linetap import LineTap

BOOK = {"guest": "Ann", "date": "2026-12-01"}
SESSION_TIMEOUT_S = 20
INSTRUCTIONS = "Book rooms carefully; search before you book twice."
RESOURCE_URI = "memory://bookings"

WRITE = types.ToolAnnotations(read_only_hint=False)
READ = types.ToolAnnotations(read_only_hint=True)
OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"value": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["value", "count"],
}


def _schema(**props: str) -> dict[str, Any]:
    return {"type": "object", "properties": {k: {"type": t} for k, t in props.items()}}


def _ok(payload: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(payload))])


def _tools() -> list[types.Tool]:
    booking = _schema(guest="string", date="string", idempotency_key="string")
    booking["required"] = ["guest", "date"]
    item = _schema(item="string")
    return [
        types.Tool(name="create_booking", description="Create a booking.", input_schema=booking),
        types.Tool(
            name="apply_discount",
            title="Apply a discount",
            description="Apply a discount to a booking.",
            input_schema=_schema(booking_id="string", percent="number"),
            annotations=types.ToolAnnotations(
                read_only_hint=False,
                destructive_hint=False,
                idempotent_hint=False,
                open_world_hint=True,
                title="Discount",
            ),
            _meta={"vendor/cost": 3, "vendor/tags": ["money", "write"]},
        ),
        types.Tool(
            name="search_bookings",
            description="Search bookings by guest and date.",
            input_schema=_schema(guest="string", date="string"),
        ),
        types.Tool(
            name="get_booking",
            description="Get a booking by id.",
            input_schema=_schema(booking_id="string"),
            annotations=READ,
        ),
        types.Tool(
            name="sync_ledger",
            description="Synchronise the ledger.",
            input_schema=_schema(note="string"),
        ),
        types.Tool(
            name="reject_write",
            description="A write the upstream always rejects.",
            input_schema=item,
            annotations=WRITE,
        ),
        types.Tool(
            name="connect_account",
            description="Needs a URL elicitation first.",
            input_schema=_schema(account="string"),
            annotations=WRITE,
        ),
        types.Tool(
            name="fail_rpc",
            description="Executes, then fails with a JSON-RPC error.",
            input_schema=item,
            annotations=WRITE,
        ),
        types.Tool(
            name="hang_write",
            description="Executes, then answers only when released.",
            input_schema=item,
            annotations=WRITE,
        ),
        types.Tool(
            name="confirm_charge",
            description="2026-07-28: asks for input first (MRTR), executes on the retry.",
            input_schema=item,
            annotations=WRITE,
        ),
        types.Tool(
            name="structured",
            description="Answers with structuredContent and _meta.",
            input_schema={
                "type": "object",
                "properties": {
                    "value": {"type": "string", "description": "ünïcödé ✓"},
                    "nested": {"type": "object", "additionalProperties": True},
                },
                "additionalProperties": False,
            },
            output_schema=OUTPUT_SCHEMA,
            annotations=READ,
        ),
    ]


@dataclass
class RecordingUpstream:
    """An in-process MCP upstream that records every tool call it really executed."""

    page_size: int = 0
    instructions: str | None = INSTRUCTIONS
    tools: list[types.Tool] = field(default_factory=_tools)
    executed: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    metas: list[dict[str, Any] | None] = field(default_factory=list)  # request _meta per call
    tool_list_requests: int = 0
    release: anyio.Event | None = None  # hang_write answers once this is set
    hanging: anyio.Event | None = None  # set when hang_write has executed
    during_execution: list[Any] = field(default_factory=list)  # what `on_execute` saw
    on_execute: Any = None  # called with (tool, arguments) before each execution is recorded
    gate: int = 0  # create_booking answers only once this many calls of it have arrived
    _arrived: int = 0
    _gate_open: anyio.Event | None = None

    def count(self, tool: str, arguments: dict[str, Any] | None = None) -> int:
        """How many times `tool` (with exactly these arguments, if given) really executed."""
        return sum(1 for t, a in self.executed if t == tool and arguments in (None, a))

    def _execute(self, tool: str, arguments: dict[str, Any]) -> None:
        if self.on_execute is not None:
            self.during_execution.append(self.on_execute(tool, arguments))
        self.executed.append((tool, arguments))

    async def on_list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self.tool_list_requests += 1
        if self.page_size <= 0:
            return types.ListToolsResult(tools=self.tools)
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + self.page_size
        more = str(end) if end < len(self.tools) else None
        return types.ListToolsResult(tools=self.tools[start:end], next_cursor=more)

    async def on_call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        name, args = params.name, dict(params.arguments or {})
        if name not in {t.name for t in self.tools}:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {name!r}")
        self.metas.append(dict(ctx.meta) if ctx.meta is not None else None)
        if name == "confirm_charge" and params.request_state != "confirmed":
            return types.InputRequiredResult(request_state="confirmed")  # nothing ran yet
        if name == "reject_write":  # not executed: nothing recorded
            return types.CallToolResult(
                content=[types.TextContent(text='{"error": "rejected"}')], is_error=True
            )
        self._execute(name, args)
        if name == "create_booking" and self.gate:
            assert self._gate_open is not None
            self._arrived += 1
            if self._arrived >= self.gate:
                self._gate_open.set()
            await self._gate_open.wait()
        if name == "create_booking":
            return _ok({"booking_id": f"BK-{len(self.executed):04d}", **args})
        if name in ("search_bookings", "get_booking"):
            found = [a for t, a in self.executed if t == "create_booking"]
            return _ok({"bookings": found})
        if name == "sync_ledger":
            with warnings.catch_warnings():  # deprecated only in the 2026 protocol
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await ctx.session.send_log_message(
                    level="info",
                    data={"event": "ledger synced"},
                    logger="upstream",
                    related_request_id=ctx.request_id,
                )
            await ctx.session.report_progress(1, 1, "synced")
            return _ok({"synced": True})
        if name == "fail_rpc":  # a tool may throw after writing (A1)
            raise MCPError(code=types.INTERNAL_ERROR, message="fail_rpc failed after writing")
        if name == "connect_account":  # X13: the 2025-11-25 URL elicitation error, with data
            raise MCPError(
                code=types.URL_ELICITATION_REQUIRED,
                message="Authorise the account first.",
                data={
                    "elicitations": [
                        {
                            "mode": "url",
                            "elicitationId": "e-1",
                            "url": "https://example.test/authorise",
                            "message": "Connect your account.",
                        }
                    ]
                },
            )
        if name == "hang_write":
            assert self.hanging is not None and self.release is not None
            self.hanging.set()
            await self.release.wait()
            return _ok({"done": True})
        if name == "structured":
            payload = {"value": str(args.get("value", "")), "count": len(self.executed)}
            return types.CallToolResult(
                content=[types.TextContent(text=json.dumps(payload))],
                structured_content=payload,
                _meta={"upstream/trace": "t-1", "upstream/n": 7},
            )
        return _ok({"done": True, **args})

    async def on_list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=RESOURCE_URI,
                    name="bookings",
                    mime_type="application/json",
                    description="Every executed booking.",
                )
            ]
        )

    async def on_read_resource(self, ctx: Any, params: Any) -> types.ReadResourceResult:
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=RESOURCE_URI,
                    mime_type="application/json",
                    text=json.dumps(self.executed),
                )
            ]
        )

    async def on_list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name="booking_request",
                    description="Ask for a booking.",
                    arguments=[types.PromptArgument(name="guest", required=True)],
                )
            ]
        )

    async def on_get_prompt(self, ctx: Any, params: types.GetPromptRequestParams):
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
            "recording-upstream",
            version="1.0.0",
            instructions=self.instructions,
            on_list_tools=self.on_list_tools,
            on_call_tool=self.on_call_tool,
            on_list_resources=self.on_list_resources,
            on_read_resource=self.on_read_resource,
            on_list_prompts=self.on_list_prompts,
            on_get_prompt=self.on_get_prompt,
        )

    async def serve(self, reader: MemoryPipe, writer: MemoryPipe) -> None:
        """Serve one connection until the proxy closes the line stream."""
        self.release = anyio.Event()
        self.hanging = anyio.Event()
        self._gate_open = anyio.Event()
        server = self.server()
        async with mcp_streams(reader, writer) as (read, write):
            await server.run(read, write, server.create_initialization_options())


@dataclass
class ScriptedUpstream:
    """A line-level upstream that answers with hand-written JSON, for what an SDK server
    would never send: results without `isError`, fields no MCP type knows."""

    tools: list[dict[str, Any]]
    results: dict[str, dict[str, Any]]  # tool name -> the exact `result` to answer with
    executed: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    release: anyio.Event | None = None
    hanging: anyio.Event | None = None

    async def serve(self, reader: MemoryPipe, writer: MemoryPipe) -> None:
        while (line := await reader.read_line()) is not None:
            message = json.loads(line)
            method, rpc_id = message.get("method"), message.get("id")
            if rpc_id is None or method is None:
                continue  # notifications and answers to our (never sent) requests
            params = message.get("params") or {}
            if method == "initialize":
                result: dict[str, Any] = {
                    "protocolVersion": params.get("protocolVersion"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "scripted-upstream", "version": "0"},
                }
            elif method == "tools/list":
                result = {"tools": self.tools, "x-list-extra": {"kept": True}}
            elif method == "tools/call":
                self.executed.append((params["name"], params.get("arguments") or {}))
                result = self.results[params["name"]]
            else:
                result = {}
            body = {"jsonrpc": "2.0", "id": rpc_id, "result": result}
            await writer.write_line(json.dumps(body, ensure_ascii=False).encode())


@dataclass
class LenientUpstream(ScriptedUpstream):
    """An upstream as lenient as some real ones: it decodes bad UTF-8 with replacement
    characters, executes a `tools/call` whatever its id (none, null, reused), accepts NaN and
    answers a batch with a batch (the 2025-03-26 revision). Whatever reaches it executes, so
    `executed` shows exactly what the proxy let through."""

    async def serve(self, reader: MemoryPipe, writer: MemoryPipe) -> None:
        while (line := await reader.read_line()) is not None:
            try:
                data = json.loads(line.decode("utf-8", "replace"))
            except RecursionError:  # too deep for this upstream: an error for the id it sees
                found = re.search(rb'"id":\s*"([^"]*)"', line)
                rpc_id = found.group(1).decode() if found else None
                error = {"code": -32700, "message": "too deeply nested"}
                body = {"jsonrpc": "2.0", "id": rpc_id, "error": error}
                await writer.write_line(json.dumps(body).encode())
                continue
            answers = [
                a
                for m in (data if isinstance(data, list) else [data])
                if (a := self._answer(m)) is not None
            ]
            if answers:
                out = answers if isinstance(data, list) else answers[0]
                await writer.write_line(json.dumps(out, ensure_ascii=False).encode())

    def _answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        method, params = message.get("method"), message.get("params") or {}
        if method == "tools/call":
            self.executed.append((params["name"], params.get("arguments") or {}))
            result = self.results[params["name"]]
        elif method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "lenient-upstream", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": self.tools}
        elif method is None or "id" not in message:
            return None
        else:
            result = {}
        return {"jsonrpc": "2.0", "id": message.get("id"), "result": result}


def lenient_upstream() -> LenientUpstream:
    """One write (`create_booking`, by name) and one read (`search_bookings`)."""
    schema = {
        "type": "object",
        "properties": {"guest": {"type": "string"}, "date": {"type": "string"}},
    }
    tools = [
        {"name": "create_booking", "inputSchema": schema},
        {"name": "search_bookings", "inputSchema": schema},
    ]
    ok = {"content": [{"type": "text", "text": "ok"}]}
    return LenientUpstream(tools=tools, results={"create_booking": ok, "search_bookings": ok})


class TapPipe(MemoryPipe, LineTap):
    """A MemoryPipe that also keeps every line written to it."""

    def __init__(self) -> None:
        MemoryPipe.__init__(self)
        LineTap.__init__(self, SESSION_TIMEOUT_S)
        self.eof_read = asyncio.Event()  # the reader saw EOF

    async def read_line(self) -> bytes | None:
        line = await super().read_line()
        if line is None:
            self.eof_read.set()
        return line

    async def write_line(self, line: bytes) -> None:
        self.record(line)
        await super().write_line(line)

    def answer_to(self, rpc_id: Any) -> tuple[bytes, dict[str, Any]]:
        """The raw line and parsed message that answers request `rpc_id`."""
        for line in self.lines:
            message = json.loads(line)
            if (
                isinstance(message, dict)
                and "method" not in message
                and message.get("id") == rpc_id
            ):
                return line, message
        raise AssertionError(f"no answer to id {rpc_id!r} among {len(self.lines)} lines")


@dataclass
class Harness:
    """Everything a test looks at: the client, the proxy's session, the upstream's truth."""

    client: ClientSession
    init: types.InitializeResult
    proxy: Proxy
    session: Session
    upstream: Any  # RecordingUpstream or ScriptedUpstream
    events: EventList
    from_client: TapPipe  # every line the client sent
    to_upstream: TapPipe  # every line the upstream received
    from_upstream: TapPipe  # every line the upstream sent
    to_client: TapPipe  # every line the client received
    reports: list[str]  # every report-file text the proxy wrote, in order
    logs: list[str]  # every stderr line the proxy logged
    done: anyio.Event  # set when proxy.run() has returned
    ended: str | None = None  # why proxy.run() returned

    async def close_client(self) -> None:
        """The client leaves (EOF); returns once the proxy has read the EOF."""
        await self.from_client.close()
        with anyio.fail_after(SESSION_TIMEOUT_S):
            await self.from_client.eof_read.wait()

    def judgement(self):
        return self.session.judgement()

    def attempts(self, tool: str) -> list[str]:
        """A1: the outcome of each attempt at `tool`, in order."""
        return [a.status for op in self.session.judge.ops if op.tool == tool for a in op.attempts]

    def last_report(self) -> dict[str, Any]:
        return json.loads(self.reports[-1])

    async def raw_call(self, name: str, arguments: Any, rpc_id: Any) -> dict[str, Any]:
        """Send a tools/call line by hand (past the SDK's validation); wait for its answer."""
        body = {
            "jsonrpc": "2.0",
            "id": rpc_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        return await self.raw_request(json.dumps(body).encode(), rpc_id)

    async def raw_request(self, line: bytes, rpc_id: Any) -> dict[str, Any]:
        """Send one raw line from the client; wait for the answer with id `rpc_id`."""
        await self.from_client.write_line(line)
        return await self.to_client.wait_for(
            lambda m: isinstance(m, dict) and "method" not in m and m.get("id") == rpc_id
        )

    async def raw_batch(self, elements: list[Any]) -> list[dict[str, Any]]:
        """Send a JSON-RPC batch from the client; wait for the batch that answers its ids."""
        ids = sorted(
            json.dumps(e.get("id"))
            for e in elements
            if isinstance(e, dict) and e.get("id") is not None
        )
        await self.from_client.write_line(json.dumps(elements).encode())
        return await self.to_client.wait_for(
            lambda m: (
                isinstance(m, list)
                and sorted(json.dumps(a.get("id")) for a in m if a.get("id") is not None) == ids
            )
        )


def config(
    *,
    scenario: str | None = None,
    chaos_error_rate: float | None = None,
    seed: int | None = None,
    retry_after_s: float = 60,
    audit_tools: bool = True,
    upstream_timeout_s: float = 10.0,
    write_tools: tuple[str, ...] | None = None,
    fault_delay_ms: int = 0,
    keys_honoured: tuple[str, ...] = (),
) -> ProxyConfig:
    """A ProxyConfig for the in-memory proxy (no upstream command: the upstream is in-process)."""
    return ProxyConfig(
        upstream_command="(in-process)",
        plan=PlanConfig(
            scenario=scenario,
            chaos_error_rate=chaos_error_rate,
            seed=seed,
            retry_after_s=retry_after_s,
            fault_delay_ms=fault_delay_ms,
        ),
        classifier=ClassifierConfig(write_globs=write_tools, keys_honoured=keys_honoured),
        audit_tools=audit_tools,
        upstream_timeout_s=upstream_timeout_s,
    )


def _joined(pieces: Any) -> str:
    """The report text from what the proxy hands its report writer (keyed pieces or bytes)."""
    return b"".join(p[1] if isinstance(p, tuple) else p for p in pieces).decode()


@asynccontextmanager
async def proxied(
    upstream: RecordingUpstream | ScriptedUpstream | None = None,
    *,
    report_file: bool = True,
    clock: Callable[[], int] | None = None,
    client_kwargs: dict[str, Any] | None = None,
    stateless: bool = False,
    **config_kwargs: Any,
) -> AsyncIterator[Harness]:
    """Client, proxy and upstream in one event loop; the session ends when the block ends."""
    upstream = upstream or RecordingUpstream()
    proxy_config = config(**config_kwargs)
    events = EventList()
    session = Session(
        proxy_config.classifier,
        proxy_config.plan,
        kind="proxy",
        sinks=[events],
        **({"clock": clock} if clock is not None else {}),
    )
    client_to_proxy, proxy_to_client = TapPipe(), TapPipe()
    proxy_to_upstream, upstream_to_proxy = TapPipe(), TapPipe()
    reports: list[str] = []
    logs: list[str] = []
    proxy = Proxy(
        proxy_config,
        session,
        client_to_proxy,
        proxy_to_client,
        upstream_to_proxy,
        proxy_to_upstream,
        write_report=(lambda pieces: reports.append(_joined(pieces))) if report_file else None,
        log=logs.append,
    )
    proxy_done = anyio.Event()
    harness: Harness | None = None

    async def run_proxy() -> None:
        try:
            reason = await proxy.run()
            if harness is not None:
                harness.ended = reason
        finally:
            proxy_done.set()
            await proxy_to_upstream.close()  # as UpstreamProcess.close() does: upstream sees EOF

    with anyio.fail_after(SESSION_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(upstream.serve, proxy_to_upstream, upstream_to_proxy)
            tg.start_soon(run_proxy)
            async with mcp_streams(proxy_to_client, client_to_proxy) as (read, write):
                async with ClientSession(read, write, **(client_kwargs or {})) as client:
                    # X11: a 2026-07-28 client has no handshake; it discovers the server.
                    init = await (client.discover() if stateless else client.initialize())
                    harness = Harness(
                        client,
                        init,
                        proxy,
                        session,
                        upstream,
                        events,
                        client_to_proxy,
                        proxy_to_upstream,
                        upstream_to_proxy,
                        proxy_to_client,
                        reports,
                        logs,
                        proxy_done,
                    )
                    yield harness
            await client_to_proxy.close()  # client EOF (X6)
            await proxy_done.wait()
            if upstream.release is not None:
                upstream.release.set()  # never leave a hanging handler behind


def call(rpc_id: Any, tool: str = "create_booking", arguments: Any = None, **extra: Any):
    """A tools/call request as JSON (`rpc_id` ... leaves the id out: a notification)."""
    body = {"jsonrpc": "2.0", "method": "tools/call",
            "params": {"name": tool, "arguments": BOOK if arguments is None else arguments}}
    if rpc_id is not ...:
        body["id"] = rpc_id
    return {**body, **extra}


async def ping(h, rpc_id: str) -> None:
    """A round trip: every line the client sent before it has been handled by the proxy."""
    await h.raw_request(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "ping"}).encode(),
                        rpc_id)
