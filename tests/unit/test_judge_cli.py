"""`agent-harness judge EVENTS.jsonl`: re-judging a recorded session (issue 2, O1, O2)."""

import json
from pathlib import Path

from typer.testing import CliRunner

from harness.report import read_report
from runner.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EVENTS = EXAMPLES / "f1-ghost-write.events.jsonl"


def judge(*args: str):
    return CliRunner().invoke(app, ["judge", *args])


def test_rejudging_a_recorded_f1_session_gives_the_proxys_own_report():  # O1 O2 J8
    result = judge(str(EVENTS))
    assert result.exit_code == 0, result.output
    rejudged = json.loads(result.stdout)
    recorded = json.loads((EXAMPLES / "f1-ghost-write.report.json").read_text())
    for field in ("verdict", "report", "score", "patches", "toolClassification"):
        assert rejudged[field] == recorded[field], field
    assert rejudged["verdict"] == "FAIL"
    assert [p["id"] for p in rejudged["patches"]] == ["GHOST_WRITE"]


def test_judge_markdown_shows_verdict_score_and_patches():  # P1
    result = judge(str(EVENTS), "--format", "md")
    assert result.exit_code == 0
    assert result.stdout.startswith("# agent-harness report: FAIL")
    assert "## [CRITICAL] GHOST_WRITE" in result.stdout
    assert "| Duplicate Safety | 0% | 60% |" in result.stdout


def test_judge_a_missing_log_is_one_error_line(tmp_path):
    result = judge(str(tmp_path / "missing.jsonl"))
    assert result.exit_code == 1
    assert result.output.strip().startswith("agent-harness: error:")
    assert result.output.strip().count("\n") == 0


def test_judge_a_corrupt_log_names_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(EVENTS.read_text().splitlines()[0] + "\n{not json\n")
    result = judge(str(bad))
    assert result.exit_code == 1
    assert "bad.jsonl:2:" in result.output


def test_judge_rejects_an_unknown_format():
    result = judge(str(EVENTS), "--format", "yaml")
    assert result.exit_code != 0


def test_an_event_log_of_version_1_is_still_judged():  # X14 events.LOG_VERSION: old logs read
    old = Path(__file__).parent / "data" / "f1-ghost-write.v1.events.jsonl"
    result = judge(str(old))
    assert result.exit_code == 0, result.output
    rejudged = read_report(result.stdout)
    assert rejudged.verdict == "FAIL"
    [op] = rejudged.report.operations
    assert (op.executions, op.arguments) == (2, {"guest": "Alice Example", "date": "2026-12-01"})
    assert [p.id for p in rejudged.patches] == ["GHOST_WRITE"]
