"""`tools/call` through the proxy: judged, maybe faulted, forwarded as the line it came as.

The router (harness.proxy.router) takes messages apart and routes them; call delivery follows
one tool call from its arrival to the answer the agent receives: where a fault changes what
the agent gets, or when, it is here.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Awaitable, Callable
from typing import Any

from harness.base import jsonutil
from harness.base.errors import ReportFileError
from harness.base.jsonscan import ScanError, top_level
from harness.faults import HttpFault
from harness.proxy.audit import AUDIT_TOOLS, answer_audit_call
from harness.proxy.batch import Reply
from harness.proxy.flight import Flight, Key, Spawn
from harness.proxy.listing import Listing
from harness.proxy.messages import (
    Message,
    UnreadableAnswer,
    UpstreamGone,
    error_body,
    error_result,
    id_key,
    usable_id,
)
from harness.proxy.order import InTurn, Order, Turn
from harness.proxy.refusals import Refusals, not_recorded
from harness.proxy.revision import ClientRevision
from harness.proxy.tasks import TaskBook, task_id_of
from harness.session import Session, Ticket
from harness.wire.http.lines import has_related, related_of, settle, tagged, with_receipt
from harness.wire.transport import StreamClosed

INVALID_PARAMS = -32602
CLOSED = "the agent's connection had closed"
GC_EVERY_CALLS = 1000
AUDIT_NAMES = frozenset(t["name"] for t in AUDIT_TOOLS)


class Begun:
    """S8: a call begins once the call that came before it has begun (not been sent)."""

    def __init__(self, before: asyncio.Future[None] | None) -> None:
        self.before = before  # the previous call's `future` (only it: no chain of calls)
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def may_begin(self) -> bool:
        """The call before has begun (or there was none)."""
        if self.before is None or self.before.done():
            self.before = None
            return True
        return False

    async def after_the_call_before(self) -> None:
        before = self.before
        if before is not None and not before.done():
            await asyncio.shield(before)
        self.before = None

    def done(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


class CallDelivery:
    """Every `tools/call` of one session, from its arrival to the answer the agent receives."""

    def __init__(
        self,
        session: Session,
        flight: Flight,
        revision: ClientRevision,
        log: Callable[[str], None],
        *,
        refusals: Refusals,
        tasks: TaskBook,
        listing: Listing,
        spawn: Spawn,
        report: Callable[[], None],
        report_current: Callable[[], Awaitable[None]],
        to_upstream: Reply,
        upstream_order: Order,
        idle: Callable[[], None],
        settles_receipts: bool,
        timeout_s: float,
        audit_tools: bool,
    ) -> None:
        self.session = session
        self.flight = flight
        self.revision = revision  # X11: the shape of the proxy's own answers
        self.log = log
        self.refusals = refusals
        self.tasks = tasks  # X12: a call that asked for a task
        self.listing = listing  # calls are judged once the tool list is in
        self._spawn = spawn
        self._report = report  # O3: the report file current now
        self._report_current = report_current  # O3: current before the next send (shared)
        self._to_upstream = to_upstream
        self._upstream_order = upstream_order  # X9: the client's messages reach it in order
        self._idle = idle  # after the event log failed: the proxy stops once nothing is open
        self._settles_receipts = settles_receipts  # E5: the agent's transport says if it got it
        self._timeout_s = timeout_s  # --upstream-timeout
        self._audit_tools = audit_tools
        self._last_begun: asyncio.Future[None] | None = None  # S8: the last call has begun
        # E5: progress tokens of calls answered with a timeout, messages of theirs not forwarded
        self._silenced: dict[Key, Key] = {}
        self._dropped: dict[Key, int] = {}

    async def start(self, message: Message, reply: Reply) -> None:
        """X10: a call is judged and forwarded, or refused; never forwarded unjudged."""
        if not message.has("id"):
            # A notification cannot be answered, so its outcome could never be judged.
            self.refusals.refused("no_id", "tools/call", message)
            return
        rpc_id = message.get("id")
        if rpc_id is None:
            self.refusals.refused("null_id", "tools/call", message)
            await reply(
                error_body(
                    None,
                    -32600,
                    "Invalid Request: a tools/call needs a string or number id; "
                    "agent-harness did not forward it",
                )
            )
            return
        key = id_key(rpc_id)
        if self.flight.id_in_use(key):
            await self.refusals.duplicate_id(message, rpc_id, reply)
            return
        self.flight.calls.add(key)  # at once: the next line may reuse the id
        # X9: while this call waits for the tool list, what the client sends after it waits
        # behind it (a cancellation never reaches the upstream before the call it cancels).
        turn = self._upstream_order.turn()
        # S8: calls begin (are numbered, judged, faulted) in the order they came: each waits
        # for the one before it to have begun (not to have been sent: issue 24, so that the
        # calls of one read share one report write, `_report_current`).
        begun = Begun(self._last_begun)
        self._last_begun = begun.future
        handling = self._handle_call(message, rpc_id, reply, turn, begun)
        self.flight.call_tasks[key] = self._spawn(handling)

    async def _handle_call(
        self, message: Message, rpc_id: Any, reply: Reply, turn: Turn, begun: Begun
    ) -> None:
        key = id_key(rpc_id)
        try:
            await self._judged_call(message, rpc_id, reply, turn, begun)
        finally:
            begun.done()
            turn.release()
            flight = self.flight
            flight.calls.discard(key)
            flight.call_tasks.pop(key, None)
            flight.cancelled.discard(key)
            flight.settled.set()
            flight.call_ended.set()  # X16: room for a call waiting in the backlog
            self._idle()

    async def _judged_call(
        self, message: Message, rpc_id: Any, reply: Reply, turn: Turn, begun: Begun
    ) -> None:
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
            self.refusals.refused("no_tool_name", "tools/call", message)
            await reply(
                error_body(
                    rpc_id,
                    INVALID_PARAMS,
                    "Invalid params: tools/call needs params.name as a "
                    "string; agent-harness did not forward it",
                )
            )
            return
        task = params.get("task") if message.data is not None else None
        task = task if isinstance(task, dict) else None  # X12: the client asked for a task
        if self._audit_tools and name in AUDIT_NAMES:
            answer = answer_audit_call(name, arguments, self.session)
            await reply(self.revision.own_answer(rpc_id, answer))
            return
        self.listing.start()  # a client that skipped notifications/initialized
        if not (self.listing.ready.is_set() and begun.may_begin()):  # else no wait, no timer
            try:
                async with asyncio.timeout(self._timeout_s):
                    await self.listing.ready.wait()
                    # S8, X9: calls begin (are numbered, judged, faulted) in the order they
                    # came; one that came as the list arrived must not overtake those that
                    # waited for it.
                    await begun.after_the_call_before()
            except TimeoutError:
                if not self.listing.ready.is_set():
                    self.log(
                        "WARNING: the upstream's tool list is late; judging this call unlisted"
                    )
        ticket = self.session.begin_call(
            name, arguments, rpc_id=rpc_id, raw_arguments=raw_arguments,
            sessionless=self.revision.version if self.revision.stateless else None,
        )  # fmt: skip
        begun.done()  # the next call may begin
        _freeze_now_and_then(ticket.seq)
        if not ticket.goes_upstream:
            turn.release()  # it never goes upstream: nothing behind it needs to wait
            await self._injected_answer(ticket, rpc_id, ticket.injected, reply, task)
            return
        # O3: current before the call goes upstream. First: the upstream may be lost while the
        # call waits for the shared write (no answer could come to it then).
        await self._report_current()
        flight = self.flight
        if flight.upstream_gone is not None:
            self.session.upstream_failed(ticket, "unavailable", error=flight.upstream_gone.detail)
            text = f"UPSTREAM_UNAVAILABLE: {flight.upstream_gone.detail}"
            await self._answer(ticket, rpc_id, error_result(text), "harness", reply, task)
            return
        if flight.unrecordable is not None:  # its CallReceived could not be written: not sent
            self.session.upstream_failed(ticket, "unavailable", error=str(flight.unrecordable))
            self.session.answered(ticket, is_error=True, source="harness")
            await self._give(ticket, reply, not_recorded(rpc_id, flight.unrecordable))
            return
        key = id_key(rpc_id)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        flight.pending[key] = future
        if task is not None:  # its task is tracked as its answer arrives, before any status
            self.tasks.expect(key, ticket)
        await turn.wrap(self._to_upstream)(message.line)
        answer: Message | UnreadableAnswer
        try:
            answer = await asyncio.wait_for(future, self._timeout_s)
        except TimeoutError:
            flight.pending.pop(key, None)
            self.tasks.forget(key)
            # E5: its answer may still come; it is recorded then (a task's answer is no outcome)
            self._abandon(key, ticket if task is None else None, params)
            self.session.upstream_failed(ticket, "timeout")
            text = f"The upstream did not answer within {self._timeout_s:g} s."
            await self._answer(ticket, rpc_id, error_result(text), "harness", reply, task)
            return
        except UpstreamGone as gone:
            self.session.upstream_failed(ticket, gone.status, error=gone.detail)
            text = f"UPSTREAM_UNAVAILABLE: {gone.detail}"
            await self._answer(ticket, rpc_id, error_result(text), "harness", reply, task)
            return
        except UnreadableAnswer as bad:
            answer = bad
        # X9: answered in its place among the upstream's messages (`turn` was its place in
        # the client's messages to the upstream).
        answer_turn = flight.turns.pop(key, None)
        in_order = reply if answer_turn is None else answer_turn.wrap(reply)
        try:
            if isinstance(answer, UnreadableAnswer):
                await self._unusable_answer(ticket, rpc_id, answer.detail, in_order, task)
            else:
                await self._upstream_answered(ticket, rpc_id, answer, in_order, task)
        finally:
            if answer_turn is not None:
                answer_turn.release()

    async def _upstream_answered(
        self,
        ticket: Ticket,
        rpc_id: Any,
        answer: Message,
        reply: Reply,
        task: dict[str, Any] | None,
    ) -> None:
        result = answer.get("result") if answer.data is not None else _shallow(answer, "result")
        if isinstance(result, dict):
            task_id = task_id_of(result.get("task")) if task is not None else None
            if self.tasks.tracks(task_id):  # X12: "task created" is no outcome; its result is
                await self.tasks.created_answer(task_id, answer, reply)
                return
            replaced = self.session.upstream_result(ticket, result)
            if replaced is not None:
                await self._injected_answer(ticket, rpc_id, replaced, reply, task)
                return
            if ticket.hold_ms and not await self._held(ticket, rpc_id, reply):
                # Cancelled while held: the client no longer takes the answer (not recorded as
                # one), but its stream is not left waiting for it (an HTTP agent's POST).
                await reply(answer.line)
                return
            self.session.answered(ticket, is_error=result.get("isError") is True)
            await self._report_current()
            await self._give(ticket, reply, answer.line)  # X3: the answer exactly as sent
            return
        error = answer.get("error")
        if getattr(answer.line, "stream_cut", False):
            # H3: no answer came (the HTTP upstream's stream closed without one); the error is
            # the proxy's own, not the upstream's (X13 does not apply): a stdio agent gets a
            # tool result, an HTTP agent's stream is cut the same way.
            self.session.upstream_failed(ticket, "error", error=error)
            detail = error.get("message") if isinstance(error, dict) else error
            code = error.get("code") if isinstance(error, dict) else None
            text = f"Upstream error {code}: {detail}"
            await self._answer(
                ticket, rpc_id, error_result(text), "upstream", _still_cut(reply), task
            )
            return
        if not answer.has("result") and _is_error_object(error):
            # X13: a JSON-RPC error reaches the agent as the upstream sent it (code, message,
            # data: e.g. -32042 with the elicitations a client needs); F1 does not apply to it.
            self.session.upstream_failed(ticket, "error", error=error)
            self.session.answered(ticket, is_error=True)
            await self._report_current()
            await self._give(ticket, reply, answer.line)
            return
        await self._unusable_answer(ticket, rpc_id, _unusable(answer), reply, task)

    async def _unusable_answer(
        self,
        ticket: Ticket,
        rpc_id: Any,
        detail: str,
        reply: Reply,
        task: dict[str, Any] | None = None,
    ) -> None:
        """An answer the proxy could not read: one error answer, the attempt unknown (A1)."""
        self.session.upstream_failed(ticket, "error", error={"message": detail})
        text = f"UPSTREAM_INVALID_ANSWER: {detail}; agent-harness did not forward it"
        await self._answer(ticket, rpc_id, error_result(text), "harness", reply, task)

    async def _held(self, ticket: Ticket, rpc_id: Any, reply: Reply) -> bool:
        """F9: the fault holds the upstream's real answer (`Fault.hold`); False when the client
        cancelled the call meanwhile (the hold ends at once)."""
        if isinstance(reply, InTurn):
            reply.release()  # the answers to later calls do not wait for the held one (X9)
        self._report()  # O3: the execution is on record while the answer waits
        key = id_key(rpc_id)
        if key in self.flight.cancelled:
            return False
        assert ticket.fault is not None  # only a fault sets `ticket.hold_ms`
        cancelled = self.flight.holding[key] = asyncio.Event()
        try:
            return await ticket.fault.hold(cancelled)
        finally:
            self.flight.holding.pop(key, None)

    async def _injected_answer(
        self,
        ticket: Ticket,
        rpc_id: Any,
        answer: dict[str, Any],
        reply: Reply,
        task: dict[str, Any] | None = None,
    ) -> None:
        delay = self.session.plan_config.fault_delay_ms
        if delay:
            if isinstance(reply, InTurn):
                reply.release()  # the upstream's later messages do not wait for the fault
            await asyncio.sleep(delay / 1000)  # S11: imitate a real timeout
        fault = ticket.fault
        if isinstance(fault, HttpFault):  # H2: the agent's HTTP answer itself is the fault
            self.session.answered(ticket, is_error=True, source="fault")
            self._report()
            code, text = fault.error()
            await self._give(ticket, reply, tagged(error_body(rpc_id, code, text), **fault.hints()))
            return
        await self._answer(ticket, rpc_id, answer, "fault", reply, task)

    async def _answer(
        self,
        ticket: Ticket,
        rpc_id: Any,
        result: dict[str, Any],
        source: str,
        reply: Reply,
        task: dict[str, Any] | None = None,
    ) -> None:
        self.session.answered(ticket, is_error=result.get("isError") is True, source=source)
        await self._report_current()
        if task is not None:  # X12: the shape the client asked for, a task that failed
            result = self.tasks.mint(task, result)
        await self._give(ticket, reply, self.revision.own_answer(rpc_id, result))

    async def _give(self, ticket: Ticket, reply: Reply, line: bytes) -> None:
        """Send a call's answer (recorded as sent); should it never reach the agent, that is
        recorded too (E5). An answer that goes out with its batch is the batch's."""
        await self.deliver_answer(reply, line, [] if ticket.batch is not None else [ticket.seq])

    async def deliver_answer(self, reply: Reply, line: bytes, seqs: list[int]) -> None:
        """`reply(line)`; an HTTP agent's transport settles the line's receipt when it knows
        whether the answer reached the agent, a stdio agent's write either works or raises."""
        settles = self._settles_receipts
        if seqs and settles:
            line = with_receipt(line, self._receipt(seqs))
        try:
            await reply(line)
        except StreamClosed:
            settle(line, CLOSED)
            if seqs and not settles:  # built only when an answer was lost
                self._receipt(seqs)(CLOSED)
            raise

    def _receipt(self, seqs: list[int]) -> Callable[[str | None], None]:
        """E5: what to do when the transport says whether an answer reached the agent."""

        def heard(lost: str | None) -> None:
            if lost is None:
                return
            for seq in seqs:
                self.session.not_delivered(seq, lost)
            with contextlib.suppress(ReportFileError):  # then fatal: run() re-raises it
                self._report()

        return heard

    def _abandon(self, key: Key, ticket: Ticket | None, params: dict[str, Any]) -> None:
        """E5: the proxy answered the call itself (--upstream-timeout). Its late answer will be
        recorded; what the upstream goes on sending for it (progress, messages on its stream)
        is not forwarded: the call is over for the agent."""
        self.flight.abandoned[key] = ticket
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if token is not None and usable_id(token):
            self._silenced[id_key(token)] = key

    def late(self, key: Key, answer: Message | None, unreadable: str | None = None) -> None:
        """E5: the answer to a call the proxy gave up on came after all: recorded, not sent."""
        ticket = self.flight.abandoned.pop(key, None)
        for token in [t for t, k in self._silenced.items() if k == key]:
            del self._silenced[token]
        self._dropped.pop(key, None)
        if ticket is None:
            return
        if answer is None:
            self.session.late_answer(ticket, error={"message": unreadable})
        else:
            result = answer.get("result") if answer.data is not None else _shallow(answer, "result")
            self.session.late_answer(ticket, result=result, error=answer.get("error"))
        self.log(
            f"the upstream answered call {ticket.seq} ({ticket.tool}) after --upstream-timeout: "
            "recorded (the agent had its timeout)"
        )
        self._report()

    def after_its_call(self, line: bytes, message: Message | None) -> bool:
        """E5: whether `line` belongs to a call the proxy already answered with a timeout (and
        is therefore not forwarded; the first such message of a call is said once)."""
        if not self.flight.abandoned:
            return False
        key: Key | None = None
        if has_related(line) and usable_id(related_of(line)):
            key = id_key(related_of(line))
        elif message is not None and message.get("method") == "notifications/progress":
            params = message.get("params")
            token = params.get("progressToken") if isinstance(params, dict) else None
            key = self._silenced.get(id_key(token)) if usable_id(token) else None
        if key is None or key not in self.flight.abandoned:
            return False
        count = self._dropped.get(key, 0)
        self._dropped[key] = count + 1
        if count == 0:
            self.log(
                "WARNING: the upstream goes on sending messages for a call already answered with "
                "a timeout; they are not forwarded"
            )
        return True


def _freeze_now_and_then(seq: int) -> None:
    """Every GC_EVERY_CALLS calls: the judge's state only grows and is never garbage; once
    collected, move it out of the collector's sight, so a long session does not pay for
    rescanning it."""
    if seq % GC_EVERY_CALLS == 0:
        gc.collect()
        gc.freeze()


def _still_cut(reply: Reply) -> Reply:
    """H3: the upstream's response stream closed without an answer; an HTTP agent's closes the
    same way (the listener reads the hint), a stdio agent gets a tool result."""

    async def send(line: bytes) -> None:
        await reply(tagged(line, stream_cut=True))

    return send


def _is_error_object(error: Any) -> bool:
    """A JSON-RPC error object: an integer code and a string message."""
    return (
        isinstance(error, dict)
        and isinstance(error.get("code"), int)
        and not isinstance(error.get("code"), bool)
        and isinstance(error.get("message"), str)
    )


def _shallow(answer: Message, member: str) -> dict[str, Any] | None:
    """The top level of a result too deep to parse (X7): its members as far as they parse.

    The judge needs only `isError` and `resultType`; the answer itself goes on as its line.
    """
    text = answer.raw.get(member) if answer.raw is not None else None
    if text is None or not text.lstrip().startswith("{"):
        return None
    try:
        members = top_level(text)
    except ScanError:
        return None
    shallow: dict[str, Any] = {}
    for key, value in members.items():
        try:
            shallow[key] = jsonutil.loads(value)
        except (ValueError, jsonutil.TooDeep):
            shallow[key] = None
    return shallow


def _unusable(answer: Message) -> str:
    """Why an answer to tools/call is neither a result object nor a JSON-RPC error."""
    if answer.has("result"):
        result = answer.get("result")
        what = "null" if result is None else type(result).__name__
        return f"the upstream answered tools/call with a result that is not an object ({what})"
    if answer.has("error"):
        return "the upstream answered tools/call with an error that is not a JSON-RPC error"
    return "the upstream answered tools/call with neither a result nor an error"
