"""Sequential stopping per cell (M3), through real sweeps of scripted agents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.execute import run_sweep
from runner.experiment import ExperimentSpec, SpecError, load_spec
from runner.experiment.matrix import expand
from runner.store import Store
from tests.support.specs import write_spec

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def stop_spec(folder: Path, **overrides: Any) -> ExperimentSpec:
    # One run at a time (concurrency 1): a cell stops right after the run that decides it.
    fields = dict(models=["scripted/naive", "scripted/careful"], patches=["none", "auto"],
                  runs=12, concurrency=1)  # fmt: skip
    return load_spec(write_spec(folder, "stop", file="spec.yaml", **{**fields, **overrides}))


def runs_per_cell(store: Store) -> dict[tuple[str, str], int]:
    rows = store.load_runs("stop").group_by("model", "patch_arm").len().iter_rows()
    return {(model, arm): n for model, arm, n in rows}


async def test_m3_a_cell_stops_once_its_interval_clears_the_threshold(tmp_path):
    rule = {"threshold": 0.5, "min_runs": 5, "confidence": 0.95}
    spec = stop_spec(tmp_path, stop_early=rule)
    with Store.open(tmp_path / "runs.duckdb") as store:
        result = await run_sweep(spec, expand(spec), store, in_process="always")
        counts = runs_per_cell(store)
    # naive books twice every time (5 of 5: Wilson [57%, 100%] lies above 50%), careful never
    # (0 of 5: [0%, 43%] below); the patched arms too. 5 runs decide each of the 4 cells.
    assert counts == {("scripted/naive", "none"): 5, ("scripted/naive", "auto"): 5,
                      ("scripted/careful", "none"): 5, ("scripted/careful", "auto"): 5}
    assert result.stopped_early == 4 * (12 - 5)


async def test_m3_the_default_rule_looks_at_99_percent_and_so_decides_later(tmp_path):
    # 5 of 5 at 99 %: Wilson [43%, 100%] still reaches 50 %; 7 of 7: [51.7%, 100%] does not.
    spec = stop_spec(tmp_path, models=["scripted/naive"], patches=["none"],
                      stop_early={"threshold": 0.5})
    assert spec.stop_early is not None and spec.stop_early.confidence == 0.99
    with Store.open(tmp_path / "runs.duckdb") as store:
        await run_sweep(spec, expand(spec), store, in_process="always")
        assert runs_per_cell(store) == {("scripted/naive", "none"): 7}


async def test_m3_stopping_is_off_unless_the_spec_asks_for_it(tmp_path):
    spec = stop_spec(tmp_path, runs=6, models=["scripted/naive"], patches=["none"])
    with Store.open(tmp_path / "runs.duckdb") as store:
        result = await run_sweep(spec, expand(spec), store, in_process="always")
        assert runs_per_cell(store) == {("scripted/naive", "none"): 6}
    assert result.stopped_early == 0


async def test_m3_a_resumed_sweep_remembers_which_cells_were_decided(tmp_path):
    spec = stop_spec(tmp_path, models=["scripted/naive"], patches=["none"],
                      stop_early={"threshold": 0.5, "min_runs": 5, "confidence": 0.95})
    cells = expand(spec)
    with Store.open(tmp_path / "runs.duckdb") as store:
        # A first sweep cut short after 3 runs, then the whole matrix again.
        await run_sweep(spec, cells[:3], store, in_process="always")
        await run_sweep(spec, cells, store, in_process="always")
        again = await run_sweep(spec, cells, store, in_process="always")
        assert runs_per_cell(store) == {("scripted/naive", "none"): 5}
    assert again.ran == 0 and again.stopped_early == 12 - 5


@pytest.mark.parametrize(
    ("rule", "field"),
    [({"threshold": 1.5}, "threshold"), ({"threshold": 0.5, "min_runs": 0}, "min_runs"),
     ({"threshold": 0.5, "confidence": 1}, "confidence"), ({"treshold": 0.5}, "treshold")],
)
def test_m3_a_bad_stop_rule_is_a_spec_error_naming_file_line_and_field(tmp_path, rule, field):
    with pytest.raises(SpecError) as err:
        stop_spec(tmp_path, stop_early=rule)
    # One line per problem, each FILE:LINE: FIELD (a misspelt key also lacks the real one).
    lines = str(err.value).splitlines()
    assert any("spec.yaml:" in line and f"stop_early.{field}:" in line for line in lines)
