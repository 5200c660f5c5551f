"""R3 R4 (issue 37): a run that hosts its built-in upstream in process keeps the upstream's
ledger in memory and reads its ground truth from it (no ledger file to create, fsync at each
commit and open again), and takes its proxy's final report as text (no report file to write
and read back). What the run concludes is the same as with files (test_runner_paths compares
it with a proxy and upstream processes, row by row); a kept folder still holds both files."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runner.execute import execute_run
from runner.execute.connect import Connection, ProxyTarget, in_process_connection
from runner.experiment import load_spec
from runner.experiment.matrix import expand
from tests.support.specs import REQUEST, write_spec


def naive_f1(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A naive agent under F1: it books, is told the booking timed out, and books again."""
    spec = load_spec(write_spec(
        tmp_path, "mem", models=["scripted/naive"], scenarios=["F1"],
        conversations=[{"name": "c", "user": REQUEST}],
    ))  # fmt: skip
    return spec, expand(spec)[0]


@pytest.mark.anyio
async def test_r3_a_run_in_process_keeps_its_ledger_and_report_in_memory(tmp_path):
    spec, cell = naive_f1(tmp_path)
    files: list[list[str]] = []

    @contextlib.asynccontextmanager
    async def watching(target: ProxyTarget, workdir: Path) -> AsyncIterator[Connection]:
        async with in_process_connection(target, workdir) as connection:
            yield connection
        # The session is over: the upstream wrote both bookings, the proxy its final report.
        files.append(sorted(p.name for p in workdir.iterdir()))

    record = await execute_run(cell, spec, connect=watching)
    assert record.status == "ok", record.error
    assert files == [[]]
    assert record.verdict == "FAIL" and record.duplicate_found is True  # the report was read
    # The ground truth came from the ledger in memory: two real rows of one booking.
    assert record.real_duplicate is True
    assert [op.real_rows for op in record.operations if op.tool == "create_booking"] == [2]


@pytest.mark.anyio
async def test_r3_a_kept_run_in_process_leaves_its_ledger_and_report_as_files(tmp_path):
    spec, cell = naive_f1(tmp_path)
    record = await execute_run(cell, spec, in_process="always", keep_dir=tmp_path / "kept")
    assert record.status == "ok", record.error
    kept = tmp_path / "kept" / record.run_id
    with sqlite3.connect(kept / "upstream.sqlite") as conn:
        rows = conn.execute("SELECT guest, stay_date, nights FROM bookings").fetchall()
    assert rows == [("Alice Example", "2026-12-01", 2)] * 2
    assert json.loads((kept / "report.json").read_text()) == json.loads(record.report_json)
