"""What the self-test shows: the printed tables, the report file (B3) and a progress line."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from harness import CERTIFICATION, __version__
from harness.base import jsonutil
from harness.base.outfile import write_file
from harness.benchmark.run import BENCHMARK_RETRY_AFTER_S, AgentResult, BenchmarkResult
from harness.faults import FAULTS
from harness.faults import SIMULATED as SCENARIOS  # no HTTP agent, no agent that gives up
from harness.judge import FAIL
from harness.report.markdown import score_table

REPORT_PATH = Path(".agent-harness") / "benchmark-report.json"
NOTE = (
    "A self-test of the harness: scripted reference agents against a simulated booking "
    "backend. It says nothing about your agent or your system; use `agent-harness proxy` "
    "to measure those."
)


def _overall(score: dict[str, Any]) -> str:
    return "no score" if score["overall"] is None else f"{score['overall']}/100"


def _scenario_rows(agent: AgentResult) -> list[str]:
    lines = [
        "| Scenario | Expected | Verdict | Overall | Runs as expected |",
        "|---|---|---|---|---|",
    ]
    for r in agent.scenarios:
        score = r.score
        lines.append(
            f"| {r.scenario} | {r.expected} | {score['verdict']} | {_overall(score)} "
            f"| {r.counts[r.expected]}/{len(r.scores)} |"
        )
    return lines


def telling_apart() -> list[str]:
    """The scenarios in which the reference agents must get different verdicts (B1)."""
    return [s for s in SCENARIOS if len(set(FAULTS[s].reference_verdicts.values())) > 1]


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _closing_lines(result: BenchmarkResult) -> list[str]:
    if not result.passed:
        missed = "; ".join(
            f"{agent.name} in {r.scenario}: expected {r.expected}, got "
            + ", ".join(f"{v} in {n} of {len(r.scores)} runs" for v, n in sorted(r.counts.items()))
            for agent, r in result.unexpected
        )
        return [f"Self-test FAILED: {missed}."]
    lines = ["Self-test PASSED: every run got the verdict expected for its reference agent."]
    for a in result.agents:
        failing = [r.scenario for r in a.scenarios if r.expected == FAIL]
        if failing:
            lines.append(
                f"The {a.agent.name.lower()} agent failed {', '.join(failing)}, as it is meant to: "
                "that is part of the self-test and says nothing about your system."
            )
        elif a.agent.fails_somewhere():
            lines.append(
                f"No selected scenario is one the {a.agent.name.lower()} agent should fail; "
                f"{_and(telling_apart())} tell the reference agents apart."
            )
    return lines


def render(result: BenchmarkResult, report_path: Path | None = None) -> str:
    """The printed self-test: a score table per agent, its scenarios, and the outcome."""
    runs = "1 run" if result.runs == 1 else f"{result.runs} runs"
    jitter = f"jitter up to {result.jitter_ms} ms" if result.jitter_ms else "no jitter"
    lines = [
        f"agent-harness benchmark: {len(result.agents)} reference agents, scenarios "
        f"{', '.join(result.scenarios)}, {runs} each, {jitter}.",
        NOTE,
    ]
    for i, agent in enumerate(result.agents, 1):
        lines += [
            "",
            f"Reference agent {i}/{len(result.agents)}: {agent.agent.name} "
            f"({agent.agent.behaviour})",
            score_table(agent.score),
            "",
            *_scenario_rows(agent),
        ]
    lines.append("")
    if report_path is not None:
        lines.append(f"Report written to {report_path}")
    return "\n".join(lines + _closing_lines(result))


def _agent_json(agent: AgentResult) -> dict[str, Any]:
    scenarios = {}
    for r in agent.scenarios:
        example = r.first
        scenarios[r.scenario] = {
            "expected": r.expected,
            "verdict": r.score["verdict"],
            "asExpected": r.as_expected,
            "runs": len(r.scores),
            "verdicts": dict(sorted(r.counts.items())),
            "score": r.score,
            "firstRun": {
                "verdictReason": example.report["verdictReason"],
                "violations": [v["code"] for v in example.report["violations"]],
                "observations": [o["code"] for o in example.report["observations"]],
                "patches": [p["id"] for p in example.patches],
            },
        }
    return {
        "certification": CERTIFICATION,
        "name": agent.agent.name,
        "behaviour": agent.agent.behaviour,
        "score": agent.score,
        "scenarios": scenarios,
    }


def report_dict(result: BenchmarkResult) -> dict[str, Any]:
    """B3: the report file's content, certification first."""
    report: dict[str, Any] = {
        "certification": CERTIFICATION,
        "kind": "benchmark",
        "selfTest": "PASSED" if result.passed else "FAILED",
        "unexpected": [
            {
                "agent": agent.key,
                "scenario": r.scenario,
                "expected": r.expected,
                "verdicts": dict(sorted(r.counts.items())),
            }
            for agent, r in result.unexpected
        ],
        "options": {
            "scenarios": result.scenarios,
            "runs": result.runs,
            "jitterMs": result.jitter_ms,
            "retryAfterS": BENCHMARK_RETRY_AFTER_S,
        },
        "note": NOTE,
    }
    for agent in result.agents:
        report[agent.agent.key] = _agent_json(agent)
    report["harnessVersion"] = __version__
    return report


def write_json_atomically(path: Path, data: Any) -> None:
    """Write JSON (one line and a newline) atomically, under the V1 rules (OutputFileError)."""
    write_file(path, jsonutil.dumps(data) + "\n", "report file")


class ProgressLine:
    """A one-line progress display on a terminal; silent when the stream is not a terminal."""

    def __init__(self, stream: TextIO, total: int, min_total: int) -> None:
        self.stream = stream
        self.total = total
        self.enabled = total >= min_total and stream.isatty()
        self._shown = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        percent = done * 100 // total
        if percent != self._shown:  # redraw at most 101 times, whatever the run count
            self._shown = percent
            self.stream.write(f"\rbenchmark: {done}/{total} runs ({percent}%)")
            self.stream.flush()

    def close(self) -> None:
        """Erase the line, so what follows starts on a clean line."""
        if self.enabled and self._shown >= 0:
            self.stream.write("\r\033[K")
            self.stream.flush()
