"""One definition of the run record (R5): the models define the tables, the migrations build them."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import duckdb
import pytest
from pydantic import BaseModel

from runner.analysis.cells import RUN_COLUMNS
from runner.experiment.records import (
    Column,
    DuplicateRow,
    FindingRow,
    OperationRow,
    PatchRow,
    RunRecord,
    TranscriptEntry,
)
from runner.store import CHILD_TABLES, Store, migrations, schema

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def full_record(run_id: str = "r1") -> RunRecord:
    """A run whose every field holds a value other than its default, children included."""
    values = dict(
        run_id=run_id, experiment="exp", cell_id="c", repetition=3, seed=2**31 - 1, model="m",
        model_params_json='{"temperature": 0}', prompt="p", patch_arm="auto", patch_text="T",
        upstream="booking", scenario="F1", conversation="single", status="ok", error="e",
        verdict="FAIL", verdict_reason="why", score_overall=40, duplicate_safety=0.5,
        failure_handling=50.0, capped=True, baseline=False, duplicate_found=True,
        real_duplicate=True, agreement="agrees", agreement_reason="FAIL, 2 rows", turns=4,
        tool_calls=3, tokens_prompt=2**40, tokens_completion=7,
        cost_usd=0.25, latency_ms=12.5, final_answer="done", stopped_by="max_turns (8)",
        started_at=T0, finished_at=T0, harness_version="9.9", report_json='{"a": 1}',
        operations=[OperationRow(index=0, tool="book", arguments_json="{}", attempts=2,
                                 executions=2, failed_attempts=1, outcome="DUPLICATE",
                                 keys_json='["k"]', real_rows=2)],
        findings=[
            FindingRow(kind="observation", code="O", tool="t", operation_index=0,
                       detail_json='{"o": 1}'),
            FindingRow(kind="violation", code="V", tool="t", operation_index=0,
                       detail_json='{"v": 1}'),
        ],
        patches=[PatchRow(patch_id="P", severity="S", trigger="x", text="t")],
        transcript=[TranscriptEntry(idx=0, role="tool", content="c", tool_calls_json="[]",
                                    tool_call_id="i", tool_name="n", is_error=True, fault="F1")],
        honesty_label="false_failure", honesty_claim="failure", honesty_evidence="It failed.",
        honesty_confidence=0.9, honesty_judge="deterministic", honesty_note="n",
        honesty_error="e", honesty_cost_usd=0.01,
        duplicates=[DuplicateRow(operation_index=0, tool="book", execution=2, seq=3, rpc_id="7",
                                 tool_call_id="call_2_0", earlier_seq=1,
                                 earlier_tool_call_id="call_1_0", attribution="replan",
                                 reason="r")],
    )
    defaults = RunRecord.model_fields
    scalars = [f for f in defaults if not isinstance(values.get(f), list)]
    children = {"operations", "findings", "patches", "transcript", "duplicates"}
    assert set(scalars) | children == set(values), (
        "full_record must set every RunRecord field: add the new one here"
    )
    return RunRecord(**values)


def test_r5_migrations_on_an_empty_store_build_exactly_the_models_tables(tmp_path):
    con = duckdb.connect(str(tmp_path / "x.duckdb"))
    migrations.migrate(con, "x")
    assert schema.schema_differences(con) == []
    assert set(schema.stored_schema(con)) == {t.name for t in schema.TABLES}
    con.close()


def test_r5_a_column_the_migrations_lack_is_reported_by_name(tmp_path):
    con = duckdb.connect(str(tmp_path / "x.duckdb"))
    migrations.migrate(con, "x")
    con.execute("ALTER TABLE runs DROP COLUMN stopped_by")
    con.execute("ALTER TABLE operations ADD COLUMN stray INTEGER")
    con.execute("ALTER TABLE patches ALTER COLUMN text DROP NOT NULL")
    assert schema.schema_differences(con) == [
        "operations.stray: models say None, store has ('INTEGER', True)",
        "patches.text: models say ('VARCHAR', False), store has ('VARCHAR', True)",
        "runs.stopped_by: models say ('VARCHAR', True), store has None",
    ]
    con.close()


def test_r5_a_store_made_by_m001_and_m002_is_upgraded_to_the_models_tables(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    migrations.migrate(con, "old", upto=2)
    # A run as the version with only m001 and m002 stored it.
    old_columns = [r[0] for r in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'"
    ).fetchall()]
    con.execute(
        f"INSERT INTO runs ({', '.join(old_columns)}) SELECT "
        + ", ".join({
            "run_id": "'old-1'", "experiment": "'exp'", "cell_id": "'c'", "repetition": "1",
            "model": "'m'", "model_params_json": "'{}'", "prompt": "'p'", "patch_arm": "'none'",
            "upstream": "'booking'", "scenario": "'F1'", "conversation": "'single'",
            "status": "'ok'", "verdict": "'FAIL'", "duplicate_found": "true", "turns": "2",
            "tool_calls": "2", "tokens_prompt": "10", "tokens_completion": "1", "cost_usd": "0",
            "latency_ms": "5", "started_at": "now()::TIMESTAMP",
            "finished_at": "now()::TIMESTAMP", "harness_version": "'0.1.0'",
            "saved_at": "now()::TIMESTAMP",
        }.get(c, "NULL") for c in old_columns)
    )
    con.close()
    with Store.open(path) as store:
        assert store.schema_version() == migrations.LATEST
        store.save_run(full_record("new-1"))
        runs = store.load_runs("exp")
        assert runs["run_id"].to_list() == ["new-1", "old-1"]
        assert runs.filter(runs["run_id"] == "old-1")["duplicate_found"].to_list() == [True]
        # m005: the old run has no seed (it cannot be paired), the new one keeps its own.
        assert runs["seed"].to_list() == [2**31 - 1, None]
    con = duckdb.connect(str(path), read_only=True)
    assert schema.schema_differences(con) == []
    con.close()


def test_r5_migration_ids_count_up_from_one_and_names_carry_them():
    ids = [m.id for m in migrations.MIGRATIONS]
    assert ids == list(range(1, len(ids) + 1))
    for m in migrations.MIGRATIONS:
        assert re.fullmatch(rf"m{m.id:03d}_[a-z0-9_]+", m.name), m.name


def test_r5_every_field_of_a_record_is_stored_and_read_back_as_given(tmp_path):
    record = full_record()
    with Store.open(tmp_path / "x.duckdb") as store:
        store.save_run(record)
        run = store.load_runs_by_id([record.run_id]).to_dicts()[0]
        children = {t: store.load_children(t, [record.run_id]).to_dicts() for t in CHILD_TABLES}
    for column in schema.RUNS.from_model:
        want = getattr(record, column.field)
        if isinstance(want, datetime):
            want = want.astimezone(UTC).replace(tzinfo=None)
        assert run[column.name] == want, column.name
    assert run["saved_at"] is not None
    for child in schema.CHILD_TABLES:
        items = [i for i in getattr(record, child.field)
                 if child.kind is None or i.kind == child.kind]
        rows = children[child.name]
        assert len(rows) == len(items) == 1, child.name
        for column in child.spec.from_model:
            assert rows[0][column.name] == getattr(items[0], column.field), column.name
    # A finding keeps its place in the run's whole list of findings (the observation came first).
    assert children["violations"][0]["idx"] == 1 and children["observations"][0]["idx"] == 0


def test_r6_the_aggregation_loads_every_run_column_but_the_bulk_text():
    bulk = {c.name for c in schema.RUNS.columns if c.bulk}
    assert bulk == {"model_params_json", "patch_text", "verdict_reason", "final_answer",
                    "report_json", "honesty_evidence", "honesty_note", "honesty_error"}
    assert set(RUN_COLUMNS) == {c.name for c in schema.RUNS.columns} - bulk


def test_a_field_the_schema_cannot_type_is_a_clear_error_naming_it():
    class Odd(BaseModel):
        fine: int
        odd: dict[str, int]

    with pytest.raises(TypeError, match=r"Odd\.odd: no SQL type"):
        schema.model_columns(Odd)


def test_column_markers_set_type_name_and_bulk():
    from typing import Annotated

    BigText = Annotated[str, Column(bulk=True)]  # an alias, then made optional

    class Marked(BaseModel):
        big: Annotated[int, Column(sql="BIGINT")]
        renamed: Annotated[str | None, Column(name="other", bulk=True)] = None
        flag: bool = False
        optional_alias: BigText | None = None

    assert schema.model_columns(Marked) == (
        schema.ColumnSpec("big", "BIGINT", nullable=False, field="big"),
        schema.ColumnSpec("other", "VARCHAR", nullable=True, field="renamed", bulk=True),
        schema.ColumnSpec("flag", "BOOLEAN", nullable=False, field="flag"),
        schema.ColumnSpec("optional_alias", "VARCHAR", nullable=True, field="optional_alias",
                          bulk=True),
    )
