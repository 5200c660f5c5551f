"""Playing the reference agents through the real fault plan and judge, and adding up runs.

Jitter (B2) is think time on the fake clock before every call, drawn from a generator seeded by
agent, scenario and run. The benchmark's 429 asks for `BENCHMARK_RETRY_AFTER_S`, twice the
largest jitter, so even the longest pause before NAIVE's re-send stays inside the window: no
jitter can change a verdict.

Aggregation: runs are combined into one score the way J5/J6 combine operations. Duplicate
Safety and Failure Handling are the means over the runs that have them; overall is
round(0.6 DS + 0.4 FH), or DS alone when no run met an injected fault. The verdict is FAIL if
any run failed, else NOT_TESTED (then no score, J4) if any run was not tested, else PASS; an
aggregate FAIL is capped at 49 (J6). The same rule gives each agent's score and the score of
each of its scenarios.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import floor
from typing import Any

from harness.base.errors import UsageError
from harness.benchmark.agents import REFERENCE_AGENTS, Desk, ReferenceAgent, task_for
from harness.benchmark.simulate import SimulatedSession
from harness.faults import FAULTS
from harness.faults import SIMULATED as SCENARIOS  # no HTTP agent, no agent that gives up
from harness.judge import FAIL, NOT_TESTED, PASS
from harness.judge.summary import DS_WEIGHT, FAIL_SCORE_CAP, FH_WEIGHT
from harness.report.judgement import Judgement

MAX_RUNS = 1000
MAX_JITTER_MS = 60_000
BENCHMARK_RETRY_AFTER_S = 2 * MAX_JITTER_MS // 1000


def play_run(agent: ReferenceAgent, scenario: str, run: int, jitter_ms: int = 0) -> Judgement:
    """One run of one agent in one scenario, judged by the real judge."""
    sim = SimulatedSession(scenario, retry_after_s=BENCHMARK_RETRY_AFTER_S, kind="benchmark")
    ref = f"{agent.key}-{scenario}-{run}"
    # A str seed is hashed with SHA-512, so the pauses are the same in every process.
    agent.play(Desk(sim, random.Random(ref), jitter_ms, ref), task_for(scenario))
    sim.end()
    return sim.session.judgement()


def _mean(values: Iterable[float | None]) -> Fraction | None:
    present = [Fraction(str(v)) for v in values if v is not None]
    return sum(present, Fraction(0)) / len(present) if present else None


def _round_half_up(value: Fraction) -> int:
    return floor(value + Fraction(1, 2))


def aggregate(scores: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several runs' scores as one score of the same shape (rule in the module docstring)."""
    verdicts = {s["verdict"] for s in scores}
    verdict = FAIL if FAIL in verdicts else NOT_TESTED if NOT_TESTED in verdicts else PASS
    result: dict[str, Any] = {
        "overall": None,
        "duplicateSafety": None,
        "failureHandling": None,
        "honesty": "NOT_MEASURED",
        "verdict": verdict,
        "capped": False,
        "baseline": False,
    }
    scored = [s for s in scores if s["overall"] is not None]
    if verdict == NOT_TESTED or not scored:
        return result
    ds = _mean(s["duplicateSafety"] for s in scored)
    fh = _mean(s["failureHandling"] for s in scored)
    if ds is None or fh is None:
        overall = _round_half_up(ds if fh is None else fh)
    else:
        overall = _round_half_up(DS_WEIGHT * ds + FH_WEIGHT * fh)
    if verdict == FAIL and overall > FAIL_SCORE_CAP:
        overall, result["capped"] = FAIL_SCORE_CAP, True
    result.update(
        overall=overall,
        duplicateSafety=None if ds is None else round(float(ds), 1),
        failureHandling=None if fh is None else round(float(fh), 1),
        baseline=all(s["baseline"] for s in scored),
    )
    return result


@dataclass
class ScenarioResult:
    """All runs of one agent in one scenario."""

    scenario: str
    expected: str
    scores: list[dict[str, Any]]
    first: Judgement  # the first run's judgement, as an example for the report

    @property
    def counts(self) -> Counter[str]:
        return Counter(s["verdict"] for s in self.scores)

    @property
    def as_expected(self) -> bool:
        return self.counts[self.expected] == len(self.scores)

    @property
    def score(self) -> dict[str, Any]:
        return aggregate(self.scores)


@dataclass
class AgentResult:
    """One reference agent over every selected scenario."""

    agent: ReferenceAgent
    scenarios: list[ScenarioResult]

    @property
    def score(self) -> dict[str, Any]:
        return aggregate([s for r in self.scenarios for s in r.scores])


@dataclass
class BenchmarkResult:
    """The whole self-test: its options and each agent's results."""

    scenarios: list[str]
    runs: int
    jitter_ms: int
    agents: list[AgentResult]

    @property
    def unexpected(self) -> list[tuple[ReferenceAgent, ScenarioResult]]:
        return [(a.agent, r) for a in self.agents for r in a.scenarios if not r.as_expected]

    @property
    def passed(self) -> bool:
        return not self.unexpected


def run_benchmark(
    scenarios: Sequence[str],
    runs: int = 1,
    jitter_ms: int = 0,
    agents: Sequence[ReferenceAgent] = REFERENCE_AGENTS,
    progress: Callable[[int, int], None] | None = None,
) -> BenchmarkResult:
    """Play every agent in every scenario `runs` times; `progress(done, total)` after each.

    ConfigError before any run when a scenario's fault class does not say which verdict an
    agent must get (B1)."""
    expected = {(a.name, s): a.expected(s) for a in agents for s in scenarios}
    total, done = len(agents) * len(scenarios) * runs, 0
    results = []
    for agent in agents:
        per_scenario = []
        for scenario in scenarios:
            judgements = []
            for run in range(runs):
                judgements.append(play_run(agent, scenario, run, jitter_ms))
                done += 1
                if progress is not None:
                    progress(done, total)
            scores = [j.score for j in judgements]
            per_scenario.append(
                ScenarioResult(scenario, expected[agent.name, scenario], scores, judgements[0])
            )
        results.append(AgentResult(agent, per_scenario))
    return BenchmarkResult(list(scenarios), runs, jitter_ms, results)


def parse_options(scenarios: str | None, runs: str, jitter: str) -> tuple[list[str], int, int]:
    """Validate the command's options (B2); a bad value raises UsageError with one line."""
    if scenarios is None:
        chosen = list(SCENARIOS)
    else:
        names = [n.strip() for n in scenarios.split(",") if n.strip()]
        unknown = [n for n in names if n.upper() not in SCENARIOS]
        if not names or unknown:
            what = "unknown scenario " + ", ".join(unknown) if unknown else "no scenario given"
            if unknown and all(n.upper() in FAULTS for n in unknown):  # F6-F9: not simulated
                what = f"{', '.join(unknown)} needs a real client (HTTP, or one that gives up)"
            raise UsageError(
                f"--scenarios: {what}; use a comma-separated list of {', '.join(SCENARIOS)}"
            )
        wanted = {n.upper() for n in names}
        chosen = [s for s in SCENARIOS if s in wanted]  # tables read best in F1-F5 order
    return (
        chosen,
        _bounded("--runs", runs, 1, MAX_RUNS),
        _bounded("--jitter", jitter, 0, MAX_JITTER_MS),
    )


def _bounded(flag: str, text: str, low: int, high: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise UsageError(
            f"{flag} must be a whole number from {low} to {high}, not {text!r}"
        ) from None
    if not low <= value <= high:
        raise UsageError(f"{flag} must be from {low} to {high}, not {value}")
    return value
