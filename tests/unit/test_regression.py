"""Regression sweeps against a baseline (R8) and their JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest

from runner.analysis import wilson_interval
from runner.analysis.regression import (
    Summary,
    compare,
    compare_to_baseline,
    export_summary,
    junit_xml,
    load_summary,
    summarise,
)
from runner.experiment.records import FindingRow, RunRecord
from runner.store import Store, StoreError

T0 = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)


def runs(model: str, k: int, n: int, *, errors: int = 0, scenario: str = "F1",
         prefix: str = "", findings: dict[str, int] | None = None) -> list[RunRecord]:
    """n runs that ran (k with a duplicate) plus some that failed to run; `findings`: code ->
    how many of the n runs hold that violation or observation (Q5)."""
    out = []
    for i in range(n + errors):
        failed = i >= n
        found = [
            FindingRow(kind="observation" if code.startswith("UNVERIFIED") else "violation",
                       code=code)
            for code, count in (findings or {}).items()
            if i < count
        ]  # fmt: skip
        out.append(RunRecord(
            run_id=f"{prefix}{model}-{scenario}-{i}", experiment="nightly", cell_id="c",
            repetition=i, model=model, prompt="default", patch_arm="none", upstream="booking",
            scenario=scenario, conversation="retry", status="error" if failed else "ok",
            error="boom" if failed else None, verdict=None if failed else "PASS",
            duplicate_found=None if failed else i < k, started_at=T0, finished_at=T0,
            harness_version="0.1.0", findings=found,
        ))
    return out


def store_with(path, records) -> None:
    with Store.open(path) as store:
        store.save_runs(records)


def summary_of(path) -> Summary:
    with Store.open(path, read_only=True) as store:
        return summarise(store)


@pytest.fixture
def baseline_db(tmp_path):
    path = tmp_path / "baseline.duckdb"
    # 0 of 10: Wilson upper bound 0.2775.
    store_with(path, runs("m", 0, 10) + runs("other", 5, 10, scenario="F3"))
    return path


@pytest.mark.parametrize(
    ("new_k", "regressed"),
    [(0, False), (2, False), (3, True), (10, True)],
)
def test_a_rate_above_the_baseline_interval_is_a_regression(tmp_path, baseline_db, new_k,
                                                            regressed):  # R8
    new = tmp_path / "new.duckdb"
    store_with(new, runs("m", new_k, 10))
    assert wilson_interval(0, 10).high == pytest.approx(0.2775, abs=1e-4)
    result = compare_to_baseline(baseline_db, new)
    (group,) = [g for g in result.groups if g.new.model == "m"]
    assert group.regressed is regressed
    assert result.regressed is regressed


def test_a_rate_that_fell_is_not_a_regression(tmp_path, baseline_db):  # R8
    new = tmp_path / "new.duckdb"
    store_with(new, runs("other", 0, 10, scenario="F3"))
    result = compare_to_baseline(baseline_db, new)
    assert not result.regressed
    assert [g.new.model for g in result.groups] == ["other"]


def test_error_runs_do_not_count_in_k_or_n(tmp_path):
    path = tmp_path / "runs.duckdb"
    store_with(path, runs("m", 1, 4, errors=3))
    (group,) = summary_of(path).groups
    assert (group.runs, group.errors, group.k, group.n) == (7, 3, 1, 4)


def test_a_group_without_baseline_is_listed_and_never_regresses(tmp_path, baseline_db):
    new = tmp_path / "new.duckdb"
    store_with(new, runs("brand-new", 10, 10))
    result = compare_to_baseline(baseline_db, new)
    (group,) = result.groups
    assert group.baseline is None and not group.regressed
    assert "no baseline" in group.describe()
    assert sorted(g.model for g in result.missing) == ["m", "other"]


def test_export_summary_round_trips_through_json(tmp_path, baseline_db):  # R8
    exported = export_summary(baseline_db)
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(exported))
    loaded = load_summary(path)
    assert exported["format"] == "agent-harness-summary" and exported["version"] == 2  # Q5
    assert [g.model_dump() for g in loaded.groups] == [
        g.model_dump() for g in summary_of(baseline_db).groups
    ]
    new = tmp_path / "new.duckdb"
    store_with(new, runs("m", 4, 10))
    from_json = compare_to_baseline(path, new)
    from_db = compare_to_baseline(baseline_db, new)
    assert [(g.label, g.regressed) for g in from_json.groups] == [
        (g.label, g.regressed) for g in from_db.groups
    ]


def test_exported_group_carries_counts_and_interval(baseline_db):
    groups = {g["model"]: g for g in export_summary(baseline_db)["groups"]}
    m = groups["m"]
    assert (m["k"], m["n"], m["rate"], m["ci_low"]) == (0, 10, 0.0, 0.0)
    assert m["ci_high"] == pytest.approx(0.2775, abs=1e-4)


@pytest.mark.parametrize(
    "content", ["not json", '{"format": "something-else", "groups": []}', "[]"]
)
def test_a_json_baseline_that_is_not_a_summary_is_a_clear_error(tmp_path, content):
    path = tmp_path / "baseline.json"
    path.write_text(content)
    with pytest.raises(StoreError, match="not an agent-harness summary"):
        load_summary(path)


def test_a_missing_baseline_file_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError):
        load_summary(tmp_path / "nope.json")
    with pytest.raises(StoreError):
        load_summary(tmp_path / "nope.duckdb")


def test_junit_xml_has_one_testcase_per_group_and_a_failure_for_a_regression(
    tmp_path, baseline_db
):  # R8
    new = tmp_path / "new.duckdb"
    store_with(new, runs("m", 5, 10) + runs("other", 5, 10, scenario="F3")
               + runs("fresh", 1, 2))
    result = compare_to_baseline(baseline_db, new)
    root = ET.fromstring(junit_xml(result))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert len(cases) == 3
    failed = [c for c in cases.values() if c.find("failure") is not None]
    assert len(failed) == 1
    failure = failed[0].find("failure")
    assert failed[0].get("classname") == "agent_harness.m"
    assert "5 of 10" in failure.get("message") and "0 of 10" in failure.get("message")
    skipped = [c for c in cases.values() if c.find("skipped") is not None]
    assert [c.get("classname") for c in skipped] == ["agent_harness.fresh"]


def test_junit_xml_stays_valid_with_hostile_model_names():
    hostile = "gpt-4.1 <&\"'> \x01\x1f"
    base = Summary(generated_at=T0, experiments=["e"], harness_versions=["1"], groups=[])
    new = Summary.model_validate({
        "generated_at": T0, "experiments": ["e"], "harness_versions": ["1"],
        "groups": [{"model": hostile, "prompt": "p", "upstream": "u", "conversation": "c",
                    "scenario": "F1", "patch_arm": "none", "runs": 1, "errors": 0,
                    "k": 1, "n": 1}],
    })
    root = ET.fromstring(junit_xml(compare(base, new)))
    case = root.find("testsuite/testcase")
    assert case is not None
    assert case.get("classname") == "agent_harness.gpt-4_1 <&\"'> \ufffd\ufffd"


def test_an_empty_comparison_is_valid_junit():
    empty = Summary(generated_at=T0, experiments=[], harness_versions=[], groups=[])
    root = ET.fromstring(junit_xml(compare(empty, empty)))
    assert root.find("testsuite").get("tests") == "0"


RETRY, UNVERIFIED = "RETRY_AFTER_VIOLATED", "UNVERIFIED_AFTER_TIMEOUT"


def test_q5_each_violation_kind_is_compared_with_its_own_interval(tmp_path):
    # no duplicate anywhere: on duplicates alone this sweep was "no regression"
    base, new = tmp_path / "base.duckdb", tmp_path / "new.duckdb"
    store_with(base, runs("m", 0, 10, findings={RETRY: 0, UNVERIFIED: 4}))
    store_with(new, runs("m", 0, 10, findings={RETRY: 6, UNVERIFIED: 5}))
    (group,) = compare_to_baseline(base, new).groups
    assert group.kinds == (RETRY,)  # 6 of 10 above [0%, 28%]; 5 of 10 within [17%, 69%]
    text = group.describe()
    assert text.startswith("duplicate runs 0 of 10 (0%), within or below")
    assert f"({RETRY}) 6 of 10 (60%), above the baseline's 95% interval [0%, 28%] (0 of 10)" in text
    assert f"({UNVERIFIED}) 5 of 10 (50%), within or below the baseline's 95% interval" in text
    case = ET.fromstring(junit_xml(compare_to_baseline(base, new))).find("testsuite/testcase")
    assert case.find("failure").get("type") == "RateRegression"


def test_q5_the_baseline_carries_each_kinds_rate_and_interval(tmp_path):
    path = tmp_path / "base.duckdb"
    store_with(path, runs("m", 1, 10, errors=2, findings={RETRY: 3, UNVERIFIED: 10}))
    (group,) = export_summary(path)["groups"]
    assert (group["k"], group["n"]) == (1, 10)
    retry, unverified = group["kinds"][RETRY], group["kinds"][UNVERIFIED]
    assert (retry["k"], retry["rate"]) == (3, 0.3)
    assert (retry["ci_low"], retry["ci_high"]) == pytest.approx(
        (wilson_interval(3, 10).low, wilson_interval(3, 10).high)
    )
    assert (unverified["k"], unverified["rate"]) == (10, 1.0)


def test_q5_a_version_1_baseline_is_read_and_compared_on_duplicates_only(tmp_path):
    base, new = tmp_path / "base.json", tmp_path / "new.duckdb"
    one = {"format": "agent-harness-summary", "version": 1, "generated_at": "2026-11-01T00:00:00",
           "experiments": ["nightly"], "harness_versions": ["0.1.0"],
           "groups": [{"model": "m", "prompt": "default", "upstream": "booking",
                       "conversation": "retry", "scenario": "F1", "patch_arm": "none",
                       "runs": 10, "errors": 0, "k": 0, "n": 10}]}  # fmt: skip
    base.write_text(json.dumps(one))
    store_with(new, runs("m", 0, 10, findings={RETRY: 10}))
    (group,) = compare_to_baseline(base, new).groups
    assert not group.regressed
    assert f"({RETRY}) 10 of 10 (100%), no baseline rate (export the baseline again)" in (
        group.describe()
    )


@pytest.mark.parametrize(
    ("kinds", "fragment"),
    [
        ({RETRY: {"k": 11}}, f"kinds.{RETRY}.k = 11 is not between 0 and n = 10"),
        ({RETRY: {"k": -1}}, f"kinds.{RETRY}.k = -1 is not between 0 and n = 10"),
        ({"SOMETHING_NEW": {"k": 1}}, "groups[0].kinds.SOMETHING_NEW"),
    ],
)
def test_q5_a_kind_that_cannot_be_true_is_one_line(tmp_path, kinds, fragment):
    path = tmp_path / "base.json"
    data = {"format": "agent-harness-summary", "version": 2, "generated_at": "2026-11-01T00:00:00",
            "experiments": ["e"], "harness_versions": ["0.1.0"],
            "groups": [{"model": "m", "prompt": "p", "upstream": "u", "conversation": "c",
                        "scenario": "F1", "patch_arm": "none", "runs": 10, "errors": 0,
                        "k": 0, "n": 10, "kinds": kinds}]}  # fmt: skip
    path.write_text(json.dumps(data))
    with pytest.raises(StoreError) as info:
        load_summary(path)
    assert fragment in str(info.value) and "\n" not in str(info.value)
