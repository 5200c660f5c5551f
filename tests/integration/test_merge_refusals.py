"""`merge` refuses or fails as one unit (SPEC G2, V8; issue 22).

The real error is the one shown (never DuckDB's "Current transaction is aborted"), a failed
merge leaves no empty output behind and an existing output exactly as it was (an older one not
even upgraded), and one store given twice, by the same or by another path, is refused with one
line instead of being counted twice.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from runner.store import Store, StoreError, migrations
from runner.store.merge import merge_stores
from tests.support import launcher
from tests.support.paths import BIN
from tests.support.runkit import cli_env
from tests.support.storekit import fingerprint, make_store


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return launcher.run(
        [str(BIN), *args], cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def broken_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every copied run row loses its experiment (a NOT NULL column): the INSERT fails."""
    redacted = Store.redacted_rows

    def breaking(self: Store, table: str, rows: pa.Table) -> pa.Table:
        rows = redacted(self, table, rows)
        if table == "runs":
            i = rows.column_names.index("experiment")
            rows = rows.set_column(i, "experiment", pa.nulls(rows.num_rows, pa.string()))
        return rows

    monkeypatch.setattr(Store, "redacted_rows", breaking)


def test_g2_a_failed_merge_shows_the_real_error_and_leaves_no_output(
    tmp_path: Path, broken_copy: None
) -> None:  # G2, V8
    a = make_store(tmp_path / "a.duckdb", ["r1", "r2"])
    out = tmp_path / "out.duckdb"
    with pytest.raises(StoreError) as err:
        merge_stores([a], out)
    message = str(err.value)
    assert "NOT NULL" in message and "experiment" in message, message
    assert "transaction is aborted" not in message.lower()
    assert "\n" not in message
    assert not out.exists() and not Path(f"{out}.wal").exists()


def test_g2_a_failed_merge_leaves_an_existing_output_byte_identical(
    tmp_path: Path, broken_copy: None
) -> None:  # G2, V8
    a = make_store(tmp_path / "a.duckdb", ["r1"])
    out = make_store(tmp_path / "out.duckdb", ["o1"])
    before = fingerprint(out)
    with pytest.raises(StoreError, match="NOT NULL"):
        merge_stores([a], out)
    assert fingerprint(out) == before


def test_g2_a_failed_merge_does_not_even_upgrade_an_older_output(
    tmp_path: Path, broken_copy: None
) -> None:  # G2, V8
    a = make_store(tmp_path / "a.duckdb", ["r1"])
    out = tmp_path / "old.duckdb"
    con = duckdb.connect(str(out))
    migrations.migrate(con, "old", upto=2)
    con.close()
    before = fingerprint(out)
    with pytest.raises(StoreError, match="NOT NULL"):
        merge_stores([a], out)
    assert fingerprint(out) == before
    con = duckdb.connect(str(out), read_only=True)
    assert con.execute("SELECT max(id) FROM schema_migrations").fetchall() == [(2,)]
    con.close()


def test_g2_a_merge_that_works_upgrades_an_older_output_and_adds_the_runs(tmp_path: Path) -> None:
    a = make_store(tmp_path / "a.duckdb", ["r1", "r2"])
    out = tmp_path / "old.duckdb"
    con = duckdb.connect(str(out))
    migrations.migrate(con, "old", upto=2)
    con.close()
    result = merge_stores([a], out)
    assert result.runs == 2 and result.added == {str(a): 2}
    with Store.open(out, read_only=True) as store:
        assert store.schema_version() == migrations.LATEST
        assert sorted(store.finished_run_ids("exp")) == ["r1", "r2"]


def _same_store_twice(tmp_path: Path) -> dict[str, list[str]]:
    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path / "a.duckdb", tmp_path / "link.duckdb")
    os.link(tmp_path / "a.duckdb", tmp_path / "hard.duckdb")
    return {
        "the same name": ["a.duckdb", "a.duckdb"],
        "another spelling": ["a.duckdb", "sub/../a.duckdb"],
        "an absolute path": ["a.duckdb", str(tmp_path / "a.duckdb")],
        "a symlink": ["a.duckdb", "link.duckdb"],
        "a hard link": ["a.duckdb", "hard.duckdb"],
    }


def test_g2_merge_a_a_is_refused_with_one_line_whatever_the_path(tmp_path: Path) -> None:  # G2
    make_store(tmp_path / "a.duckdb", ["r1", "r2"])
    make_store(tmp_path / "b.duckdb", ["r3"])
    for how, pair in _same_store_twice(tmp_path).items():
        done = cli(tmp_path, "merge", pair[0], "b.duckdb", pair[1], "-o", "out.duckdb")
        assert done.returncode == 1, (how, done.stdout, done.stderr)
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and "give each store once" in lines[0], (how, done.stderr)
        assert not (tmp_path / "out.duckdb").exists(), how
    # The output given as an input by another path is refused the same way.
    make_store(tmp_path / "out.duckdb", ["o1"])
    before = fingerprint(tmp_path / "out.duckdb")
    os.symlink(tmp_path / "out.duckdb", tmp_path / "out-link.duckdb")
    done = cli(tmp_path, "merge", "a.duckdb", "out-link.duckdb", "-o", "out.duckdb")
    assert done.returncode == 1 and "is the output too" in done.stderr, done.stderr
    assert fingerprint(tmp_path / "out.duckdb") == before


def test_g2_merge_counts_each_run_once(tmp_path: Path) -> None:  # G2
    make_store(tmp_path / "a.duckdb", ["r1", "r2"])
    make_store(tmp_path / "b.duckdb", ["r2", "r3"])  # overlapping shards are fine
    done = cli(tmp_path, "merge", "a.duckdb", "b.duckdb", "-o", "out.duckdb")
    assert done.returncode == 0, done.stderr
    assert "a.duckdb: 2 runs added, 0 already there" in done.stdout
    assert "b.duckdb: 1 runs added, 1 already there" in done.stdout
    assert "out.duckdb: 3 runs in all" in done.stdout
