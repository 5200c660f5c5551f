"""Q3: the proxy says its verdict. docs/proxy.md's first example and its Claude Desktop JSON,
as a user copies them (only the upstream swapped for a real MCP server: the built-in booking
service over stdio), give a verdict line on stderr at the end and a report file in the state
folder, though neither names a report file. An MCP client (the official SDK) books once under
F1 and, told it timed out, books again; ground truth: the booking service's rows.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from runner.upstreams import stdio_command
from tests.support.paths import BIN, ROOT

pytestmark = pytest.mark.anyio

DOC = ROOT / "docs" / "proxy.md"
YOUR_SERVER = ["--upstream-command", "node", "--upstream-arg", "dist/your-server.js"]
BOOKING = {"guest": "Alice Example", "date": "2026-12-01", "nights": 2}
VERDICT = re.compile(
    r"^\[agent-harness\] verdict: FAIL, score (\d+)/100: create_booking \(operation #0\) was "
    r"executed 2 times[^;]*; report: (.+)$"
)


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def _swap_server(args: list[str], db: Path) -> list[str]:
    """The example's args with the booking service where it names `dist/your-server.js`."""
    at = next(i for i in range(len(args)) if args[i : i + 4] == YOUR_SERVER)
    program, *rest = stdio_command("booking", db)
    ours = ["--upstream-command", program, *(f"--upstream-arg={a}" for a in rest)]
    return [*args[:at], *ours, *args[at + 4 :]]


async def _book_twice(args: list[str], cwd: str, env: dict[str, str], errlog: Path) -> None:
    params = StdioServerParameters(command=str(BIN), args=args, cwd=cwd, env=env)
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for _ in range(2):  # F1: the first answer is a timeout, the write ran
                    await session.call_tool("create_booking", BOOKING)


def _rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("select count(*) from bookings").fetchone()[0]


def _verdict(errlog: Path) -> tuple[int, Path]:
    lines = errlog.read_text().splitlines()
    assert lines[0].startswith("[agent-harness] report file: "), lines
    found = VERDICT.match(lines[-1])
    assert found, lines[-1]
    return int(found.group(1)), Path(found.group(2))


async def test_q3_the_first_example_of_the_proxy_doc_prints_its_verdict(tmp_path: Path) -> None:
    argv = _blocks("sh")[0].split()
    assert argv[:2] == ["agent-harness", "proxy"] and "--report-file" not in argv
    db, state = tmp_path / "booking.sqlite", tmp_path / "state"
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    await _book_twice(_swap_server(argv[1:], db), str(tmp_path), env, tmp_path / "err.txt")
    score, report = _verdict(tmp_path / "err.txt")
    assert report.parent == state / "agent-harness" / "reports"
    data = json.loads(report.read_text())
    assert data["verdict"] == "FAIL" and data["score"]["overall"] == score
    assert _rows(db) == 2  # ground truth: the booking really exists twice


async def test_q3_the_claude_desktop_configuration_prints_its_verdict(tmp_path: Path) -> None:
    # a desktop agent starts its servers in a folder of its own (/ on macOS): the report goes
    # under the user's home, ~/.local/state/agent-harness/reports
    config = json.loads(_blocks("json")[0])
    (server,) = config["mcpServers"].values()
    assert server["command"] == "agent-harness" and "--report-file" not in server["args"]
    db, home = tmp_path / "booking.sqlite", tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}
    env["HOME"] = str(home)
    await _book_twice(_swap_server(server["args"], db), "/", env, tmp_path / "err.txt")
    _, report = _verdict(tmp_path / "err.txt")
    assert report.parent == home / ".local" / "state" / "agent-harness" / "reports"
    assert json.loads(report.read_text())["verdict"] == "FAIL"
    assert _rows(db) == 2


async def test_q3_no_report_file_still_says_the_verdict(tmp_path: Path) -> None:
    db = tmp_path / "booking.sqlite"
    args = _swap_server(["proxy", *YOUR_SERVER, "--scenario", "F1", "--no-report-file"], db)
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    await _book_twice(args, str(tmp_path), env, tmp_path / "err.txt")
    last = (tmp_path / "err.txt").read_text().splitlines()[-1]
    assert VERDICT.match(last) and last.endswith("; report: none written (--no-report-file)")
    assert not (tmp_path / "state").exists()
