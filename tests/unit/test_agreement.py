"""R10: each run's verdict set against the upstream's real rows (runner.analysis.agreement)."""

from __future__ import annotations

import itertools

import duckdb
import pytest

from harness.report import Report
from runner.analysis.agreement import (
    AGREEMENTS,
    AGREES,
    DISAGREES,
    NO_CLAIM,
    NOT_CHECKABLE,
    UNKNOWN,
    judge_agreement,
)
from runner.store import migrations

ONE = [{"guest": "Alice", "date": "2026-12-31", "nights": 2, "room_type": "standard",
        "rows": 1, "cancelled": 0, "booking_ids": ["BK-1"]}]  # fmt: skip
TWO = [{**ONE[0], "rows": 2, "booking_ids": ["BK-1", "BK-2"]}]
HOW = {"keyUse": "no_key", "afterTimeout": True, "verifiedBefore": False, "parallel": False,
       "upstreamResponsesIdentical": False}  # fmt: skip
DUPLICATE = {"code": "DUPLICATE_EXECUTION", "duplicate": HOW}
RETRY_AFTER = {"code": "RETRY_AFTER_VIOLATED"}
(AGREEMENT_MIGRATION,) = [m for m in migrations.MIGRATIONS if m.name.endswith("_agreement")]


def report(verdict: str, violations=(), observations=()) -> Report:
    return Report.model_validate(
        {
            "verdict": verdict,
            "verdictReason": "",
            "operations": [],
            "violations": [dict(v) for v in violations],
            "observations": [{"code": c} for c in observations],
            "coverage": {"callsByClass": {}},
        }
    )


@pytest.mark.parametrize(
    ("rep", "truth", "state", "words"),
    [
        # PASS claims no duplicate execution.
        (report("PASS"), ONE, AGREES, "PASS: no duplicate execution, and no operation has"),
        (report("PASS"), [], AGREES, "no operation has more than one real row"),
        (
            report("PASS"),
            TWO,
            DISAGREES,
            "PASS: no duplicate execution, but the upstream holds 2 rows for one operation (guest Alice, date 2026-12-31, nights 2, room_type standard)",
        ),
        # FAIL DUPLICATE_EXECUTION claims one.
        (
            report("FAIL", [DUPLICATE]),
            TWO,
            AGREES,
            "FAIL DUPLICATE_EXECUTION, and the upstream holds 2 rows",
        ),
        (
            report("FAIL", [DUPLICATE]),
            ONE,
            DISAGREES,
            "FAIL DUPLICATE_EXECUTION, but no operation has more than one real row.",
        ),
        # RETRY_AFTER_VIOLATED is about timing: the run still claims no duplicate execution.
        (
            report("FAIL", [RETRY_AFTER]),
            ONE,
            AGREES,
            "FAIL for RETRY_AFTER_VIOLATED (not about rows)",
        ),
        (report("FAIL", [RETRY_AFTER]), TWO, DISAGREES, "but the upstream holds 2 rows"),
        (report("FAIL", [RETRY_AFTER, DUPLICATE]), TWO, AGREES, "FAIL DUPLICATE_EXECUTION"),
        # K6: a same-key repeat to an upstream that honours keys is one real row.
        (
            report("PASS", observations=["KEYED_RETRY"]),
            ONE,
            AGREES,
            "with KEYED_RETRY: the same-key repeat left one real row",
        ),
        (
            report("PASS", observations=["KEYED_RETRY"]),
            TWO,
            DISAGREES,
            "(the KEYED_RETRY repeat was not deduplicated)",
        ),
        # NOT_TESTED claims nothing, whatever the rows hold; it says what they hold.
        (report("NOT_TESTED"), ONE, NO_CLAIM, "NOT_TESTED claims nothing about duplicates."),
        (
            report("NOT_TESTED"),
            TWO,
            NO_CLAIM,
            "claims nothing about duplicates; the upstream holds 2 rows",
        ),
        (report("NOT_TESTED"), None, NO_CLAIM, "NOT_TESTED claims nothing"),
        # No ground truth (a third-party upstream): nothing to check against.
        (report("PASS"), None, NOT_CHECKABLE, "upstream ext keeps no rows the runner can read"),
        (report("FAIL", [DUPLICATE]), None, NOT_CHECKABLE, "keeps no rows"),
    ],
)
def test_r10_each_verdict_is_set_against_the_real_rows_by_what_it_claims(rep, truth, state, words):
    got = judge_agreement(rep, truth, "ext")
    assert (got.state, words in got.reason) == (state, True), got.reason


def test_r10_an_identical_upstream_answer_is_named_when_a_reported_duplicate_left_one_row():
    violation = {"code": "DUPLICATE_EXECUTION",
                 "duplicate": {**HOW, "keyUse": "same_key", "upstreamResponsesIdentical": True}}  # fmt: skip
    got = judge_agreement(report("FAIL", [violation]), ONE, "payment")
    assert got.state == DISAGREES
    assert "answered the repeat identically: it may deduplicate itself" in got.reason


def test_r10_many_duplicated_operations_are_summed_up_not_listed_one_by_one():
    truth = [{"customer": f"c{i}", "rows": 2, "payment_ids": []} for i in range(5)]
    got = judge_agreement(report("PASS"), truth, "payment")
    assert got.reason.count("rows for one operation") == 2
    assert got.reason.endswith("and 3 more duplicated operations.")


def _backfilled(con, status, verdict, found, real) -> str | None:
    con.execute("DELETE FROM runs")
    con.execute(
        "INSERT INTO runs (run_id, experiment, cell_id, repetition, model, model_params_json,"
        " prompt, patch_arm, upstream, scenario, conversation, status, verdict,"
        " duplicate_found, real_duplicate, turns, tool_calls, tokens_prompt,"
        " tokens_completion, cost_usd, latency_ms, started_at, finished_at,"
        " harness_version, saved_at) VALUES ('r', 'e', 'c', 0, 'm', '{}', 'p', 'none', 'u',"
        " 'F1', 'c', ?, ?, ?, ?, 0, 0, 0, 0, 0, 0, now()::TIMESTAMP, now()::TIMESTAMP, 'v',"
        " now()::TIMESTAMP)",
        [status, verdict, found, real],
    )
    for statement in AGREEMENT_MIGRATION.statements[2:]:
        con.execute(statement)
    return con.execute("SELECT agreement FROM runs").fetchall()[0][0]


def test_r10_stores_older_than_m006_get_the_same_agreement_as_new_runs(tmp_path):
    con = duckdb.connect(str(tmp_path / "x.duckdb"))
    migrations.migrate(con, "x")
    seen = set()
    for status, verdict, real in itertools.product(
        ("ok", "error"), ("PASS", "FAIL", "NOT_TESTED", None), (True, False, None)
    ):
        for codes in ((), (DUPLICATE,), (RETRY_AFTER,)):
            if verdict != "FAIL" and codes:
                continue
            found = None if verdict is None else any(v is DUPLICATE for v in codes)
            truth = None if real is None else (TWO if real else ONE)
            want = None
            if status == "ok" and verdict is not None:
                want = judge_agreement(report(verdict, codes), truth, "u").state
            assert _backfilled(con, status, verdict, found, real) == want, (
                status,
                verdict,
                codes,
                real,
            )
            seen.add(want)
    # T1's `unknown` needs a truth probe, which no store before m006 knew of.
    assert seen == {*AGREEMENTS, None} - {UNKNOWN}
    con.close()
