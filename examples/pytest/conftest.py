"""The example's upstream: the built-in booking service over stdio, its rows in a SQLite file
(BOOKING_DB, else one per test). Point agent_harness_upstream at your own MCP server."""

import os
import sys

import pytest


@pytest.fixture
def agent_harness_upstream(tmp_path):
    db = os.environ.get("BOOKING_DB") or str(tmp_path / "booking.sqlite")
    return [sys.executable, "-m", "runner.upstreams", "booking", "--db", db]
