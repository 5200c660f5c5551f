"""I1: `agent-harness wrap` on real client configurations.

Each client's own file (tests/e2e/clients/: Claude Desktop, Cursor, Claude Code, VS Code with
comments and trailing commas, Codex's TOML, as their docs write them) is wrapped and unwrapped
by the installed command: only the wrapped entries change, each starts the proxy with the
server's own command or URL, the backup holds the original, and unwrap gives the original back
byte for byte. Then a wrapped entry is used as a client uses it: the official SDK client starts
the entry's command with its args, env and cwd `/` (as a desktop client does), talks to a real
server through it (the built-in booking service over stdio and over HTTP, npm's server-memory),
and the report the proxy wrote is read; ground truth is the server's own state.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import sqlite3
import tomllib
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from harness.clients import jsonc
from harness.proxy import parse
from harness.report import read_report
from runner.upstreams import http_command, stdio_command
from tests.support import launcher
from tests.support.httpkit import running
from tests.support.paths import BIN, ROOT
from tests.support.prereq import node, npm_entry

CLIENTS = ROOT / "tests" / "e2e" / "clients"
BOOKING = {"guest": "Alice Example", "date": "2026-12-01", "nights": 2}
# file -> (the name a client gives it, the servers in it, whether TOML)
FILES = {
    "claude_desktop_config.json": ("claude_desktop_config.json", ["filesystem", "memory"]),
    "cursor-mcp.json": ("mcp.json", ["server-name", "remote-server"]),
    "claude-code.mcp.json": (".mcp.json", ["api-server", "local-db"]),
    "vscode-mcp.json": ("mcp.json", ["Perplexity", "github", "fetch"]),
    "codex-config.toml": ("config.toml", ["context7", "figma", "chrome_devtools"]),
}


def expanded(args: list[str]) -> list[str]:
    """What Claude Code makes of `${VAR:-default}` with VAR unset: the default."""
    return [re.sub(r"\$\{[A-Za-z_]\w*:-([^}]*)\}", r"\1", a) for a in args]


def wrap(*args: str | Path) -> Any:
    """`agent-harness wrap ARGS` as a user runs it."""
    return launcher.run(
        [str(BIN), "wrap", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def place(tmp_path: Path, fixture: str) -> tuple[Path, bytes]:
    name, _ = FILES[fixture]
    folder = tmp_path / fixture.replace(".", "-")
    folder.mkdir()
    path = folder / name
    shutil.copyfile(CLIENTS / fixture, path)
    return path, path.read_bytes()


def servers_of(path: Path) -> dict[str, Any]:
    """The servers as the client reads them."""
    if path.suffix == ".toml":
        return tomllib.loads(path.read_text())["mcp_servers"]
    data = jsonc.parse(path.read_text()).plain()
    return data.get("mcpServers") or data["servers"]


def entry_lines(path: Path, text: str, names: list[str]) -> set[int]:
    """The line numbers (from 0) the entries of `names` take in `text`."""
    lines: set[int] = set()
    if path.suffix == ".toml":
        rows = text.splitlines()
        for name in names:
            start = rows.index(f"[mcp_servers.{name}]")
            end = next(
                (i for i in range(start + 1, len(rows)) if rows[i].startswith("[")), len(rows)
            )
            lines |= set(range(start, end))
        return lines
    root = jsonc.parse(text)
    container = root.get("mcpServers") or root.get("servers")
    assert container is not None
    for member in container.members:
        if member.key in names:
            first = text.count("\n", 0, member.start)
            lines |= set(range(first, text.count("\n", 0, member.value.end) + 1))
    return lines


@pytest.mark.parametrize("fixture", sorted(FILES))
def test_i1_a_client_configuration_is_wrapped_in_place_and_unwrapped_byte_for_byte(
    tmp_path: Path, fixture: str
) -> None:
    path, original = place(tmp_path, fixture)
    before = servers_of(path)
    reports = tmp_path / "reports"
    done = wrap(path, "--scenario", "F1", "--report-dir", reports)
    assert done.returncode == 0, done.stderr
    _, names = FILES[fixture]
    assert [line.split(" (")[0] for line in done.stdout.splitlines()[:-1]] == [
        f"wrapped {n}" for n in names
    ]
    # the backup is the original, its owner's only
    backup = path.with_name(path.name + ".agent-harness-backup")
    assert backup.read_bytes() == original and backup.stat().st_mode & 0o077 == 0
    text = path.read_text()
    # only the wrapped entries changed: every line outside them is the original's, in order
    diff = difflib.SequenceMatcher(None, original.decode().splitlines(), text.splitlines())
    inside = entry_lines(path, original.decode(), names)
    for tag, i1, i2, _, _ in diff.get_opcodes():
        if tag != "equal":
            assert set(range(i1, i2)) <= inside, (tag, original.decode().splitlines()[i1:i2])
    # each entry starts the proxy in front of what the server was
    for name, entry in servers_of(path).items():
        old = before[name]
        assert entry["command"] == str(BIN) and entry["args"][0] == "proxy"
        config = parse(expanded(entry["args"][1:])).config
        assert config is not None and config.plan.scenario == "F1" and not config.audit_tools
        assert config.report_file == str(reports / f"{name}.json")
        if "command" in old:
            assert config.upstream_command == old["command"]
            assert list(config.upstream_args) == old.get("args", [])
            assert entry.get("env") == old.get("env")  # env stays where it was (pass-through)
        else:
            assert config.upstream_url == expanded([old["url"]])[0]
            for header in old.get("headers", {}) | old.get("http_headers", {}):
                variable = "AGENT_HARNESS_HEADER_" + header.upper().replace("-", "_")
                assert entry["env"][variable] == (old.get("headers") or old["http_headers"])[header]
                assert any(s.name == header and s.env == variable for s in config.upstream_headers)
            assert old.get("headers", {}).keys().isdisjoint(entry["args"])  # never in argv
    assert reports.is_dir()
    # unwrap: the original, byte for byte, and nothing of wrap's left beside it
    undone = wrap(path, "--unwrap")
    assert undone.returncode == 0, undone.stderr
    assert path.read_bytes() == original
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_i1_codex_remote_server_keeps_its_variables_by_name(tmp_path: Path) -> None:
    path, _ = place(tmp_path, "codex-config.toml")
    assert wrap(path, "--server", "figma", "--report-dir", tmp_path / "r").returncode == 0
    figma = servers_of(path)["figma"]
    config = parse(figma["args"][1:]).config
    assert config is not None
    by_name = {s.name: s for s in config.upstream_headers}
    assert by_name["Authorization"].env == "FIGMA_OAUTH_TOKEN"
    assert by_name["Authorization"].prefix == "Bearer "
    assert by_name["X-Org-Id"].env == "FIGMA_ORG"
    # Codex gives a stdio server only the variables it names
    assert figma["env_vars"] == ["FIGMA_ORG", "FIGMA_OAUTH_TOKEN"]
    assert figma["env"] == {"AGENT_HARNESS_HEADER_X_FIGMA_REGION": "us-east-1"}
    assert not {"url", "http_headers", "bearer_token_env_var"} & figma.keys()
    assert servers_of(path)["context7"]["command"] == "npx"  # not named: untouched


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"mcpServers": {"s": {"command": "srv", "args": ["--api-key", "sk-proj-abcdefghijklmnop1234"]}}}',
         "argument 2 looks like a credential"),
        ('{"mcpServers": {"s": {"command": "srv", "args": ["--token=abc123"]}}}',
         "argument 1 looks like a credential"),
        ('{"mcpServers": {"s": {"command": "srv", "args": ["https://me:pw@db.example/x"]}}}',
         "argument 1 looks like a credential"),
        ('{"servers": {"s": {"command": "srv", "args": ["a" /* why */, "b"]}}}',
         "a comment inside its command or args would be lost"),
        ('{"servers": {"s": {"type": "http", "url": "https://x.example/mcp" // remote\n}}}',
         "a comment inside its entry would be lost"),
        ('{"mcpServers": {"s": {"type": "sse", "url": "https://x.example/sse"}}}',
         "older HTTP+SSE transport"),
        ('{"mcpServers": {"s": {"url": "https://x.example/mcp", "auth": {"CLIENT_ID": "x"}}}}',
         "signs in with OAuth"),
        ('{"mcpServers": {"s": {"command": "agent-harness", "args": ["proxy", "--upstream-command", "srv"]}}}',
         "already runs behind agent-harness proxy"),
        ('{"mcpServers": {"s": {"transport": "ws"}}}', "neither a command nor a url"),
        ('{"mcpServers": {"s": {"command": "srv", "args": "--port 1"}}}', "args is not a list"),
        ('{"other": {}}', "no MCP servers in it"),
        ('{"mcpServers": {"s": {"command": "srv",}', "not JSON: line 1, column 41"),
        ('[mcp_servers.s]\nurl = "https://x.example"\nbearer_token = "abc"\n', "bearer_token"),
    ],
)  # fmt: skip
def test_i1_what_wrap_cannot_rewrite_safely_is_one_line_and_nothing_is_written(
    tmp_path: Path, text: str, why: str
) -> None:
    path = tmp_path / ("config.toml" if text.startswith("[") else "mcp.json")
    path.write_text(text)
    done = wrap(path, "--scenario", "F1")
    assert done.returncode == 1 and why in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert path.read_text() == text and sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_i1_a_wrapped_file_is_not_wrapped_again_and_unwrap_keeps_later_changes(
    tmp_path: Path,
) -> None:
    path, original = place(tmp_path, "claude_desktop_config.json")
    assert wrap(path, "--server", "memory", "--report-dir", tmp_path / "r").returncode == 0
    again = wrap(path)
    assert again.returncode == 1 and "already wrapped" in again.stderr
    # the client rewrites its file (another setting changed) while it is wrapped
    text = path.read_text().replace('"Alt+Space"', '"Ctrl+Space"')
    path.write_text(text)
    assert wrap(path, "--unwrap").returncode == 0
    assert path.read_bytes() == original.replace(b'"Alt+Space"', b'"Ctrl+Space"')


def _rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("select count(*) from bookings").fetchone()[0]


async def _use(entry: dict[str, Any], calls: list[tuple[str, dict[str, Any]]], err: Path) -> None:
    """Start a wrapped entry as a desktop client does (its folder `/`), make the calls."""
    env = {**os.environ, **entry.get("env", {})}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env, cwd="/")
    with err.open("w") as log:
        async with stdio_client(params, errlog=log) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for tool, arguments in calls:  # F1: the first answer is a timeout
                    await session.call_tool(tool, arguments)


@pytest.mark.anyio
async def test_i1_a_wrapped_claude_desktop_config_runs_its_servers_behind_the_proxy(
    tmp_path: Path,
) -> None:
    db, graph = tmp_path / "booking.sqlite", tmp_path / "memory.jsonl"
    program, *args = stdio_command("booking", db)
    config = {
        "mcpServers": {
            "booking": {"command": program, "args": args},
            "memory": {
                "command": node(),
                "args": [str(npm_entry("server-memory"))],
                "env": {"MEMORY_FILE_PATH": str(graph)},
            },
        }
    }
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(config, indent=2))
    reports = tmp_path / "reports"
    done = wrap(path, "--scenario", "F1", "--report-dir", reports)
    assert done.returncode == 0, done.stderr
    wrapped = json.loads(path.read_text())["mcpServers"]

    await _use(wrapped["booking"], [("create_booking", BOOKING)] * 2, tmp_path / "b.txt")
    report = read_report(reports / "booking.json")
    assert report.status == "finished" and report.verdict == "FAIL"
    assert report.report.operations[0].executions == 2
    assert _rows(db) == 2  # ground truth: booked twice

    entity = {"entities": [{"name": "Alice", "entityType": "person", "observations": ["x"]}]}
    await _use(wrapped["memory"], [("create_entities", entity)] * 2, tmp_path / "m.txt")
    report = read_report(reports / "memory.json")
    assert report.status == "finished" and report.verdict == "PASS"  # a repeat it skips
    assert report.report.operations[0].outcome == "IDEMPOTENT_REPEAT"
    # ground truth: the env the entry kept reached the server through the proxy: its graph
    # file is where MEMORY_FILE_PATH says, with Alice once
    names = [json.loads(line)["name"] for line in graph.read_text().splitlines()]
    assert names == ["Alice"]


@pytest.mark.anyio
async def test_i1_a_wrapped_vscode_url_server_is_reached_through_a_stdio_proxy(
    tmp_path: Path,
) -> None:
    db = tmp_path / "booking.sqlite"
    async with running(http_command("booking", db)) as upstream:
        config = (
            '{\n\t// the booking service over HTTP\n\t"servers": {\n\t\t"booking": {\n'
            f'\t\t\t"type": "http",\n\t\t\t"url": "{upstream.url}",\n'
            '\t\t\t"headers": {"X-Tenant": "acme"}\n\t\t}\n\t}\n}\n'
        )
        path = tmp_path / "mcp.json"
        path.write_text(config)
        done = wrap(path, "--scenario", "F1", "--report-dir", tmp_path / "r")
        assert done.returncode == 0, done.stderr
        entry = jsonc.parse(path.read_text()).plain()["servers"]["booking"]
        assert entry["type"] == "stdio" and entry["env"] == {
            "AGENT_HARNESS_HEADER_X_TENANT": "acme"
        }
        await _use(entry, [("create_booking", BOOKING)] * 2, tmp_path / "err.txt")
    report = read_report(tmp_path / "r" / "booking.json")
    assert report.verdict == "FAIL" and report.report.operations[0].executions == 2
    assert _rows(db) == 2
    assert wrap(path, "--unwrap").returncode == 0 and path.read_text() == config
