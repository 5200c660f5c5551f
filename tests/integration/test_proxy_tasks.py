"""X12: task-augmented calls are judged by the task's result, and faults keep the task shape.

The upstream here speaks the 2025-11-25 tasks protocol on the line level: a `tools/call` with
`params.task` runs the tool at once, records it in `executed` (the ground truth) and answers
with a CreateTaskResult; `tasks/get` and `tasks/result` tell how it ended. The client is raw
JSON-RPC, as the MCP Python SDK has no tasks.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.wire.protocol import RELATED_TASK_KEY
from tests.support.proxy_fixture import MemoryPipe, proxied

pytestmark = pytest.mark.anyio

REPORT = {"title": "Q3"}


@dataclass
class TaskUpstream:
    """A write tool `create_report` that runs as a task; `fail` makes each task fail."""

    fail: bool = False
    notify: bool = False  # send notifications/tasks/status when a task ends
    executed: list[dict[str, Any]] = field(default_factory=list)
    own_result_requests: int = 0
    release: Any = None
    _tasks: dict[str, dict[str, Any]] = field(default_factory=dict)

    async def serve(self, reader: MemoryPipe, writer: MemoryPipe) -> None:
        async def send(body: dict[str, Any]) -> None:
            await writer.write_line(json.dumps(body).encode())

        while (line := await reader.read_line()) is not None:
            message = json.loads(line)
            method, rpc_id = message.get("method"), message.get("id")
            params = message.get("params") or {}
            if rpc_id is None:
                continue
            if str(rpc_id).startswith("agent-harness-") and method == "tasks/result":
                self.own_result_requests += 1
            result, error = self._answer(method, params)
            if error is not None:
                await send({"jsonrpc": "2.0", "id": rpc_id, "error": error})
                continue
            await send({"jsonrpc": "2.0", "id": rpc_id, "result": result})
            if method == "tools/call" and "task" in params and self.notify:
                task = self._tasks[result["task"]["taskId"]]["task"]
                await send({"jsonrpc": "2.0", "method": "notifications/tasks/status",
                            "params": task})  # fmt: skip

    def _answer(self, method: str, params: dict[str, Any]) -> tuple[Any, Any]:
        if method == "initialize":
            return {"protocolVersion": params["protocolVersion"], "serverInfo": {"name": "t", "version": "0"},
                    "capabilities": {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}},
                                                             "cancel": {}}}}, None  # fmt: skip
        if method == "tools/list":
            return {"tools": [{"name": "create_report", "inputSchema": {"type": "object"},
                               "annotations": {"readOnlyHint": False},
                               "execution": {"taskSupport": "optional"}}]}, None  # fmt: skip
        if method == "tools/call":
            if not self.fail:
                self.executed.append(params.get("arguments") or {})
            result = {"content": [{"type": "text", "text": "failed" if self.fail else "done"}]}
            if self.fail:
                result["isError"] = True
            if "task" not in params:
                return result, None
            task_id = f"task-{len(self._tasks) + 1}"
            status = "failed" if self.fail else "completed"
            task = {"taskId": task_id, "status": status, "createdAt": "2026-01-01T00:00:00Z",
                    "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 10}
            self._tasks[task_id] = {"task": task, "result": result}
            return {"task": {**task, "status": "working"}}, None
        if method in ("tasks/get", "tasks/result", "tasks/cancel"):
            entry = self._tasks.get(params.get("taskId"))
            if entry is None:
                return None, {"code": -32602, "message": "no such task"}
            if method == "tasks/result":
                meta = {RELATED_TASK_KEY: {"taskId": params["taskId"]}}
                return {**entry["result"], "_meta": meta}, None
            if method == "tasks/cancel":
                return None, {"code": -32602, "message": "task is terminal"}
            return entry["task"], None
        return {}, None


def task_call(rpc_id: str, **task: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": {
        "name": "create_report", "arguments": REPORT, "task": task}}).encode()  # fmt: skip


def ask(rpc_id: str, method: str, task_id: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method,
                       "params": {"taskId": task_id}}).encode()  # fmt: skip


async def run_task(h, n: int) -> tuple[dict, dict, dict]:
    """Create a task, poll it, fetch its result, as the TypeScript SDK's client does."""
    created = await h.raw_request(task_call(f"c{n}", ttl=30000), f"c{n}")
    task_id = created["result"]["task"]["taskId"]
    status = await h.raw_request(ask(f"g{n}", "tasks/get", task_id), f"g{n}")
    result = await h.raw_request(ask(f"r{n}", "tasks/result", task_id), f"r{n}")
    return created, status, result


def attempts(h) -> list[str]:
    return h.attempts("create_report")


async def test_x12_task_created_is_no_execution_and_the_task_result_decides():
    upstream = TaskUpstream()
    async with proxied(upstream) as h:
        created = await h.raw_request(task_call("c1"), "c1")
        assert created["result"]["task"]["status"] == "working"  # passed through unchanged
        assert attempts(h) == ["open"]  # "task created" says nothing yet
        _, status, result = await run_task(h, 2)
    assert status["result"]["status"] == "completed"
    assert result["result"]["content"][0]["text"] == "done"
    # Ground truth: two executions; the one nobody asked about was asked for at the end (X6).
    assert len(upstream.executed) == 2
    assert attempts(h) == ["executed", "executed"]
    assert h.judgement().report["operations"][0]["executions"] == 2


async def test_x12_a_failed_task_then_a_retry_is_not_a_duplicate():
    # The case: counting "task created" as the execution made this FAIL with one
    # real execution. Now the failed task is a rejection (which may still have written, A3).
    upstream = TaskUpstream(fail=True)
    async with proxied(upstream) as h:
        _, status, result = await run_task(h, 1)
        assert status["result"]["status"] == "failed" and result["result"]["isError"] is True
        upstream.fail = False
        await run_task(h, 2)
    assert len(upstream.executed) == 1  # ground truth
    report = h.judgement().report
    assert report["operations"][0]["executions"] == 1
    assert report["verdict"] != "FAIL" and attempts(h) == ["rejected", "executed"]


@pytest.mark.parametrize("scenario", ["F2", "F3", "F5"])
async def test_x12_an_injected_fault_answers_as_a_task_of_the_proxy_that_failed(scenario):
    upstream = TaskUpstream()
    clock = itertools.count(0, 10_000_000).__next__  # 10 ms per event: the retry waits enough
    async with proxied(upstream, scenario=scenario, retry_after_s=0.001, clock=clock) as h:
        created, status, result = await run_task(h, 1)
        cancel = await h.raw_request(ask("x1", "tasks/cancel", created["result"]["task"]["taskId"]),
                                     "x1")  # fmt: skip
        await run_task(h, 2)
    task = created["result"]["task"]
    assert task["taskId"].startswith("agent-harness-task-") and task["status"] == "failed"
    assert "ttl" in task and task["createdAt"].endswith("Z")
    assert status["result"]["status"] == "failed" and status["result"]["statusMessage"]
    assert result["result"]["isError"] is True
    assert result["result"]["_meta"][RELATED_TASK_KEY] == {"taskId": task["taskId"]}
    assert cancel["error"]["code"] == -32602
    assert len(upstream.executed) == 1  # only the retry ran
    j = h.judgement()
    assert attempts(h) == ["injected", "executed"]
    assert j.report["operations"][0]["executions"] == 1
    assert j.report["verdict"] == "PASS"


@pytest.mark.parametrize("notify", [False, True], ids=["polled", "notified"])
async def test_x12_f1_on_a_task_the_ghost_is_told_as_a_failed_task_and_a_rerun_fails(notify):
    upstream = TaskUpstream(notify=notify)
    async with proxied(upstream, scenario="F1") as h:
        created, status, result = await run_task(h, 1)
        await run_task(h, 2)  # the agent runs it again
    assert created["result"]["task"]["status"] == "working"
    assert status["result"]["status"] == "failed"
    assert "timed out" in status["result"]["statusMessage"]
    assert result["result"]["isError"] is True and "timed out" in result["result"]["content"][0]["text"]
    if notify:
        told = [m for m in h.to_client.messages()
                if isinstance(m, dict) and m.get("method") == "notifications/tasks/status"]
        assert [m["params"]["status"] for m in told] == ["failed", "completed"]
    assert len(upstream.executed) == 2  # ground truth
    j = h.judgement()
    assert attempts(h) == ["ghost", "executed"]
    assert j.report["verdict"] == "FAIL"
    assert j.report["violations"][0]["duplicate"]["afterTimeout"] is True
