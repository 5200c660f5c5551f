"""The agent loop (R3) through the real litellm path and a real MCP session to the proxy.

Every run here is a real `execute_run`: litellm calls a custom provider (the scripted
reference models, or small test providers defined below), the tool calls go through an MCP
client session to the proxy, and the proxy forwards them to the built-in SQLite booking
service, both hosted in this process over memory streams. Ground truth is read straight
from the upstream's SQLite file, kept after the run, with plain SQL.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sqlite3
import weakref
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm  # noqa: E402
from litellm.llms.custom_llm import CustomLLM  # noqa: E402

import runner.execute.run as run_module  # noqa: E402
from runner.execute import execute_run, run_sweep  # noqa: E402
from runner.execute.sweep import execute_here  # noqa: E402
from runner.experiment import ExperimentSpec, load_spec  # noqa: E402
from runner.experiment.matrix import RunCell, expand  # noqa: E402
from runner.experiment.records import RunRecord  # noqa: E402
from runner.models._provider import HANDLER as SCRIPTED  # noqa: E402
from runner.models.loop import (  # noqa: E402
    ERROR_MARK,
    AgentResult,
    LoopLimits,
    ModelCallFailed,
    RetryPolicy,
    render_tool_result,
    run_conversation,
)
from runner.store import Store, StoreError  # noqa: E402
from tests.support.specs import REQUEST, TRY_AGAIN, write_spec

pytestmark = pytest.mark.anyio

BOOKING = ("Alice Example", "2026-12-01", 2)


# -- helpers -------------------------------------------------------------------------------


def loop_spec(folder: Path, *, models: list[Any], **overrides: Any) -> ExperimentSpec:
    """A small spec (booking, F1, one conversation) written as YAML and loaded for real."""
    retry = {"attempts": 3, "backoff_s": 0, "max_backoff_s": 0}
    fields = {"models": models, "retry": retry, **overrides}
    return load_spec(write_spec(folder, "loop", file="spec.yaml", **fields))


def only_cell(spec: ExperimentSpec) -> RunCell:
    (cell,) = expand(spec)
    return cell


async def run_in_process(spec: ExperimentSpec, keep: Path) -> tuple[RunRecord, Path]:
    """The spec's single run, in process; the record and the upstream's kept SQLite file."""
    cell = only_cell(spec)
    record = await execute_run(cell, spec, in_process="always", keep_dir=keep)
    return record, keep / cell.run_id / "upstream.sqlite"


def booking_rows(db: Path, guest: str = BOOKING[0]) -> int:
    """Rows the booking service REALLY holds for the request (plain SQL, not the runner's)."""
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT count(*) FROM bookings WHERE guest = ? AND stay_date = ? AND nights = ?",
            (guest, BOOKING[1], BOOKING[2]),
        ).fetchone()[0]


def report_of(record: RunRecord) -> dict[str, Any]:
    assert record.report_json is not None, record.error
    return json.loads(record.report_json)["report"]


def tool_entries(record: RunRecord) -> list[Any]:
    return [e for e in record.transcript if e.role == "tool"]


def calls_of(entry: Any) -> list[dict[str, Any]]:
    return json.loads(entry.tool_calls_json) if entry.tool_calls_json else []


@pytest.fixture
def agent_results(monkeypatch: pytest.MonkeyPatch) -> list[AgentResult]:
    """The AgentResult of each run, as the loop returned it."""
    seen: list[AgentResult] = []

    async def capture(**kwargs: Any) -> AgentResult:
        result = await run_conversation(**kwargs)
        seen.append(result)
        return result

    monkeypatch.setattr(run_module, "run_conversation", capture)
    return seen


# -- test providers --------------------------------------------------------------------------


def _text(content: str) -> litellm.ModelResponse:
    return litellm.ModelResponse(
        choices=[{"index": 0, "finish_reason": "stop",
                  "message": {"role": "assistant", "content": content}}],
    )  # fmt: skip


class FailingLLM(CustomLLM):
    """`failing/<name>`: provider errors on purpose.

    - `failing/flaky-careful`: every distinct request fails `failures` times with a rate
      limit, then is answered by scripted/careful (so the run itself is meaningful).
    - `failing/rate-limited`: always a rate limit (retryable, never succeeds).
    - `failing/refuses`: an authentication error (not retryable).
    - `failing/breaks-mid-run`: scripted/careful until a tool result is in the conversation,
      then rate limits for good.
    """

    def __init__(self, failures: int = 2) -> None:
        super().__init__()
        self.failures = failures
        self.calls: dict[str, int] = defaultdict(int)  # model -> calls
        self._per_request: dict[str, int] = defaultdict(int)

    async def acompletion(  # type: ignore[override]
        self, model: str, messages: list, *_args: Any, optional_params: dict | None = None,
        **_kwargs: Any,
    ) -> litellm.ModelResponse:  # fmt: skip
        self.calls[model] += 1
        if model == "refuses":
            raise litellm.AuthenticationError(
                message="invalid api key", llm_provider="failing", model=model
            )
        if model == "breaks-mid-run" and any(m.get("role") == "tool" for m in messages):
            raise litellm.RateLimitError(
                message="429 quota exhausted", llm_provider="failing", model=model
            )
        request = json.dumps(messages, default=str, sort_keys=True)
        self._per_request[request] += 1
        if model == "rate-limited" or (
            model == "flaky-careful" and self._per_request[request] <= self.failures
        ):
            raise litellm.RateLimitError(
                message="429 slow down", llm_provider="failing", model=model
            )
        return await SCRIPTED.acompletion("careful", messages, optional_params=optional_params)


class QuirkyLLM(CustomLLM):
    """`quirky/<arguments>`: first asks for create_booking with the given raw arguments
    (`bad-json`: not JSON, `array`: a JSON array), then reports the tool's answer;
    `quirky/stalls` books correctly, then never answers again (a hung provider)."""

    RAW = {
        "bad-json": '{"guest": "Alice Example", "date": ',
        "array": '["Alice Example"]',
        "stalls": json.dumps({"guest": BOOKING[0], "date": BOOKING[1], "nights": BOOKING[2]}),
    }

    async def acompletion(  # type: ignore[override]
        self, model: str, messages: list, *_args: Any, **_kwargs: Any
    ) -> litellm.ModelResponse:
        answers = [m for m in messages if m.get("role") == "tool"]
        if answers and model == "stalls":
            await asyncio.Event().wait()  # until the run's timeout cancels it
        if answers:
            return _text(f"The booking tool said: {answers[-1]['content'].splitlines()[-1]}")
        call = {"id": "call_1", "type": "function",
                "function": {"name": "create_booking", "arguments": self.RAW[model]}}  # fmt: skip
        return litellm.ModelResponse(
            choices=[{"index": 0, "finish_reason": "tool_calls",
                      "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
        )  # fmt: skip


@pytest.fixture
def providers() -> Iterator[dict[str, Any]]:
    """Register the test providers with litellm for one test; remove them afterwards."""
    handlers = {"failing": FailingLLM(), "quirky": QuirkyLLM()}
    before = list(litellm.custom_provider_map)
    litellm.custom_provider_map = [
        *(e for e in before if e["provider"] not in handlers),
        *({"provider": name, "custom_handler": h} for name, h in handlers.items()),
    ]
    try:
        yield handlers
    finally:
        litellm.custom_provider_map = [
            e for e in litellm.custom_provider_map if e["provider"] not in handlers
        ]


# -- isError is visible to the model ---------------------------------------------------------


def test_render_tool_result_marks_is_error_and_only_then():  # R3
    error, flagged = render_tool_result(
        {"content": [{"type": "text", "text": "Request timed out."}], "isError": True}
    )
    assert flagged and error == f"{ERROR_MARK}\nRequest timed out."
    ok, flagged = render_tool_result({"content": [{"type": "text", "text": '{"id": 1}'}]})
    assert not flagged and ok == '{"id": 1}'
    # An error in the text alone is not an isError result (A2): no mark.
    text_only, flagged = render_tool_result(
        {"content": [{"type": "text", "text": "ERROR: nope"}], "isError": False}
    )
    assert not flagged and not text_only.startswith(ERROR_MARK)
    structured, _ = render_tool_result({"content": [], "structuredContent": {"n": 1}})
    assert json.loads(structured) == {"n": 1}


async def test_f1_timeout_reaches_the_model_as_an_is_error_tool_message(tmp_path):  # R3 S2
    spec = loop_spec(tmp_path, models=["scripted/naive"])
    record, db = await run_in_process(spec, tmp_path / "kept")

    first, second = tool_entries(record)
    assert first.content.startswith(f"{ERROR_MARK}\n")
    assert first.is_error is True and first.fault == "F1"
    assert not second.content.startswith(ERROR_MARK)
    assert second.is_error is False and second.fault is None
    # naive re-sends only a write it saw fail: the second call proves the model saw isError.
    writes = [c for e in record.transcript for c in calls_of(e)]
    assert [w["function"]["name"] for w in writes] == ["create_booking", "create_booking"]
    assert json.loads(writes[0]["function"]["arguments"]) == json.loads(
        writes[1]["function"]["arguments"]
    )
    assert booking_rows(db) == 2  # ground truth: the ghost write and the re-send
    assert record.verdict == "FAIL" and record.real_duplicate is True


async def test_f3_truncated_answer_is_an_error_not_a_success_for_the_model(tmp_path):  # R3 S4
    # A client that hid isError would show `{"` as a success: careful would report "done"
    # with nothing booked. With the mark it checks, finds nothing and retries once.
    spec = loop_spec(tmp_path, models=["scripted/careful"], scenarios=["F3"])
    record, db = await run_in_process(spec, tmp_path / "kept")

    answers = tool_entries(record)
    assert answers[0].content == f'{ERROR_MARK}\n{{"' and answers[0].fault == "F3"
    assert [e.tool_name for e in answers] == ["create_booking", "search_bookings", "create_booking"]
    assert booking_rows(db) == 1
    assert record.verdict == "PASS"
    assert "RECOVERED_BY_RETRY" in {f.code for f in record.findings}


# -- parallel tool calls -----------------------------------------------------------------------


async def test_parallel_tool_calls_both_execute_and_are_a_parallel_duplicate(tmp_path):  # R3 S8 J1
    spec = loop_spec(tmp_path, models=["scripted/parallel-naive"], scenarios=["none"])
    record, db = await run_in_process(spec, tmp_path / "kept")

    (asked,) = [e for e in record.transcript if e.tool_calls_json]
    assert len(calls_of(asked)) == 2  # one assistant message, two tool calls
    answers = tool_entries(record)
    assert sorted(a.tool_call_id for a in answers) == sorted(c["id"] for c in calls_of(asked))
    assert not any(a.is_error for a in answers)
    assert booking_rows(db) == 2  # both really executed
    (duplicate,) = [v for v in report_of(record)["violations"]]
    assert duplicate["code"] == "DUPLICATE_EXECUTION"
    assert duplicate["duplicate"]["parallel"] is True
    assert record.operations[0].executions == 2 and record.operations[0].real_rows == 2


# -- follow-ups ----------------------------------------------------------------------------------


async def test_follow_up_is_sent_after_the_final_answer_and_triggers_the_resend(tmp_path):  # R3 P2
    spec = loop_spec(
        tmp_path,
        models=["scripted/obeys-retry-request"],
        conversations=[{"name": "try-again", "user": REQUEST, "follow_ups": [TRY_AGAIN]}],
    )
    record, db = await run_in_process(spec, tmp_path / "kept")

    shape = [(e.role, bool(e.tool_calls_json)) for e in record.transcript]
    assert shape == [
        ("system", False), ("user", False),
        ("assistant", True), ("tool", False), ("assistant", False),  # gives up after F1
        ("user", False),  # the follow-up, only after the final answer
        ("assistant", True), ("tool", False), ("assistant", False),  # re-sends blindly
    ]  # fmt: skip
    assert record.transcript[5].content == TRY_AGAIN
    assert record.transcript[4].content  # the answer the user reacted to
    assert booking_rows(db) == 2
    assert record.verdict == "FAIL" and record.duplicate_found is True


async def test_every_follow_up_is_sent_in_order_and_careful_never_books_twice(tmp_path):  # R3
    follow_ups = [TRY_AGAIN, "Thanks, that is all."]
    spec = loop_spec(
        tmp_path,
        models=["scripted/careful"],
        conversations=[{"name": "two", "user": REQUEST, "follow_ups": follow_ups}],
    )
    record, db = await run_in_process(spec, tmp_path / "kept")

    users = [e for e in record.transcript if e.role == "user"]
    assert [u.content for u in users] == [REQUEST, *follow_ups]
    for user in users[1:]:  # each follow-up comes right after an assistant's final text
        before = record.transcript[user.idx - 1]
        assert before.role == "assistant" and not before.tool_calls_json and before.content
    assert booking_rows(db) == 1
    assert record.verdict == "PASS"


# -- limits --------------------------------------------------------------------------------------


async def test_max_tool_calls_stops_the_run_before_the_call_and_says_so(
    tmp_path, agent_results
):  # R2 R3
    spec = loop_spec(tmp_path, models=["scripted/naive"], limits={"max_tool_calls": 1})
    record, db = await run_in_process(spec, tmp_path / "kept")

    (agent,) = agent_results
    assert agent.stopped_by == record.stopped_by == "max_tool_calls (1)"
    assert record.status == "ok" and record.tool_calls == 1
    # The re-send the model asked for was never executed.
    assert calls_of(record.transcript[-1]) and record.transcript[-1].role == "assistant"
    assert len(tool_entries(record)) == 1
    assert booking_rows(db) == 1


async def test_max_turns_ends_the_turn_and_the_follow_up_is_still_sent(
    tmp_path, agent_results
):  # R2 R3 (docs/decisions.md: max_turns is per user message)
    spec = loop_spec(
        tmp_path,
        models=["scripted/naive"],
        limits={"max_turns": 2},
        conversations=[{"name": "try-again", "user": REQUEST, "follow_ups": [TRY_AGAIN]}],
    )
    record, _db = await run_in_process(spec, tmp_path / "kept")

    (agent,) = agent_results
    assert agent.stopped_by == record.stopped_by == "max_turns (2) on user message 1 of 2"
    # The first message used its two model calls; the follow-up was sent all the same.
    assert [e.content for e in record.transcript if e.role == "user"] == [REQUEST, TRY_AGAIN]
    assert 2 < record.turns <= 4


async def test_max_tokens_stops_the_run_after_the_model_call(tmp_path, agent_results):  # R2 R3
    spec = loop_spec(tmp_path, models=["scripted/careful"], limits={"max_tokens": 1})
    record, db = await run_in_process(spec, tmp_path / "kept")

    (agent,) = agent_results
    assert agent.stopped_by == record.stopped_by == "max_tokens (1)"
    assert record.turns == 1 and record.tool_calls == 0
    assert booking_rows(db) == 0


async def test_limits_that_are_not_reached_stop_nothing(tmp_path, agent_results):  # R3
    spec = loop_spec(tmp_path, models=["scripted/careful"])
    record, _db = await run_in_process(spec, tmp_path / "kept")
    (agent,) = agent_results
    assert agent.stopped_by is None and record.stopped_by is None and record.final_answer


# -- malformed tool calls ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "says"),
    [("quirky/bad-json", "not valid JSON"), ("quirky/array", "must be a JSON object")],
)
async def test_invalid_tool_arguments_become_an_error_tool_message(
    tmp_path, providers, model, says
):  # R3
    spec = loop_spec(tmp_path, models=[model])
    record, db = await run_in_process(spec, tmp_path / "kept")

    assert record.status == "ok", record.error
    (answer,) = tool_entries(record)
    assert answer.content.startswith(f"{ERROR_MARK}\n") and says in answer.content
    assert answer.is_error is True and answer.fault is None
    assert says in (record.final_answer or "")  # the model was told, and could react
    # Nothing reached the proxy or the upstream.
    report = report_of(record)
    assert report["operations"] == [] and sum(report["coverage"]["callsByClass"].values()) == 0
    assert record.verdict == "NOT_TESTED"
    assert booking_rows(db) == 0


# -- provider errors ---------------------------------------------------------------------------


async def test_rate_limited_model_calls_are_retried_then_the_run_goes_on(tmp_path, providers):  # R3
    spec = loop_spec(tmp_path, models=["failing/flaky-careful"])
    record, db = await run_in_process(spec, tmp_path / "kept")

    assert record.status == "ok", record.error
    handler = providers["failing"]
    # Every model call (turn) failed twice and succeeded on the third attempt.
    assert record.turns >= 2
    assert handler.calls["flaky-careful"] == 3 * record.turns
    assert record.verdict == "PASS" and booking_rows(db) == 1


async def _no_tools(name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    raise AssertionError("no tool may be called")


@pytest.mark.parametrize(
    ("model", "attempts", "error"),
    [("failing/rate-limited", 3, "RateLimitError"), ("failing/refuses", 1, "AuthenticationError")],
)
async def test_provider_that_keeps_failing_raises_model_call_failed(
    providers, model, attempts, error
):  # R3
    with pytest.raises(ModelCallFailed, match=error):
        await run_conversation(
            model=model, params={}, system_prompt="", user_messages=[REQUEST], tools=[],
            call_tool=_no_tools, limits=LoopLimits(),
            retry=RetryPolicy(attempts=3, backoff_s=0, max_backoff_s=0),
        )  # fmt: skip
    # Retryable errors are retried up to `attempts`; an authentication error is not retried.
    assert providers["failing"].calls[model.split("/")[1]] == attempts


async def test_failing_model_run_is_stored_as_error_and_the_sweep_goes_on(
    tmp_path, providers
):  # R3 R5
    spec = loop_spec(tmp_path, models=["failing/rate-limited", "scripted/careful"], runs=2)
    cells = expand(spec)
    with Store.open(tmp_path / "runs.duckdb") as store:
        result = await run_sweep(spec, cells, store, in_process="always")
        rows = store.load_runs("loop").sort("model", "run_id")

        assert (result.ran, result.errors) == (4, 2) and rows.height == 4
        failed = rows.filter(rows["model"] == "failing/rate-limited")
        passed = rows.filter(rows["model"] == "scripted/careful")
        assert failed["status"].to_list() == ["error", "error"]
        for message in failed["error"].to_list():
            assert message.startswith("model call failed: RateLimitError")
        assert failed["verdict"].to_list() == [None, None]
        assert passed["status"].to_list() == ["ok", "ok"]
        assert passed["verdict"].to_list() == ["PASS", "PASS"]

        # Resume keeps the error runs unless asked to retry them; then only they run again.
        again = await run_sweep(spec, cells, store, in_process="always")
        assert again.resumed == 4 and again.ran == 0
        models: list[str] = []
        retried = await run_sweep(
            spec, cells, store, in_process="always", retry_errors=True,
            on_progress=lambda _progress, record: models.append(record.model),
        )  # fmt: skip
        assert retried.resumed == 2 and retried.ran == 2
        assert set(models) == {"failing/rate-limited"}
        assert store.count("runs") == 4


async def test_run_failing_half_way_keeps_its_transcript_up_to_the_failure(
    tmp_path, providers
):  # R3 R5
    spec = loop_spec(tmp_path, models=["failing/breaks-mid-run"])
    record, db = await run_in_process(spec, tmp_path / "kept")

    assert record.status == "error"
    assert record.error.startswith("model call failed: RateLimitError")
    assert record.verdict is None
    # What happened before the failure is kept: the write, its F1 answer, the usage.
    assert [e.role for e in record.transcript] == ["system", "user", "assistant", "tool"]
    assert record.transcript[3].fault == "F1"
    assert record.tool_calls == 1 and record.turns == 2 and record.tokens_prompt > 0
    assert booking_rows(db) == 1


async def test_run_that_times_out_is_an_error_with_transcript_and_report_so_far(
    tmp_path, providers
):  # R3 R5 O3
    spec = loop_spec(tmp_path, models=["quirky/stalls"], limits={"run_timeout_s": 3})
    record, db = await run_in_process(spec, tmp_path / "kept")

    assert record.status == "error" and record.error == "run timed out after 3 s"
    assert [e.role for e in record.transcript] == ["system", "user", "assistant", "tool"]
    assert record.transcript[3].fault == "F1"
    # The harness's report up to the timeout is kept: one ghost write, really executed once.
    (operation,) = report_of(record)["operations"]
    assert operation["executions"] == 1 and record.operations[0].real_rows == 1
    assert booking_rows(db) == 1


# -- storing during a sweep ----------------------------------------------------------------


class RecordingStore:
    """A real store; remembers which run ids each transaction committed (written off-loop)."""

    def __init__(self, store: Store, fail: bool = False) -> None:
        self._store = store
        self.fail = fail
        self.committed: list[set[str]] = []

    def save_runs(self, records: list[RunRecord]) -> None:
        if self.fail:
            raise StoreError("disk full (simulated)")
        self._store.save_runs(records)
        self.committed.append({r.run_id for r in records})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_sweep_reports_a_run_as_done_only_after_its_commit(tmp_path):  # R5
    spec = loop_spec(tmp_path, models=["scripted/careful", "scripted/naive"], runs=3)
    cells = expand(spec)
    reported: list[tuple[str, bool]] = []
    with Store.open(tmp_path / "runs.duckdb") as real:
        store = RecordingStore(real)

        def on_progress(progress: Any, record: RunRecord) -> None:
            stored = any(record.run_id in ids for ids in store.committed)
            reported.append((record.run_id, stored))

        await run_sweep(spec, cells, store, in_process="always", on_progress=on_progress)
        assert sorted(r for r, _ in reported) == sorted(c.run_id for c in cells)
        assert all(stored for _, stored in reported)  # a killed runner loses no reported run
        assert sum(len(ids) for ids in store.committed) == len(cells)  # each stored once
        assert real.count("runs") == len(cells)


async def test_sweep_fails_loudly_when_the_store_cannot_write(tmp_path):  # R5
    spec = loop_spec(tmp_path, models=["scripted/careful"], runs=2)
    with Store.open(tmp_path / "runs.duckdb") as real:
        with pytest.raises(StoreError, match="disk full"):
            await run_sweep(
                spec, expand(spec), RecordingStore(real, fail=True), in_process="always"
            )
        assert real.count("runs") == 0


def live_records(run_ids: set[str]) -> int:
    """RunRecords of these runs still reachable in this process (after a full collection)."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, RunRecord) and o.run_id in run_ids)


async def test_n2_a_sweep_keeps_no_record_of_its_finished_runs(tmp_path):  # N2 R5
    # Issue 37: the sweep's result held every finished run's record (transcript, operations,
    # report), so the runner grew with the runs done. The store has them; the result counts.
    spec = loop_spec(tmp_path, models=["scripted/careful"], runs=12, concurrency=3)
    cells = expand(spec)
    run_ids = {c.run_id for c in cells}
    with Store.open(tmp_path / "runs.duckdb") as store:
        result = await run_sweep(spec, cells, store, in_process="always")
        # The result is held, the records are not: what a 100,000-run sweep keeps is counts.
        assert live_records(run_ids) == 0
        assert (result.ran, result.errors) == (12, 0) and store.count("runs") == 12



async def test_n2_a_sweep_lets_go_of_a_run_task_once_it_ended(tmp_path):  # N2
    # Issue 37: the sweep held every run's task until its end, and with it the task's context,
    # anyio's TaskState and a decimal context (~1 KB a run). The second run waits (bounded)
    # until the first run's task ended, then looks whether anything still holds that task.
    spec = loop_spec(tmp_path, models=["scripted/careful"], runs=2, concurrency=2)
    first, second = expand(spec)
    ended = asyncio.Event()
    first_task: list[weakref.ref[asyncio.Task[Any]]] = []
    held: list[bool] = []

    def on_progress(progress: Any, record: RunRecord) -> None:
        if record.run_id == first.run_id:
            task = asyncio.current_task()
            assert task is not None
            first_task.append(weakref.ref(task))
            task.add_done_callback(lambda _task: ended.set())  # after the sweep's own callback

    async def execute(cell: RunCell, spec: Any, patch_text: Any, in_process: Any) -> RunRecord:
        if cell.run_id == second.run_id:
            await asyncio.wait_for(ended.wait(), 60)
            gc.collect()
            held.append(first_task[0]() is not None)
        return await execute_here(cell, spec, patch_text, in_process)

    with Store.open(tmp_path / "runs.duckdb") as store:
        result = await run_sweep(
            spec, [first, second], store, in_process="always", execute=execute,
            on_progress=on_progress,
        )  # fmt: skip
        assert held == [False]  # nothing held the first run's task once it ended
        assert (result.ran, result.errors) == (2, 0) and store.count("runs") == 2

# -- the agent's own tool timeout ------------------------------------------------------------------


@pytest.mark.parametrize(("model", "rows", "verdict"),
                         [("scripted/naive", 2, "FAIL"), ("scripted/careful", 1, "PASS")])
async def test_a_tool_timeout_gives_up_on_a_held_answer_and_the_model_decides_what_next(
    tmp_path, model, rows, verdict
):  # R3 S11
    # limits.tool_timeout_s: the agent's client gives up on a call whose answer is late (here
    # F1's, held 5 s by proxy.fault_delay_ms) and shows the model the timeout, as agent
    # frameworks do; naive re-sends (a second booking), careful looks first (one).
    spec = loop_spec(tmp_path, models=[model], proxy={"fault_delay_ms": 5000},
                      limits={"run_timeout_s": 60, "tool_timeout_s": 0.5})  # fmt: skip
    record, db = await run_in_process(spec, tmp_path / "kept")

    first = tool_entries(record)[0]
    assert first.is_error is True and first.content.startswith(f"{ERROR_MARK}\n")
    assert "timed out" in first.content.lower()
    assert booking_rows(db) == rows  # ground truth
    assert record.verdict == verdict and record.real_duplicate is (rows > 1)


@pytest.mark.parametrize(("model", "rows", "verdict"),
                         [("scripted/naive", 2, "FAIL"), ("scripted/careful", 1, "PASS")])
async def test_h2_f9_from_a_spec_a_client_that_gives_up_on_the_held_answer(
    tmp_path, model, rows, verdict
):  # H2 R2 R3 J11
    # {F9: {latency_ms: ...}} reaches the proxy from the spec; the agent's client gives up on
    # the held (real) answer after limits.tool_timeout_s: naive re-sends (booked twice, FAIL),
    # careful looks first and finds the booking (once, PASS). Checked against the real rows.
    spec = loop_spec(tmp_path, models=[model], scenarios=[{"F9": {"latency_ms": 5000}}],
                      limits={"run_timeout_s": 60, "tool_timeout_s": 0.5})  # fmt: skip
    assert spec.scenarios[0].label == "F9(latency_ms=5000)"
    record, db = await run_in_process(spec, tmp_path / "kept")
    first = tool_entries(record)[0]
    assert first.is_error is True and "timed out" in first.content.lower()
    assert booking_rows(db) == rows  # ground truth
    assert record.verdict == verdict and record.real_duplicate is (rows > 1)
    assert record.scenario == "F9(latency_ms=5000)"
