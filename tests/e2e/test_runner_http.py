"""`agent-harness run` with upstreams over streamable HTTP (H1, R2-R4): a built-in upstream
served over HTTP, and an upstream given by its URL, each behind a real proxy subprocess.

Ground truth is the built-in booking service's SQLite ledger: the runner stores it next to each
verdict for a built-in; for the URL upstream the test reads the ledger of the server it started.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from runner.upstreams import ground_truth
from tests.support import launcher
from tests.support.httpkit import running
from tests.support.runkit import CLI_TIMEOUT_S, E2E_LIMITS, cli_env, query
from tests.support.specs import REQUEST, write_spec

pytestmark = [pytest.mark.slow]


def run_cli(bin_path: Path, spec: Path, db: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return launcher.run(
        [str(bin_path), "run", str(spec), "--db", str(db)],
        capture_output=True, text=True, timeout=CLI_TIMEOUT_S, env=env, cwd=spec.parent,
    )  # fmt: skip


@pytest.mark.parametrize(("agent", "transport"), [("stdio", "http"), ("http", "stdio"),
                                                  ("http", "http")])  # fmt: skip
def test_h1_r4_runs_over_http_give_verdicts_that_match_the_rows(
    agent, transport, agent_harness_bin, tmp_path
):  # H1 R3 R4: the agent to `proxy --listen`, the proxy to a built-in served over HTTP, or both
    spec = write_spec(
        tmp_path, "http-builtin",
        models=["scripted/careful", "scripted/naive"],
        upstreams=[{"name": "booking", "builtin": "booking", "transport": transport}],
        conversations=[{"name": "single", "user": REQUEST}],
        proxy={"agent": agent}, limits=E2E_LIMITS,
    )  # fmt: skip
    db = tmp_path / "runs.duckdb"
    done = run_cli(agent_harness_bin, spec, db, cli_env())
    assert done.returncode == 0, done.stderr
    runs = dict(query(db, "SELECT model, verdict FROM runs WHERE status = 'ok'"))
    assert runs == {"scripted/careful": "PASS", "scripted/naive": "FAIL"}
    rows = query(db, "SELECT r.model, max(o.real_rows), max(o.executions) FROM runs r "
                     "JOIN operations o USING (run_id) GROUP BY r.model")  # fmt: skip
    assert sorted(rows) == [("scripted/careful", 1, 1), ("scripted/naive", 2, 2)]


def test_h1_r2_an_upstream_given_by_url_is_put_behind_the_proxy(agent_harness_bin, tmp_path):
    # H1 R2 R3: the spec names only a URL and a header taken from the environment (V3).
    ledger = tmp_path / "external.sqlite"
    serve = [sys.executable, "-m", "runner.upstreams", "booking", "--db", str(ledger),
             "--http", "127.0.0.1:0"]  # fmt: skip

    async def sweep() -> subprocess.CompletedProcess:
        async with running(serve, stdout=asyncio.subprocess.DEVNULL) as server:
            spec = write_spec(
                tmp_path, "http-url",
                models=["scripted/naive"],
                upstreams=[{"name": "remote", "url": server.url,
                            "headers": {"X-Harness-Test": "os.environ/HARNESS_TEST_HEADER"}}],
                conversations=[{"name": "single", "user": REQUEST}], limits=E2E_LIMITS,
            )  # fmt: skip
            env = {**cli_env(), "HARNESS_TEST_HEADER": "secret-header-value"}
            return await anyio.to_thread.run_sync(
                run_cli, agent_harness_bin, spec, tmp_path / "runs.duckdb", env
            )

    done = anyio.run(sweep)
    assert done.returncode == 0, done.stderr
    db = tmp_path / "runs.duckdb"
    assert query(db, "SELECT status, verdict FROM runs") == [("ok", "FAIL")]
    assert [op["rows"] for op in ground_truth("booking", ledger)] == [2]  # booked twice, really
    stored = " ".join(str(v) for row in query(db, "SELECT * FROM experiments") for v in row)
    assert "secret-header-value" not in stored and "os.environ/HARNESS_TEST_HEADER" in stored
    assert os.environ.get("HARNESS_TEST_HEADER") is None
