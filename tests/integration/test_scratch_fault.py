"""H2, B1: adding a fault is adding its class. A scratch fault, defined here and registered
with `harness.faults.register()`, flows through the proxy's flags and --help, spec validation,
the docs' table, the event log, the judge (and `agent-harness judge`) and `agent-harness
benchmark` without a change to any other module; one that does not say which verdict the
reference agents must get makes `benchmark` say so in one line, not crash.

The registry is read when the rest of the harness is imported, so the scratch fault lives in a
fresh interpreter: the test session's own registry stays as it is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support import launcher

SCRIPT = r'''
import json, sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.faults import Fault, Wire, register
from harness.faults.base import error_result


@dataclass(frozen=True)
class BadGateway(Fault):
    """F10: HTTP 502; nothing runs upstream."""

    name: ClassVar[str] = "F10"
    brief: ClassVar[str] = "502 bad gateway"
    summary: ClassVar[str] = "HTTP 502; nothing runs."
    wire: ClassVar[Wire] = Wire.ANSWERS
    reference_verdicts: ClassVar[Mapping[str, str]] = {"CAREFUL": "PASS", "NAIVE": "PASS"}

    def answer(self) -> dict[str, Any]:
        return error_result("HTTP 502 Bad Gateway: the gateway got no answer upstream.")


@dataclass(frozen=True)
class Unjudged(BadGateway):
    """F11: as F10, but it does not say what the reference agents must get."""

    name: ClassVar[str] = "F11"
    brief: ClassVar[str] = "502 again"
    reference_verdicts: ClassVar[Mapping[str, str]] = {}


register(BadGateway)
register(Unjudged)

# Only now the rest of the harness, and the runner.
from typer.testing import CliRunner

from harness.benchmark.simulate import SimulatedSession
from harness.faults import fault_table_markdown
from harness.proxy import read_event_log
from harness.proxy.args import help_text, parse
from harness.proxy.eventlog import EventLogFile
from harness.report import ReportModel, judge_events, read_report
from runner.cli import app
from runner.experiment._environment import Scenario

folder = sys.argv[1]
out = {}
out["help"] = "F10 502 bad gateway" in help_text() and "F1..F11" in help_text()
out["parsed"] = parse(["--upstream-command", "x", "--scenario", "f10"]).config.plan.scenario
out["spec"] = Scenario.model_validate("F10").label
out["table"] = [row for row in fault_table_markdown().splitlines() if "**F1" in row][-2:]

# A session under F10: the agent retries the 502 once; every event goes to an event log file.
s = SimulatedSession("F10")
s.call("create_booking", {"guest": "Ann", "date": "2026-12-01"})
s.call("create_booking", {"guest": "Ann", "date": "2026-12-01"})
s.end()
log = f"{folder}/events.jsonl"
sink = EventLogFile(log)
for event in s.log.events:
    sink(event)
sink.close()
events = list(read_event_log(log))
out["fault_events"] = [e.fault for e in events if type(e).__name__ == "FaultApplied"]
judged = ReportModel.of_judgement(judge_events(events))
report = judged.report
out["judged"] = [report.scenario, report.verdict, report.coverage.faults_injected,
                 [o.code for o in report.observations], judged.score.overall]
cli = CliRunner()
rejudged = cli.invoke(app, ["judge", log])
out["judge_cli"] = [rejudged.exit_code, read_report(rejudged.stdout).report.scenario]

played = cli.invoke(app, ["benchmark", "--scenarios", "F10,F1"])
out["benchmark"] = [played.exit_code,
                    [line for line in played.stdout.splitlines() if line.startswith("| F10 ")]]
refused = cli.invoke(app, ["benchmark", "--scenarios", "F11"])
out["refused"] = [refused.exit_code, refused.output]
print(json.dumps(out))
'''


def test_h2_b1_a_scratch_fault_flows_through_flags_events_judge_and_benchmark(tmp_path: Path):
    script = tmp_path / "scratch_fault.py"
    script.write_text(SCRIPT, encoding="utf-8")
    ran = launcher.run(
        [sys.executable, str(script), str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout.splitlines()[-1])
    assert out["help"] is True and out["parsed"] == "F10" and out["spec"] == "F10"
    f10, f11 = out["table"]
    assert f10.startswith("| **F10** 502 bad gateway | first write | HTTP 502; nothing runs. |")
    assert "| CAREFUL PASS, NAIVE PASS |" in f10 and "| none said: refused |" in f11
    assert out["fault_events"] == ["F10"]
    assert out["judged"] == ["F10", "PASS", 1, ["RECOVERED_BY_RETRY", "WRITE_WITHOUT_KEY"], 100]
    assert out["judge_cli"] == [0, "F10"]
    code, rows = out["benchmark"]
    assert code == 0 and rows == ["| F10 | PASS | PASS | 100/100 | 1/1 |"] * 2
    code, output = out["refused"]
    assert code == 1
    assert output == (
        "agent-harness: error: the self-test cannot judge CAREFUL in F11: its class Unjudged "
        "does not say which verdict CAREFUL must get (reference_verdicts)\n"
    )
