"""`agent-harness merge`: join the stores of one experiment's shards into one (SPEC G2).

Generic over the store's tables as the migrations made them, so that a column or a child
table added later is merged without a change here: `experiments` by name (one spec version
per experiment), every table with a `run_id` column (runs and their child tables) by run, any
other table by distinct rows. Idempotent: a run already in the output is not stored again, so
merging twice, or shards that overlap, stores nothing twice; only a run stored with
`status=error` is replaced by the same run stored as finished. Inputs are checked before the
output is created or changed, and the copy is one transaction: a refused or failed merge
leaves the output as it was. The output is opened by `Store` (V1: a regular file, its folders
made) and every copied row passes the store's redaction (V3), as `save_runs` rows do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from runner.store.errors import StoreError
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


def merge_stores(inputs: Sequence[Path], out: Path) -> MergeResult:
    """Merge the run stores `inputs` into `out` (created if missing); StoreError on a conflict."""
    for path in inputs:
        if path.resolve() == out.resolve():
            raise StoreError(f"{path} is the output too; merge into another file")
    experiments = _check_versions([out, *inputs] if out.exists() else list(inputs))
    with Store.open(out) as store:
        con = store.connection
        aliases = {path: f"merge_in_{i}" for i, path in enumerate(inputs)}
        try:
            for path, alias in aliases.items():
                escaped = str(path).replace("'", "''")
                con.execute(f"ATTACH '{escaped}' AS {alias} (READ_ONLY)")
            result = _merge(store, aliases)
        except duckdb.Error as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise StoreError(f"cannot merge into {out}: {first}") from err
        finally:
            for alias in aliases.values():
                with contextlib.suppress(duckdb.Error):
                    con.execute(f"DETACH {alias}")
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


def _merge(store: Store, aliases: dict[Path, str]) -> MergeResult:
    """Copy what the attached inputs add, in one transaction, through the store's redaction."""
    con, result = store.connection, MergeResult()
    per_run, others = _tables(con)
    con.begin()
    try:
        for path, alias in aliases.items():
            _insert(store, "experiments", f"SELECT * FROM {alias}.experiments", _EXPERIMENT)
            # The runs to take: new ones, and finished ones that the output holds as errors.
            con.execute(
                f"""
                CREATE OR REPLACE TEMP TABLE merge_take AS
                SELECT i.run_id FROM {alias}.runs i LEFT JOIN runs o USING (run_id)
                WHERE o.run_id IS NULL OR (o.status = 'error' AND i.status <> 'error')
                """
            )
            taken = con.execute("SELECT count(*) FROM merge_take").fetchall()[0][0]
            total = con.execute(f"SELECT count(*) FROM {alias}.runs").fetchall()[0][0]
            for table in per_run:
                con.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT run_id FROM merge_take)")
                _insert(
                    store, table,
                    f"SELECT * FROM {alias}.{table} WHERE run_id IN (SELECT run_id FROM merge_take)",
                )  # fmt: skip
            for table in others:
                _insert(store, table, f"SELECT * FROM {alias}.{table} EXCEPT SELECT * FROM {table}")
            result.added[str(path)], result.skipped[str(path)] = taken, total - taken
        con.execute("DROP TABLE IF EXISTS merge_take")
        result.runs = con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
        con.commit()
    except BaseException:
        con.rollback()
        raise
    return result


# One spec version per experiment (checked before): keep the output's text, widen the dates.
_EXPERIMENT = """
    ON CONFLICT (name) DO UPDATE SET
        spec_path = coalesce(experiments.spec_path, excluded.spec_path),
        spec_text = coalesce(experiments.spec_text, excluded.spec_text),
        first_started = least(experiments.first_started, excluded.first_started),
        last_started = greatest(experiments.last_started, excluded.last_started)
"""


def _insert(store: Store, table: str, select: str, on_conflict: str = "") -> None:
    """Insert the rows of `select` into `table`, redacted as the store redacts (V3)."""
    con = store.connection
    rows = store.redacted_rows(table, con.sql(select).to_arrow_table())
    if not rows.num_rows:
        return
    con.register("merge_rows", rows)
    try:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM merge_rows {on_conflict}")
    finally:
        con.unregister("merge_rows")
