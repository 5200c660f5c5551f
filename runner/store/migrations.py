"""Numbered schema migrations for the run store (R5).

A migration, once released, never changes: a new column or table is a new migration appended
to MIGRATIONS. Each one runs in its own transaction and is recorded in `schema_migrations`.
The tables they build must equal what `runner.store.schema` derives from the run record's
models (tests/unit/test_schema.py checks it): a new field on a model comes with a migration
here, e.g. `Migration(7, "m007_what", ("ALTER TABLE runs ADD COLUMN what BOOLEAN",))`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb

from runner.store.errors import SchemaVersionError, StoreError


@dataclass(frozen=True)
class Migration:
    """One schema step: its number, its name and the SQL statements it runs."""

    id: int
    name: str
    statements: tuple[str, ...]


_M001_INITIAL = (
    """
    CREATE TABLE experiments (
        name VARCHAR PRIMARY KEY,
        spec_path VARCHAR,
        spec_text VARCHAR,
        first_started TIMESTAMP NOT NULL,
        last_started TIMESTAMP NOT NULL
    )
    """,
    """
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY,
        experiment VARCHAR NOT NULL,
        cell_id VARCHAR NOT NULL,
        repetition INTEGER NOT NULL,
        model VARCHAR NOT NULL,
        model_params_json VARCHAR NOT NULL,
        prompt VARCHAR NOT NULL,
        patch_arm VARCHAR NOT NULL,
        patch_text VARCHAR,
        upstream VARCHAR NOT NULL,
        scenario VARCHAR NOT NULL,
        conversation VARCHAR NOT NULL,
        status VARCHAR NOT NULL,
        error VARCHAR,
        verdict VARCHAR,
        verdict_reason VARCHAR,
        score_overall INTEGER,
        duplicate_safety DOUBLE,
        failure_handling DOUBLE,
        capped BOOLEAN,
        baseline BOOLEAN,
        duplicate_found BOOLEAN,
        real_duplicate BOOLEAN,
        turns INTEGER NOT NULL,
        tool_calls INTEGER NOT NULL,
        tokens_prompt BIGINT NOT NULL,
        tokens_completion BIGINT NOT NULL,
        cost_usd DOUBLE NOT NULL,
        latency_ms DOUBLE NOT NULL,
        final_answer VARCHAR,
        started_at TIMESTAMP NOT NULL,
        finished_at TIMESTAMP NOT NULL,
        harness_version VARCHAR NOT NULL,
        report_json VARCHAR,
        saved_at TIMESTAMP NOT NULL
    )
    """,
    """
    CREATE TABLE operations (
        run_id VARCHAR NOT NULL,
        idx INTEGER NOT NULL,
        tool VARCHAR NOT NULL,
        arguments_json VARCHAR NOT NULL,
        attempts INTEGER NOT NULL,
        executions INTEGER NOT NULL,
        failed_attempts INTEGER NOT NULL,
        outcome VARCHAR NOT NULL,
        keys_json VARCHAR NOT NULL,
        real_rows INTEGER
    )
    """,
    # Violations and observations share a shape; SPEC J1/J2 name them apart, so do we.
    """
    CREATE TABLE violations (
        run_id VARCHAR NOT NULL,
        idx INTEGER NOT NULL,
        code VARCHAR NOT NULL,
        tool VARCHAR,
        operation_index INTEGER,
        detail_json VARCHAR NOT NULL
    )
    """,
    """
    CREATE TABLE observations (
        run_id VARCHAR NOT NULL,
        idx INTEGER NOT NULL,
        code VARCHAR NOT NULL,
        tool VARCHAR,
        operation_index INTEGER,
        detail_json VARCHAR NOT NULL
    )
    """,
    """
    CREATE TABLE patches (
        run_id VARCHAR NOT NULL,
        idx INTEGER NOT NULL,
        patch_id VARCHAR NOT NULL,
        severity VARCHAR NOT NULL,
        trigger VARCHAR NOT NULL,
        text VARCHAR NOT NULL
    )
    """,
    """
    CREATE TABLE transcripts (
        run_id VARCHAR NOT NULL,
        idx INTEGER NOT NULL,
        role VARCHAR NOT NULL,
        content VARCHAR NOT NULL,
        tool_calls_json VARCHAR,
        tool_call_id VARCHAR,
        tool_name VARCHAR,
        is_error BOOLEAN,
        fault VARCHAR
    )
    """,
)

# Which limit ended a run early (max_turns, max_tool_calls, max_tokens), if one did.
_M002_STOPPED_BY = ("ALTER TABLE runs ADD COLUMN stopped_by VARCHAR",)

# Honesty (M1): the judge's label of the final words, its evidence and confidence.
_M003_HONESTY = tuple(
    f"ALTER TABLE runs ADD COLUMN {column} {sql}"
    for column, sql in (
        ("honesty_label", "VARCHAR"),
        ("honesty_claim", "VARCHAR"),
        ("honesty_evidence", "VARCHAR"),
        ("honesty_confidence", "DOUBLE"),
        ("honesty_judge", "VARCHAR"),
        ("honesty_note", "VARCHAR"),
        ("honesty_error", "VARCHAR"),
        ("honesty_cost_usd", "DOUBLE"),
    )
)

# Attribution (M2): one row per duplicate execution with its cause.
_M004_DUPLICATES = (
    """
    CREATE TABLE duplicates (
        run_id VARCHAR NOT NULL,
        idx INTEGER NOT NULL,
        operation_index INTEGER NOT NULL,
        tool VARCHAR NOT NULL,
        execution INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        rpc_id VARCHAR,
        tool_call_id VARCHAR,
        earlier_seq INTEGER NOT NULL,
        earlier_tool_call_id VARCHAR,
        attribution VARCHAR NOT NULL,
        reason VARCHAR NOT NULL
    )
    """,
)

# The run's seed (shared by the patch arms of one repetition): pairs runs for McNemar (M3).
_M005_SEED = ("ALTER TABLE runs ADD COLUMN seed BIGINT",)

# R10: the verdict against the upstream's real rows (runner.analysis.agreement). Runs stored
# before this migration get the state from their stored verdict, harness finding and real
# rows, by the same rule; tests/unit/test_agreement.py checks that this SQL matches it.
_M006_AGREEMENT = (
    "ALTER TABLE runs ADD COLUMN agreement VARCHAR",
    "ALTER TABLE runs ADD COLUMN agreement_reason VARCHAR",
    """
    UPDATE runs SET
        agreement = CASE
            WHEN status = 'error' OR verdict IS NULL THEN NULL
            WHEN verdict = 'NOT_TESTED' THEN 'no_claim'
            WHEN real_duplicate IS NULL THEN 'not_checkable'
            WHEN coalesce(duplicate_found, false) = real_duplicate THEN 'agrees'
            ELSE 'disagrees'
        END,
        agreement_reason = CASE
            WHEN status = 'error' OR verdict IS NULL THEN NULL
            ELSE 'set when the store was upgraded (m006), from the stored verdict, harness '
                 || 'finding and real rows'
        END
    """,
)

# A run's cost is unknown (NULL) when a model it called has no price (issue 12): never $0.
_M007_COST_UNKNOWN = ("ALTER TABLE runs ALTER COLUMN cost_usd DROP NOT NULL",)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "m001_initial", _M001_INITIAL),
    Migration(2, "m002_stopped_by", _M002_STOPPED_BY),
    Migration(3, "m003_honesty", _M003_HONESTY),
    Migration(4, "m004_duplicates", _M004_DUPLICATES),
    Migration(5, "m005_seed", _M005_SEED),
    Migration(6, "m006_agreement", _M006_AGREEMENT),
    Migration(7, "m007_cost_unknown", _M007_COST_UNKNOWN),
)

LATEST = MIGRATIONS[-1].id

_CREATE_LEDGER = """
    CREATE TABLE IF NOT EXISTS schema_migrations (
        id INTEGER PRIMARY KEY,
        name VARCHAR NOT NULL,
        applied_at TIMESTAMP NOT NULL
    )
"""


def applied(con: duckdb.DuckDBPyConnection) -> dict[int, str]:
    """The migrations recorded in the database, by id; empty for a fresh database."""
    # fetchall, not fetchone: DuckDB 2 keeps an unfinished result open on the connection.
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_migrations'"
    ).fetchall()[0][0]
    if not exists:
        return {}
    return dict(con.execute("SELECT id, name FROM schema_migrations").fetchall())


def check_known(done: dict[int, str], where: str) -> None:
    """Refuse a database written by a newer (or a different) version of the code."""
    newest = max(done, default=0)
    if newest > LATEST:
        raise SchemaVersionError(
            f"{where} has schema version {newest}, newer than this agent-harness knows "
            f"({LATEST}); upgrade agent-harness to read it"
        )
    known = {m.id: m.name for m in MIGRATIONS}
    for mid, name in done.items():
        if known.get(mid) != name:
            raise SchemaVersionError(
                f"{where} records migration {mid} as {name!r}, this agent-harness knows it as "
                f"{known.get(mid)!r}; it was written by another program"
            )


def migrate(
    con: duckdb.DuckDBPyConnection,
    where: str,
    upto: int | None = None,
    *,
    in_transaction: bool = False,
) -> list[str]:
    """Apply every migration the database lacks, in order; return the names applied.

    upto stops after that migration id (tests build the stores older versions made).
    in_transaction: the caller holds one transaction for the migrations and what follows
    (`merge`: a failed merge leaves its output as it was, not upgraded); else each
    migration is a transaction of its own.
    """
    con.execute(_CREATE_LEDGER)
    done = applied(con)
    check_known(done, where)
    ran: list[str] = []
    for migration in MIGRATIONS:
        if migration.id in done or (upto is not None and migration.id > upto):
            continue
        if not in_transaction:
            con.begin()
        try:
            for statement in migration.statements:
                con.execute(statement)
            con.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                [migration.id, migration.name, datetime.now(UTC).replace(tzinfo=None)],
            )
            if not in_transaction:
                con.commit()
        except duckdb.Error as err:
            if not in_transaction:
                con.rollback()
            first_line = str(err).splitlines()[0]
            raise StoreError(f"cannot apply {migration.name} to {where}: {first_line}") from err
        ran.append(migration.name)
    return ran
