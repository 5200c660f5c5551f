"""R5, V3: the store writes runs as columns (`RunBatch`); the rows it stores are exactly the
redacted run records' fields, for one run or many at once, secrets and odd values included."""

from __future__ import annotations

import sys
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from runner.experiment.records import FindingRow, RunRecord, TranscriptEntry
from runner.store import CHILD_TABLES, RunBatch, Store, StoreError, feed
from runner.store import store as store_module
from runner.store.redact import REDACTED, Redactor
from runner.store.rows import utc_naive
from runner.store.schema import CHILD_TABLES as CHILD_SPECS
from runner.store.schema import RUNS
from tests.support.records import make_run

SECRET = "sk-live-0123456789abcdef"
LONG = "é" * 5000 + " Bearer " + "t" * 40 + " " + "x" * 70_000


def odd_runs() -> list[RunRecord]:
    """Runs holding secrets, None, unicode and long text, in every table."""
    runs = [make_run(f"run-{i}") for i in range(5)]
    runs[1] = make_run(
        "run-1",
        error=f"failed with api key {SECRET}",
        model_params_json=f'{{"temperature": 0, "api_key": "{SECRET}", "b": [1]}}',
        final_answer="Réservé ✓ 予約 \u212aey ı İ",
        report_json=LONG,
        patch_text=None,
        started_at=datetime(2026, 11, 1, 14, tzinfo=timezone(timedelta(hours=2))),
        transcript=[
            TranscriptEntry(idx=0, role="user", content="Authorization: Basic dXNlcjpwYXNz"),
            TranscriptEntry(idx=1, role="tool", content="", tool_calls_json="[]", fault=None),
            TranscriptEntry(idx=2, role="assistant", content=f"see https://ada:pw@host/{SECRET}"),
        ],
        findings=[
            FindingRow(kind="violation", code="X", detail_json=f'{{"k": "{SECRET}"}}'),
            FindingRow(kind="observation", code="Y", tool="ßook"),
            FindingRow(kind="violation", code="Z", tool=None, operation_index=None),
        ],
    )
    runs[3] = make_run(
        "run-3",
        status="error",
        error="",
        verdict=None,
        operations=[],
        findings=[],
        patches=[],
        transcript=[],
        duplicates=[],
    )
    return runs


def expected_tables(records: list[RunRecord], redactor: Redactor) -> dict[str, list[dict]]:
    """The rows each table should hold, from the redacted records (`Redactor.record`)."""
    tables: dict[str, list[dict]] = {"runs": []}
    clean = [redactor.record(r) for r in records]
    for r in clean:
        row = {c.name: getattr(r, c.field) for c in RUNS.from_model}
        tables["runs"].append(
            {k: utc_naive(v) if isinstance(v, datetime) else v for k, v in row.items()}
        )
    for child in CHILD_SPECS:
        rows = tables.setdefault(child.name, [])
        for r in clean:
            for position, item in enumerate(getattr(r, child.field)):
                if child.kind is not None and item.kind != child.kind:
                    continue
                row = {"run_id": r.run_id, **({"idx": position} if child.positions else {})}
                row.update({c.name: getattr(item, c.field) for c in child.spec.from_model})
                rows.append(row)
    return tables


def stored_tables(path: Path) -> dict[str, list[dict]]:
    with Store.open(path, read_only=True) as store:
        con = store.connection
        out = {}
        for table in ("runs", *CHILD_TABLES):
            cursor = con.execute(
                f"SELECT * EXCLUDE (saved_at) FROM {table}"
                if table == "runs"
                else f"SELECT * FROM {table}"
            )
            names = [d[0] for d in cursor.description]
            out[table] = sorted(
                (dict(zip(names, row, strict=True)) for row in cursor.fetchall()), key=repr
            )
        return out


@pytest.mark.parametrize("one_by_one", [False, True], ids=["one batch", "one run each"])
def test_r5_v3_stored_rows_are_the_redacted_records_fields_in_batches_of_any_size(
    tmp_path, one_by_one
):
    records = odd_runs()
    redactor = Redactor([SECRET])
    path = tmp_path / "runs.duckdb"
    with Store.open(path, redactor=Redactor([SECRET])) as store:
        if one_by_one:
            for record in records:
                store.save_run(record)
        else:
            store.save_runs(records)
    want = {t: sorted(rows, key=repr) for t, rows in expected_tables(records, redactor).items()}
    have = stored_tables(path)
    assert have == want
    dump = repr(have)
    assert SECRET not in dump and "dXNlcjpwYXNz" not in dump and "ada:pw" not in dump
    assert REDACTED in dump
    run1 = next(r for r in have["runs"] if r["run_id"] == "run-1")
    assert run1["started_at"] == datetime(2026, 11, 1, 12)  # aware -> naive UTC
    assert run1["report_json"].startswith("é" * 5000) and len(run1["report_json"]) > 75_000


def test_r5_a_batch_of_columns_and_a_list_of_records_store_the_same_rows(tmp_path):
    records = odd_runs()
    batch = RunBatch.of(records)
    with Store.open(tmp_path / "a.duckdb", redactor=Redactor([SECRET])) as store:
        store.save_batch(batch)
    assert batch.tables == RunBatch.of(records).tables  # the caller's batch is not changed
    with Store.open(tmp_path / "b.duckdb", redactor=Redactor([SECRET])) as store:
        store.save_runs(records)
    assert stored_tables(tmp_path / "a.duckdb") == stored_tables(tmp_path / "b.duckdb")


def test_r5_within_a_batch_of_columns_the_last_record_of_a_run_id_wins():
    first, last = make_run("r", model="first"), make_run("r", model="last", findings=[])
    batch = RunBatch.of([first, make_run("s"), last])
    assert batch.run_ids == ["r", "s"]
    assert batch.tables["runs"]["model"] == ["last", "m"]
    assert batch.tables["violations"]["run_id"] == ["s"]


def test_r5_a_value_arrow_cannot_store_is_one_store_error_and_nothing_is_written(tmp_path):
    bad = make_run("bad").model_copy(update={"turns": 2**40})  # INTEGER column
    with Store.open(tmp_path / "runs.duckdb") as store:
        with pytest.raises(StoreError, match="cannot save runs"):
            store.save_runs([make_run("good"), bad])
        assert store.count("runs") == 0


def _converters() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "store-arrow"]


@pytest.fixture
def small_slices(monkeypatch):
    """Slices of two rows: a batch of a few runs goes through the converting thread (N2)."""
    monkeypatch.setattr(feed, "SLICE_ROWS", 2)


def test_r5_v3_slices_converted_beside_the_insert_store_the_same_rows_in_order(
    tmp_path, small_slices
):
    records = odd_runs() + [make_run(f"run-{i}") for i in range(5, 12)]
    redactor = Redactor([SECRET])
    interval = sys.getswitchinterval()
    with Store.open(tmp_path / "runs.duckdb", redactor=Redactor([SECRET])) as store:
        store.save_runs(records)
        in_order = [
            row[0] for row in store.connection.execute("SELECT run_id FROM runs").fetchall()
        ]
        store.save_runs(records[3:7])  # re-saving replaces, through the same path
    want = {t: sorted(rows, key=repr) for t, rows in expected_tables(records, redactor).items()}
    assert stored_tables(tmp_path / "runs.duckdb") == want
    assert in_order == [r.run_id for r in records]  # the table keeps the batch's order
    assert not _converters()
    assert sys.getswitchinterval() == interval  # set back after the fast switching


@pytest.mark.parametrize("where", ["first slice", "a later slice"])
def test_r5_a_value_arrow_cannot_store_on_the_converting_thread_writes_nothing(
    tmp_path, small_slices, where
):
    bad = make_run("bad").model_copy(update={"turns": 2**40})  # INTEGER column
    good = [make_run(f"good-{i}") for i in range(7)]
    batch = [bad, *good] if where == "first slice" else [*good, bad]
    interval = sys.getswitchinterval()
    with Store.open(tmp_path / "runs.duckdb") as store:
        with pytest.raises(StoreError, match="cannot save runs"):
            store.save_runs(batch)
        assert store.count("runs") == 0
        assert not _converters()
        assert sys.getswitchinterval() == interval
        store.save_runs(good)  # the connection is usable after the rollback
        assert store.count("runs") == 7


def test_r5_a_row_duckdb_refuses_in_a_later_slice_leaves_nothing_half_written(
    tmp_path, small_slices
):
    bad_entry = TranscriptEntry.model_construct(idx=0, role="user", content=None)  # NOT NULL
    runs = [make_run(f"r{i}") for i in range(6)]
    runs[5] = runs[5].model_copy(update={"transcript": [bad_entry]})
    interval = sys.getswitchinterval()
    with Store.open(tmp_path / "runs.duckdb") as store:
        with pytest.raises(StoreError, match="cannot save runs"):
            store.save_runs(runs)
        assert {t: store.count(t) for t in ("runs", *CHILD_TABLES)} == dict.fromkeys(
            ("runs", *CHILD_TABLES), 0
        )
        assert not _converters()
        assert sys.getswitchinterval() == interval


def test_r5_saved_at_is_now_in_utc(tmp_path):
    before = datetime.now(UTC).replace(tzinfo=None)
    with Store.open(tmp_path / "runs.duckdb") as store:
        store.save_runs([make_run("r")])
        (saved,) = store.connection.execute("SELECT saved_at FROM runs").fetchone()
    assert before - timedelta(seconds=1) <= saved <= datetime.now(UTC).replace(tzinfo=None)


@pytest.mark.parametrize("size", ["small batches", "large batches"])
def test_r5_n2_v3_resaving_replaces_stored_runs_by_their_redacted_ids(
    tmp_path, small_slices, monkeypatch, size
):
    """N2: a large batch into a store without runs skips the existence check and redacts its
    ids slice by slice; once the store holds runs, a batch of any size looks its stored runs
    up by their ids as stored (redacted) and replaces them (R5: a re-run is idempotent)."""
    if size == "large batches":
        monkeypatch.setattr(store_module, "_LOOKUPS", 2)  # a join on the ids, not look-ups
    secret_id = f"run-{SECRET}"
    first = [make_run(secret_id, model="old"), *(make_run(f"r{i}", model="old") for i in range(4))]
    again = [make_run(secret_id, model="new"), *(make_run(f"r{i}", model="new") for i in range(2, 7))]
    redactor = Redactor([SECRET])
    path = tmp_path / "runs.duckdb"
    with Store.open(path, redactor=Redactor([SECRET])) as store:
        store.save_runs(first)
        store.save_runs(again)  # without the check: a duplicate key, or two copies of a run
    latest = {r.run_id: r for r in [*first, *again]}
    want = expected_tables(list(latest.values()), redactor)
    have = stored_tables(path)
    assert have == {t: sorted(rows, key=repr) for t, rows in want.items()}
    assert SECRET not in repr(have)
    models = {row["run_id"]: row["model"] for row in have["runs"]}
    assert models == {
        f"run-{REDACTED}": "new", "r0": "old", "r1": "old", **{f"r{i}": "new" for i in range(2, 7)}
    }


def test_n2_a_writer_writes_each_full_row_group_during_the_insert(tmp_path):  # N2
    """A writer's DuckDB runs on one thread and writes a row group to the file as soon as it
    is full (not five at once after the last slice); a reading connection keeps DuckDB's."""
    settings = "SELECT current_setting('threads'), current_setting('write_buffer_row_group_count')"
    with Store.open(tmp_path / "runs.duckdb") as store:
        store.save_runs([make_run("r")])
        assert store.connection.execute(settings).fetchall() == [(1, 1)]
    with Store.open(tmp_path / "runs.duckdb", read_only=True) as store:
        assert store.connection.execute(settings).fetchall()[0][1] == 5
