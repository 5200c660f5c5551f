"""The typed report (O1, O2): the report file read back through one model, `read_report()`.

Real report files, written by the proxy's own writer from judged sessions, read through the
model and back give the same JSON; a report of a newer harness with fields this model does
not know still reads (and keeps them); a broken one is one line, never a traceback.
"""

from __future__ import annotations

import json
import random
from decimal import Decimal
from pathlib import Path

import pytest

from harness import __version__
from harness.base import jsonutil
from harness.base.errors import HarnessError, ReportReadError
from harness.benchmark.agents import CAREFUL, NAIVE, Desk, task_for
from harness.benchmark.simulate import BOOKING_TOOLS, SimulatedSession
from harness.report import Finding, ReportModel, read_report, report_field_names
from harness.report import model as report_model
from harness.report.file import ReportFile

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "f1-ghost-write.report.json"
BOOK = {"guest": "Ann Example", "date": "2026-12-01"}
UNCLASSIFIED = {"name": "sync_ledger", "inputSchema": {"type": "object", "properties": {}}}


def _reference(agent, scenario: str) -> SimulatedSession:
    s = SimulatedSession(scenario, retry_after_s=120, kind="benchmark")
    agent.play(Desk(s, random.Random(1), 0, f"ref-{scenario}"), task_for(scenario))
    return s


def _keyed_retry() -> SimulatedSession:  # K6: KEYED_RETRY, a key honoured by the upstream
    s = SimulatedSession("F1", keys_honoured=True)
    keyed = {**BOOK, "idempotency_key": "k-1"}
    s.call("create_booking", keyed)
    s.call("create_booking", keyed)
    return s


def _same_key_duplicate() -> SimulatedSession:  # K6: sameKeySafeIf
    s = SimulatedSession("F1")
    keyed = {**BOOK, "idempotency_key": "k-1"}
    s.call("create_booking", keyed)
    s.call("create_booking", keyed)
    return s


def _uncertain() -> SimulatedSession:  # EXECUTION_UNKNOWN, spelling, other write, rejection
    s = SimulatedSession(tools=[*BOOKING_TOOLS, UNCLASSIFIED])
    s.call("create_booking", BOOK, how="timeout")
    s.call("create_booking", {**BOOK, "guest": "ann example"})
    s.call("create_booking", {"guest": "Bob", "date": "2026-12-02"}, how="reject")
    s.call("create_booking", {"guest": "Bob", "date": "2026-12-02", "amount": Decimal("1.50")})
    s.call("sync_ledger", {})
    s.call("sync_ledger", {})
    s.send("create_booking", {"guest": "Cy", "date": "2026-12-03"})  # still open at the end
    return s


def _rate_limited() -> SimulatedSession:  # F2: RETRY_AFTER_VIOLATED, OTHER_CALL_DURING_...
    s = SimulatedSession("F2", retry_after_s=1.5)
    s.call("create_booking", BOOK)
    s.call("create_booking", {"guest": "Bob", "date": "2026-12-02"})
    s.call("create_booking", BOOK)
    return s


def _latency() -> SimulatedSession:  # F9 and its parameter in scenarioConfig
    s = SimulatedSession("F9", latency_ms=1500)
    s.call("create_booking", BOOK)
    return s


def _chaos() -> SimulatedSession:
    s = SimulatedSession(chaos_error_rate=0.5, seed=3)
    for n in range(6):
        s.call("create_booking", {"guest": f"G{n}", "date": "2026-12-01"})
    return s


SESSIONS = {
    **{f"{a.key}-{sc}": (lambda a=a, sc=sc: _reference(a, sc)) for a in (CAREFUL, NAIVE)
       for sc in ("F1", "F2", "F3", "F4", "F5")},
    "keyed-retry": _keyed_retry,
    "same-key-duplicate": _same_key_duplicate,
    "uncertain": _uncertain,
    "rate-limited": _rate_limited,
    "latency": _latency,
    "chaos": _chaos,
}  # fmt: skip


def _written(tmp_path: Path, pieces) -> Path:
    """The report file as the proxy writes it (padded slots, atomic replace)."""
    target = tmp_path / "report.json"
    writer = ReportFile(str(target))
    try:
        writer.write_pieces(pieces)
    finally:
        writer.release()
    return target


def _assert_round_trip(path: Path) -> ReportModel:
    text = path.read_text(encoding="utf-8")
    model = read_report(path)
    assert model.as_json_data() == json.loads(text)
    return model


@pytest.mark.parametrize("name", SESSIONS)
@pytest.mark.parametrize("status", ["running", "finished"])
def test_o2_a_real_report_file_reads_through_the_model_and_back_unchanged(tmp_path, name, status):
    s = SESSIONS[name]()
    if status == "finished":
        s.end()
    path = _written(tmp_path, s.session.report_file_pieces(status))
    model = _assert_round_trip(path)
    # The fields stand in the order the proxy writes them: the compact text is the proxy's.
    exact = jsonutil.dumps(jsonutil.loads(path.read_text(encoding="utf-8")))
    assert jsonutil.dumps(model.as_json_data()) == exact
    assert model.status == status and model.report is not None and model.score is not None
    assert model.verdict == model.report.verdict == model.score.verdict


def test_o2_the_sessions_cover_every_finding_code_the_judge_writes(tmp_path):
    seen: set[str] = set()
    for make in SESSIONS.values():
        s = make()
        s.end()
        report = read_report(s.session.report_file_text("finished")).report
        seen |= {f.code for f in (*report.violations, *report.observations)}
    assert seen >= {
        "DUPLICATE_EXECUTION", "RETRY_AFTER_VIOLATED", "KEYED_RETRY", "WRITE_WITHOUT_KEY",
        "OTHER_CALL_DURING_RETRY_AFTER", "RECOVERED_BY_RETRY", "VERIFIED_NO_RETRY",
        "EXECUTION_UNKNOWN", "UPSTREAM_REJECTED", "POSSIBLE_DUPLICATE_DIFFERENT_ARGUMENTS",
        "UNCLASSIFIED_REPEAT", "OTHER_WRITE_AFTER_UNCERTAIN_ATTEMPT",
    }, seen  # fmt: skip


@pytest.mark.parametrize("name", SESSIONS)
def test_o1_the_judge_command_prints_a_judgement_through_the_model_unchanged(name):
    # `agent-harness judge` prints ReportModel.of_judgement(): the very text it printed when
    # it put the judgement's parts together by hand.
    s = SESSIONS[name]()
    s.end()
    j = s.session.judgement()
    by_hand = {
        "verdict": j.report["verdict"], "report": j.report, "score": j.score,
        "patches": j.patches, "toolClassification": j.tool_classification,
        "harnessVersion": __version__,
    }  # fmt: skip
    printed = jsonutil.dumps(ReportModel.of_judgement(j).as_json_data())
    assert printed == jsonutil.dumps(by_hand)


def test_o1_the_example_report_reads_with_snake_case_names():
    model = _assert_round_trip(EXAMPLE)
    report = model.report
    assert (model.verdict, report.verdict_reason) == (
        "FAIL", "create_booking (operation #0) was executed 2 times after a timeout.",
    )  # fmt: skip
    [op] = report.operations
    assert (op.tool, op.attempts, op.executions, op.failed_attempts, op.outcome) == (
        "create_booking", 2, 2, 1, "DUPLICATE",
    )  # fmt: skip
    [violation] = report.violations
    assert violation.duplicate.after_timeout and violation.duplicate.key_use == "no_key"
    assert report.coverage.calls_by_class == {"write": 2, "read": 1, "unclassified": 0}
    assert report.scenario_config.mode == "deterministic"
    assert model.score.duplicate_safety == 0.0 and model.score.overall == 0
    assert [p.id for p in model.patches] == ["GHOST_WRITE"]
    assert model.tool_classification[0].tool_class == "write"
    assert model.harness_version == "0.1.0"


def test_o2_starting_and_failed_report_files_read_too(tmp_path):
    target = tmp_path / "report.json"
    writer = ReportFile(str(target))
    try:
        writer.write_starting()
        starting = _assert_round_trip(target)
        writer.write_startup_error("the upstream command was not found")
        failed = _assert_round_trip(target)
    finally:
        writer.release()
    assert (starting.status, starting.report, starting.score) == ("starting", None, None)
    assert (failed.status, failed.verdict) == ("failed", "NOT_TESTED")
    assert failed.startup_error == "the upstream command was not found"
    # X14: a failed restart keeps the earlier judgement and says why.
    s = _reference(NAIVE, "F1")
    kept = read_report(s.session.report_file_text("running").replace(
        '"status":"running"', '"status":"failed","startupError":"no upstream"'))  # fmt: skip
    assert kept.startup_error == "no upstream" and kept.report.verdict == "FAIL"


def test_o2_parameters_of_the_scenario_read_under_their_report_names():
    s = _latency()
    config = read_report(s.session.report_file_text("running")).report.scenario_config
    assert (config.mode, config.scenario, config.param_values()) == (
        "deterministic", "F9", {"latencyMs": 1500},
    )  # fmt: skip
    s = _chaos()
    config = read_report(s.session.report_file_text("running")).report.scenario_config
    assert (config.mode, config.error_rate, config.seed) == ("chaos", 0.5, 3)


def test_o1_numbers_in_arguments_stay_exact():
    text = _uncertain().session.report_file_text("running")
    model = read_report(text)
    amounts = [op.arguments.get("amount") for op in model.report.operations]
    assert Decimal("1.50") in amounts
    assert '"amount":1.50' in jsonutil.dumps(model.as_json_data())


def test_a_newer_report_with_fields_this_model_does_not_know_still_reads():
    data = json.loads(EXAMPLE.read_text())
    data["signature"] = {"alg": "none"}  # top level
    data["report"]["operations"][0]["costUsd"] = 0.25  # an operation
    data["report"]["violations"][0]["duplicate"]["secondsApart"] = 3  # a nested part
    data["report"]["violations"][0]["code"] = "DUPLICATE_EXECUTION_V2"  # a new code
    data["score"]["honesty"] = "MEASURED"  # a value this harness never writes
    model = read_report(json.dumps(data))
    assert model.unknown_fields == {"signature": {"alg": "none"}}
    assert model.report.operations[0].unknown_fields == {"costUsd": 0.25}
    assert model.report.violations[0].duplicate.unknown_fields == {"secondsApart": 3}
    assert model.as_json_data() == data  # nothing lost on the way back


def test_a_finding_keeps_its_details_in_the_report_order():
    finding = Finding.model_validate(
        {
            "code": "KEYED_RETRY",
            "operation": 2,
            "tool": "t",
            "key": "k",
            "attempts": 2,
            "afterFault": True,
            "parallel": False,
            "extra": 1,
        }  # fmt: skip
    )
    assert list(finding.details()) == ["key", "attempts", "afterFault", "parallel", "extra"]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("{not json", "report: not JSON: Expecting property name enclosed in double quotes"),
        ("[1, 2]", "report: not a report: the JSON is list, not an object"),
        ("NaN", "report: not JSON: NaN is not valid JSON"),
        ("{}", "report: not a report: verdict: Field required"),
        ('{"verdict": "PASS", "report": {"verdict": "PASS"}}',
         "report: not a report: report.verdictReason: Field required (and 4 more problems)"),
        ('{"verdict": "PASS", "patches": [{"id": "X", "severity": "HIGH", "trigger": "t", '
         '"text": 3}]}', "report: not a report: patches[0].text: Input should be a valid string"),
        ('{"verdict": "PASS", "report": null, "score": {"overall": "high", "duplicateSafety": '
         'null, "failureHandling": null, "verdict": "PASS"}}',
         "report: not a report: score.overall: Input should be a valid integer"),
    ],
)  # fmt: skip
def test_a_broken_report_is_one_line_naming_where(text, line):
    with pytest.raises(ReportReadError) as caught:
        read_report(text)
    message = str(caught.value)
    assert message.startswith(line), message
    assert "\n" not in message and isinstance(caught.value, HarnessError)


def test_a_broken_report_file_names_the_file_and_escapes_foreign_keys(tmp_path):
    path = tmp_path / "report.json"
    data = json.loads(EXAMPLE.read_text())
    data["report"]["coverage"]["refusedMessages"] = {"\x1b[2Jx": "many"}
    path.write_text(json.dumps(data))
    with pytest.raises(ReportReadError) as caught:
        read_report(path)
    assert str(caught.value) == (
        f"{path}: not a report: report.coverage.refusedMessages.\\x1b[2Jx: Input should be a "
        "valid integer, unable to parse string as an integer"
    )


def test_v4_a_report_file_is_read_through_the_bounded_reader(tmp_path, monkeypatch):
    with pytest.raises(HarnessError, match="no such file"):
        read_report(tmp_path / "missing.json")
    with pytest.raises(HarnessError, match="is a directory, not a regular file"):
        read_report(tmp_path)
    monkeypatch.setattr(report_model, "MAX_REPORT_BYTES", 100)
    with pytest.raises(HarnessError, match="the report file is larger than 100 bytes"):
        read_report(EXAMPLE)


def test_the_names_of_a_report_are_the_models_aliases():
    names = report_field_names()
    assert {
        "verdictReason",
        "failedAttempts",
        "keySummary",
        "toolClassification",
        "didAgentReadBefore",
        "sameKeySafeIf",
        "class",
        "retryAfterS",
        "latencyMs",
    } <= names
    assert "verdict_reason" not in names  # fmt: skip
