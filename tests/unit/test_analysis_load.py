"""N2: `analyse` reads only the run columns it needs, in whatever order DuckDB returns them;
neither changes the report."""

from __future__ import annotations

from datetime import datetime

import polars as pl
import pytest

from bench.analysis import synthetic_runs
from runner.analysis import analyse
from runner.analysis.cells import ANALYSED_COLUMNS, RUN_COLUMNS
from runner.html import render_html, render_markdown
from runner.store import Store

NOW = datetime(2026, 12, 2, 7, 0)


def test_n2_analysed_columns_are_stored_run_columns():
    assert set(ANALYSED_COLUMNS) <= {*RUN_COLUMNS, "model_params_json"}
    assert len(set(ANALYSED_COLUMNS)) == len(ANALYSED_COLUMNS)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "runs.duckdb"
    with Store.open(path) as opened:
        opened.save_runs(synthetic_runs(600))
    with Store.open(path, read_only=True) as opened:
        yield opened


def test_n2_the_report_does_not_depend_on_the_order_runs_are_loaded_in(monkeypatch, store):
    ordered = analyse(store, now=NOW)
    html, markdown = render_html(ordered), render_markdown(ordered)
    load_runs = type(store).load_runs
    for seed in (1, 2):
        def shuffled(self, *args, seed=seed, **kwargs):
            return load_runs(self, *args, **kwargs).sample(fraction=1.0, shuffle=True, seed=seed)

        monkeypatch.setattr(type(store), "load_runs", shuffled)
        again = analyse(store, now=NOW)
        assert render_html(again) == html
        assert render_markdown(again) == markdown
        columns = [c for c in ordered.cells.columns if ordered.cells[c].dtype != pl.Float64]
        assert again.cells.select(columns).equals(ordered.cells.select(columns))
