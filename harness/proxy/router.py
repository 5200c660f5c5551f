"""The proxy core: routes JSON-RPC lines between agent and upstream, judging tool calls.

Only `tools/list` and `tools/call` (and their answers) are parsed for meaning; every other
message passes through unchanged in both directions (X9): resources, prompts, logging,
progress, cancellation, pings and server-to-client requests such as sampling. A call goes
upstream as the very line the agent sent, and the upstream's answer comes back as the very line
it sent, unless a fault replaces it (X3, X4).

Every message that could execute a write is judged or not forwarded (X10): the elements of a
JSON-RPC batch go the same way as lone messages (and their answers go back as one batch); a
`tools/call` without an id, with a null id, or with an id that a request in flight already
uses is refused, and so is a line that is not JSON the proxy can read.

`Proxy` routes; four collaborators each do one job and are handed only what they need: call
delivery (a tool call's way, calls.py), the task book (X12, tasks.py), the listing (the proxy's
own tool list, listing.py) and the refusals (refusals.py). What they and the router share is
the session's book of requests in flight (flight.py).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from harness.base import jsonutil
from harness.base.errors import ReportFileError, UpstreamError
from harness.proxy.args import ProxyConfig
from harness.proxy.batch import BatchReply, Reply
from harness.proxy.calls import CallDelivery
from harness.proxy.flight import Flight
from harness.proxy.listing import Listing
from harness.proxy.messages import (
    Batch,
    Message,
    Unreadable,
    UnreadableAnswer,
    UpstreamGone,
    error_body,
    id_key,
    parse_line,
    usable_id,
)
from harness.proxy.order import Order, Turn
from harness.proxy.refusals import INVALID_REQUEST, Refusals, not_recorded
from harness.proxy.revision import ClientRevision
from harness.proxy.tasks import TASK_METHODS, TaskBook
from harness.session import CURRENT_BATCH, BatchHold, Session
from harness.wire.transport import LineReader, LineWriter, MessageTooLarge, StreamClosed

# X6: after a signal, answers that arrive this long still count.
DRAIN_SECONDS = 2.0

# X16: at most this many tool calls open at once (not counting cancelled ones). A model turn
# asks for a handful of calls in parallel, so 64 leaves an order of magnitude of room while a
# pipelining agent (stdin from a file: every request at once) keeps only 64 calls' tasks,
# parsed messages and tickets alive instead of one per request of the whole file. A fast
# upstream is kept busy: 64 calls queued at it hide any round trip.
MAX_CALLS_IN_FLIGHT = 64
# X16: what the client sent behind a call that waits for room, held in order (parsed), at most
# this many messages and bytes; past that the client is not read until there is room (V11).
BACKLOG_MESSAGES = 256
BACKLOG_BYTES = 4 * 1024 * 1024

Incoming = Message | Batch | Unreadable | None


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
        wait_at_eof: bool = True,
    ) -> None:
        self.config = config
        self.session = session
        self.client_in, self.client_out = client_in, client_out
        self.upstream_in, self.upstream_out = upstream_in, upstream_out
        self.write_report = write_report
        self.log = log
        self.describe_upstream_exit = describe_upstream_exit
        self.wait_at_eof = wait_at_eof  # False where an EOF leaves no way to answer (HTTP)
        self.revision = ClientRevision()
        self.flight = flight = Flight()  # shared with the concerns below
        self._order = Order()  # X9: upstream messages reach the client in the order sent
        self._to_upstream_order = Order()  # X9: and the client's reach the upstream so
        self._initialize_key: tuple[str, Any] | None = None
        self._spawned: set[asyncio.Task[None]] = set()  # ended with the session
        # X16: the client's messages waiting behind the cap on calls in flight, in order
        self._backlog: deque[tuple[Incoming, bytes]] = deque()
        self._backlog_bytes = 0
        self._backlog_changed = asyncio.Event()  # an item came or went, or the client's EOF
        self._client_done = False
        self.initialized = asyncio.Event()
        self.end_reason = "client closed the connection"
        self.fatal: BaseException | None = None
        self._report_pending: asyncio.Future[None] | None = None  # `_report_current`'s write
        self._stop = asyncio.Event()
        # The concerns, each handed what it needs.
        self.refusals = Refusals(session, log)
        self.listing = Listing(
            session,
            log,
            ask=self._ask_upstream,
            spawn=self._spawn,
            report=self._report,
            fail=self._fail,
            timeout_s=config.upstream_timeout_s,
            key_fields=config.classifier.key_fields,
            audit_tools=config.audit_tools,
        )
        self.tasks = TaskBook(
            session,
            self.revision,
            new_id=flight.own_id,
            ask=self._ask_upstream,
            spawn=self._spawn,
            report=self._report,
        )
        self.calls = CallDelivery(
            session,
            flight,
            self.revision,
            log,
            refusals=self.refusals,
            tasks=self.tasks,
            listing=self.listing,
            spawn=self._spawn,
            report=self._report,
            report_current=self._report_current,
            to_upstream=self._to_upstream,
            upstream_order=self._to_upstream_order,
            idle=self._stop_when_idle,
            settles_receipts=getattr(client_out, "settles_receipts", False),
            timeout_s=config.upstream_timeout_s,
            audit_tools=config.audit_tools,
        )

    # What the integration tests look at inside a running router, by the names they use.
    @property
    def _pending(self) -> dict[tuple[str, Any], asyncio.Future[Message]]:
        return self.flight.pending

    @property
    def _abandoned(self) -> dict[tuple[str, Any], Any]:
        return self.flight.abandoned

    @property
    def _tools_ready(self) -> asyncio.Event:
        return self.listing.ready

    @property
    def unrecordable(self) -> ReportFileError | None:
        """The event log cannot be written (`cannot_record`)."""
        return self.flight.unrecordable

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
            for task in list(self._spawned):
                task.cancel()
            await asyncio.gather(client, upstream, stop, *self._spawned, return_exceptions=True)
        if self.fatal is not None:
            raise self.fatal
        return self.end_reason

    def stop(self, reason: str) -> None:
        """End the session: what is in flight is drained first (X6)."""
        self.end_reason = reason
        self._stop.set()

    def _fail(self, exc: BaseException) -> None:
        """End the session at once: `run()` raises `exc`."""
        self.fatal = exc
        self._stop.set()

    def cannot_record(self, exc: ReportFileError) -> None:
        """The event log cannot be written: no new request is forwarded (each is answered with
        an error); what is in flight gets the upstream's answer; then the proxy stops. The
        caller says so once (`unrecordable_line`): over HTTP many lanes share one event log."""
        if self.flight.unrecordable is not None:
            return
        self.flight.unrecordable = exc
        self._stop_when_idle()

    def _stop_when_idle(self) -> None:
        """After `cannot_record`: stop once no request the client is waiting for is in flight."""
        if self.flight.unrecordable is None:
            return
        calls, passed = self.flight.waited_for()
        if not calls and not passed:
            self.stop("the event log could not be written")

    async def _drain(self) -> None:
        """X6, X15: wait for the answers to what the client asked before it left.

        At the client's EOF every request in flight that it did not cancel is waited for until
        it is answered or the upstream exits; a call at most its own `--upstream-timeout`, a
        request passed through at most `--upstream-timeout` after the EOF (a client that closes
        its input may still read the answers: `proxy < requests`). After
        a signal, answers that arrive within DRAIN_SECONDS still count. A cancelled request is
        never waited for: its outcome stays unknown unless its answer has arrived.
        """
        self.tasks.settle_open()  # X12: a task nobody asked about is asked now
        flight = self.flight
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.upstream_timeout_s
        while self.wait_at_eof and not self._stop.is_set() and flight.upstream_gone is None:
            # A call ends by itself (answer, --upstream-timeout, upstream gone); a request only
            # passed through has no timeout of its own, so the deadline bounds it.
            calls, passed = flight.waited_for()
            remaining = deadline - loop.time()
            if not calls and not (passed and remaining > 0):
                break
            flight.settled.clear()
            waits = {asyncio.ensure_future(e.wait()) for e in (flight.settled, self._stop)}
            await asyncio.wait(
                waits, timeout=None if calls else remaining, return_when=asyncio.FIRST_COMPLETED
            )
            for waiting in waits:
                waiting.cancel()
        # Every task still running counts (a call's, or the X12 fetch of a task's result), but
        # not the handling of a call the client cancelled.
        tasks = flight.call_tasks
        cancelled = {tasks[k] for k in flight.cancelled if k in tasks}
        calls = [t for t in self._spawned if t not in cancelled]
        if calls:
            await asyncio.wait(calls, timeout=DRAIN_SECONDS)

    def _report(self, status: str = "running") -> None:
        """O3: the report file is current; a write failure ends the proxy before any answer."""
        if self.write_report is None or self.fatal is not None:
            return
        # This write is current for the calls waiting in `_report_current` too.
        pending, self._report_pending = self._report_pending, None
        try:
            self.write_report(self.session.report_file_pieces(status))
        except BaseException as exc:
            if isinstance(exc, ReportFileError):
                self._fail(exc)
            if pending is not None:  # the waiting calls raise it too
                if isinstance(exc, Exception):
                    pending.set_exception(exc)
                else:
                    pending.cancel()
            raise
        if pending is not None:
            pending.set_result(None)

    async def _report_current(self) -> None:
        """O3: the report file is current before what the caller sends next (a call to the
        upstream, an answer to the agent); a write failure raises here, as `_report`'s.

        Issue 24: the calls that come here in the same turn of the event loop share one write,
        made at the start of the next turn, before any of them goes on: with 64 calls in
        flight the report is rendered and written once per batch of calls, not twice per call.
        Nothing is sent before the write that records it, so O3 holds for each of them."""
        if self.write_report is None or self.fatal is not None:
            return
        pending = self._report_pending
        if pending is None and len(self.flight.calls) <= 1:
            self._report()  # a lone call (N1): nothing to share the write with
            return
        if pending is None:
            loop = asyncio.get_running_loop()
            pending = self._report_pending = loop.create_future()
            loop.call_soon(self._write_pending_report)
        await asyncio.shield(pending)

    def _write_pending_report(self) -> None:
        pending = self._report_pending
        if pending is None:
            return  # a write since (`_report`) was current for its calls
        try:
            self._report()
        except Exception:  # `_report` handed it to the waiting calls: raised there
            return
        if self._report_pending is pending:  # `_report` returned early (already fatal)
            self._report_pending = None
            pending.set_result(None)

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        """`coro` in a task of its own, ended with the session."""
        task = asyncio.create_task(self._guard(coro))
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)
        return task

    async def _guard(self, coro: Awaitable[None]) -> None:
        try:
            await coro
        except ReportFileError:
            pass  # already recorded as fatal; run() re-raises it
        except StreamClosed:
            self.stop("client closed the connection")

    # -- client -> upstream ----------------------------------------------------------------

    async def _client_loop(self) -> None:
        """X16: read the client while at most MAX_CALLS_IN_FLIGHT calls are open.

        A message that would start a call past the cap waits in the backlog, and so does
        everything the client sent after it (X9: its messages reach the upstream in order).
        Reading goes on meanwhile, so what lets a call end is never held back by it: an answer
        to the upstream's own request and a cancellation of an open request go through at
        once. Only when the backlog is full too is the client not read (V11's backpressure).
        """
        reading = asyncio.create_task(self._read_client())
        try:
            await self._work_backlog()
        finally:
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
        failed = None if reading.cancelled() else reading.exception()
        if failed is not None:
            raise failed

    async def _read_client(self) -> None:
        try:
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
                parsed = parse_line(line)
                if not self._backlog and (self._room_for_call() or not _starts_calls(parsed)):
                    await self._dispatch(parsed, line)
                elif self._goes_past(parsed):
                    await self._dispatch(parsed, line)
                else:
                    self._backlog.append((parsed, line))
                    self._backlog_bytes += len(line)
                    self._backlog_changed.set()
                    while (
                        len(self._backlog) >= BACKLOG_MESSAGES
                        or self._backlog_bytes >= BACKLOG_BYTES
                    ):
                        self._backlog_changed.clear()
                        await self._backlog_changed.wait()
        finally:
            self._client_done = True
            self._backlog_changed.set()

    async def _work_backlog(self) -> None:
        """Start what waits in the backlog, in order, as calls end; return after the EOF."""
        while True:
            if not self._backlog:
                if self._client_done:
                    return
                self._backlog_changed.clear()
                await self._backlog_changed.wait()
                continue
            parsed, line = self._backlog[0]
            while _starts_calls(parsed) and not self._room_for_call():
                self.flight.call_ended.clear()
                await self.flight.call_ended.wait()
            try:
                await self._dispatch(parsed, line)
            finally:  # taken off only now: the reader keeps behind it what came after it
                self._backlog.popleft()
                self._backlog_bytes -= len(line)
                self._backlog_changed.set()

    def _room_for_call(self) -> bool:
        """X16: fewer than MAX_CALLS_IN_FLIGHT calls open (a cancelled one does not count)."""
        tasks = self.flight.call_tasks
        if len(tasks) < MAX_CALLS_IN_FLIGHT:
            return True
        return sum(k not in self.flight.cancelled for k in tasks) < MAX_CALLS_IN_FLIGHT

    def _goes_past(self, parsed: Incoming) -> bool:
        """X16, X15: what may pass the backlog: an answer to the upstream's request (or another
        JSON value that is no message) and a cancellation of a request already open."""
        if parsed is None:
            return True
        if not isinstance(parsed, Message):
            return False
        method = parsed.get("method")
        if method is None:
            return True
        if method != "notifications/cancelled" or parsed.has("id"):
            return False
        params = parsed.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if not usable_id(request_id):
            return False
        key = id_key(request_id)
        return key in self.flight.call_tasks or key in self.flight.forwarded

    async def _dispatch(self, parsed: Incoming, line: bytes) -> None:
        if isinstance(parsed, Batch):
            await self._batch(parsed)
        elif isinstance(parsed, Unreadable):
            await self.refusals.unreadable(parsed, self._to_client)
        elif parsed is None or parsed.get("method") is None:
            await self._to_upstream(line)  # responses to server requests, other JSON values
        else:
            await self._from_client(parsed, self._to_client)

    async def _batch(self, batch: Batch) -> None:
        """X10: each element goes the way a lone message goes; the answers return as a batch."""
        elements = [parse_line(element) for element in batch.elements]
        if not any(isinstance(e, Message) and e.get("method") is not None for e in elements):
            await self._to_upstream(batch.line)  # nothing in it can execute anything
            return
        hold = BatchHold()  # J11: the elements' answers count as given when the batch goes

        async def send(line: bytes) -> None:
            self.session.batch_sent(hold)
            self._report()
            await self.calls.deliver_answer(self._to_client, line, [s for s, _, _ in hold.held])

        collector = BatchReply(send)
        taking_apart = CURRENT_BATCH.set(hold)
        try:
            for element, parsed in zip(batch.elements, elements, strict=True):
                if isinstance(parsed, Message) and parsed.get("method") is None:
                    await self._to_upstream(element)  # a response to a server request
                elif isinstance(parsed, Message):
                    if self._will_answer(parsed):
                        collector.expect()
                    await self._from_client(parsed, collector.add)
                else:  # JSON-RPC: an element that is not a message gets an Invalid Request error
                    collector.expect()
                    await collector.add(
                        error_body(None, INVALID_REQUEST, "Invalid Request: not a JSON-RPC message")
                    )
        finally:
            CURRENT_BATCH.reset(taking_apart)
        await collector.seal()

    @staticmethod
    def _will_answer(message: Message) -> bool:
        """Whether a request gets an answer through its reply (a batch counts on it)."""
        rpc_id = message.get("id")
        if message.get("method") == "tools/call":
            return message.has("id")  # a null id gets its refusal
        return rpc_id is not None

    async def _from_client(self, message: Message, reply: Reply) -> None:
        """One request or notification of the client (alone or from a batch)."""
        method = message.get("method")
        new_revision = self.revision.observe(message.get("params"))
        flight = self.flight
        if message.get("id") is not None and not usable_id(message.get("id")):
            await self.refusals.bad_id(message, reply)
            return
        if flight.unrecordable is not None and message.get("id") is not None:
            await reply(not_recorded(message.get("id"), flight.unrecordable))
            return
        if method == "tools/call":
            await self.calls.start(message, reply)
            return
        if method == "notifications/cancelled":
            self._note_cancelled(message.get("params"))
        rpc_id = message.get("id")
        if rpc_id is not None:
            key = id_key(rpc_id)
            if flight.id_in_use(key):
                await self.refusals.duplicate_id(message, rpc_id, reply)
                return
            if method in TASK_METHODS and await self.tasks.request(message, rpc_id, reply):
                return  # X12: a task the proxy made up answers here
            if flight.upstream_gone is not None:
                detail = flight.upstream_gone.detail
                await reply(error_body(rpc_id, -32000, f"UPSTREAM_UNAVAILABLE: {detail}"))
                return
            flight.forwarded[key] = (rpc_id, reply)
            if method == "initialize":
                self._initialize_key = key
                self.revision.initialize_seen()
            if method == "tools/list":
                self.listing.client_asks(key, message.get("params"))
        await self._pass_upstream(message.line)
        if method == "notifications/initialized":
            self.listing.start()
        elif new_revision:
            self.listing.start(again=True)  # X11: a stateless client has no handshake

    def _note_cancelled(self, params: Any) -> None:
        """X15: a request the client cancelled is not waited for at shutdown."""
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if usable_id(request_id):
            flight = self.flight
            key = id_key(request_id)
            if key in flight.call_tasks or key in flight.forwarded:
                flight.cancelled.add(key)
                flight.settled.set()
                flight.call_ended.set()  # X16: a cancelled call leaves room for another
            held = flight.holding.get(key)
            if held is not None:
                held.set()  # F9: the hold of an answer the client gave up on ends now

    async def _pass_upstream(self, line: bytes) -> None:
        """X9: a client request or notification goes upstream now, or after the calls the
        client sent before it (still waiting for the tool list) went. Answers to the
        upstream's own requests never wait: the upstream may need one to go on."""
        await self._in_order(self._to_upstream_order, self._to_upstream, line)

    async def _to_upstream(self, line: bytes) -> None:
        if self.flight.upstream_gone is not None:
            return
        try:
            await self.upstream_out.write_line(line)
        except StreamClosed:
            self._upstream_lost(UpstreamGone("crash", self.describe_upstream_exit()))

    async def _to_client(self, line: bytes) -> None:
        await self.client_out.write_line(line)

    async def _ask_upstream(self, method: str, params: dict[str, Any]) -> Message:
        """A request of the proxy's own, in the client's protocol revision (X11)."""
        rpc_id = self.flight.own_id("agent-harness-")
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self.flight.pending[id_key(rpc_id)] = future
        body = {
            "jsonrpc": "2.0",
            "id": rpc_id,
            "method": method,
            "params": self.revision.own_params(params),
        }
        await self._to_upstream(jsonutil.dumps(body).encode())
        return await asyncio.wait_for(future, self.config.upstream_timeout_s)

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
            try:
                await self._from_upstream(line)
            except StreamClosed:
                self.stop("client closed the connection")
                return
        self._upstream_lost(gone)

    async def _from_upstream(self, line: bytes) -> None:
        flight = self.flight
        parsed = parse_line(line)
        if isinstance(parsed, Batch):
            # The proxy never sends the upstream a batch (X10 splits the client's), so a batch
            # from it is an older server's way of answering: each element goes its own way.
            for element in parsed.elements:
                await self._from_upstream(element)
            return
        if isinstance(parsed, Unreadable) and parsed.rpc_id is not None:
            key = id_key(parsed.rpc_id)
            if key in flight.abandoned:  # E5: a late answer, unreadable: recorded, not sent
                self.calls.late(key, None, f"its answer could not be read ({parsed.reason})")
                return
            future = flight.pending.pop(key, None)
            if future is not None:  # one error answer for it, never the raw bytes as well
                if not future.done():
                    self._take_turn(key)
                    detail = f"its answer could not be read ({parsed.reason})"
                    future.set_exception(UnreadableAnswer(detail))
                return
        message = parsed if isinstance(parsed, Message) else None
        if message is not None and message.get("method") is None and message.has("id"):
            key = id_key(message.get("id"))
            future = flight.pending.pop(key, None)
            self.tasks.answered(key, message)  # X12: a task at once, before its status arrives
            if future is not None:
                if not future.done():
                    self._take_turn(key)
                    future.set_result(message)
                return
            if key in flight.abandoned:
                self.calls.late(key, message)  # E5: recorded; the agent already had its timeout
                return
            _, reply = flight.forwarded.pop(key, (None, self._to_client))
            flight.cancelled.discard(key)
            flight.settled.set()
            self._stop_when_idle()
            if key == self._initialize_key or self.revision.stateless:
                result = message.get("result")
                info = result.get("serverInfo") if isinstance(result, dict) else None
                if isinstance(info, dict):  # Z7: the server names itself: its profile
                    self.session.server_named(info.get("name"), info.get("version"))
                self.initialized.set()
            asked = self.tasks.asked_about(key)
            if asked is not None:  # X12: may need the task's result first: not in this loop
                turn = self._order.turn()
                self._spawn_in(turn, self.tasks.answer(*asked, message, turn.wrap(reply)))
                return
            await self._deliver(reply, self.listing.client_answer(key, message, line))
            return
        if self.calls.after_its_call(line, message):
            return  # E5: for a call already answered with a timeout
        if message is not None and message.get("method") == "notifications/tasks/status":
            turn = self._order.turn()
            self._spawn_in(turn, self.tasks.status(message, turn.wrap(self._to_client)))
            return
        if message is not None and message.get("method") == "notifications/tools/list_changed":
            self.listing.changed()
        await self._deliver(self._to_client, line)

    def _take_turn(self, key: tuple[str, Any]) -> None:
        """X9: the answer to a judged call goes out in its place among the upstream's messages."""
        if key in self.flight.calls:
            self.flight.turns[key] = self._order.turn()

    def _spawn_in(self, turn: Turn, coro: Awaitable[None]) -> None:
        """Run `coro` in a task of its own; its turn ends with it, whether it sent or not."""

        async def in_turn() -> None:
            try:
                await coro
            finally:
                turn.release()

        self._spawn(in_turn())

    async def _deliver(self, reply: Reply, line: bytes) -> None:
        """X9: send an upstream message now, or after the ones before it still on their way."""
        await self._in_order(self._order, reply, line)

    async def _in_order(self, order: Order, send: Reply, line: bytes) -> None:
        """`send(line)` now when nothing before it in `order` is still on its way, else in a
        task of its own that waits its turn (the common case costs no task)."""
        if order.clear():
            await send(line)
            return
        await order.room(self.config.upstream_timeout_s)  # V11: a slow client holds us back
        turn = order.turn()
        order.hold(len(line))

        async def in_its_turn() -> None:
            try:
                await turn.wrap(send)(line)
            finally:
                order.release(len(line))

        self._spawn_in(turn, in_its_turn())

    def _upstream_lost(self, gone: UpstreamGone) -> None:
        flight = self.flight
        if flight.upstream_gone is not None:
            return
        flight.upstream_gone = gone
        self.log(f"ERROR: upstream unavailable: {gone.detail}")
        for future in flight.pending.values():
            if not future.done():
                future.set_exception(gone)
        flight.pending.clear()
        self.listing.ready.set()  # calls waiting for the list go on, to be answered
        if not self.initialized.is_set():
            self._fail(UpstreamError(f"the upstream did not start: {gone.detail}"))
            return
        waiting = list(flight.forwarded.values())
        flight.forwarded.clear()
        flight.settled.set()
        self._stop_when_idle()
        for rpc_id, reply in waiting:  # requests passed through that will now never be answered
            body = error_body(rpc_id, -32000, f"UPSTREAM_UNAVAILABLE: {gone.detail}")
            self._spawn(reply(body))


def _starts_calls(parsed: Incoming) -> bool:
    """X16: a message that may start a judged call (a batch may hold some)."""
    if isinstance(parsed, Batch):
        return True
    return isinstance(parsed, Message) and parsed.get("method") == "tools/call"
