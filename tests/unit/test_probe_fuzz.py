"""Round 4's fuzzing of truth probes' queries (V19, T1): a seeded generator writes SQL against
a SQLite and a DuckDB file: reads of many shapes, writes and file-making statements in many
spellings (case, comments, schema prefixes, PRAGMA values), and queries that make huge values
or endless rows.

Whatever comes: the probe gives records within max_output_bytes or fails in one line
(`ProbeFailed`, never another error); the database file's bytes and the folder's files are as
they were (ground truth: read back after every batch); a SQLite probe's memory never takes a
value past the bound (peak RSS of this process, before and after).

Seeds: 1 and 2 in `make test`; PROBE_FUZZ_SEED=N replays seed N alone (docs/security.md).
"""

from __future__ import annotations

import asyncio
import os
import random
import resource
import sqlite3
from pathlib import Path

import duckdb
import pytest

from runner.execute.probe import ProbeFailed, read_state
from runner.experiment import TruthProbe

SEEDS = [int(os.environ["PROBE_FUZZ_SEED"])] if "PROBE_FUZZ_SEED" in os.environ else [1, 2]
QUERIES_PER_SEED = 150
BOUND = 20_000  # max_output_bytes of every generated probe


def _spell(rng: random.Random, sql: str) -> str:
    """The same statement as people write it: case, a leading comment, spacing."""
    if rng.random() < 0.3:
        sql = sql.lower() if rng.random() < 0.5 else sql.upper().replace("'X", "'x")
    if rng.random() < 0.2:
        sql = "/* probe */ " + sql
    if rng.random() < 0.2:
        sql = sql.replace(" ", "  ")
    return sql


READ, REFUSED, EITHER = "read", "refused", "either"  # what a generated query must give


def _sqlite_query(rng: random.Random, folder: Path) -> tuple[str, str]:
    """(a query, READ: it reads within the bound; REFUSED: it must fail; EITHER: records
    within the bound or a failure)."""
    n = rng.choice([10, 1000, 10**6, 2 * 10**8])
    reads = [
        "SELECT customer, amount FROM orders",
        "SELECT count(*), sum(amount) FROM orders",
        "SELECT upper(customer) || '-' || hex(id) FROM orders ORDER BY id DESC",
        "SELECT json_object('c', customer) FROM orders",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5) SELECT i FROM n",
        "PRAGMA table_info(orders)",
        "PRAGMA user_version",
        "SELECT name FROM pragma_table_info('orders')",
        "SELECT name, sql FROM sqlite_master",
        "SELECT * FROM orders WHERE customer LIKE 'A%'",
        "EXPLAIN QUERY PLAN SELECT * FROM orders",
    ]
    writes = [
        f"ATTACH '{folder}/made.sqlite' AS x",
        f"ATTACH DATABASE 'file:{folder}/made2.sqlite?mode=rwc' AS y",
        f"VACUUM INTO '{folder}/copy.sqlite'",
        "VACUUM",
        "PRAGMA query_only = 0", "PRAGMA query_only = false", "PRAGMA main.query_only = no",
        "PRAGMA writable_schema = 1", "PRAGMA journal_mode = WAL", "PRAGMA user_version = 9",
        "PRAGMA temp_store_directory = '/tmp'", "PRAGMA cache_size = 100000",
        "INSERT INTO orders (customer, amount) VALUES ('x', 1)",
        "UPDATE orders SET amount = amount + 1", "DELETE FROM orders",
        "REPLACE INTO orders VALUES (1, 'y', 2)",
        "CREATE TABLE made (a)", "CREATE TEMP TABLE made (a)",
        "CREATE TEMP VIEW v AS SELECT 1", "CREATE INDEX i ON orders (customer)",
        "CREATE TRIGGER t AFTER INSERT ON orders BEGIN SELECT 1; END",
        "DROP TABLE orders", "ALTER TABLE orders ADD COLUMN z", "REINDEX", "ANALYZE",
        "SAVEPOINT s", "BEGIN EXCLUSIVE", "SELECT load_extension('libx')",
        "SELECT 1; DROP TABLE orders",
        "CREATE VIRTUAL TABLE v USING fts5(a)",
    ]  # fmt: skip
    huge = [
        f"SELECT zeroblob({n})", f"SELECT randomblob({n})", f"SELECT printf('%.*c', {n}, 'x')",
        f"SELECT replace(hex(zeroblob({n})), '00', 'ab')",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i FROM n",
        f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) "
        "SELECT group_concat(i) FROM n",
    ]
    roll = rng.random()
    if roll < 0.35:
        return _spell(rng, rng.choice(reads)), READ
    if roll < 0.75:
        return _spell(rng, rng.choice(writes)), REFUSED
    return rng.choice(huge), EITHER


def _duckdb_query(rng: random.Random, folder: Path) -> tuple[str, str]:
    reads = [
        "SELECT customer, amount FROM orders", "SELECT count(*) FROM orders",
        "SELECT * FROM range(5)", "SELECT list(customer) FROM orders",
        "SELECT * FROM duckdb_tables()", "PRAGMA table_info('orders')",
        "SELECT {'c': customer} FROM orders", "SHOW TABLES", "DESCRIBE orders",
    ]  # fmt: skip
    writes = [
        f"ATTACH '{folder}/made.duckdb' AS x", f"COPY orders TO '{folder}/out.csv'",
        f"EXPORT DATABASE '{folder}/exported'", "SET enable_external_access = true",
        "SET memory_limit = '64GB'", "INSTALL httpfs", "LOAD httpfs",
        "INSERT INTO orders VALUES ('x', 1)", "CREATE TABLE made (a INT)", "DROP TABLE orders",
        "UPDATE orders SET amount = 0", "CHECKPOINT", "CREATE MACRO m(a) AS a",
        f"SELECT * FROM read_csv('{folder}/x.csv')", "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM glob('/*')", "CALL dbgen(sf = 0.01)",
    ]  # fmt: skip
    big = ["SELECT repeat('x', 100000)", "SELECT * FROM range(100000)",
           "SELECT repeat('y', 30) FROM range(10000)"]  # fmt: skip
    roll = rng.random()
    if roll < 0.4:
        return _spell(rng, rng.choice(reads)), READ
    if roll < 0.85:
        return _spell(rng, rng.choice(writes)), EITHER  # refused, or a no-op (CHECKPOINT)
    return rng.choice(big), EITHER


def _check(got: dict[str, int] | str, expected: str, where: str) -> None:
    if isinstance(got, str):
        assert "\n" not in got and len(got) < 600, (where, got)
        assert expected != READ, f"{where}: a read failed: {got}"
    else:
        assert expected != REFUSED, f"{where}: it ran: {str(got)[:300]}"
        size = sum((len(record.encode()) + 1) * n for record, n in got.items())
        assert size <= BOUND, f"{where}: {size:,} bytes of records"


def _probe(db: Path, sql: str) -> dict[str, int] | str:
    """The records, or the one line why the probe failed; any other error fails the test."""
    probe = TruthProbe(sql=sql, database=str(db), max_output_bytes=BOUND, timeout_s=5)
    try:
        return dict(asyncio.run(read_state(probe)))
    except ProbeFailed as exc:
        return str(exc)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b""
            for p in sorted(folder.rglob("*"))}  # fmt: skip


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("seed", SEEDS)
def test_v19_generated_sqlite_probes_only_read_and_stay_bounded(tmp_path, seed):
    # V19
    db = tmp_path / "shop.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, amount REAL)")
        conn.executemany("INSERT INTO orders (customer, amount) VALUES (?, ?)",
                         [("ACME", 129), ("Bob", 5.5), ("ACME", 129)])  # fmt: skip
        conn.execute("CREATE INDEX by_customer ON orders (customer)")  # REINDEX has work
    conn.close()
    before, peak = _files(tmp_path), _peak_mb()
    rng = random.Random(seed)
    for case in range(QUERIES_PER_SEED):
        sql, expected = _sqlite_query(rng, tmp_path)
        where = f"seed {seed} case {case}: {sql[:120]}"
        _check(_probe(db, sql), expected, where)
        assert _files(tmp_path) == before, f"{where}: the folder changed"
    assert _peak_mb() - peak < 96, "a probe's value reached memory whole"


@pytest.mark.parametrize("seed", SEEDS)
def test_v19_generated_duckdb_probes_only_read(tmp_path, seed):
    # V19 as V8
    db = tmp_path / "shop.duckdb"
    with duckdb.connect(str(db)) as conn:
        conn.execute("CREATE TABLE orders (customer VARCHAR, amount DECIMAL(10, 2))")
        conn.execute("INSERT INTO orders VALUES ('ACME', 129), ('Bob', 5.5)")
    before = _files(tmp_path)
    rng = random.Random(seed * 101)
    for case in range(QUERIES_PER_SEED // 3):
        sql, expected = _duckdb_query(rng, tmp_path)
        where = f"seed {seed} case {case}: {sql[:120]}"
        _check(_probe(db, sql), expected, where)
        assert _files(tmp_path) == before, f"{where}: the folder changed"
