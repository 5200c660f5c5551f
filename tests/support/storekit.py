"""Run stores for tests of files from elsewhere (V8): real stores made by the Store, hostile
ones made by hand, and byte-exact fingerprints of files that must stay as they were."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from runner.experiment.records import OperationRow, RunRecord, TranscriptEntry
from runner.store import Store

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
SPEC_TEXT = "name: exp\nmodels: [scripted/careful]\n"


def make_run(run_id: str, experiment: str = "exp", **fields: object) -> RunRecord:
    """A finished run with an operation and a short transcript; fields override."""
    base: dict[str, object] = dict(
        run_id=run_id, experiment=experiment, cell_id=f"cell-{run_id}", repetition=1,
        model="scripted/careful", prompt="p", patch_arm="none", upstream="booking",
        scenario="F1", conversation="c", status="ok", verdict="PASS", duplicate_found=False,
        real_duplicate=False, agreement="agrees", score_overall=90, started_at=T0,
        finished_at=T0, harness_version="0.1.0", final_answer="Your room is booked.",
        report_json='{"verdict": "PASS"}',
        operations=[OperationRow(index=0, tool="book", arguments_json="{}", attempts=1,
                                 executions=1, failed_attempts=0, outcome="executed",
                                 real_rows=1)],
        transcript=[TranscriptEntry(idx=0, role="user", content="Please book a room."),
                    TranscriptEntry(idx=1, role="assistant", content="Your room is booked.")],
    )  # fmt: skip
    base.update(fields)
    return RunRecord(**base)


def make_store(
    path: Path,
    run_ids: list[str],
    experiment: str = "exp",
    spec_text: str = SPEC_TEXT,
    **fields: object,
) -> Path:
    """A run store holding one experiment and the given runs."""
    with Store.open(path) as store:
        store.save_experiment(experiment, "spec.yaml", spec_text, T0)
        store.save_runs(make_run(r, experiment, **fields) for r in run_ids)
    return path


def fingerprint(path: Path) -> dict[str, str | None]:
    """sha256 of a file and of its WAL, None where there is none: "left as it was"."""
    prints: dict[str, str | None] = {}
    for name in (str(path), f"{path}.wal"):
        p = Path(name)
        prints[p.name] = hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None
    return prints


def hostile_store(path: Path, view_sql: str) -> Path:
    """A real run store whose `runs` table was swapped for a view (`view_sql` selects from
    `kept`, the real rows, and may call read_text, glob, ...), as a hostile shard would be."""
    make_store(path, ["r1", "r2"])
    con = duckdb.connect(str(path))
    try:
        con.execute("CREATE TABLE kept AS SELECT * FROM runs")
        con.execute("DROP TABLE runs")
        con.execute(f"CREATE VIEW runs AS {view_sql}")
    finally:
        con.close()
    return path


def foreign_database(path: Path) -> Path:
    """A DuckDB database of somebody else's: customers and orders, no run store."""
    con = duckdb.connect(str(path))
    try:
        con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR)")
        con.execute("INSERT INTO customers VALUES (1, 'Alice'), (2, 'Bob')")
        con.execute("CREATE TABLE orders (id INTEGER, customer INTEGER, total DOUBLE)")
        con.execute("INSERT INTO orders VALUES (10, 1, 99.5)")
    finally:
        con.close()
    return path


def tables(path: Path) -> set[str]:
    """The table names in a DuckDB file, read through a plain read-only connection."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    finally:
        con.close()
