"""Aggregation (R6) on a hand-made run store whose counts are known."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from runner.analysis import analyse, fisher_exact, wilson_interval
from runner.analysis.cells import varying_condition_parts
from runner.analysis.model import CELL_KEYS
from runner.experiment.records import FindingRow, RunRecord
from runner.store import Store

T0 = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
NO_FOLLOW_UP = "no follow-up"
RETRY = "follow-up 'please try again'"
_seq = iter(range(10_000))


def run(model: str, arm: str, conversation: str, outcome: str, *, experiment: str = "exp",
        real: bool | str | None = "same", error: str = "boom", upstream: str = "booking") -> RunRecord:
    """One run; outcome is dup (FAIL), clean (PASS), nt (NOT_TESTED) or error."""
    i = next(_seq)
    dup = outcome == "dup"
    is_error = outcome == "error"
    verdict = {"dup": "FAIL", "clean": "PASS", "nt": "NOT_TESTED", "error": None}[outcome]
    return RunRecord(
        run_id=f"{model}-{arm}-{i:04d}", experiment=experiment, cell_id=f"{model}/{arm}",
        repetition=i, model=model, prompt="default", patch_arm=arm,
        patch_text=None if arm == "none" else f"text for {conversation}", upstream=upstream,
        scenario="F1", conversation=conversation, status="error" if is_error else "ok",
        error=error if is_error else None, verdict=verdict,
        score_overall={"dup": 40, "clean": 100}.get(outcome),
        duplicate_found=None if is_error else dup,
        real_duplicate=None if is_error else (dup if real == "same" else real),
        tokens_prompt=100, tokens_completion=10, cost_usd=0.01,
        started_at=T0 + timedelta(minutes=i), finished_at=T0 + timedelta(minutes=i, seconds=30),
        harness_version="0.1.0",
        findings=[FindingRow(kind="violation", code="DUPLICATE_EXECUTION")] if dup else [],
    )


def hand_made_runs() -> list[RunRecord]:
    alpha_none = (
        [run("alpha", "none", NO_FOLLOW_UP, "dup") for _ in range(5)]
        + [run("alpha", "none", NO_FOLLOW_UP, "dup", real=None)]  # upstream cannot tell
        + [run("alpha", "none", NO_FOLLOW_UP, "clean") for _ in range(3)]
        + [run("alpha", "none", NO_FOLLOW_UP, "error", error="litellm.Timeout: 600 s\nTrace A")]
    )
    alpha_auto = (
        [run("alpha", "auto", NO_FOLLOW_UP, "dup")]
        + [run("alpha", "auto", NO_FOLLOW_UP, "clean") for _ in range(6)]
        + [run("alpha", "auto", NO_FOLLOW_UP, "nt")]
        + [run("alpha", "auto", NO_FOLLOW_UP, "error", error="litellm.Timeout: 600 s\nTrace B")]
    )
    alpha_retry_auto = [run("alpha", "auto", RETRY, "clean") for _ in range(4)]
    beta_none = [run("beta", "none", NO_FOLLOW_UP, "dup") for _ in range(5)]
    elsewhere = [run("gamma", "none", NO_FOLLOW_UP, "clean", experiment="elsewhere")]
    return alpha_none + alpha_auto + alpha_retry_auto + beta_none + elsewhere


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("analysis") / "runs.duckdb"
    with Store.open(path) as s:
        s.save_runs(hand_made_runs())
        s.save_experiment("exp", "experiments/exp.yaml", "spec", started_at=T0)
        yield s


@pytest.fixture(scope="module")
def analysis(store):
    return analyse(store, "exp", now=datetime(2026, 11, 2, tzinfo=UTC))


def cell(analysis, model: str, conversation: str, arm: str) -> dict:
    rows = analysis.cells.filter(
        (pl.col("model") == model) & (pl.col("conversation") == conversation)
        & (pl.col("patch_arm") == arm)
    ).to_dicts()
    assert len(rows) == 1
    return rows[0]


def test_cells_are_one_row_per_model_condition_scenario_and_arm(analysis):  # R6
    keys = analysis.cells.select("model", "conversation", "patch_arm").rows()
    assert keys == [
        ("alpha", RETRY, "auto"),
        ("alpha", NO_FOLLOW_UP, "none"),
        ("alpha", NO_FOLLOW_UP, "auto"),
        ("beta", NO_FOLLOW_UP, "none"),
    ]
    assert analysis.cells.get_column("cell_no").to_list() == [1, 2, 3, 4]


def test_cell_counts_leave_error_runs_out_of_the_rates(analysis):  # R6
    c = cell(analysis, "alpha", NO_FOLLOW_UP, "none")
    assert (c["runs"], c["errors"], c["n"], c["dup_k"]) == (10, 1, 9, 6)
    assert c["rate"] == pytest.approx(6 / 9)
    interval = wilson_interval(6, 9)
    assert (c["ci_low"], c["ci_high"]) == (
        pytest.approx(interval.low), pytest.approx(interval.high)
    )


def test_real_duplicates_count_only_runs_whose_upstream_could_tell(analysis):
    c = cell(analysis, "alpha", NO_FOLLOW_UP, "none")
    assert (c["real_k"], c["real_n"]) == (5, 8)


@pytest.mark.parametrize(
    ("model", "conversation", "arm", "expected"),
    [
        ("alpha", NO_FOLLOW_UP, "none", (3, 6, 0, 60.0)),
        ("alpha", NO_FOLLOW_UP, "auto", (6, 1, 1, 640 / 7)),
        ("alpha", RETRY, "auto", (4, 0, 0, 100.0)),
        ("beta", NO_FOLLOW_UP, "none", (0, 5, 0, 40.0)),
    ],
)
def test_verdict_counts_and_mean_score_per_cell(analysis, model, conversation, arm, expected):
    c = cell(analysis, model, conversation, arm)
    passed, failed, not_tested, mean = expected
    assert (c["passed"], c["failed"], c["not_tested"]) == (passed, failed, not_tested)
    # NOT_TESTED has no score (J4) and must not pull the mean down.
    assert c["mean_score"] == pytest.approx(mean)


def test_tokens_and_cost_include_every_run(analysis):
    c = cell(analysis, "alpha", NO_FOLLOW_UP, "auto")
    assert c["tokens"] == 9 * 110
    assert c["cost_usd"] == pytest.approx(0.09)


def test_condition_label_names_only_what_varies(analysis):
    assert set(analysis.cells.get_column("condition")) == {RETRY, NO_FOLLOW_UP}
    assert analysis.overview.common == {"prompt": "default", "upstream": "booking"}


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        ({"prompt": ["a", "a"], "upstream": ["u", "u"], "conversation": ["c", "c"]},
         ["upstream", "conversation"]),
        ({"prompt": ["a", "b"], "upstream": ["u", "v"], "conversation": ["c", "c"]},
         ["prompt", "upstream"]),
    ],
)
def test_varying_condition_parts(columns, expected):
    assert varying_condition_parts(pl.DataFrame(columns)) == expected


def test_before_after_rows_compare_each_arm_with_the_unpatched_runs(analysis):  # R6
    rows = {(r.model, r.conversation): r for r in analysis.before_after}
    assert analysis.patch_arms == ["auto"]
    alpha = rows[("alpha", NO_FOLLOW_UP)]
    assert (alpha.unpatched.k, alpha.unpatched.n) == (6, 9)
    auto = alpha.arms["auto"]
    assert (auto.count.k, auto.count.n) == (1, 8)
    assert auto.p_value == pytest.approx(fisher_exact(6, 3, 1, 7))


def test_before_after_marks_missing_arms_and_missing_baselines(analysis):
    rows = {(r.model, r.conversation): r for r in analysis.before_after}
    assert rows[("beta", NO_FOLLOW_UP)].arms["auto"] is None
    retry = rows[("alpha", RETRY)]
    assert retry.unpatched is None
    assert (retry.arms["auto"].count.k, retry.arms["auto"].count.n) == (0, 4)
    assert retry.arms["auto"].p_value is None
    assert len(analysis.before_after) == 3


def test_overview_counts_runs_errors_and_verdicts(analysis):  # R7 overview
    ov = analysis.overview
    assert (ov.runs, ov.ok_runs, ov.error_runs) == (28, 26, 2)
    assert ov.verdicts == {"PASS": 13, "FAIL": 12, "NOT_TESTED": 1}
    assert ov.harness_versions == ["0.1.0"]
    assert [e.name for e in ov.experiments] == ["exp"]
    assert ov.experiments[0].spec_path == "experiments/exp.yaml"
    assert ov.experiments[0].runs == 28


def test_error_runs_are_grouped_by_the_first_line_of_their_message(analysis):
    assert analysis.overview.errors == [("litellm.Timeout: 600 s", 2)]


def test_patch_texts_list_each_distinct_text_of_each_arm(analysis):
    texts = {(p["patch_arm"], p["patch_text"]): p["runs"] for p in analysis.patch_texts}
    assert texts == {("auto", f"text for {NO_FOLLOW_UP}"): 9, ("auto", f"text for {RETRY}"): 4}


def test_experiment_filter_and_all_experiments(store):
    everything = analyse(store)
    assert "gamma" in everything.cells.get_column("model").to_list()
    assert everything.overview.runs == 29
    assert [e.name for e in everything.overview.experiments] == ["elsewhere", "exp"]


def test_drill_down_takes_one_run_per_cell_first(store):  # R7
    result = analyse(store, "exp", max_detail_runs=4)
    assert sorted(d.cell_no for d in result.details) == [1, 2, 3, 4]
    assert result.details_left_out == 28 - 4
    by_cell = {d.cell_no: d for d in result.details}
    # The representative of a cell with duplicates is a duplicate run.
    assert by_cell[2].run["duplicate_found"] is True
    assert by_cell[3].run["duplicate_found"] is True


def test_drill_down_fills_up_with_runs_with_findings(store):  # R7
    result = analyse(store, "exp", max_detail_runs=6)
    extra = [d for d in result.details if d.cell_no in (2, 4)]
    assert len(extra) == 4
    assert all(d.run["verdict"] == "FAIL" for d in extra)


def test_drill_down_loads_findings_and_report_fields(store):
    result = analyse(store, "exp", max_detail_runs=1)
    (detail,) = result.details
    assert detail.run["duplicate_found"] is True
    assert [f["code"] for f in detail.findings] == ["DUPLICATE_EXECUTION"]
    assert "report_json" not in detail.run


def test_drill_down_shows_the_runs_of_a_cell_in_repetition_order(tmp_path):  # R7
    # Run ids are hashes: their order says nothing. Within a priority, #1 comes before #2.
    runs = [run("alpha", "none", NO_FOLLOW_UP, "clean") for _ in range(4)]
    runs = [r.model_copy(update={"run_id": f"z{9 - k}", "repetition": k + 1})
            for k, r in enumerate(runs)]
    with Store.open(tmp_path / "runs.duckdb") as s:
        s.save_runs(runs)
        result = analyse(s, "exp")
    assert [d.run["repetition"] for d in result.details] == [1, 2, 3, 4]


@pytest.mark.parametrize(("limit", "shown"), [(0, 0), (1000, 28)])
def test_drill_down_limit_bounds(store, limit, shown):
    result = analyse(store, "exp", max_detail_runs=limit)
    assert len(result.details) == shown
    assert result.details_left_out == 28 - shown


def test_an_empty_store_gives_an_empty_analysis(tmp_path):
    with Store.open(tmp_path / "empty.duckdb") as s:
        result = analyse(s)
    assert result.cells.is_empty()
    assert result.before_after == []
    assert result.overview.runs == 0
    assert result.details == []


def test_n2_cells_keep_text_keys_in_text_order_whatever_order_the_runs_came_in(tmp_path):  # N2
    """The aggregation groups, joins and sorts the cell keys as categoricals (N2): the cells
    still hold text columns, sorted as text (not in the order the values were first met)."""
    models = ["zeta", "Beta", "émile", "alpha", "beta"]
    runs = [run(m, arm, NO_FOLLOW_UP, outcome) for m in models for arm in ("auto", "none")
            for outcome in ("dup", "clean")]
    with Store.open(tmp_path / "runs.duckdb") as s:
        s.save_runs(runs)
        result = analyse(s, now=datetime(2026, 11, 2, tzinfo=UTC))
    assert all(result.cells.schema[key] == pl.String for key in CELL_KEYS)
    shown = result.cells.select("model", "patch_arm").rows()
    assert shown == [(m, arm) for m in sorted(models) for arm in ("none", "auto")]
    assert [row.model for row in result.before_after] == sorted(models)
    assert [d.cell_no for d in result.details] == sorted(d.cell_no for d in result.details)
    assert [d.run["model"] for d in result.details] == [m for m in sorted(models) for _ in "abcd"]


def test_m2_n2_duplicate_causes_count_only_the_analysed_runs(tmp_path):  # M2 N2
    """The causes of all experiments are read without matching them with the runs (N2): the
    cells count only those of the runs analysed, and a duplicates row without its run (which
    the store never writes) counts nowhere."""
    from tests.support.records import make_run

    runs = [make_run("a1"), make_run("a2"), make_run("b1", experiment="other")]
    with Store.open(tmp_path / "runs.duckdb") as s:
        s.save_runs(runs)
        s.connection.execute(
            "INSERT INTO duplicates SELECT * REPLACE ('orphan' AS run_id) FROM duplicates "
            "WHERE run_id = 'a1'"
        )
        assert sorted(s.duplicate_causes().get_column("run_id")) == ["a1", "a2", "b1", "orphan"]
        assert sorted(s.duplicate_causes("exp").get_column("run_id")) == ["a1", "a2"]
        every = analyse(s, now=datetime(2026, 11, 2, tzinfo=UTC))
        one = analyse(s, "exp", now=datetime(2026, 11, 2, tzinfo=UTC))
    assert every.cells.get_column("a_total").to_list() == [3]
    assert every.cells.get_column("a_replan").to_list() == [3]
    assert one.cells.get_column("a_total").to_list() == [2]
