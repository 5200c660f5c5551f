"""The run store: one DuckDB file holding experiments, runs and everything a run left (R5)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from runner.experiment.records import RunRecord
from runner.store import migrations, opening, schema
from runner.store.errors import StoreError, first_line
from runner.store.feed import Feed
from runner.store.redact import Redactor
from runner.store.rows import Clean, RunBatch, utc_naive

if TYPE_CHECKING:  # DuckDB's .pl() imports polars when a table is read: `run` never needs it
    import polars as pl

DEFAULT_PATH = Path("reports/runs.duckdb")

CHILD_TABLES = tuple(child.name for child in schema.CHILD_TABLES)
_CHILD_SPECS = {child.name: child.spec for child in schema.CHILD_TABLES}

Experiments = str | Sequence[str] | None
_LOOKUPS = 100  # up to this many run ids, a batch asks for its stored runs by index look-ups


def _except_run_ids(clean: Clean, table: str, column: str, values: list) -> list:
    """`clean`, except for the runs' ids, which were redacted before (the existence check)."""
    return values if table == "runs" and column == "run_id" else clean(table, column, values)


def _experiment_filter(experiment: Experiments, column: str = "experiment") -> tuple[str, list]:
    """A WHERE clause and its parameters selecting one, several or all experiments."""
    if experiment is None:
        return "", []
    names = [experiment] if isinstance(experiment, str) else list(experiment)
    if not names:
        return " WHERE false", []
    return f" WHERE {column} IN ({', '.join('?' for _ in names)})", names


class Store:
    """A DuckDB run store. Use `Store.open(path)`; one writing process per file."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        path: Path,
        read_only: bool,
        redactor: Redactor | None = None,
        cleanup: Callable[[], None] | None = None,
    ) -> None:
        self._con = con
        self.path = path
        self.read_only = read_only
        self._cleanup = cleanup  # removes the upgraded temporary copy of an older store
        # V3: the one redaction step; everything written passes it (the spec's own secrets
        # are known when the caller passes Redactor.for_spec_text).
        self.redactor = redactor or Redactor()

    @classmethod
    def open(
        cls,
        path: str | Path = DEFAULT_PATH,
        *,
        read_only: bool = False,
        redactor: Redactor | None = None,
        upgrade: bool = True,
    ) -> Store:
        """Open a store file the one way (V8, `runner.store.opening`).

        read_only: a file from anywhere (a report's, a merge input, a baseline), vetted and
        never changed; a store made by an older agent-harness is read through an upgraded
        temporary copy. Else our own store, created with its folders or upgraded in place
        (`upgrade=False` leaves the migrations to the caller); a DuckDB file that is not a run
        store is refused before anything is written to it.
        """
        path = Path(path)
        if read_only:
            con, cleanup = opening.open_to_read(path)
            return cls(con, path, read_only, redactor, cleanup)
        return cls(opening.open_to_write(path, upgrade=upgrade), path, read_only, redactor)

    def close(self) -> None:
        """Close the connection; the store object is unusable afterwards."""
        self._con.close()
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def connection(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection, for store-wide tools such as `merge` (one writer: this one)."""
        return self._con

    def redacted_rows(self, table: str, rows: pa.Table) -> pa.Table:
        """Rows read from elsewhere (another store) as this store may hold them: the same
        redaction as `save_runs`/`save_experiment` (V3), column by column."""
        for i, name in enumerate(rows.column_names):
            if not pa.types.is_string(rows.schema.field(i).type):
                continue
            values = rows.column(i).to_pylist()
            if table == "experiments" and name == "spec_text":
                clean = [None if v is None else self.redactor.spec_text(v) for v in values]
            elif table == "runs" and name == "model_params_json":
                clean = [None if v is None else self._params_json(v) for v in values]
            else:
                clean = self.redactor.column(values)
            if clean != values:
                rows = rows.set_column(i, name, pa.array(clean, type=pa.string()))
        return rows

    def _params_json(self, text: str) -> str:
        clean = json.dumps(
            self.redactor.params(json.loads(text or "{}")), sort_keys=True, default=str
        )
        return text if json.loads(clean) == json.loads(text or "{}") else clean

    def schema_version(self) -> int:
        """The newest migration applied to this file."""
        return max(migrations.applied(self._con), default=0)

    # -- writing ---------------------------------------------------------------------------

    def save_experiment(
        self,
        name: str,
        spec_path: str | Path | None,
        spec_text: str | None,
        started_at: datetime | None = None,
    ) -> None:
        """Record that an experiment (re)started: keep its first start, update spec and last."""
        moment = utc_naive(started_at or datetime.now(UTC))
        if spec_text is not None:
            spec_text = self.redactor.spec_text(spec_text)
        try:
            self._con.execute(
                """
                INSERT INTO experiments VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (name) DO UPDATE SET
                    spec_path = excluded.spec_path,
                    spec_text = excluded.spec_text,
                    last_started = excluded.last_started
                """,
                [name, None if spec_path is None else str(spec_path), spec_text, moment, moment],
            )
        except duckdb.Error as err:
            raise StoreError(f"cannot save experiment {name!r}: {first_line(err)}") from err

    def save_run(self, record: RunRecord) -> None:
        """Store one finished run in one transaction, replacing a stored run with its id."""
        self.save_runs([record])

    def save_runs(self, records: Iterable[RunRecord]) -> None:
        """Store a batch of runs in one transaction; within the batch the last of an id wins."""
        self.save_batch(RunBatch.of(records))

    def save_batch(self, batch: RunBatch) -> None:
        """Store runs given as columns (`RunBatch.of`) in one transaction, redacted (V3) slice
        by slice on their way to DuckDB (`runner.store.feed`). The batch is left as it is."""
        if not len(batch):
            return
        self._write(batch, datetime.now(UTC))

    def _clean(self, table: str, column: str, values: list) -> list:
        """A text column's values as stored (V3): the one redaction of `save_batch`."""
        if table == "runs" and column == "model_params_json":
            # Once per distinct value: a sweep's runs share a few parameter sets.
            clean = {v: self.redactor.params_json(v) for v in set(values)}
            return list(map(clean.__getitem__, values))
        return self.redactor.column(values)

    def _write(self, batch: RunBatch, saved_at: datetime) -> None:
        con = self._con
        clean: Clean = self._clean
        # Replacing stored runs needs their ids as stored (redacted) before the insert: a
        # small batch (the sweep's group commit) always looks them up; a large one only when
        # the store holds runs at all (a fresh store, a merge's output: none can be stored).
        # Else the ids are redacted with the rest, slice by slice, beside the insert.
        run_ids: list[str] | None = None
        if len(batch) <= _LOOKUPS or self._has_runs():
            run_ids = clean("runs", "run_id", batch.run_ids)
            runs = {**batch.tables["runs"], "run_id": run_ids}
            batch = RunBatch({**batch.tables, "runs": runs})
            clean = partial(_except_run_ids, self._clean)
        try:
            feed = Feed(batch, saved_at, ("runs", *CHILD_TABLES), clean)
        except (pa.ArrowException, OverflowError) as err:
            raise StoreError(f"cannot save runs to {self.path}: {first_line(err)}") from err
        registered: list[str] = []
        con.begin()
        try:
            if run_ids is not None:
                ids = pa.table({"run_id": pa.array(run_ids, type=pa.string())})
                if len(batch) > _LOOKUPS:
                    con.register("_batch_ids", ids)
                    registered.append("_batch_ids")
                # Child tables have no index, so a DELETE scans them: skip it in the usual
                # case of runs that are not stored yet.
                if self._stored_count(run_ids):
                    if not registered:
                        con.register("_batch_ids", ids)
                        registered.append("_batch_ids")
                    for table in ("runs", *CHILD_TABLES):
                        con.execute(
                            f"DELETE FROM {table} WHERE run_id IN (SELECT run_id FROM _batch_ids)"
                        )
            # Each registered table and each statement costs ~0.5-1 ms: only non-empty ones.
            feed.start()
            for table in feed.tables:
                name = f"_batch_{table}"
                con.register(name, feed.reader(table))
                registered.append(name)
                con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {name}")
            con.commit()
        except BaseException as err:
            # BaseException on purpose: after a KeyboardInterrupt mid-batch no open transaction
            # may remain for a later commit to half-apply. A commit that failed (a full disk,
            # V20) has ended the transaction already: its rollback must not hide why.
            with contextlib.suppress(duckdb.Error):
                con.rollback()
            feed.close()
            failed = feed.error  # a value Arrow cannot hold, met on the converting thread
            if isinstance(failed, (pa.ArrowException, OverflowError)):
                raise StoreError(f"cannot save runs to {self.path}: {first_line(failed)}") from (
                    failed
                )
            if failed is not None:
                raise failed from err
            if isinstance(err, duckdb.Error):
                raise StoreError(
                    f"cannot save runs to {self.path}: {first_line(err)}; these {len(batch)} "
                    "runs are not stored, every run stored before is kept"
                ) from err
            raise
        finally:
            feed.close()
            for name in registered:
                con.unregister(name)

    def _has_runs(self) -> bool:
        return bool(self._con.execute("SELECT EXISTS (SELECT 1 FROM runs)").fetchall()[0][0])

    def _stored_count(self, run_ids: list[str]) -> int:
        if len(run_ids) <= _LOOKUPS:  # a small batch (group commit): index look-ups, no join
            marks = ", ".join("?" for _ in run_ids)
            sql, params = f"SELECT count(*) FROM runs WHERE run_id IN ({marks})", run_ids
        else:
            sql = "SELECT count(*) FROM runs WHERE run_id IN (SELECT run_id FROM _batch_ids)"
            params = []
        return int(self._con.execute(sql, params).fetchall()[0][0])

    # -- reading ---------------------------------------------------------------------------

    def finished_run_ids(self, experiment: str, include_errors: bool = True) -> set[str]:
        """Ids of the runs stored for an experiment; without errors, failed runs get re-run."""
        sql = "SELECT run_id FROM runs WHERE experiment = ?"
        if not include_errors:
            sql += " AND status <> 'error'"
        return {row[0] for row in self._con.execute(sql, [experiment]).fetchall()}

    def experiment_names(self) -> list[str]:
        """Every experiment that has runs or a spec in the store, sorted."""
        rows = self._con.execute(
            "SELECT name FROM experiments UNION SELECT DISTINCT experiment FROM runs ORDER BY 1"
        ).fetchall()
        return [row[0] for row in rows]

    def load_experiments(self, experiment: Experiments = None) -> pl.DataFrame:
        """The experiments table (name, spec path and text, first and last start)."""
        where, params = _experiment_filter(experiment, "name")
        return self._con.sql(f"SELECT * FROM experiments{where} ORDER BY name", params=params).pl()

    def load_runs(
        self,
        experiment: Experiments = None,
        columns: Sequence[str] | None = None,
        include_report: bool = False,
        ordered: bool = True,
    ) -> pl.DataFrame:
        """Run rows as a polars DataFrame, by run id unless `ordered` is False (then in
        DuckDB's order, which saves a sort); the raw report JSON only when asked for."""
        if columns is None:
            wanted = [c for c in self._columns("runs") if include_report or c != "report_json"]
        else:
            wanted = list(columns)
        known = set(self._columns("runs"))
        unknown = [c for c in wanted if c not in known]
        if unknown:
            raise StoreError(f"runs has no column(s) {', '.join(unknown)}")
        where, params = _experiment_filter(experiment)
        select = ", ".join(f'"{c}"' for c in wanted)
        order = " ORDER BY run_id" if ordered else ""
        return self._con.sql(f"SELECT {select} FROM runs{where}{order}", params=params).pl()

    def patch_texts(self, experiment: Experiments = None) -> pl.DataFrame:
        """Distinct (patch_arm, patch_text) of the patched runs, with how many runs used each."""
        where, params = _experiment_filter(experiment)
        where = f"{where} AND" if where else " WHERE"
        return self._con.sql(
            f"SELECT patch_arm, patch_text, count(*) AS runs FROM runs{where} "
            "patch_arm <> 'none' GROUP BY ALL ORDER BY patch_arm, runs DESC, patch_text",
            params=params,
        ).pl()

    def load_children(self, table: str, run_ids: Sequence[str]) -> pl.DataFrame:
        """Rows of a child table (operations, findings, patches, transcripts) for some runs."""
        if table not in CHILD_TABLES:
            raise StoreError(f"unknown child table {table!r}")
        with self._ids_view(run_ids) as view:
            return self._con.sql(
                f"SELECT * FROM {table} WHERE run_id IN (SELECT run_id FROM {view}) "
                "ORDER BY run_id, idx"
            ).pl()

    def duplicate_causes(self, experiment: Experiments = None) -> pl.DataFrame:
        """Duplicate executions per run and cause (M2): run_id, attribution, n. For some
        experiments, of their runs; for all, every row of the table, not matched with the
        runs (N2: the analysis joins them with the runs it loaded; 10 -> 3 ms of CPU for the
        bench's 100,000 runs)."""
        where, params = _experiment_filter(experiment)
        runs = f" WHERE d.run_id IN (SELECT run_id FROM runs{where})" if where else ""
        return self._con.sql(
            "SELECT d.run_id, d.attribution, count(*)::BIGINT AS n FROM duplicates d"
            f"{runs} GROUP BY ALL ORDER BY ALL",
            params=params,
        ).pl()

    def runs_with_finding(self, experiment: Experiments, table: str, code: str) -> pl.DataFrame:
        """The ids of the runs (of some experiments, or all) whose report holds a violation or
        an observation (`table`) with this code: one column, run_id, each id once (Q5)."""
        if table not in ("violations", "observations"):
            raise StoreError(f"unknown findings table {table!r}")
        where, params = _experiment_filter(experiment)
        return self._con.sql(
            f"SELECT DISTINCT f.run_id FROM {table} f WHERE f.code = ? AND f.run_id IN "
            f"(SELECT run_id FROM runs{where})",
            params=[code, *params],
        ).pl()

    def load_runs_by_id(self, run_ids: Sequence[str]) -> pl.DataFrame:
        """Whole run rows, raw report JSON included, for some run ids."""
        with self._ids_view(run_ids) as view:
            return self._con.sql(
                f"SELECT * FROM runs WHERE run_id IN (SELECT run_id FROM {view}) ORDER BY run_id"
            ).pl()

    @contextmanager
    def _ids_view(self, run_ids: Sequence[str]) -> Iterator[str]:
        """A temporary view of run ids to join with, however many there are."""
        ids = pa.table({"run_id": pa.array(list(run_ids), type=pa.string())})
        self._con.register("_wanted_ids", ids)
        try:
            yield "_wanted_ids"
        finally:
            self._con.unregister("_wanted_ids")

    def count(self, table: str) -> int:
        """Number of rows in one of the store's tables (for checks and the overview)."""
        if table not in ("experiments", "runs", *CHILD_TABLES):
            raise StoreError(f"unknown table {table!r}")
        return int(self._con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])

    def _columns(self, table: str) -> list[str]:
        rows = self._con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position",
            [table],
        ).fetchall()
        return [row[0] for row in rows]
