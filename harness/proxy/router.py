"""The proxy core: routes JSON-RPC lines between agent and upstream, judging tool calls.

Only `tools/list` and `tools/call` (and their answers) are parsed for meaning; every other
message passes through unchanged in both directions (X9): resources, prompts, logging,
progress, cancellation, pings and server-to-client requests such as sampling. A call goes
upstream as the very line the agent sent, and the upstream's answer comes back as the very line
it sent, unless a fault replaces it (X3, X4).
"""

from __future__ import annotations

import asyncio
import gc
import secrets
from collections.abc import Callable
from typing import Any

from harness import jsonutil
from harness.errors import ConfigError, ReportFileError, UpstreamError
from harness.proxy.args import ProxyConfig
from harness.proxy.audit import AUDIT_TOOLS, answer_audit_call
from harness.proxy.jsonscan import top_level
from harness.proxy.messages import Message, UpstreamGone, error_result, id_key, parse_message
from harness.session import Session, Ticket
from harness.tools import startup_lines
from harness.transport import LineReader, LineWriter, MessageTooLarge, StreamClosed

GC_EVERY_CALLS = 1000
# X6: answers that arrive this long after the client left still count.
DRAIN_SECONDS = 2.0


class Proxy:
    """One proxy session between a client line stream and an upstream line stream."""

    def __init__(
        self,
        config: ProxyConfig,
        session: Session,
        client_in: LineReader,
        client_out: LineWriter,
        upstream_in: LineReader,
        upstream_out: LineWriter,
        *,
        write_report: Callable[[list[tuple[Any, bytes]]], None] | None = None,
        log: Callable[[str], None] = lambda line: None,
        describe_upstream_exit: Callable[[], str] = lambda: "the upstream closed its output",
    ) -> None:
        self.config = config
        self.session = session
        self.client_in, self.client_out = client_in, client_out
        self.upstream_in, self.upstream_out = upstream_in, upstream_out
        self.write_report = write_report
        self.log = log
        self.describe_upstream_exit = describe_upstream_exit
        self._token = secrets.token_hex(4)
        self._own_ids = 0
        self._pending: dict[tuple[str, Any], asyncio.Future[Message]] = {}
        self._list_pages: dict[tuple[str, Any], bool] = {}  # client tools/list: first page?
        self._abandoned: set[tuple[str, Any]] = set()
        self._forwarded: dict[tuple[str, Any], Any] = {}  # client requests passed through as-is
        self._initialize_key: tuple[str, Any] | None = None
        self._calls: set[asyncio.Task[None]] = set()
        self._tools_ready = asyncio.Event()
        self._listing_started = False
        self.initialized = asyncio.Event()
        self.upstream_gone: UpstreamGone | None = None
        self.end_reason = "client closed the connection"
        self.fatal: BaseException | None = None
        self._stop = asyncio.Event()

    # -- lifecycle ------------------------------------------------------------------------

    async def run(self) -> str:
        """Serve until the client leaves or `stop()` is called; return why it ended."""
        self._report("running")
        client = asyncio.create_task(self._client_loop())
        upstream = asyncio.create_task(self._upstream_loop())
        stop = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait({client, stop}, return_when=asyncio.FIRST_COMPLETED)
            if self.fatal is None:
                await self._drain()
        finally:
            for task in (client, stop):
                task.cancel()
            if self.fatal is None:
                self.session.end(self.end_reason)
                self._report("finished")
            upstream.cancel()
            for task in list(self._calls):
                task.cancel()
            await asyncio.gather(client, upstream, stop, *self._calls, return_exceptions=True)
        if self.fatal is not None:
            raise self.fatal
        return self.end_reason

    def stop(self, reason: str) -> None:
        self.end_reason = reason
        self._stop.set()

    async def _drain(self) -> None:
        """X6: give calls still at the upstream a moment to be answered and counted."""
        if self._calls:
            await asyncio.wait(set(self._calls), timeout=DRAIN_SECONDS)

    def _report(self, status: str) -> None:
        """O3: the report file is current; a write failure ends the proxy before any answer."""
        if self.write_report is None or self.fatal is not None:
            return
        try:
            self.write_report(self.session.report_file_pieces(status))
        except ReportFileError as exc:
            self.fatal = exc
            self._stop.set()
            raise

    # -- client -> upstream ----------------------------------------------------------------

    async def _client_loop(self) -> None:
        while True:
            try:
                line = await self.client_in.read_line()
            except MessageTooLarge as exc:
                self.end_reason = f"a message from the client was too large ({exc})"
                self.log(f"ERROR: {self.end_reason}; ending the session")
                return
            if line is None:
                return
            if not line.strip():
                continue
            message = parse_message(line)
            if message is None or message.get("method") is None:
                await self._to_upstream(line)  # responses to server requests, or not JSON at all
                continue
            method = message.get("method")
            rpc_id = message.get("id")
            if method == "tools/call" and rpc_id is not None:
                task = asyncio.create_task(self._guard(self._handle_call(message, rpc_id)))
                self._calls.add(task)
                task.add_done_callback(self._calls.discard)
                continue
            if rpc_id is not None:
                if self.upstream_gone is not None:
                    await self._reply_error(
                        rpc_id, f"UPSTREAM_UNAVAILABLE: {self.upstream_gone.detail}"
                    )
                    continue
                key = id_key(rpc_id)
                self._forwarded[key] = rpc_id
                if method == "initialize":
                    self._initialize_key = key
                if method == "tools/list":
                    params = message.get("params")
                    self._list_pages[key] = not (isinstance(params, dict) and params.get("cursor"))
            await self._to_upstream(line)
            if method == "notifications/initialized":
                self._start_listing()

    async def _guard(self, coro: Any) -> None:
        try:
            await coro
        except ReportFileError:
            pass  # already recorded as fatal; run() re-raises it
        except StreamClosed:
            self.stop("client closed the connection")

    async def _to_upstream(self, line: bytes) -> None:
        if self.upstream_gone is not None:
            return
        try:
            await self.upstream_out.write_line(line)
        except StreamClosed:
            self._upstream_lost(UpstreamGone("crash", self.describe_upstream_exit()))

    async def _to_client(self, line: bytes) -> None:
        await self.client_out.write_line(line)

    # -- upstream -> client ----------------------------------------------------------------

    async def _upstream_loop(self) -> None:
        gone: UpstreamGone
        while True:
            try:
                line = await self.upstream_in.read_line()
            except MessageTooLarge as exc:
                gone = UpstreamGone("oversized", f"the upstream sent a message too large ({exc})")
                break
            if line is None:
                gone = UpstreamGone("crash", self.describe_upstream_exit())
                break
            if not line.strip():
                continue
            message = parse_message(line)
            if (
                message is not None
                and message.get("method") is None
                and "id" in (message.data or message.raw or {})
            ):
                key = id_key(message.get("id"))
                future = self._pending.pop(key, None)
                if future is not None:
                    if not future.done():
                        future.set_result(message)
                    continue
                if key in self._abandoned:
                    self._abandoned.discard(key)
                    continue  # a late answer to a call already answered with a timeout
                self._forwarded.pop(key, None)
                if key == self._initialize_key:
                    self.initialized.set()
                if self._list_pages.pop(key, None) and self.config.audit_tools:
                    line = self._with_audit_tools(message) or line
            elif (
                message is not None and message.get("method") == "notifications/tools/list_changed"
            ):
                self._tools_ready.clear()
                self._listing_started = False
                self._start_listing()
            try:
                await self._to_client(line)
            except StreamClosed:
                self.stop("client closed the connection")
                return
        self._upstream_lost(gone)

    def _upstream_lost(self, gone: UpstreamGone) -> None:
        if self.upstream_gone is not None:
            return
        self.upstream_gone = gone
        self.log(f"ERROR: upstream unavailable: {gone.detail}")
        for future in self._pending.values():
            if not future.done():
                future.set_exception(gone)
        self._pending.clear()
        self._tools_ready.set()
        if not self.initialized.is_set():
            self.fatal = UpstreamError(f"the upstream did not start: {gone.detail}")
            self._stop.set()
            return
        waiting, self._forwarded = list(self._forwarded.values()), {}
        for rpc_id in waiting:  # requests passed through that will now never be answered
            task = asyncio.create_task(
                self._guard(self._reply_error(rpc_id, f"UPSTREAM_UNAVAILABLE: {gone.detail}"))
            )
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)

    def _with_audit_tools(self, message: Message) -> bytes | None:
        data = message.data
        result = data.get("result") if data else None
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return None
        result["tools"] = [*result["tools"], *AUDIT_TOOLS]
        return jsonutil.dumps(data).encode()

    # -- the proxy's own listing (C7) --------------------------------------------------------

    def _start_listing(self) -> None:
        if not self._listing_started:
            self._listing_started = True
            task = asyncio.create_task(self._guard(self._list_tools()))
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)

    async def _request(self, method: str, params: dict[str, Any]) -> Message:
        self._own_ids += 1
        rpc_id = f"agent-harness-{self._token}-{self._own_ids}"
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[id_key(rpc_id)] = future
        body = {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}
        await self._to_upstream(jsonutil.dumps(body).encode())
        return await asyncio.wait_for(future, self.config.upstream_timeout_s)

    async def _list_tools(self) -> None:
        """Every page of the upstream's tool list, classified (C1-C7) and printed."""
        tools: list[dict[str, Any]] = []
        cursor: Any = None
        try:
            while True:
                answer = await self._request("tools/list", {"cursor": cursor} if cursor else {})
                result = answer.get("result")
                if not isinstance(result, dict):
                    self.log(f"WARNING: the upstream's tools/list failed: {answer.get('error')}")
                    break
                tools += [t for t in result.get("tools", []) if isinstance(t, dict)]
                cursor = result.get("nextCursor")
                if not cursor:
                    break
        except (UpstreamGone, TimeoutError) as exc:
            self.log(f"WARNING: could not list the upstream's tools: {exc}")
        try:
            classification = self.session.tools_listed(tools)
        except ConfigError as exc:
            self.fatal = exc
            self._stop.set()
            return
        for line in startup_lines(classification, self.config.classifier.key_fields):
            self.log(line)
        self._tools_ready.set()
        self._report("running")

    # -- tools/call ---------------------------------------------------------------------------

    async def _handle_call(self, message: Message, rpc_id: Any) -> None:
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        name = params.get("name") if message.data is not None else None
        arguments = params.get("arguments") if message.data is not None else None
        raw_arguments = None
        if message.data is None:  # too deep to parse: take what the scanner can tell
            inner = top_level(message.raw.get("params", "{}")) if message.raw else {}
            name = jsonutil.loads(inner["name"]) if "name" in inner else None
            raw_arguments = inner.get("arguments", "null")
        if not isinstance(name, str):
            await self._to_upstream(message.line)  # malformed: let the upstream answer it
            return
        if self.config.audit_tools and name in {t["name"] for t in AUDIT_TOOLS}:
            await self._reply(rpc_id, answer_audit_call(name, arguments, self.session))
            return
        self._start_listing()  # a client that skipped notifications/initialized
        try:
            await asyncio.wait_for(self._tools_ready.wait(), self.config.upstream_timeout_s)
        except TimeoutError:
            self.log("WARNING: the upstream's tool list is late; judging this call unlisted")
        ticket = self.session.begin_call(
            name, arguments, rpc_id=rpc_id, raw_arguments=raw_arguments
        )
        if ticket.seq % GC_EVERY_CALLS == 0:
            # The judge's state only grows and is never garbage: once collected, move it out of
            # the collector's sight, so a long session does not pay for rescanning it.
            gc.collect()
            gc.freeze()
        if not ticket.goes_upstream:
            await self._injected_answer(ticket, rpc_id, ticket.injected)
            return
        if self.upstream_gone is not None:
            self.session.upstream_failed(ticket, "unavailable", error=self.upstream_gone.detail)
            await self._answer(
                ticket,
                rpc_id,
                error_result(f"UPSTREAM_UNAVAILABLE: {self.upstream_gone.detail}"),
                source="harness",
            )
            return
        self._report("running")  # O3: current before the call goes upstream
        key = id_key(rpc_id)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        await self._to_upstream(message.line)
        try:
            reply = await asyncio.wait_for(future, self.config.upstream_timeout_s)
        except TimeoutError:
            self._pending.pop(key, None)
            self._abandoned.add(key)
            self.session.upstream_failed(ticket, "timeout")
            text = f"The upstream did not answer within {self.config.upstream_timeout_s:g} s."
            await self._answer(ticket, rpc_id, error_result(text), source="harness")
            return
        except UpstreamGone as gone:
            self.session.upstream_failed(ticket, gone.status, error=gone.detail)
            await self._answer(
                ticket,
                rpc_id,
                error_result(f"UPSTREAM_UNAVAILABLE: {gone.detail}"),
                source="harness",
            )
            return
        result = reply.get("result")
        if isinstance(result, dict):
            replaced = self.session.upstream_result(ticket, result)
            if replaced is not None:
                await self._injected_answer(ticket, rpc_id, replaced)
                return
            self.session.answered(ticket, is_error=result.get("isError") is True)
            self._report("running")
            await self._to_client(reply.line)  # X3: the upstream's answer exactly as sent
            return
        error = reply.get("error")
        self.session.upstream_failed(ticket, "error", error=error)
        detail = error.get("message") if isinstance(error, dict) else error
        code = error.get("code") if isinstance(error, dict) else None
        # X4: a protocol error reaches the agent as a tool result with isError.
        await self._answer(
            ticket, rpc_id, error_result(f"Upstream error {code}: {detail}"), source="upstream"
        )

    async def _injected_answer(self, ticket: Ticket, rpc_id: Any, answer: dict[str, Any]) -> None:
        delay = self.session.plan_config.fault_delay_ms
        if delay:
            await asyncio.sleep(delay / 1000)  # S11: imitate a real timeout
        await self._answer(ticket, rpc_id, answer, source="fault")

    async def _answer(
        self, ticket: Ticket, rpc_id: Any, result: dict[str, Any], source: str
    ) -> None:
        self.session.answered(ticket, is_error=result.get("isError") is True, source=source)
        self._report("running")
        await self._reply(rpc_id, result)

    async def _reply_error(self, rpc_id: Any, message: str) -> None:
        body = {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32000, "message": message}}
        await self._to_client(jsonutil.dumps(body).encode())

    async def _reply(self, rpc_id: Any, result: dict[str, Any]) -> None:
        body = {"jsonrpc": "2.0", "id": rpc_id, "result": result}
        await self._to_client(jsonutil.dumps(body).encode())
