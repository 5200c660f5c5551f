"""Task-augmented `tools/call` (2025-11-25 tasks, X12): judged by the task's result.

A call with `params.task` is answered with a `CreateTaskResult` ("task created"), which says
nothing about whether the tool ran. The attempt's outcome is the task's result: what the
upstream answers to `tasks/result`, fetched by the client or, once the task has reached a
terminal status (`tasks/get`, `tasks/cancel`, `notifications/tasks/status`), by the proxy
itself. A fault answers in the shape the client asked for:

- F2, F3, F5, chaos (nothing reaches the upstream): the proxy makes up a task of its own that
  has failed with the fault's text; `tasks/get` shows it, `tasks/result` gives the fault's
  result, `tasks/cancel` is refused as for any finished task.
- F1 (the write runs): the upstream's task is passed on; when its result shows an execution,
  the client is told the task failed with the timeout, and its result is the timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from harness.base import jsonutil
from harness.proxy.batch import Reply
from harness.proxy.flight import Ask, Key, Spawn
from harness.proxy.messages import Message, UpstreamGone, error_body, id_key
from harness.proxy.revision import ClientRevision
from harness.session import Session, Ticket
from harness.wire.protocol import RELATED_TASK_KEY, TERMINAL_TASK_STATES

TASK_METHODS = frozenset({"tasks/get", "tasks/result", "tasks/cancel"})
DEFAULT_TTL_MS = 60_000
POLL_INTERVAL_MS = 1_000


@dataclass
class TrackedTask:
    """An upstream task that carries a judged attempt."""

    ticket: Ticket
    settled: bool = False  # the attempt's outcome is recorded
    ghost: dict[str, Any] | None = None  # F1: the result the client gets instead of the real one
    answered: bool = False  # the agent has learnt how the task ended (AnswerSent)
    settling: asyncio.Task[None] | None = None


@dataclass
class MintedTask:
    """A task the proxy made up to carry a fault's answer (nothing ran upstream)."""

    task: dict[str, Any]
    result: dict[str, Any]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text(result: dict[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        return str(content[0].get("text", ""))
    return ""


def _with_related(result: dict[str, Any], task_id: str) -> dict[str, Any]:
    meta = result.get("_meta") if isinstance(result.get("_meta"), dict) else {}
    return {**result, "_meta": {**meta, RELATED_TASK_KEY: {"taskId": task_id}}}


def task_id_of(params: Any) -> str | None:
    """The `taskId` in a Task or in the params of a request about one."""
    task_id = params.get("taskId") if isinstance(params, dict) else None
    return task_id if isinstance(task_id, str) else None


class TaskBook:
    """What the proxy knows of the tasks of one session, and what it does about them."""

    def __init__(
        self,
        session: Session,
        revision: ClientRevision,
        *,
        new_id: Callable[[str], str],
        ask: Ask,
        spawn: Spawn,
        report: Callable[[], None],
    ) -> None:
        self.session = session
        self.revision = revision  # X11: the shape of the proxy's own answers
        self._new_id = new_id
        self._ask = ask
        self._spawn = spawn
        self._report = report  # O3: an outcome is on record before the next answer
        self.tracked: dict[str, TrackedTask] = {}
        self.minted: dict[str, MintedTask] = {}
        self._asked: dict[Key, tuple[str, str]] = {}  # the client's request id -> method, task
        self._calls: dict[Key, Ticket] = {}  # task-augmented calls gone upstream

    # -- a task-augmented call -------------------------------------------------------------

    def expect(self, key: Key, ticket: Ticket) -> None:
        """A task-augmented call goes upstream: its task is tracked as its answer arrives."""
        self._calls[key] = ticket

    def forget(self, key: Key) -> None:
        """The call `key` was given up on (--upstream-timeout): a later task is not tracked."""
        self._calls.pop(key, None)

    def answered(self, key: Key, answer: Message) -> None:
        """The upstream answered request `key`: a task-augmented call's task is tracked at
        once, before any status of it arrives."""
        ticket = self._calls.pop(key, None)
        if ticket is not None:
            self._task_created(ticket, answer)

    def tracks(self, task_id: str | None) -> bool:
        """An upstream task that carries a judged attempt."""
        return task_id in self.tracked

    def mint(self, requested: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        """X12: a failed task of the proxy's own that carries `result`; its CreateTaskResult."""
        task_id = self._new_id("agent-harness-task-")
        now = _now()
        ttl = requested.get("ttl")
        task = {
            "taskId": task_id,
            "status": "failed",
            "statusMessage": _text(result),
            "createdAt": now,
            "lastUpdatedAt": now,
            "ttl": ttl if isinstance(ttl, int) and not isinstance(ttl, bool) else DEFAULT_TTL_MS,
            "pollInterval": POLL_INTERVAL_MS,
        }
        self.minted[task_id] = MintedTask(task, _with_related(result, task_id))
        return {"task": task}

    def _task_created(self, ticket: Ticket, answer: Message) -> None:
        """The upstream answered a task-augmented call with a task: track it, no outcome yet."""
        result = answer.get("result")
        task = result.get("task") if isinstance(result, dict) else None
        task_id = task_id_of(task)
        if task_id is None:
            return  # not a task after all (an upstream without tasks): judged as usual
        self.session.task_created(ticket, task_id)
        self.tracked[task_id] = TrackedTask(ticket)
        if task.get("status") in TERMINAL_TASK_STATES:
            self._settle_later(task_id)

    async def created_answer(self, task_id: str, answer: Message, reply: Reply) -> None:
        """Pass the CreateTaskResult on; a task that has already ended is settled first, so a
        ghost (F1) reads as failed from its first answer on."""
        result = answer.get("result")
        status = result["task"].get("status")
        if status not in TERMINAL_TASK_STATES:
            await reply(answer.line)
            return
        await self._told_status(task_id, status, answer, "result", reply)

    async def _told_status(
        self, task_id: str, status: str, message: Message, where: str, send: Reply
    ) -> None:
        """A terminal status of a tracked task reaches the client: settled, a ghost as failed.

        `where` is the member that holds the Task: `result` (tasks/get, tasks/cancel), `params`
        (notifications/tasks/status), or `result` with a `task` inside (CreateTaskResult).
        """
        tracked = self.tracked[task_id]
        await self._settle(task_id)
        if tracked.ghost is None or status != "completed":
            self._task_told(tracked, is_error=status != "completed", source="upstream")
            await send(message.line)
            return
        body = message.data or {}
        holder = body[where]
        inner = "task" in holder and isinstance(holder["task"], dict)
        task = holder["task"] if inner else holder
        failed = {**task, "status": "failed", "statusMessage": _text(tracked.ghost)}
        holder = {**holder, "task": failed} if inner else failed
        await send(jsonutil.dumps({**body, where: holder}).encode())
        self._task_told(tracked, is_error=True, source="fault")

    # -- the client asks about a task ---------------------------------------------------------

    async def request(self, message: Message, rpc_id: Any, reply: Reply) -> bool:
        """tasks/get, tasks/result, tasks/cancel: answered here for a minted task; noted for a
        tracked one (its answer is read); True when the proxy answered it itself."""
        method = message.get("method")
        task_id = task_id_of(message.get("params"))
        if task_id is None:
            return False
        minted = self.minted.get(task_id)
        if minted is not None:
            if method == "tasks/get":
                await reply(self.revision.own_answer(rpc_id, minted.task))
            elif method == "tasks/result":
                await reply(self.revision.own_answer(rpc_id, minted.result))
            else:  # as any receiver answers for a task that has finished
                await reply(error_body(rpc_id, -32602, "Cannot cancel task in terminal status: "
                                       f"{minted.task['status']}"))  # fmt: skip
            return True
        if task_id in self.tracked:
            self._asked[id_key(rpc_id)] = (method, task_id)
        return False

    def asked_about(self, key: Key) -> tuple[str, str] | None:
        """The method and task of the client's request `key` about a tracked task, if it was."""
        return self._asked.pop(key, None)

    async def answer(self, method: str, task_id: str, answer: Message, reply: Reply) -> None:
        """The upstream answered the client's question about a tracked task."""
        tracked = self.tracked[task_id]
        result = answer.get("result")
        if method == "tasks/result":
            if not tracked.settled:
                self._record_task_result(tracked, answer)
            if tracked.ghost is not None and isinstance(result, dict):
                ghost = _with_related(tracked.ghost, task_id)
                await reply(self.revision.own_answer(answer.get("id"), ghost))
                self._task_told(tracked, is_error=True, source="fault")
                return
            is_error = not isinstance(result, dict) or result.get("isError") is True
            self._task_told(tracked, is_error=is_error, source="upstream")
            await reply(answer.line)
            return
        # tasks/get, tasks/cancel: a Task, maybe in a terminal status
        status = result.get("status") if isinstance(result, dict) else None
        if status not in TERMINAL_TASK_STATES:
            await reply(answer.line)
            return
        await self._told_status(task_id, status, answer, "result", reply)

    async def status(self, message: Message, send: Reply) -> None:
        """notifications/tasks/status of a tracked task: a terminal status is settled first."""
        params = message.get("params")
        task_id = task_id_of(params)
        tracked = self.tracked.get(task_id) if task_id else None
        status = params.get("status") if isinstance(params, dict) else None
        if tracked is None or status not in TERMINAL_TASK_STATES:
            await send(message.line)
            return
        await self._told_status(task_id, status, message, "params", send)

    # -- the task's outcome ---------------------------------------------------------------

    def _settle_later(self, task_id: str) -> None:
        tracked = self.tracked[task_id]
        if tracked.settling is None and not tracked.settled:
            tracked.settling = self._spawn(self._fetch_result(task_id))

    async def _settle(self, task_id: str) -> None:
        """Make sure the attempt's outcome is recorded, asking the upstream if need be."""
        tracked = self.tracked[task_id]
        if tracked.settled:
            return
        self._settle_later(task_id)
        assert tracked.settling is not None
        await asyncio.shield(tracked.settling)

    async def _fetch_result(self, task_id: str) -> None:
        tracked = self.tracked[task_id]
        try:
            answer = await self._ask("tasks/result", {"taskId": task_id})
        except TimeoutError:
            if not tracked.settled:
                tracked.settled = True
                self.session.upstream_failed(tracked.ticket, "timeout")
            return
        except UpstreamGone as gone:
            if not tracked.settled:
                tracked.settled = True
                self.session.upstream_failed(tracked.ticket, gone.status, error=gone.detail)
            return
        if not tracked.settled:
            self._record_task_result(tracked, answer)
        self._report()

    def _record_task_result(self, tracked: TrackedTask, answer: Message) -> None:
        tracked.settled = True
        result = answer.get("result")
        if isinstance(result, dict):
            tracked.ghost = self.session.upstream_result(tracked.ticket, result, task=True)
        else:
            self.session.upstream_failed(tracked.ticket, "error", error=answer.get("error"))

    def _task_told(self, tracked: TrackedTask, *, is_error: bool, source: str) -> None:
        if not tracked.answered:
            tracked.answered = True
            self.session.answered(tracked.ticket, is_error=is_error, source=source)
            self._report()

    def settle_open(self) -> None:
        """X6: at the end, ask for the outcome of every task nobody asked about (bounded)."""
        for task_id, tracked in self.tracked.items():
            if not tracked.settled:
                self._settle_later(task_id)
