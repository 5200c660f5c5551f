"""A run store is a file from elsewhere (SPEC V8): `report --db`, `merge` inputs and
`sweep --baseline` stores are opened the one way (runner/store/opening.py).

The hostile stores are the ones issue 22 describes: a shard whose `runs` is a VIEW that reads
`/etc/hostname`, lists `/root/*` or reads `/proc/self/environ` (where a planted API key waits).
Each is refused with one line naming the file, before any of its rows is read, and no byte of
what the view would read reaches stdout, stderr, the HTML or a merged store. A file that is not
a run store is refused and left byte-identical; read-only commands never upgrade a store in
place; special names (`:memory:`, `md:`, URLs) are refused for `--db` and `-o`; a SQLite input
makes DuckDB download no extension.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import duckdb
import pytest

from runner.store import Store, StoreError, StoreOpenError, migrations
from runner.store.merge import merge_stores
from runner.store.opening import HARDENED
from tests.support import launcher
from tests.support.paths import BIN
from tests.support.runkit import cli_env
from tests.support.storekit import (
    fingerprint,
    foreign_database,
    hostile_store,
    make_store,
    tables,
)

PLANTED = f"sk-planted-{uuid.uuid4().hex}"  # an API key in the environment of the command


def cli(cwd: Path, *args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**cli_env(), "PLANTED_API_KEY": PLANTED}
    if home is not None:
        env["HOME"] = str(home)
    return launcher.run(
        [str(BIN), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def one_error_line(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def secrets_dir(tmp_path: Path) -> Path:
    """A folder whose file and file names are the secrets a view would read or list."""
    folder = tmp_path / "private"
    folder.mkdir()
    (folder / "secret.txt").write_text(f"FILE-CONTENT-{uuid.uuid4().hex}\n")
    (folder / f"listed-{uuid.uuid4().hex}").write_text("x")
    return folder


def _views(secrets: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (view SQL, the strings that must never appear in any output)."""
    secret_file = secrets / "secret.txt"
    listed = next(p.name for p in secrets.iterdir() if p.name.startswith("listed-"))
    hostname = Path("/etc/hostname").read_text().strip() if Path("/etc/hostname").exists() else ""
    read = (
        "SELECT * REPLACE ((SELECT string_agg(content, '') FROM read_text('{0}')) AS {1}) FROM kept"
    )
    listing = "SELECT * REPLACE ((SELECT string_agg(file, ',') FROM glob('{0}')) AS {1}) FROM kept"
    return {
        # The issue's own: /etc/hostname and /root/*, plus files of ours whose bytes we know.
        "read_text /etc/hostname": (
            read.format("/etc/hostname", "final_answer"),
            [hostname] if len(hostname) >= 6 else [],
        ),
        "read_text a secret file": (
            read.format(secret_file, "final_answer"),
            [secret_file.read_text().strip()],
        ),
        "glob /root/*": (listing.format("/root/*", "error"), []),
        "glob a private folder": (listing.format(f"{secrets}/*", "error"), [listed]),
        "read_text /proc/self/environ": (
            read.format("/proc/self/environ", "final_answer"),
            [PLANTED],
        ),
    }


VIEW_NAMES = [
    "read_text /etc/hostname",
    "read_text a secret file",
    "glob /root/*",
    "glob a private folder",
    "read_text /proc/self/environ",
]


@pytest.mark.parametrize("view", VIEW_NAMES)
def test_v8_report_and_merge_refuse_a_store_whose_runs_is_a_view_and_leak_nothing(
    tmp_path: Path, secrets_dir: Path, view: str
) -> None:  # V8
    sql, secrets = _views(secrets_dir)[view]
    evil = hostile_store(tmp_path / "shard.duckdb", sql)
    before = fingerprint(evil)
    make_store(tmp_path / "good.duckdb", ["g1"])
    kept = make_store(tmp_path / "kept.duckdb", ["k1"])
    kept_before = fingerprint(kept)

    report = cli(tmp_path, "report", "--db", "shard.duckdb", "-o", "out.html")
    merged_new = cli(tmp_path, "merge", "good.duckdb", "shard.duckdb", "-o", "merged.duckdb")
    merged_old = cli(tmp_path, "merge", "shard.duckdb", "-o", "kept.duckdb")
    md = cli(tmp_path, "report", "--db", "shard.duckdb", "--format", "md", "-o", "-")
    for done in (report, merged_new, merged_old, md):
        line = one_error_line(done, "shard.duckdb", "view")
        assert "runs" in line
        for secret in secrets:
            assert secret not in done.stdout and secret not in done.stderr
    assert not (tmp_path / "out.html").exists()
    assert not (tmp_path / "merged.duckdb").exists()  # refused before the output was made
    assert fingerprint(kept) == kept_before  # an existing output: left as it was
    assert fingerprint(evil) == before  # the input: never changed, no ledger added
    assert "schema_migrations" in tables(evil) and "kept" in tables(evil)
    # Nothing of the secrets anywhere under the test folder but where they live.
    for path in tmp_path.rglob("*"):
        if path.is_file() and secrets_dir not in path.parents and path != evil:
            data = path.read_bytes()
            assert all(s.encode() not in data for s in secrets), path


def test_v8_sweep_refuses_a_hostile_baseline_store_before_any_run(
    tmp_path: Path, secrets_dir: Path
) -> None:  # V8, V13
    sql, secrets = _views(secrets_dir)["read_text /proc/self/environ"]
    hostile_store(tmp_path / "baseline.duckdb", sql)
    (tmp_path / "spec.yaml").write_text(
        "name: nightly\nmodels: [scripted/careful]\nprompts: [{name: p, text: hi}]\n"
        "upstreams: [{name: booking, builtin: booking}]\n"
        "conversations: [{name: c, user: Please book a room.}]\n"
    )
    done = cli(tmp_path, "sweep", "spec.yaml", "--baseline", "baseline.duckdb",
               "--db", "runs.duckdb", "--junit", "junit.xml")  # fmt: skip
    one_error_line(done, "baseline.duckdb", "view")
    assert PLANTED not in done.stdout + done.stderr
    assert not (tmp_path / "runs.duckdb").exists()  # no run ran


@pytest.mark.parametrize(
    ("what", "sql", "fragment"),
    [
        ("a macro", "CREATE MACRO runs_total() AS (SELECT count(*) FROM runs)", "macro"),
        ("a table macro", "CREATE MACRO everything() AS TABLE SELECT * FROM glob('/*')", "macro"),
        ("a table of its own", "CREATE TABLE notes (t VARCHAR)", "table notes"),
        ("a view beside the tables", "CREATE VIEW peek AS SELECT * FROM runs", "view"),
        (
            "a schema of its own",
            "CREATE SCHEMA other; CREATE TABLE other.runs (x INTEGER)",
            "other.runs",
        ),
    ],
)
def test_v8_any_view_macro_or_foreign_table_in_a_store_is_refused_by_name(
    tmp_path: Path, what: str, sql: str, fragment: str
) -> None:  # V8
    path = make_store(tmp_path / "store.duckdb", ["r1"])
    con = duckdb.connect(str(path))
    con.execute(sql)
    con.close()
    before = fingerprint(path)
    with pytest.raises(StoreOpenError) as err:
        Store.open(path, read_only=True)
    assert str(path) in str(err.value) and fragment in str(err.value), what
    assert "\n" not in str(err.value)
    with pytest.raises(StoreError):
        merge_stores([path], tmp_path / "out.duckdb")
    assert not (tmp_path / "out.duckdb").exists()
    with pytest.raises(StoreOpenError):
        Store.open(path)  # not even our own writer takes it
    assert fingerprint(path) == before


def test_v8_a_generated_column_is_refused(tmp_path: Path) -> None:  # V8
    path = tmp_path / "store.duckdb"
    con = duckdb.connect(str(path))
    migrations.migrate(con, "x")
    con.execute("DROP TABLE patches")
    con.execute(
        "CREATE TABLE patches (run_id VARCHAR NOT NULL, idx INTEGER NOT NULL, "
        "patch_id VARCHAR NOT NULL, severity VARCHAR NOT NULL, trigger VARCHAR NOT NULL, "
        "text VARCHAR GENERATED ALWAYS AS (current_setting('home_directory')))"
    )
    con.close()
    with pytest.raises(StoreOpenError, match=r"patches\.text is computed"):
        Store.open(path, read_only=True)


def test_v8_every_store_connection_is_hardened_and_locked(tmp_path: Path) -> None:  # V8
    path = make_store(tmp_path / "store.duckdb", ["r1"])
    for read_only in (True, False):
        with Store.open(path, read_only=read_only) as store:
            con = store.connection
            for name, value in HARDENED.items():
                assert con.execute(f"SELECT current_setting('{name}')").fetchall() == [(value,)]
            with pytest.raises(duckdb.Error, match="locked"):
                con.execute("SET enable_external_access = true")
            with pytest.raises(duckdb.Error):
                con.execute("SELECT * FROM read_text('/etc/hostname')")
            # A writer attaches its file itself (opening.py), then no other.
            with pytest.raises(duckdb.Error):
                con.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS other")
            assert not (tmp_path / "other.duckdb").exists()


def test_v8_report_on_an_unrelated_database_refuses_and_leaves_it_byte_identical(
    tmp_path: Path,
) -> None:  # V8
    customers = foreign_database(tmp_path / "customers.duckdb")
    before = fingerprint(customers)
    done = cli(tmp_path, "report", "--db", "customers.duckdb", "-o", "r.html")
    one_error_line(done, "customers.duckdb", "not an agent-harness run store")
    assert fingerprint(customers) == before
    assert tables(customers) == {"customers", "orders"}
    assert not (tmp_path / "r.html").exists()


def test_v8_merge_into_a_file_that_is_not_a_run_store_refuses_before_adding_anything(
    tmp_path: Path,
) -> None:  # V8
    make_store(tmp_path / "a.duckdb", ["r1"])
    prod = foreign_database(tmp_path / "prod.duckdb")
    before = fingerprint(prod)
    done = cli(tmp_path, "merge", "a.duckdb", "-o", "prod.duckdb")
    one_error_line(done, "prod.duckdb", "not an agent-harness run store")
    assert fingerprint(prod) == before
    assert tables(prod) == {"customers", "orders"}


def test_v8_a_refused_merge_leaves_no_ledger_in_its_input(tmp_path: Path) -> None:  # V8
    customers = foreign_database(tmp_path / "customers.duckdb")
    before = fingerprint(customers)
    done = cli(tmp_path, "merge", "customers.duckdb", "-o", "out.duckdb")
    one_error_line(done, "customers.duckdb", "not an agent-harness run store")
    assert fingerprint(customers) == before
    assert "schema_migrations" not in tables(customers)
    assert not (tmp_path / "out.duckdb").exists()


def _old_store(path: Path, run_id: str, spec_text: str = "name: exp\n") -> Path:
    """A store as a version with migrations 1 and 2 left it, with one experiment."""
    con = duckdb.connect(str(path))
    migrations.migrate(con, "old", upto=2)
    con.execute(
        "INSERT INTO experiments VALUES ('exp', 'spec.yaml', ?, now()::TIMESTAMP, now()::TIMESTAMP)",
        [spec_text],
    )
    con.close()
    return path


def test_v8_read_only_commands_never_upgrade_an_older_store_in_place(tmp_path: Path) -> None:  # V8
    old = _old_store(tmp_path / "old.duckdb", "o1")
    before = fingerprint(old)
    with Store.open(old, read_only=True) as store:  # read through an upgraded temporary copy
        assert store.schema_version() == migrations.LATEST
        assert store.experiment_names() == ["exp"]
    assert fingerprint(old) == before
    done = cli(tmp_path, "report", "--db", "old.duckdb", "-o", "old.html")
    assert done.returncode == 0, done.stderr
    merged = cli(tmp_path, "merge", "old.duckdb", "-o", "merged.duckdb")
    assert merged.returncode == 0, merged.stderr
    assert fingerprint(old) == before
    con = duckdb.connect(str(old), read_only=True)
    assert con.execute("SELECT max(id) FROM schema_migrations").fetchall() == [(2,)]
    con.close()
    # A refused merge (two versions of the spec) leaves the older input as old as it was.
    make_store(tmp_path / "new.duckdb", ["n1"], spec_text="name: exp\nruns: 3\n")
    refused = cli(tmp_path, "merge", "old.duckdb", "new.duckdb", "-o", "other.duckdb")
    one_error_line(refused, "different versions")
    assert fingerprint(old) == before and not (tmp_path / "other.duckdb").exists()


SPECIAL_NAMES = [":memory:", ":memory:shared", "md:my_db", "motherduck:my_db",
                 "sqlite:runs.db", "http://example.com/runs.duckdb", "s3://bucket/runs.duckdb"]  # fmt: skip


@pytest.mark.parametrize("name", SPECIAL_NAMES)
def test_v8_special_names_are_refused_for_db_and_o_with_one_line(
    tmp_path: Path, name: str
) -> None:  # V8
    make_store(tmp_path / "a.duckdb", ["r1"])
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: exp\nmodels: [scripted/careful]\nprompts: [{name: p, text: hi}]\n"
        "upstreams: [{name: booking, builtin: booking}]\n"
        "conversations: [{name: c, user: Please book a room.}]\n"
    )
    runs = [
        cli(tmp_path, "run", "spec.yaml", "--db", name),
        cli(tmp_path, "report", "--db", name),
        cli(tmp_path, "merge", "a.duckdb", "-o", name),
        cli(tmp_path, "merge", name, "-o", "out.duckdb"),
    ]
    for done in runs:
        one_error_line(done, "not a file" if name.startswith(":") else "not a local file")
        assert "Stored in" not in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.duckdb", "spec.yaml"]


def test_v8_a_sqlite_input_makes_duckdb_install_no_extension(tmp_path: Path) -> None:  # V8
    import sqlite3

    home = tmp_path / "home"  # DuckDB would download sqlite_scanner into ~/.duckdb/extensions
    home.mkdir()
    db = sqlite3.connect(tmp_path / "runs.sqlite")
    db.execute("CREATE TABLE runs (run_id TEXT)")
    db.commit()
    db.close()
    make_store(tmp_path / "a.duckdb", ["r1"])
    for args in (
        ["report", "--db", "runs.sqlite"],
        ["merge", "a.duckdb", "runs.sqlite", "-o", "out.duckdb"],
        ["merge", "a.duckdb", "-o", "runs.sqlite"],
    ):
        done = cli(tmp_path, *args, home=home)
        one_error_line(done, "runs.sqlite", "SQLite database")
        assert "extension" not in done.stderr.lower()
    assert list(home.iterdir()) == []  # no ~/.duckdb: no install was tried
    assert not (tmp_path / "out.duckdb").exists()
    assert os.path.getsize(tmp_path / "runs.sqlite") > 0


def test_v8_a_writer_spills_beside_its_file_never_into_the_working_folder(tmp_path: Path) -> None:
    # V8/N2: a writer is a database in memory with its file attached (opening.py); DuckDB's
    # default spill folder for one is `.tmp` in the working folder, a file's own is beside it.
    path = make_store(tmp_path / "store.duckdb", ["r1"])
    for read_only in (True, False):
        with Store.open(path, read_only=read_only) as store:
            spill = store.connection.execute("SELECT current_setting('temp_directory')")
            assert spill.fetchall() == [(f"{path.absolute()}.tmp",)]
