"""Q2 and Q6 as pure parts: which run errors say the setup is broken, when a model stops, and
when the progress line's ETA is shown and from what."""

from __future__ import annotations

from runner.execute.failfast import AGENT_DID_NOT_START, STREAK, FailFast, failure_kind
from runner.execute.sweep import ETA_AFTER_RUNS, Progress
from runner.experiment.records import RunRecord
from runner.models.calls import MISSING_KEY, NOT_FOUND, REFUSED
from tests.support.records import make_run

KEY = f"model call failed ({MISSING_KEY}): AuthenticationError: Incorrect API key"
DOWN = f"model call failed ({REFUSED}): InternalServerError: Connection error."
GONE = f"model call failed ({NOT_FOUND}): NotFoundError: model 'qwen3:14b' not found"
NO_SESSION = "the agent exited with code 2 before its MCP session started (...); it printed nothing"


def test_q2_failure_kinds_come_from_the_errors_own_words() -> None:
    assert [failure_kind(e) for e in (KEY, DOWN, GONE, NO_SESSION)] == [
        MISSING_KEY, REFUSED, NOT_FOUND, AGENT_DID_NOT_START,
    ]  # fmt: skip
    others = [None, "", "model call failed: RateLimitError: slow down", "run timed out after 600 s",
              "the agent exited with code 4; its last output: x", "the proxy wrote no report"]  # fmt: skip
    assert [failure_kind(e) for e in others] == [None] * len(others)


def test_q2_a_model_stops_after_three_failures_of_one_kind_in_a_row() -> None:
    fail = FailFast()
    for error in (KEY, DOWN, DOWN, None, DOWN, DOWN):  # a mix, then a run that ran, resets
        fail.add("m", "m", error)
    assert not fail.skip("m")
    fail.add("m", "m", DOWN)  # the third refused connection in a row
    assert STREAK == 3 and fail.skip("m") and fail.skip("m")
    fail.add("other", "other", DOWN)
    assert not fail.skip("other")  # per model
    (line,) = fail.lines()
    assert line.startswith(
        "Stopped m: 3 runs in a row failed the same way (connection refused), so its other 2 "
        "runs were not started"
    )
    assert line.endswith(f"The last error: {DOWN}")


def test_q2_keep_going_never_stops() -> None:
    fail = FailFast(keep_going=True)
    for _ in range(10):
        fail.add("m", "m", KEY)
    assert not fail.skip("m") and fail.lines() == []


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _finish(progress: Progress, clock: _Clock, at: float, record: RunRecord) -> float | None:
    clock.now = at
    progress.finished(record)
    return progress.eta_s


def test_q6_eta_from_the_rate_after_the_first_round_not_from_the_start_up() -> None:
    # 4 runs in flight, 100 runs of 1 s each after 30 s of start-up (worker processes): the
    # first round ends at 31 s, then 4 runs a second; 96 s of runs are left after it
    clock, run = _Clock(), make_run("r")
    progress = Progress(total=100, slots=4, clock=clock)
    etas = [_finish(progress, clock, 31.0, run) for _ in range(4)]  # the first round
    assert etas == [None] * 4  # the start-up says nothing about the rate
    etas = [_finish(progress, clock, 31.0 + (i + 1) * 0.25, run) for i in range(ETA_AFTER_RUNS)]
    assert etas[:-1] == [None] * (ETA_AFTER_RUNS - 1)
    assert etas[-1] == 0.25 * 93  # 93 runs left at 4 a second: 23.25 s (from the start: 7 min)
    for i in range(93):
        eta = _finish(progress, clock, 32.0 + (i + 1) * 0.25 - 0.25, run)
    assert eta == 0.0
