"""The DuckDB run store (R5): migrations, replace-on-resave, transactions, resume."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import duckdb
import pytest

from runner.experiment.records import (
    TranscriptEntry,
)
from runner.store import (
    SchemaVersionError,
    Store,
    StoreError,
    StoreOpenError,
    migrations,
)
from tests.support.records import T0, child_counts, make_run


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "runs.duckdb") as s:
        yield s


# -- opening and migrations ----------------------------------------------------------------


ALL_MIGRATIONS = [(m.id, m.name) for m in migrations.MIGRATIONS]


def test_open_creates_missing_folders_and_applies_every_migration(tmp_path):  # R5
    path = tmp_path / "a" / "b" / "runs.duckdb"
    with Store.open(path) as s:
        assert s.schema_version() == migrations.LATEST
    assert path.is_file()
    con = duckdb.connect(str(path))
    rows = con.execute("SELECT id, name FROM schema_migrations ORDER BY id").fetchall()
    con.close()
    assert rows == ALL_MIGRATIONS
    assert rows[:2] == [(1, "m001_initial"), (2, "m002_stopped_by")]


def test_reopening_is_idempotent_and_keeps_the_data(tmp_path):  # R5
    path = tmp_path / "runs.duckdb"
    with Store.open(path) as s:
        s.save_run(make_run("r1"))
    for _ in range(2):
        with Store.open(path) as s:
            assert s.finished_run_ids("exp") == {"r1"}
    con = duckdb.connect(str(path))
    count = con.execute("SELECT count(*) FROM schema_migrations").fetchall()
    assert count == [(len(ALL_MIGRATIONS),)]
    con.close()


def test_migrate_applies_nothing_the_second_time(tmp_path):
    con = duckdb.connect(str(tmp_path / "x.duckdb"))
    assert migrations.migrate(con, "x") == [name for _, name in ALL_MIGRATIONS]
    assert migrations.migrate(con, "x") == []
    con.close()


def test_a_store_made_before_m002_is_upgraded_and_keeps_its_runs(tmp_path):  # R5
    path = tmp_path / "runs.duckdb"
    con = duckdb.connect(str(path))
    migrations.migrate(con, "x", upto=1)
    con.close()
    with Store.open(path) as s:
        assert s.schema_version() == migrations.LATEST
        record = make_run("r1").model_copy(update={"stopped_by": "max_turns (8)"})
        s.save_run(record)
        assert s.load_runs("exp")["stopped_by"].to_list() == ["max_turns (8)"]


def test_a_store_made_before_m007_is_upgraded_and_keeps_an_unknown_cost_unknown(tmp_path):  # R5
    # Issue 12: an unpriced model's cost is unknown (NULL), never $0; older stores said NOT NULL.
    path = tmp_path / "runs.duckdb"
    con = duckdb.connect(str(path))
    migrations.migrate(con, "x")
    con.execute("DELETE FROM schema_migrations WHERE id = 7")
    con.execute("ALTER TABLE runs ALTER COLUMN cost_usd SET NOT NULL")
    con.close()
    with Store.open(path) as s:
        s.save_run(make_run("priced").model_copy(update={"cost_usd": 0.25}))
        s.save_run(make_run("unpriced").model_copy(update={"cost_usd": None}))
        costs = dict(s.load_runs("exp").select("run_id", "cost_usd").iter_rows())
    assert costs == {"priced": 0.25, "unpriced": None}


def test_a_newer_schema_than_the_code_knows_is_a_clear_error(tmp_path):  # R5
    path = tmp_path / "runs.duckdb"
    Store.open(path).close()
    con = duckdb.connect(str(path))
    con.execute("INSERT INTO schema_migrations VALUES (99, 'm099_future', now()::TIMESTAMP)")
    con.close()
    with pytest.raises(SchemaVersionError, match="newer than this agent-harness knows"):
        Store.open(path)
    with pytest.raises(SchemaVersionError):
        Store.open(path, read_only=True)


def test_a_migration_recorded_under_another_name_is_refused(tmp_path):
    path = tmp_path / "runs.duckdb"
    Store.open(path).close()
    con = duckdb.connect(str(path))
    con.execute("UPDATE schema_migrations SET name = 'm001_other' WHERE id = 1")
    con.close()
    with pytest.raises(SchemaVersionError, match="another program"):
        Store.open(path)


def test_a_file_that_is_not_duckdb_is_a_one_line_error(tmp_path):  # R5
    path = tmp_path / "runs.duckdb"
    path.write_text("this is a text file, not a database\n" * 10)
    with pytest.raises(StoreOpenError) as err:
        Store.open(path)
    assert "is not a DuckDB database" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("read_only", [False, True])
def test_a_folder_as_store_path_is_refused(tmp_path, read_only):
    with pytest.raises(StoreOpenError, match="is a folder"):
        Store.open(tmp_path, read_only=read_only)


def test_an_unwritable_path_is_a_clear_error(tmp_path):  # R5
    blocker = tmp_path / "file"
    blocker.write_text("x")
    # The parent "folder" is a regular file: no user, root included, can create the store.
    with pytest.raises(StoreOpenError, match="file is not a folder"):
        Store.open(blocker / "sub" / "runs.duckdb")


def test_read_only_open_of_a_missing_file_does_not_create_it(tmp_path):
    path = tmp_path / "missing.duckdb"
    with pytest.raises(StoreOpenError, match="does not exist"):
        Store.open(path, read_only=True)
    assert not path.exists()


def test_read_only_store_reads_but_cannot_write(tmp_path):
    path = tmp_path / "runs.duckdb"
    with Store.open(path) as s:
        s.save_run(make_run("r1"))
    with Store.open(path, read_only=True) as s:
        assert s.finished_run_ids("exp") == {"r1"}
        with pytest.raises(StoreError):
            s.save_run(make_run("r2"))


# -- saving ----------------------------------------------------------------------------------


def test_save_run_stores_the_run_and_every_child_row(store):  # R5
    store.save_run(make_run("r1"))
    assert child_counts(store) == {
        "runs": 1, "operations": 1, "violations": 1, "observations": 1, "patches": 1,
        "transcripts": 3, "duplicates": 1,
    }
    row = store.load_runs(include_report=True).row(0, named=True)
    assert (row["verdict"], row["duplicate_found"], row["report_json"]) == (
        "FAIL", True, '{"verdict": "FAIL"}'
    )


def test_findings_keep_their_place_in_the_report_order(store):
    store.save_run(make_run("r1"))
    violations = store.load_children("violations", ["r1"]).to_dicts()
    observations = store.load_children("observations", ["r1"]).to_dicts()
    assert [(v["code"], v["idx"]) for v in violations] == [("DUPLICATE_EXECUTION", 1)]
    assert [(o["code"], o["idx"]) for o in observations] == [("UNVERIFIED_AFTER_TIMEOUT", 0)]
    assert violations[0]["detail_json"] == '{"duplicate": {"keyUse": "no_key"}}'


def test_operation_index_is_stored_as_idx_with_ground_truth(store):
    store.save_run(make_run("r1"))
    op = store.load_children("operations", ["r1"]).row(0, named=True)
    assert (op["idx"], op["executions"], op["real_rows"]) == (0, 2, 2)


def test_resaving_a_run_id_replaces_the_run_and_its_children(store):  # R5
    store.save_run(make_run("r1"))
    store.save_run(make_run(
        "r1", verdict="PASS", duplicate_found=False, findings=[], patches=[],
        transcript=[TranscriptEntry(idx=0, role="user", content="only")], duplicates=[],
    ))
    assert child_counts(store) == {
        "runs": 1, "operations": 1, "violations": 0, "observations": 0, "patches": 0,
        "transcripts": 1, "duplicates": 0,
    }
    assert store.load_runs().get_column("verdict").to_list() == ["PASS"]


def test_save_runs_stores_a_batch_and_the_last_record_of_an_id_wins(store):
    store.save_runs([make_run("a"), make_run("b"), make_run("a", verdict="PASS")])
    runs = store.load_runs(columns=["run_id", "verdict"]).rows()
    assert runs == [("a", "PASS"), ("b", "FAIL")]
    assert store.count("transcripts") == 6


def test_save_runs_of_nothing_is_a_no_op(store):
    store.save_runs([])
    assert store.count("runs") == 0


def test_a_failure_inside_save_leaves_nothing_half_written(store):  # R5
    store.save_run(make_run("old"))
    before = child_counts(store)
    # Bypass validation to get a transcript row the table refuses (content NOT NULL). The
    # transcripts are inserted last, after the runs and the other child rows of the batch.
    bad_entry = TranscriptEntry.model_construct(idx=0, role="user", content=None)
    broken = make_run("old", verdict="PASS").model_copy(update={"transcript": [bad_entry]})
    with pytest.raises(StoreError, match="cannot save runs"):
        store.save_runs([make_run("new"), broken])
    assert child_counts(store) == before
    assert store.finished_run_ids("exp") == {"old"}
    assert store.load_runs().get_column("verdict").to_list() == ["FAIL"]
    # The connection is usable after the rollback.
    store.save_run(make_run("new"))
    assert store.finished_run_ids("exp") == {"old", "new"}


def test_aware_timestamps_are_stored_as_utc(store):
    cest = timezone(timedelta(hours=2))
    started = datetime(2026, 6, 1, 12, 0, tzinfo=cest)
    store.save_run(make_run("r1", started_at=started, finished_at=started))
    assert store.load_runs().get_column("started_at").to_list() == [datetime(2026, 6, 1, 10, 0)]


# -- resume and reading ----------------------------------------------------------------------


def test_finished_run_ids_for_resume(store):  # R1, R5
    store.save_runs([
        make_run("ok1"),
        make_run("err1", status="error", error="boom", verdict=None),
        make_run("other", experiment="exp2"),
    ])
    assert store.finished_run_ids("exp") == {"ok1", "err1"}
    assert store.finished_run_ids("exp", include_errors=False) == {"ok1"}
    assert store.finished_run_ids("exp2") == {"other"}
    assert store.finished_run_ids("nope") == set()


@pytest.mark.parametrize(
    ("experiment", "expected"),
    [(None, ["a", "b", "c"]), ("e1", ["a", "b"]), (["e2"], ["c"]), ([], [])],
)
def test_load_runs_filters_by_experiment(store, experiment, expected):
    store.save_runs([make_run("a", experiment="e1"), make_run("b", experiment="e1"),
                     make_run("c", experiment="e2")])
    frame = store.load_runs(experiment, columns=["run_id"])
    assert frame.get_column("run_id").to_list() == expected


def test_load_runs_leaves_out_the_report_unless_asked(store):
    store.save_run(make_run("a"))
    assert "report_json" not in store.load_runs().columns
    assert "report_json" in store.load_runs(include_report=True).columns


def test_load_runs_names_an_unknown_column(store):
    with pytest.raises(StoreError, match="no column"):
        store.load_runs(columns=["run_id", "bogus"])


def test_save_experiment_keeps_first_start_and_updates_spec_and_last_start(store):
    store.save_experiment("exp", "experiments/exp.yaml", "v1", started_at=T0)
    store.save_experiment("exp", "experiments/exp.yaml", "v2", started_at=T0 + timedelta(hours=1))
    row = store.load_experiments().row(0, named=True)
    assert row["spec_text"] == "v2"
    assert row["first_started"] == datetime(2026, 11, 1, 12, 0)
    assert row["last_started"] == datetime(2026, 11, 1, 13, 0)
    assert store.experiment_names() == ["exp"]


def test_patch_texts_lists_distinct_texts_per_patched_arm(store):
    store.save_runs([
        make_run("a", patch_arm="auto", patch_text="T1"),
        make_run("b", patch_arm="auto", patch_text="T1"),
        make_run("c", patch_arm="auto", patch_text="T2"),
        make_run("d", patch_arm="none"),
    ])
    assert store.patch_texts().rows() == [("auto", "T1", 2), ("auto", "T2", 1)]


# -- a killed writer -------------------------------------------------------------------------


