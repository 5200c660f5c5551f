"""`agent-harness merge`: join the stores of one experiment's shards into one (SPEC G2, V8).

Generic over the store's tables as the migrations made them, so that a column or a child
table added later is merged without a change here: `experiments` by name (one spec version
per experiment), every table with a `run_id` column (runs and their child tables) by run, any
other table by distinct rows. Idempotent: a run already in the output is not stored again, so
merging twice, or shards that overlap, stores nothing twice; only a run stored with
`status=error` is replaced by the same run stored as finished.

The inputs are files from elsewhere (V8): each is opened the one way (`runner.store.opening`:
vetted, read-only, never changed) and its rows are read from its own connection and written
through the output store's redaction (V3), as `save_runs` rows are; no input is ATTACHed to
the output's database. Every check comes before the output is created or changed: the names,
the same file given twice (also by another path), the output among the inputs, each input
and the output vetted, one spec version per experiment. The upgrade of an older output and
the copy are one transaction: a refused or failed merge leaves the output as it was (a new
output is removed), and its error is the first one DuckDB gave.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from runner.store import migrations, opening
from runner.store.errors import StoreError, first_line
from runner.store.store import Store


@dataclass
class MergeResult:
    """What a merge did, per input and in all."""

    added: dict[str, int] = field(default_factory=dict)  # input -> runs stored from it
    skipped: dict[str, int] = field(default_factory=dict)  # input -> runs already there
    experiments: list[str] = field(default_factory=list)
    runs: int = 0  # runs in the output afterwards


def _normalised(spec_text: str | None) -> str | None:
    """The spec text without line-ending and trailing-space differences (a checkout's)."""
    if spec_text is None:
        return None
    lines = spec_text.replace("\r\n", "\n").strip().splitlines()
    return "\n".join(line.rstrip() for line in lines)


def _check_versions(sources: Sequence[Path]) -> list[str]:
    """The experiments in the stores; StoreError if two hold different specs of one."""
    versions: dict[str, dict[str, Path]] = {}  # experiment -> normalised spec -> first store
    for path in sources:
        # Exists, is a run store, is not newer than this code; an older one is upgraded.
        with Store.open(path, read_only=True) as store:
            experiments = store.load_experiments()
        for row in experiments.iter_rows(named=True):
            seen = versions.setdefault(row["name"], {})
            spec = _normalised(row["spec_text"])
            if spec is not None:
                seen.setdefault(spec, path)
    for name, seen in versions.items():
        if len(seen) > 1:
            first, second = list(seen.values())[:2]
            raise StoreError(
                f"experiment {name!r}: {first} and {second} hold different versions of its "
                "spec; merge only stores made with one version of it"
            )
    return sorted(versions)


def _distinct(inputs: Sequence[Path], out: Path) -> None:
    """Plain file names, each input once (by file, not by spelling), the output not among them."""
    for path in inputs:
        opening.check_name(path)
    opening.check_name(out, "-o")
    seen: dict[tuple[int, int], Path] = {}
    for path in inputs:
        key = opening.identity(path)
        if key in seen:
            raise StoreError(
                f"{seen[key]} and {path} are the same store: give each store once"
                if str(seen[key]) != str(path)
                else f"{path} is given twice: give each store once"
            )
        seen[key] = path
    if out.exists() and opening.identity(out) in seen:
        raise StoreError(
            f"{seen[opening.identity(out)]} is the output too; merge into another file"
        )


def merge_stores(inputs: Sequence[Path], out: Path) -> MergeResult:
    """Merge the run stores `inputs` into `out` (created if missing); StoreError on a conflict."""
    inputs, out = [Path(p) for p in inputs], Path(out)
    _distinct(inputs, out)
    created = not out.exists()
    # The output is vetted like an input: not a run store (or a hostile one) is refused here,
    # before anything is written; an empty DuckDB file may become one.
    store_out = not created and opening.vet_file(out) is not None
    experiments = _check_versions([out, *inputs] if store_out else list(inputs))
    try:
        with Store.open(out, upgrade=False) as store:
            result = _merge(store, inputs, str(out))
    except BaseException:
        if created:  # a failed merge leaves no empty output behind
            for leftover in (out, Path(f"{out}.wal")):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()
        raise
    result.experiments = experiments
    return result


def _tables(con: duckdb.DuckDBPyConnection) -> tuple[list[str], list[str]]:
    """The output's tables with a run_id column (runs first), and its other data tables."""
    rows = con.execute(
        "SELECT table_name, bool_or(column_name = 'run_id') FROM information_schema.columns "
        "WHERE table_catalog = current_database() AND table_schema = 'main' "
        "AND table_name NOT IN ('schema_migrations', 'experiments') "
        "GROUP BY table_name ORDER BY table_name"
    ).fetchall()
    per_run = sorted((table for table, has in rows if has), key=lambda table: table != "runs")
    return per_run, [table for table, has in rows if not has]


def _merge(store: Store, inputs: Sequence[Path], out: str) -> MergeResult:
    """Upgrade the output and copy what each input adds, in one transaction."""
    con, result = store.connection, MergeResult()
    con.begin()
    try:
        migrations.migrate(con, out, in_transaction=True)
        opening.check_shape(con, out)
        per_run, others = _tables(con)
        for path in inputs:
            with Store.open(path, read_only=True) as source:
                taken, total = _copy(store, source, per_run, others)
            result.added[str(path)], result.skipped[str(path)] = taken, total - taken
        result.runs = con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
        con.commit()
    except duckdb.Error as err:
        _rollback(con)
        raise StoreError(f"cannot merge into {out}: {first_line(err)}") from err
    except BaseException:
        _rollback(con)
        raise
    return result


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    with contextlib.suppress(duckdb.Error):
        con.rollback()


def _copy(store: Store, source: Store, per_run: list[str], others: list[str]) -> tuple[int, int]:
    """Copy one input's rows into the output; (runs taken, runs in the input)."""
    con, src = store.connection, source.connection
    _insert(store, "experiments", src, _select(con, "experiments"), _EXPERIMENT)
    # The runs to take: new ones, and finished ones that the output holds as errors.
    theirs = src.sql("SELECT run_id, status FROM runs").to_arrow_table()
    with _registered(con, "merge_in", theirs):
        take = con.sql(
            "SELECT i.run_id FROM merge_in i LEFT JOIN runs o USING (run_id) "
            "WHERE o.run_id IS NULL OR (o.status = 'error' AND i.status <> 'error')"
        ).to_arrow_table()
    with _registered(con, "merge_take", take), _registered(src, "merge_take", take):
        for table in per_run:
            con.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT run_id FROM merge_take)")
            rows = f"{_select(con, table)} WHERE run_id IN (SELECT run_id FROM merge_take)"
            _insert(store, table, src, rows)
    for table in others:
        _insert(store, table, src, _select(con, table), distinct=True)
    return take.num_rows, theirs.num_rows


def _select(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """SELECT of the output's columns of `table`: only what a run store holds is read."""
    columns = [
        row[0]
        for row in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_catalog = "
            "current_database() AND table_name = ? ORDER BY ordinal_position",
            [table],
        ).fetchall()
    ]
    return f"SELECT {', '.join(_quoted(c) for c in columns)} FROM main.{_quoted(table)}"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@contextlib.contextmanager
def _registered(con: duckdb.DuckDBPyConnection, name: str, rows: pa.Table) -> Iterator[None]:
    con.register(name, rows)
    try:
        yield
    finally:
        # After a failed statement the transaction is aborted and this fails too: the first
        # error is the one to report, never "Current transaction is aborted".
        with contextlib.suppress(duckdb.Error):
            con.unregister(name)


# One spec version per experiment (checked before): keep the output's text, widen the dates.
_EXPERIMENT = """
    ON CONFLICT (name) DO UPDATE SET
        spec_path = coalesce(experiments.spec_path, excluded.spec_path),
        spec_text = coalesce(experiments.spec_text, excluded.spec_text),
        first_started = least(experiments.first_started, excluded.first_started),
        last_started = greatest(experiments.last_started, excluded.last_started)
"""


# Rows per batch read from an input: a transcript row can be large, so a few thousand.
_BATCH_ROWS = 2048


def _insert(
    store: Store,
    table: str,
    src: duckdb.DuckDBPyConnection,
    select: str,
    on_conflict: str = "",
    *,
    distinct: bool = False,
) -> None:
    """Insert the rows of `select` (run on the input) into `table`, in batches, redacted as
    the store redacts (V3); `distinct`: only rows the output does not hold yet."""
    con = store.connection
    for batch in src.sql(select).to_arrow_reader(_BATCH_ROWS):
        rows = store.redacted_rows(table, pa.Table.from_batches([batch]))
        if not rows.num_rows:
            continue
        with _registered(con, "merge_rows", rows):
            source = "SELECT * FROM merge_rows"
            if distinct:
                source += f" EXCEPT {_select(con, table)}"
            con.execute(f"INSERT INTO {table} BY NAME {source} {on_conflict}")
