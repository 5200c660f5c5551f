"""T1: a truth probe's spec, its SQL reading of SQLite and DuckDB files, and how a state before
and after a run becomes real effects per operation (R10's ground truth, E1's contradiction).

The command probe starts a process, so it is tested in tests/integration/test_truth_probe_runs.py.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass
from typing import Any

import anyio
import duckdb
import pytest

from runner.execute.effects import (
    Entry,
    contradicted_by_records,
    contradicted_by_rows,
    effects,
    effects_per_operation,
    match,
)
from runner.execute.probe import ProbeFailed, read_state
from runner.experiment import TruthProbe, load_spec
from tests.support.specs import load_error, spec_text, write

COMMAND = "{name: u, command: srv, truth_probe: %s}"


def upstream_with(probe: str) -> str:
    return spec_text(upstreams=f"\n  - {COMMAND % probe}")


def test_t1_a_spec_takes_a_command_or_an_sql_probe(tmp_path):
    spec = load_spec(write(tmp_path, upstream_with("{command: [find, /srv, -type, f]}")))
    probe = spec.upstreams[0].truth_probe
    assert probe.command == ("find", "/srv", "-type", "f") and probe.timeout_s == 10
    spec = load_spec(write(tmp_path, upstream_with('{sql: "SELECT a FROM t", database: x.db}')))
    assert spec.upstreams[0].truth_probe.sql == "SELECT a FROM t"


@pytest.mark.parametrize(
    ("probe", "says"),
    [
        ('{sql: "SELECT 1"}', "truth_probe: an `sql` probe needs the `database` file"),
        ("{command: []}", "truth_probe: `command` needs the program to run"),
        ('{command: [ls], sql: "SELECT 1", database: x}', "exactly one of them"),
        ("{}", "exactly one of them"),
        ("{command: [ls], database: x}", "`database` goes with an `sql` probe"),
        ('{sql: "SELECT 1", database: x, cwd: /}', "`cwd` and `env` go with a `command`"),
        ("{command: [ls], timeout_s: 0}", "truth_probe.timeout_s: Input should be greater than 0"),
        ("{command: [ls], timeout_s: 601}", "truth_probe.timeout_s: Input should be less than"),
        ("{command: [ls], max_output_bytes: 0}", "truth_probe.max_output_bytes: Input should be"),
        ("{command: [ls], env: {'A=B': x}}", "environment variable names"),
        ("{comand: [ls]}", "truth_probe.comand: unknown key (did you mean 'command'?)"),
        ("{command: ls}", "truth_probe.command"),
    ],
)
def test_t1_a_bad_probe_is_one_file_line_error(tmp_path, probe, says):
    path = write(tmp_path, upstream_with(probe))
    error = load_error(path)
    assert error.startswith(f"{path}:4: upstreams[0].truth_probe"), error
    assert says in error and "\n" not in error


def test_t1_a_built_in_upstream_takes_no_probe(tmp_path):
    text = spec_text(upstreams="[{name: b, builtin: booking, truth_probe: {command: [ls]}}]")
    error = load_error(write(tmp_path, text))
    assert "a built-in upstream's rows are read already" in error


def read(probe: TruthProbe) -> Counter[str]:
    return anyio.run(read_state, probe)


def sql_probe(database: Any, sql: str, **bounds: Any) -> TruthProbe:
    return TruthProbe(sql=sql, database=str(database), **bounds)


def test_t1_an_sql_probe_reads_a_sqlite_file_read_only_one_record_per_row(tmp_path):
    db = tmp_path / "shop.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, amount REAL)")
        conn.executemany("INSERT INTO orders (customer, amount) VALUES (?, ?)",
                         [("ACME", 129), ("ACME", 129), ("Bob", 5.5)])  # fmt: skip
    state = read(sql_probe(db, "SELECT customer, amount FROM orders"))
    assert state == Counter({'["ACME",129.0]': 2, '["Bob",5.5]': 1})
    with pytest.raises(ProbeFailed, match="the query failed: not authorized"):  # V19
        read(sql_probe(db, "DELETE FROM orders"))
    with sqlite3.connect(db) as conn:  # ground truth: the probe changed nothing
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (3,)


def test_t1_an_sql_probe_reads_a_duckdb_file_read_only_without_file_access(tmp_path):
    db = tmp_path / "shop.duckdb"
    with duckdb.connect(str(db)) as conn:
        conn.execute("CREATE TABLE orders (customer VARCHAR, amount DECIMAL(10, 2))")
        conn.execute("INSERT INTO orders VALUES ('ACME', 129), ('ACME', 129)")
    assert read(sql_probe(db, "SELECT customer, amount FROM orders")) == Counter(
        {'["ACME","129.00"]': 2}
    )
    with pytest.raises(ProbeFailed, match="the query failed"):
        read(sql_probe(db, "INSERT INTO orders VALUES ('x', 1)"))
    with pytest.raises(ProbeFailed, match="the query failed"):  # external access is off
        read(sql_probe(db, f"SELECT * FROM read_text('{db}')"))
    with duckdb.connect(str(db), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (2,)


def test_t1_an_sql_probe_is_bounded_in_output_and_time(tmp_path):
    db = tmp_path / "big.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (v TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 100,)] * 100)
    with pytest.raises(ProbeFailed, match=r"larger than max_output_bytes \(1,000\)"):
        read(sql_probe(db, "SELECT v FROM t", max_output_bytes=1000))
    endless = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    )
    with pytest.raises(ProbeFailed, match=r"longer than timeout_s \(0.2 s\)"):
        read(sql_probe(db, endless, timeout_s=0.2))


@pytest.mark.parametrize(
    ("content", "says"),
    [(None, "is not a file"), (b"hello, not a database", "neither a SQLite nor a DuckDB")],
)
def test_t1_an_sql_probe_without_a_database_fails_with_one_line(tmp_path, content, says):
    db = tmp_path / "x.db"
    if content is not None:
        db.write_bytes(content)
    with pytest.raises(ProbeFailed, match=says):
        read(sql_probe(db, "SELECT 1"))


def test_t1_effects_are_records_that_appeared_or_went():
    before = Counter({"a": 1, "keep": 1, "gone": 2})
    after = Counter({"a": 3, "keep": 1, "new": 1})
    assert effects(before, after) == [Entry("a", 2), Entry("new", 1), Entry("gone", 0, 2)]
    assert [e.as_truth() for e in effects(before, after)][-1] == {
        "record": "gone", "rows": 0, "removed": 2,
    }  # fmt: skip


@dataclass
class Op:
    index: int
    tool: str
    arguments: Any
    executions: int = 1
    outcome: str = "EXECUTED_ONCE"


def test_t1_records_go_to_the_operation_whose_values_they_hold():
    ops = [
        Op(0, "write_file", {"path": "/srv/notes.txt", "content": "hello"}),
        Op(1, "write_query", {"query": "INSERT INTO orders VALUES ('ACME', 129)"}),
        Op(2, "create_entities", {"entities": [{"name": "Alice", "observations": ["x"]}]}),
    ]
    entries = [
        Entry("3f2a...  /srv/notes.txt", 1),  # sha256sum's line: the path is an argument
        Entry('["ACME",129.0]', 2),  # a row whose values are in the SQL statement
        Entry('{"type":"entity","name":"Alice","observations":["x"]}', 1),
        Entry("unrelated", 1),
    ]
    owners = match(entries, ops)
    assert owners == [0, 1, 2, None]
    assert effects_per_operation(entries, owners, 3) == [1, 2, 1]


def test_t1_a_record_two_operations_match_equally_belongs_to_neither():
    ops = [Op(0, "a", {"name": "Alice"}), Op(1, "b", {"name": "Alice"})]
    assert match([Entry("Alice", 2)], ops) == [None]


def test_e1_an_idempotent_repeat_with_more_than_one_real_row_is_contradicted():
    ops = [Op(0, "upsert", {}, executions=2, outcome="IDEMPOTENT_REPEAT"),
           Op(1, "create", {}, executions=2, outcome="DUPLICATE")]  # fmt: skip
    [found] = contradicted_by_rows(ops, [2, 2], {0: "annotation idempotentHint=true"})
    assert (found.operation, found.tool, found.declared_by) == (
        0, "upsert", "annotation idempotentHint=true",
    )  # fmt: skip
    assert found.detail()["evidence"] == "2 real rows for one operation executed 2 times"
    assert contradicted_by_rows(ops, [1, 2], {}) == []  # one row: the hint held


def test_e1_a_record_written_twice_by_an_idempotent_repeat_is_contradicted():
    ops = [Op(0, "append_note", {"text": "call Ann"}, 2, "IDEMPOTENT_REPEAT")]
    entries = [Entry("call Ann", 2)]
    [found] = contradicted_by_records(ops, entries, match(entries, ops), {})
    assert found.evidence == "2 copies of the record 'call Ann' appeared"
    # Unmatched, it is still the only operation that repeated.
    [found] = contradicted_by_records(ops, [Entry("line 7", 2)], [None], {})
    assert found.tool == "append_note"
    # One copy: the state is that of one execution.
    assert contradicted_by_records(ops, [Entry("call Ann", 1)], [0], {}) == []


def test_e1_an_unmatched_duplicate_record_is_not_blamed_on_an_idempotent_tool_beside_a_duplicate():
    ops = [Op(0, "put", {"k": "v"}, 2, "IDEMPOTENT_REPEAT"), Op(1, "add", {"x": 1}, 2, "DUPLICATE")]
    assert contradicted_by_records(ops, [Entry("row", 2)], [None], {}) == []


def test_v3_t1_a_probe_env_value_is_a_secret_the_store_never_keeps(tmp_path):
    from runner.store.redact import Redactor

    text = upstream_with("{command: [psql-dump], env: {PGPASSWORD: hunter2-secret-value}}")
    redactor = Redactor.for_spec_text(text)
    assert "hunter2-secret-value" not in redactor.spec_text(text)
    assert "hunter2-secret-value" not in redactor.text("it said hunter2-secret-value")
