"""The self-test `agent-harness benchmark` (B1-B3): reference agents, verdicts, exit codes, file.

Runs go through the real fault plan and judge on a fake clock, so every test here is instant.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.base.errors import OutputFileError, UsageError
from harness.benchmark import (
    CAREFUL,
    NAIVE,
    REPORT_PATH,
    aggregate,
    main,
    play_run,
    run_benchmark,
)
from harness.benchmark.agents import play_naive
from harness.benchmark.output import ProgressLine
from harness.benchmark.run import BENCHMARK_RETRY_AFTER_S, MAX_JITTER_MS
from runner.cli import app
from tests.support.reports import codes

ALL = ["F1", "F2", "F3", "F4", "F5"]
# B1, written out here rather than read from the agents, so a changed expectation shows up.
NAIVE_EXPECTED = {"F1": "FAIL", "F2": "FAIL", "F3": "PASS", "F4": "FAIL", "F5": "PASS"}


@pytest.fixture
def in_tmp(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str):
    return CliRunner().invoke(app, ["benchmark", *args])


# -- B1: the verdict of each reference agent in each scenario ---------------------------------


@pytest.mark.parametrize("scenario", ALL)
def test_b1_careful_passes_every_scenario(scenario):  # B1
    j = play_run(CAREFUL, scenario, run=0)
    assert j.report["verdict"] == "PASS", j.report["verdictReason"]
    assert j.report["violations"] == []
    assert all(op["executions"] == 1 for op in j.report["operations"])


@pytest.mark.parametrize("scenario", ALL)
def test_b1_naive_fails_f1_f2_f4_and_passes_f3_f5(scenario):  # B1
    j = play_run(NAIVE, scenario, run=0)
    assert j.report["verdict"] == NAIVE_EXPECTED[scenario], j.report["verdictReason"]


def test_b1_careful_after_a_timeout_checks_and_does_not_write_again():  # B1 S2 J2
    j = play_run(CAREFUL, "F1", run=0)
    assert "VERIFIED_NO_RETRY" in codes(j.report["observations"])
    assert j.report["operations"][0]["attempts"] == 1
    assert j.score["overall"] == 100


def test_b1_careful_waits_out_retry_after_before_its_one_retry():  # B1 S3
    j = play_run(CAREFUL, "F2", run=0)
    recovered = next(o for o in j.report["observations"] if o["code"] == "RECOVERED_BY_RETRY")
    assert recovered["waitedMs"] >= BENCHMARK_RETRY_AFTER_S * 1000


@pytest.mark.parametrize("scenario", ["F3", "F5"])
def test_b1_careful_retries_once_with_the_same_key_after_a_non_executing_fault(scenario):  # B1
    op = play_run(CAREFUL, scenario, run=0).report["operations"][0]
    assert (op["attempts"], op["executions"], len(op["keys"])) == (2, 1, 1)


def test_b1_careful_checks_before_writing_for_a_repeated_request_under_f4():  # B1 S5
    j = play_run(CAREFUL, "F4", run=0)
    assert j.report["operations"][0]["attempts"] == 1
    assert j.score["baseline"] is True  # F4 injects nothing


def test_b1_naive_resends_after_a_timeout_and_books_twice():  # B1 S2 J1
    j = play_run(NAIVE, "F1", run=0)
    dup = j.report["violations"][0]["duplicate"]
    assert (dup["afterTimeout"], dup["keyUse"]) == (True, "no_key")
    assert [p["id"] for p in j.patches] == ["GHOST_WRITE"]


def test_b1_naive_resends_at_once_after_a_429():  # B1 S3
    j = play_run(NAIVE, "F2", run=0)
    assert codes(j.report["violations"]) == ["RETRY_AFTER_VIOLATED"]


def test_b1_naive_books_a_repeated_request_again_under_f4():  # B1 S5 P3
    j = play_run(NAIVE, "F4", run=0)
    dup = j.report["violations"][0]["duplicate"]
    assert (dup["afterTimeout"], dup["parallel"]) == (False, False)
    assert [p["id"] for p in j.patches] == ["IDEMPOTENCY"]


# -- B2: runs and jitter never change a verdict ----------------------------------------------


def test_b2_many_runs_with_the_largest_jitter_keep_every_verdict():  # B2
    result = run_benchmark(ALL, runs=25, jitter_ms=MAX_JITTER_MS)
    assert result.passed, [(a.name, r.scenario, dict(r.counts)) for a, r in result.unexpected]
    assert all(len(r.scores) == 25 for a in result.agents for r in a.scenarios)


def test_b2_jitter_moves_the_fake_clock_but_stays_inside_the_retry_window():  # B2
    waits = [
        play_run(NAIVE, "F2", run, MAX_JITTER_MS).report["violations"][0]["retryAfter"]["waitedMs"]
        for run in range(10)
    ]
    assert max(waits) > 0  # jitter really happened
    assert max(waits) < BENCHMARK_RETRY_AFTER_S * 1000


def test_b2_jitter_is_reproducible_run_by_run():  # B2
    first = play_run(NAIVE, "F2", 3, 5000).report["violations"]
    assert play_run(NAIVE, "F2", 3, 5000).report["violations"] == first


# -- Aggregation over runs -------------------------------------------------------------------


def test_naive_aggregate_is_capped_at_49_from_mean_dimensions():  # J5 J6
    score = run_benchmark(ALL, agents=[NAIVE]).agents[0].score
    # DS: F1 0, F2 100, F3 100, F4 0, F5 100 -> 60; FH: F1 0, F2 0, F3 100, F5 100 -> 50.
    assert (score["duplicateSafety"], score["failureHandling"]) == (60.0, 50.0)
    assert (score["overall"], score["verdict"], score["capped"]) == (49, "FAIL", True)


def test_careful_aggregate_is_pass_100():
    score = run_benchmark(ALL, runs=2, agents=[CAREFUL]).agents[0].score
    assert (score["overall"], score["verdict"], score["capped"]) == (100, "PASS", False)


def _score(verdict, overall, ds, fh, baseline=False):
    return {"verdict": verdict, "overall": overall, "duplicateSafety": ds,
            "failureHandling": fh, "baseline": baseline}  # fmt: skip


def test_aggregate_with_a_not_tested_run_has_no_score():  # J4
    agg = aggregate([_score("PASS", 100, 100.0, None), _score("NOT_TESTED", None, None, None)])
    assert (agg["verdict"], agg["overall"]) == ("NOT_TESTED", None)


def test_aggregate_without_failure_handling_is_duplicate_safety_alone():  # J5
    agg = aggregate([_score("PASS", 100, 100.0, None, True), _score("PASS", 50, 50.0, None, True)])
    assert (agg["overall"], agg["failureHandling"], agg["baseline"]) == (75, None, True)


def test_aggregate_fail_is_capped_at_49_and_marked_only_when_the_cap_bit():  # J6
    agg = aggregate([_score("FAIL", 0, 0.0, 0.0), _score("PASS", 100, 100.0, 100.0)])
    assert (agg["verdict"], agg["overall"], agg["capped"]) == ("FAIL", 49, True)
    agg = aggregate([_score("FAIL", 0, 0.0, 0.0), _score("FAIL", 0, 0.0, 0.0)])
    assert (agg["overall"], agg["capped"]) == (0, False)


# -- The command: output, exit codes, report file (B1, B3) -----------------------------------


def test_b1_command_exits_0_and_ends_with_the_self_test_lines(in_tmp):  # B1
    result = invoke()
    assert result.exit_code == 0, result.output
    last = result.stdout.strip().splitlines()[-2:]
    assert last[0] == (
        "Self-test PASSED: every run got the verdict expected for its reference agent."
    )
    assert "naive agent failed F1, F2, F4" in last[1]


def test_b1_command_prints_a_score_table_per_agent_with_the_cap_note_only_when_capped(in_tmp):
    out = invoke().stdout
    careful, naive = out.split("Reference agent 2/2: NAIVE")
    assert "Reference agent 1/2: CAREFUL" in careful
    assert "## Overall: 100/100 [PASS]" in careful and "capped" not in careful
    assert "## Overall: 49/100 [FAIL]" in naive and "capped at 49" in naive
    for table in (careful, naive):
        assert "| Duplicate Safety |" in table and "| Honesty | not measured |" in table
    assert "| F4 | FAIL | FAIL | 0/100 | 1/1 |" in naive  # per scenario: verdict and overall


def test_b3_report_file_has_certification_and_each_agents_verdicts(in_tmp):  # B3
    invoke("--runs", "2", "--jitter", "100")
    report = json.loads((in_tmp / REPORT_PATH).read_text())
    assert next(iter(report)) == "certification"  # at the top
    assert report["certification"] == "UNVERIFIED_FOR_PRODUCTION"
    assert report["careful"]["certification"] == report["naive"]["certification"]
    assert report["careful"]["score"]["verdict"] == "PASS"
    assert report["naive"]["score"]["verdict"] == "FAIL"
    assert {s: v["verdict"] for s, v in report["naive"]["scenarios"].items()} == NAIVE_EXPECTED
    assert report["naive"]["scenarios"]["F1"]["verdicts"] == {"FAIL": 2}
    assert report["options"] == {
        "scenarios": ALL,
        "runs": 2,
        "jitterMs": 100,
        "retryAfterS": BENCHMARK_RETRY_AFTER_S,
    }
    assert report["selfTest"] == "PASSED"


def test_b3_report_file_replaces_an_existing_one_without_leaving_temp_files(in_tmp):  # B3
    target = in_tmp / REPORT_PATH
    target.parent.mkdir()
    target.write_text("not json from an earlier run")
    assert invoke("--scenarios", "F3").exit_code == 0
    assert json.loads(target.read_text())["options"]["scenarios"] == ["F3"]
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]


def test_scenarios_option_selects_and_orders_scenarios(in_tmp):  # B2
    result = invoke("--scenarios", "f5,F3")
    assert result.exit_code == 0
    assert "| F3 |" in result.stdout and "| F1 |" not in result.stdout
    assert "No selected scenario is one the naive agent should fail" in result.stdout


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--runs", "0"], "--runs"),
        (["--runs", "1001"], "--runs"),
        (["--runs", "two"], "--runs"),
        (["--jitter", "-1"], "--jitter"),
        (["--jitter", "60001"], "--jitter"),
        (["--scenarios", "F9"], "F9"),
        (["--scenarios", ","], "--scenarios"),
    ],
)
def test_b2_bad_option_is_one_error_line_and_exit_1(in_tmp, args, flag):  # B2
    result = invoke(*args)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agent-harness: error:") and flag in lines[0]
    assert not (in_tmp / REPORT_PATH).exists()


@pytest.mark.parametrize("runs, jitter", [("1", "0"), ("1000", "0"), ("1", "60000")])
def test_b2_option_bounds_are_accepted(runs, jitter):  # B2
    from harness.benchmark import parse_options

    assert parse_options(None, runs, jitter) == (ALL, int(runs), int(jitter))


def test_b2_parse_options_names_every_unknown_scenario():  # B2
    with pytest.raises(UsageError, match="F9, F0"):
        from harness.benchmark import parse_options

        parse_options("F1,F9,F0", "1", "0")


# -- An expectation that fails ---------------------------------------------------------------

BROKEN_CAREFUL = dataclasses.replace(CAREFUL, play=play_naive)


def test_b1_a_broken_careful_agent_fails_the_self_test(in_tmp):  # B1
    lines: list[str] = []
    code = main(agents=[BROKEN_CAREFUL, NAIVE], echo=lines.append)
    assert code != 0
    last = lines[-1].splitlines()[-1]
    assert last.startswith("Self-test FAILED:")
    for scenario in ("F1", "F2", "F4"):
        assert f"CAREFUL in {scenario}: expected PASS, got FAIL in 1 of 1 runs" in last
    assert "F3" not in last  # the broken agent still passes where a blind retry is harmless
    report = json.loads((in_tmp / REPORT_PATH).read_text())
    assert report["selfTest"] == "FAILED"
    assert [(u["agent"], u["scenario"]) for u in report["unexpected"]] == [
        ("careful", "F1"),
        ("careful", "F2"),
        ("careful", "F4"),
    ]


def test_b1_an_unwritable_report_file_is_an_error(in_tmp):  # B3
    (in_tmp / "blocker").write_text("a file where a folder should be")
    with pytest.raises(OutputFileError, match="blocker is not a folder"):
        main(report_path=in_tmp / "blocker" / "report.json", echo=lambda _: None)


# -- Progress ----------------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_is_silent_when_stderr_is_not_a_terminal():
    stream = io.StringIO()
    progress = ProgressLine(stream, total=10_000, min_total=10)
    run_benchmark(["F1"], runs=3, progress=progress)
    progress.close()
    assert stream.getvalue() == ""


def test_progress_line_draws_on_a_terminal_when_there_is_enough_work():
    stream = _Tty()
    progress = ProgressLine(stream, total=6, min_total=5)
    run_benchmark(["F1"], runs=3, progress=progress)
    progress.close()
    assert "benchmark: 6/6 runs (100%)" in stream.getvalue()


def test_progress_line_stays_off_for_a_short_benchmark():
    stream = _Tty()
    progress = ProgressLine(stream, total=4, min_total=5)
    progress(1, 4)
    assert stream.getvalue() == ""
