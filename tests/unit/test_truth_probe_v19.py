"""V19: a truth probe cannot write. A SQLite probe runs under an authorizer that allows only
reads (no ATTACH, no VACUUM INTO, no PRAGMA that sets anything, no temporary object) and can
attach nothing; a DuckDB probe as every store from elsewhere (V8); the output is bounded while
it is produced (`SELECT zeroblob(200000000)` fails where SQLite would make the value).

Ground truth: the database file's bytes and the folder's files before and after each probe."""

from __future__ import annotations

import asyncio
import resource
import sqlite3
from pathlib import Path

import duckdb
import pytest

from runner.execute.probe import ProbeFailed, read_state
from runner.experiment import TruthProbe


def _read(db: Path, sql: str, **bounds: object) -> dict[str, int]:
    return dict(asyncio.run(read_state(TruthProbe(sql=sql, database=str(db), **bounds))))


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    db = tmp_path / "shop.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT)")
        conn.execute("INSERT INTO orders (customer) VALUES ('ACME')")
    return db


WRITES = [
    "ATTACH '{folder}/new.sqlite' AS x",
    "VACUUM INTO '{folder}/copy.sqlite'",
    "VACUUM",
    "PRAGMA query_only = 0",
    "PRAGMA query_only = OFF",
    "PRAGMA user_version = 5",
    "PRAGMA journal_mode = WAL",
    "PRAGMA main.synchronous = 0",
    "CREATE TEMP TABLE t AS SELECT * FROM orders",
    "CREATE TEMP VIEW v AS SELECT 1",
    "INSERT INTO orders (customer) VALUES ('x')",
    "DELETE FROM orders",
    "REPLACE INTO orders VALUES (1, 'y')",
    "SAVEPOINT s",
    "BEGIN IMMEDIATE",
    "ANALYZE",
    "SELECT load_extension('x')",
]


@pytest.mark.parametrize("sql", WRITES)
def test_v19_a_sqlite_probe_can_neither_write_nor_create_a_file(shop, sql):
    # V19: ATTACH and VACUUM INTO created files; PRAGMA query_only=0 undid the read-only guard.
    folder = shop.parent
    before, files = shop.read_bytes(), sorted(p.name for p in folder.iterdir())
    with pytest.raises(ProbeFailed, match="the query failed"):
        _read(shop, sql.format(folder=folder))
    assert shop.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == files


@pytest.mark.parametrize(
    ("sql", "records"),
    [
        ("SELECT customer FROM orders", {'["ACME"]': 1}),
        ("PRAGMA table_info(orders)", {'[0,"id","INTEGER",0,null,1]': 1,
                                       '[1,"customer","TEXT",0,null,0]': 1}),
        ("SELECT name FROM pragma_table_info('orders')", {'["id"]': 1, '["customer"]': 1}),
        ("PRAGMA user_version", {"[0]": 1}),
        ("SELECT name FROM sqlite_master", {'["orders"]': 1}),
        ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) "
         "SELECT count(*) FROM n", {"[3]": 1}),
    ],
)  # fmt: skip
def test_v19_a_sqlite_probe_still_reads(shop, sql, records):
    assert _read(shop, sql) == records


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_v19_a_huge_sqlite_value_fails_where_it_is_made_not_once_it_is_in_memory(shop):
    # V19: the 200 MB blob reached Python, then its text: 2.1 GB before the bound applied.
    before = _peak_mb()
    with pytest.raises(ProbeFailed, match=r"a value larger than max_output_bytes \(4,000,000\)"):
        _read(shop, "SELECT zeroblob(200000000)")
    with pytest.raises(ProbeFailed, match=r"a value larger than max_output_bytes \(1,000\)"):
        _read(shop, "SELECT hex(zeroblob(600))", max_output_bytes=1000)
    assert _peak_mb() - before < 64


def test_v19_sqlite_rows_are_bounded_one_row_at_a_time(shop):
    many = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i FROM n"
    with pytest.raises(ProbeFailed, match=r"rows are larger than max_output_bytes \(10,000\)"):
        _read(shop, many, max_output_bytes=10_000)


@pytest.mark.parametrize(
    "sql",
    ["ATTACH '{folder}/new.duckdb' AS x", "COPY orders TO '{folder}/out.csv'",
     "EXPORT DATABASE '{folder}/exported'", "SET enable_external_access = true",
     "INSTALL httpfs", "INSERT INTO orders VALUES ('x')", "CHECKPOINT"],
)  # fmt: skip
def test_v19_a_duckdb_probe_can_neither_write_nor_create_a_file(tmp_path, sql):
    # V19 as V8: read-only, external access off, configuration locked.
    db = tmp_path / "shop.duckdb"
    with duckdb.connect(str(db)) as conn:
        conn.execute("CREATE TABLE orders (customer VARCHAR)")
        conn.execute("INSERT INTO orders VALUES ('ACME')")
    before, files = db.read_bytes(), sorted(p.name for p in tmp_path.iterdir())
    try:
        _read(db, sql.format(folder=tmp_path))
    except ProbeFailed as exc:
        assert "the query failed" in str(exc)
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == files


def test_v19_a_query_error_is_redacted_before_it_is_cut(shop):
    # V15 for a probe's one line: a credential in the query text that SQLite quotes back.
    key = "sk-proj-" + "Ab1" * 120  # longer than the 300 characters kept
    with pytest.raises(ProbeFailed) as caught:
        _read(shop, f"SELECT * FROM \"{key}\"")  # no such table: <the key>
    assert "sk-proj-Ab1" not in str(caught.value) and "[REDACTED]" in str(caught.value)
