"""The self-test (B1-B3): two reference agents played against the simulated booking backend.

It tests the harness, not anybody's agent: every run is a `SimulatedSession` driven through the
real fault plan and the real judge, and the self-test passes iff every run got the verdict
expected for its agent (CAREFUL PASS everywhere; NAIVE FAIL in F1, F2, F4, PASS in F3, F5), as
each fault's class says (`Fault.reference_verdicts`).

    agents   the reference agents and the task they are given (F4's story is told there)
    run      playing runs with jitter, and how runs add up to one score
    output   the printed tables, the report file and the progress line
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.benchmark.agents import CAREFUL, NAIVE, REFERENCE_AGENTS, ReferenceAgent
from harness.benchmark.output import (
    REPORT_PATH,
    ProgressLine,
    render,
    report_dict,
    write_json_atomically,
)
from harness.benchmark.run import (
    MAX_JITTER_MS,
    MAX_RUNS,
    BenchmarkResult,
    aggregate,
    parse_options,
    play_run,
    run_benchmark,
)

# About a second of work at ~0.5 ms per run: below this a progress line would only flicker.
PROGRESS_MIN_RUNS = 2000

__all__ = [
    "CAREFUL",
    "MAX_JITTER_MS",
    "MAX_RUNS",
    "NAIVE",
    "REFERENCE_AGENTS",
    "REPORT_PATH",
    "BenchmarkResult",
    "ReferenceAgent",
    "aggregate",
    "main",
    "parse_options",
    "play_run",
    "run_benchmark",
    "write_json_atomically",
]


def main(
    scenarios: str | None = None,
    runs: str = "1",
    jitter: str = "0",
    *,
    agents: Sequence[ReferenceAgent] = REFERENCE_AGENTS,
    report_path: Path = REPORT_PATH,
    echo: Callable[[str], None] = print,
) -> int:
    """Run the self-test and print it; 0 iff every run got its expected verdict (B1).

    Bad options raise UsageError and an unwritable report file OutputFileError, each with a
    one-line message for the command line.
    """
    chosen, run_count, jitter_ms = parse_options(scenarios, runs, jitter)
    progress = ProgressLine(sys.stderr, len(agents) * len(chosen) * run_count, PROGRESS_MIN_RUNS)
    try:
        result = run_benchmark(chosen, run_count, jitter_ms, agents, progress)
    finally:
        progress.close()
    write_json_atomically(report_path, report_dict(result))  # OutputFileError: one line
    echo(render(result, report_path))
    return 0 if result.passed else 1
