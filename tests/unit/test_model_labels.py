"""Issue 12: after editing a model's `params`, old and new runs are never summarised as one.

The cell id already hashes the parameters (new runs, old ones kept); the summaries group by
label, so a label seen with several parameter sets is shown once per set, naming what differs.
Also: a run of unknown cost (an unpriced model) keeps the total unknown, never $0.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runner.analysis import analyse
from runner.execute.terminal import summary_table
from runner.experiment.records import RunRecord
from runner.html.markdown import render_markdown
from runner.store import Store

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def record(run_id: str, params: str, *, cost: float | None = 0.0, model: str = "m") -> RunRecord:
    return RunRecord(
        run_id=run_id, experiment="exp", cell_id=f"cell-{params}", repetition=1, model=model,
        model_params_json=params, prompt="p", patch_arm="none", upstream="booking",
        scenario="F1", conversation="single", status="ok", verdict="PASS",
        duplicate_found=False, real_duplicate=False, cost_usd=cost, started_at=T0,
        finished_at=T0, harness_version="0",
    )  # fmt: skip


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "runs.duckdb") as s:
        yield s


def test_edited_params_make_two_summary_rows_that_name_the_difference(store):
    old, new = '{"temperature": 0.2, "timeout": 300}', '{"temperature": 0.2, "timeout": 600}'
    for i, params in enumerate([old, old, new]):
        store.save_run(record(f"r{i}", params))
    store.save_run(record("other", "{}", model="n"))

    cells = analyse(store, "exp").cells
    runs = dict(zip(cells["model"].to_list(), cells["runs"].to_list(), strict=True))
    assert runs == {"m (timeout=300)": 2, "m (timeout=600)": 1, "n": 1}
    table = summary_table(store.load_runs("exp"))
    assert "m (timeout=300)" in table and "m (timeout=600)" in table


def test_a_parameter_added_later_is_named_as_unset_in_the_older_runs(store):
    store.save_run(record("a", "{}"))
    store.save_run(record("b", '{"api_base": "os.environ/LOCAL_API_BASE"}'))
    models = set(analyse(store, "exp").cells["model"].to_list())
    assert models == {"m (api_base unset)", "m (api_base=os.environ/LOCAL_API_BASE)"}


def test_unknown_cost_stays_unknown_in_cells_overview_summary_and_markdown(store):
    store.save_run(record("priced", "{}", cost=0.5))
    store.save_run(record("unpriced", "{}", cost=None))
    analysis = analyse(store, "exp")
    assert analysis.cells["cost_usd"].to_list() == [None]
    assert analysis.overview.cost_usd is None
    (row,) = [line for line in summary_table(store.load_runs("exp")).splitlines() if "F1" in line]
    assert row.rstrip().endswith("unknown")
    assert "cost unknown" in render_markdown(analysis)


def test_known_costs_add_up(store):
    store.save_run(record("a", "{}", cost=0.25))
    store.save_run(record("b", "{}", cost=0.5))
    analysis = analyse(store, "exp")
    assert analysis.overview.cost_usd == 0.75
    assert "cost $0.7500" in render_markdown(analysis)
