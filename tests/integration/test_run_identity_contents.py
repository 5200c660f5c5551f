"""V18: a run's identity includes what the files it reads hold. A cassette re-recorded at the
same path, a truth probe's script or a command agent's script edited in place is a new run
for `agent-harness run` (resume), not one skipped as "already stored"; data files a command
is handed are state, not identity, so resuming still skips what ran.

The runs are real (`agent-harness run` over a cassette replayed by `agent-harness replay`);
ground truth: the store's rows (which cassette answered each run, how many runs there are)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from runner.experiment import load_spec
from runner.experiment.matrix import expand
from tests.support.paths import BIN
from tests.support.runkit import cli, query
from tests.support.specs import REQUEST

pytestmark = pytest.mark.slow
HEADER = {"cassette": "agent-harness", "version": 1}
TOOLS = {"tools": [{"name": "create_booking", "inputSchema": {"type": "object"}},
                   {"name": "search_bookings", "inputSchema": {"type": "object"},
                    "annotations": {"readOnlyHint": True}}]}  # fmt: skip
INIT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
        "serverInfo": {"name": "booking", "version": "1"}}  # fmt: skip


def record(path: Path, booking: str) -> None:
    """A cassette whose every booking is answered with `booking` (its id)."""
    answer = {"content": [{"type": "text", "text": json.dumps({"booking_id": booking})}]}
    lines = [HEADER,
             {"type": "request", "method": "initialize", "params": {}, "result": INIT},
             {"type": "request", "method": "tools/list", "params": {}, "result": TOOLS},
             {"type": "call", "tool": "search_bookings", "arguments": {}, "result": answer},
             {"type": "call", "tool": "create_booking", "arguments": {}, "result": answer}]  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def spec(folder: Path) -> Path:
    data = {
        "name": "contents",
        "models": [{"name": "scripted/naive"}],
        "prompts": [{"name": "p", "text": "You book hotel rooms."}],
        "upstreams": [{"name": "shop", "cassette": str(folder / "shop.cassette"),
                       "unmatched": "nearest"}],
        "scenarios": ["none"],
        "conversation": {"name": "c", "user": REQUEST},
    }  # fmt: skip
    path = folder / "contents.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_v18_a_rerecorded_cassette_at_the_same_path_is_a_new_run_not_a_skip(tmp_path):
    # V18: the second `run` said the run was already stored and kept the old cassette's.
    record(tmp_path / "shop.cassette", "B-1")
    path = spec(tmp_path)
    first = cli(tmp_path, "run", str(path), "--db", "runs.duckdb")
    assert first.returncode == 0, first.stdout + first.stderr
    again = cli(tmp_path, "run", str(path), "--db", "runs.duckdb")  # the same cassette: a skip
    assert again.returncode == 0 and "1 runs were already stored" in again.stdout + again.stderr
    record(tmp_path / "shop.cassette", "B-2")  # re-recorded in place
    third = cli(tmp_path, "run", str(path), "--db", "runs.duckdb")
    assert third.returncode == 0, third.stdout + third.stderr
    assert "already stored" not in third.stdout + third.stderr
    rows = query(tmp_path / "runs.duckdb", "SELECT count(*), count(DISTINCT cell_id) FROM runs")
    assert rows == [(2, 2)]


def _ids(path: Path) -> list[str]:
    return [cell.run_id for cell in expand(load_spec(path))]


def test_v18_a_probe_or_agent_script_edited_in_place_changes_the_run_ids(tmp_path):
    # V18: the probe's script and the agent's script by content; the probe's data file not.
    probe, agent, data = tmp_path / "probe.py", tmp_path / "agent.py", tmp_path / "state.json"
    probe.write_text("print('row')\n")
    agent.write_text("print('hello')\n")
    data.write_text("[]")
    spec_data = {
        "name": "scripts",
        "agents": [{"name": "a", "command": [sys.executable, str(agent)], "transport": "http"}],
        "prompts": [{"name": "p", "text": "You book hotel rooms."}],
        "upstreams": [{"name": "u", "command": sys.executable, "args": [str(BIN)],
                       "truth_probe": {"command": [sys.executable, str(probe), str(data)]}}],
        "scenarios": ["none"],
        "conversation": {"name": "c", "user": REQUEST},
    }  # fmt: skip
    path = tmp_path / "scripts.yaml"
    path.write_text(yaml.safe_dump(spec_data, sort_keys=False))
    before = _ids(path)
    data.write_text('[{"row": 1}]')  # state the runs change: the same condition
    assert _ids(path) == before
    probe.write_text("print('another row')\n")
    after_probe = _ids(path)
    assert after_probe != before
    agent.write_text("print('bye')\n")
    assert _ids(path) not in (before, after_probe)
