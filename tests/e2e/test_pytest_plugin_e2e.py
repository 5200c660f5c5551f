"""I2: the pytest plugin, as a user's suite meets it: the example suite of docs/pytest.md
(examples/pytest/) run by pytest in a subprocess, green, then red with a naive agent (the
failure says the verdict's reason and the patches), recorded once and replayed offline; ground
truth is the booking service's rows. And a suite that does not use the plugin imports nothing
of the harness's beyond the plugin's module while it collects.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "pytest"
NAIVE = '''
import asyncio

import pytest
from booking_agent import book

from harness.testing import assert_pass


@pytest.mark.agent_harness(scenarios=["F1"])
def test_a_naive_agent(agent_harness):
    asyncio.run(book(agent_harness.mcp_config_file, careful=False))
    assert_pass(agent_harness)
'''
OVER_HTTP = '''
import asyncio

import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from harness.testing import assert_verdict

BOOKING = {"guest": "Alice Example", "date": "2026-12-01", "nights": 2}


async def book_twice(url):
    async with streamable_http_client(url) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(2):
                await session.call_tool("create_booking", BOOKING)


@pytest.mark.agent_harness(scenarios=["F1"], transport="http")
def test_an_agent_over_http(agent_harness):
    assert agent_harness.mcp_config["mcpServers"]["agent-harness"]["url"] == agent_harness.url
    asyncio.run(book_twice(agent_harness.url))
    report = assert_verdict(agent_harness, "FAIL")
    assert report.report.operations[0].executions == 2
'''


def suite(tmp_path: Path) -> Path:
    folder = tmp_path / "suite"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("cassettes", "__pycache__"))
    return folder


def pytest_run(folder: Path, *args: str, db: Path, ci: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env.update(BOOKING_DB=str(db), **({"CI": "true"} if ci else {}))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("select count(*) from bookings").fetchone()[0]


def test_i2_the_example_suite_is_green_red_with_a_naive_agent_and_replays_offline(
    tmp_path: Path,
) -> None:
    folder, db = suite(tmp_path), tmp_path / "booking.sqlite"
    green = pytest_run(folder, "--harness-record-mode=once", db=db)
    assert green.returncode == 0, green.stdout[-3000:]
    assert "7 passed" in green.stdout
    # ground truth: the careful agent booked once under each F1 (the ghost write ran), never
    # under F2/F5 (nothing ran), and once more while the cassette was recorded
    assert rows(db) == 3
    (cassette,) = (folder / "cassettes" / "test_booking_agent").iterdir()
    assert cassette.name == "test_the_agent_books_once_against_the_recording-F1.cassette"
    recorded = cassette.read_bytes()

    (folder / "test_naive.py").write_text(NAIVE)
    red = pytest_run(folder, "test_naive.py", db=db)
    assert red.returncode == 1
    out = red.stdout
    assert "agent-harness verdict FAIL (expected PASS), score " in out
    assert "create_booking (operation #0) was executed 2 times" in out
    assert "violation DUPLICATE_EXECUTION: create_booking (operation #0), executed 2 times" in out
    assert "patches for the agent's system prompt:" in out and "[GHOST_WRITE, CRITICAL]" in out
    assert rows(db) == 5  # it really booked twice

    # replayed offline: in CI the default mode replays, and the real server is never started
    fresh = tmp_path / "never.sqlite"
    replayed = pytest_run(folder, "-k", "recording", db=fresh, ci=True)
    assert replayed.returncode == 0, replayed.stdout[-3000:]
    assert "1 passed" in replayed.stdout and not fresh.exists()
    assert cassette.read_bytes() == recorded

    cassette.unlink()
    missing = pytest_run(folder, "-k", "recording", "--harness-record-mode=none", db=fresh)
    assert missing.returncode == 1 and not fresh.exists()
    assert f"no cassette {cassette} to replay (record mode none); record it once" in missing.stdout


def test_i2_an_agent_over_http_gets_a_url_and_its_report(tmp_path: Path) -> None:
    folder, db = suite(tmp_path), tmp_path / "booking.sqlite"
    (folder / "test_over_http.py").write_text(OVER_HTTP)
    done = pytest_run(folder, "test_over_http.py", db=db)
    assert done.returncode == 0, done.stdout[-3000:]
    assert rows(db) == 2


def test_i2_collecting_a_suite_that_does_not_use_the_plugin_imports_none_of_the_harness(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    probe = (
        "import sys, pytest\n"
        "code = pytest.main(['--co', '-q', '-p', 'no:cacheprovider'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('harness', 'runner', 'litellm', 'mcp', 'pydantic', 'duckdb', 'opentelemetry')))\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    loaded = done.stdout.strip().splitlines()[-1]
    assert loaded == "['harness', 'harness.testing', 'harness.testing.plugin']"
