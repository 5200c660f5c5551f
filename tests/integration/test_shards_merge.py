"""Shards for CI matrices and merged stores (SPEC G2).

`--shard I/N` runs a disjoint, stable part of the matrix; `agent-harness merge` joins the
stores of one experiment. Shards 1/2 and 2/2, each run by the installed command into its own
store as two CI jobs would, merged, must equal the unsharded run: the same run ids, verdicts,
scores and real rows. Merging is idempotent, refuses two versions of one spec, and is generic
over the store's tables (a child table added by a later migration is merged without edits).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from runner.store import Store, StoreError, migrations
from runner.store.merge import merge_stores
from tests.support.runkit import cli, scripted_sweep_spec

pytestmark = pytest.mark.slow

SPEC = scripted_sweep_spec("sharded", runs=2)  # 8 and 16 runs in shards 1/2 and 2/2


def outcomes(db: Path) -> dict[str, tuple]:
    """Per run id: what the harness judged and what the upstream really holds."""
    with Store.open(db, read_only=True) as store:
        runs = store.load_runs("sharded")
        ops = store.load_children("operations", runs["run_id"].to_list())
    real: dict[str, list] = {}
    for op in ops.iter_rows(named=True):
        real.setdefault(op["run_id"], []).append((op["idx"], op["executions"], op["real_rows"]))
    return {
        r["run_id"]: (r["status"], r["verdict"], r["score_overall"], r["patch_text"],
                      tuple(real.get(r["run_id"], ())))
        for r in runs.iter_rows(named=True)
    }  # fmt: skip


def counts(db: Path) -> dict[str, int]:
    with Store.open(db, read_only=True) as store:
        return {t: store.count(t) for t in ("experiments", "runs", "operations", "transcripts")}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole experiment in one store, and shard 1/2 and 2/2 each in its own."""
    root = tmp_path_factory.mktemp("shards")
    (root / "spec.yaml").write_text(SPEC)
    for db, extra in (("all.duckdb", []), ("a.duckdb", ["--shard", "1/2"]),
                      ("b.duckdb", ["--shard", "2/2"])):  # fmt: skip
        done = cli(root, "run", "spec.yaml", "--db", db, *extra)
        assert done.returncode == 0, done.stderr
    return root


def test_g2_merged_shards_equal_the_unsharded_run(stores: Path) -> None:  # G2
    whole = outcomes(stores / "all.duckdb")
    a, b = outcomes(stores / "a.duckdb"), outcomes(stores / "b.duckdb")
    assert a and b and not a.keys() & b.keys()  # two non-empty, disjoint parts
    done = cli(stores, "merge", "a.duckdb", "b.duckdb", "-o", "merged.duckdb")
    assert done.returncode == 0, done.stderr
    assert outcomes(stores / "merged.duckdb") == whole
    assert counts(stores / "merged.duckdb") == counts(stores / "all.duckdb")
    assert f"{len(whole)} runs" in done.stdout
    # The CI matrix's last step: a sweep over the merged store finds every run there.
    swept = cli(stores, "sweep", "spec.yaml", "--db", "merged.duckdb", "-o", "merged.html")
    assert swept.returncode == 0, swept.stderr
    assert f"{len(whole)} runs were already stored" in swept.stderr
    assert outcomes(stores / "merged.duckdb") == whole


def test_g2_merging_twice_or_overlapping_stores_nothing_twice(stores: Path) -> None:  # G2
    assert cli(stores, "merge", "a.duckdb", "b.duckdb", "-o", "twice.duckdb").returncode == 0
    first = counts(stores / "twice.duckdb")
    again = cli(stores, "merge", "a.duckdb", "b.duckdb", "all.duckdb", "-o", "twice.duckdb")
    assert again.returncode == 0, again.stderr
    assert counts(stores / "twice.duckdb") == first
    assert outcomes(stores / "twice.duckdb") == outcomes(stores / "all.duckdb")


def test_g2_merge_refuses_two_versions_of_one_spec_with_one_line(stores: Path) -> None:  # G2
    changed = stores / "changed"
    changed.mkdir(exist_ok=True)
    (changed / "spec.yaml").write_text(scripted_sweep_spec("sharded", runs=3))
    assert cli(changed, "run", "spec.yaml", "--db", "c.duckdb", "--shard", "2/2").returncode == 0
    before = counts(stores / "a.duckdb")
    done = cli(stores, "merge", "a.duckdb", "changed/c.duckdb", "-o", "bad.duckdb")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert "different versions of its spec" in done.stderr and "'sharded'" in done.stderr
    assert not (stores / "bad.duckdb").exists()  # checked before anything is written
    assert counts(stores / "a.duckdb") == before


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["a.duckdb", "-o", "a.duckdb"], "is the output too"),
        (["nope.duckdb", "-o", "x.duckdb"], "does not exist"),
        (["spec.yaml", "-o", "x.duckdb"], "not a DuckDB database"),
    ],
)
def test_g2_bad_merge_input_is_one_clear_line(stores: Path, args: list[str], fragment: str):
    done = cli(stores, "merge", *args)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert fragment in done.stderr


def test_g2_a_table_added_by_a_later_migration_is_merged_without_edits(
    stores: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # G2
    # Another engineer adds a child table and a run column in a new migration: merge must
    # carry both, since it reads the tables from the store, not from a list of its own.
    new = migrations.Migration(
        migrations.LATEST + 1,
        "m999_merge_probe",
        (
            "CREATE TABLE probes (run_id VARCHAR NOT NULL, idx INTEGER NOT NULL, note VARCHAR)",
            "ALTER TABLE runs ADD COLUMN probe VARCHAR",
        ),
    )
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, new))
    monkeypatch.setattr(migrations, "LATEST", new.id)
    paths = []
    for name in ("a.duckdb", "b.duckdb"):
        copy = tmp_path / name
        copy.write_bytes((stores / name).read_bytes())
        Store.open(copy).close()  # upgraded with the new migration
        con = duckdb.connect(str(copy))
        con.execute("UPDATE runs SET probe = 'p-' || run_id")
        con.execute("INSERT INTO probes SELECT run_id, 0, 'note of ' || run_id FROM runs")
        con.close()
        paths.append(copy)
    result = merge_stores(paths, tmp_path / "out.duckdb")
    assert result.runs == len(outcomes(stores / "all.duckdb"))
    con = duckdb.connect(str(tmp_path / "out.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM probes").fetchall()[0][0] == result.runs
    assert con.execute(
        "SELECT count(*) FROM runs WHERE probe = 'p-' || run_id"
    ).fetchall()[0][0] == result.runs
    con.close()


def test_g2_a_finished_run_replaces_the_same_run_stored_as_an_error(
    stores: Path, tmp_path: Path
) -> None:  # G2
    broken = tmp_path / "broken.duckdb"
    broken.write_bytes((stores / "a.duckdb").read_bytes())
    con = duckdb.connect(str(broken))
    con.execute("UPDATE runs SET status = 'error', error = 'lost', verdict = NULL")
    con.close()
    with pytest.raises(StoreError):
        merge_stores([broken], broken)
    merge_stores([broken], tmp_path / "out.duckdb")
    merge_stores([stores / "a.duckdb"], tmp_path / "out.duckdb")
    assert outcomes(tmp_path / "out.duckdb") == outcomes(stores / "a.duckdb")


def test_v3_merged_rows_pass_the_store_redaction(stores: Path, tmp_path: Path) -> None:  # V3
    # A store written by hand or by an older harness may hold a credential: the merge writes
    # through the Store, so it leaves the merged file as save_runs would.
    raw = tmp_path / "raw.duckdb"
    raw.write_bytes((stores / "a.duckdb").read_bytes())
    token = "Bearer abcdefghijklmnop0123456789"
    con = duckdb.connect(str(raw))
    con.execute("UPDATE runs SET error = ?", [f"upstream said: Authorization: {token}"])
    con.execute("UPDATE transcripts SET content = ? WHERE idx = 0", [f"use {token}"])
    con.close()
    merge_stores([raw], tmp_path / "out.duckdb")
    con = duckdb.connect(str(tmp_path / "out.duckdb"), read_only=True)
    errors = {row[0] for row in con.execute("SELECT error FROM runs").fetchall()}
    contents = con.execute("SELECT content FROM transcripts WHERE idx = 0").fetchall()
    con.close()
    assert len(errors) == 1 and "[REDACTED]" in next(iter(errors))
    assert "abcdefghijklmnop" not in next(iter(errors))
    assert contents and all("abcdefghijklmnop" not in row[0] for row in contents)
