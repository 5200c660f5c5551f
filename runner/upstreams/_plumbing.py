"""Server plumbing shared by the built-in upstreams: tool table, answers, SQLite, MCP wiring.

A ledger module (booking, payment) declares its tools as `ToolDef`s whose `run` is a plain
synchronous function of a SQLite connection and validated arguments. This module turns them
into an mcp lowlevel `Server`: it validates arguments, runs the function in a worker thread
(SQLite commits fsync; the runner hosts many servers in one event loop), and shapes every
answer as JSON text plus `structuredContent`, errors as `isError` results, never thrown.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from pydantic import BaseModel, ValidationError

from runner.upstreams._fields import input_schema

RunFn = Callable[[sqlite3.Connection, Any], dict[str, Any]]


class ToolError(Exception):
    """A tool's business error (not found, already cancelled): answered with isError true."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ToolDef:
    """One tool: what the agent sees (name, description, schema, annotations) and what it does."""

    name: str
    description: str
    args: type[BaseModel]
    annotations: types.ToolAnnotations
    run: RunFn

    @functools.cached_property
    def listing(self) -> types.Tool:
        """The tool as tools/list shows it (built once: schema generation is slow)."""
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=input_schema(self.args),
            annotations=self.annotations,
        )


READ = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)


def write_annotations(*, destructive: bool, idempotent: bool) -> types.ToolAnnotations:
    """Annotations for a tool that changes state."""
    return types.ToolAnnotations(
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


def answer(payload: dict[str, Any], *, is_error: bool = False) -> types.CallToolResult:
    """A tool result: the payload as JSON text and as structuredContent."""
    text = json.dumps(payload, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=payload,
        is_error=is_error,
    )


def error_answer(code: str, message: str) -> types.CallToolResult:
    """An isError result with a machine-readable code and a sentence for the agent."""
    return answer({"error": code, "message": message}, is_error=True)


def describe_validation_error(exc: ValidationError) -> str:
    """One line naming each bad field, for the agent to correct its call."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        # pydantic prefixes our own ValueError messages; the agent needs only the message.
        message = err["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "invalid input: " + "; ".join(parts)


def open_db(db_path: str | Path, schema: str) -> sqlite3.Connection:
    """Open (creating file and schema if missing) the ledger database for one server."""
    path = Path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _create_empty(path, schema)
    # Autocommit mode: writes open explicit transactions (write_transaction), reads need none.
    conn = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    # WAL + FULL: each commit is fsynced to the log before the agent hears about it (a killed
    # server or machine never loses an answered write), at one fsync per commit instead of
    # the rollback journal's several; readers see committed rows while the server runs.
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(schema)
    return conn


# A new ledger is a copy of an empty one made once per process and schema: creating the schema
# in each run's new file (the switch to WAL, the tables and indexes, their commits) cost ~1 ms
# of CPU and ~2 ms of wall time, a copy ~0.1 ms (issue 24). The schema is still executed on
# the copy (IF NOT EXISTS: a no-op), as on any existing file.
_EMPTY: dict[str, bytes] = {}
_EMPTY_LOCK = threading.Lock()


def _create_empty(path: Path, schema: str) -> None:
    """Write an empty ledger with `schema` at `path` unless a file is there, fsynced as a
    schema's commit is."""
    try:
        out = path.open("xb")
    except FileExistsError:
        return
    try:
        with out:
            out.write(_empty_ledger(schema))
            out.flush()
            os.fsync(out.fileno())
    except BaseException:  # a full disk: no half-written ledger for the next open to misread
        path.unlink(missing_ok=True)
        raise


def _empty_ledger(schema: str) -> bytes:
    with _EMPTY_LOCK:
        data = _EMPTY.get(schema)
        if data is None:
            with tempfile.TemporaryDirectory(prefix="agent-harness-ledger-") as folder:
                made = Path(folder) / "empty.sqlite"
                conn = sqlite3.connect(made, isolation_level=None)
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.executescript(schema)
                finally:
                    conn.close()  # checkpoints: the whole ledger is in the one file
                data = _EMPTY[schema] = made.read_bytes()
        return data


@contextlib.contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on error: check-then-insert stays atomic."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def open_readonly(db_path: str | Path) -> sqlite3.Connection:
    """A read-only connection for the ground truth; FileNotFoundError when the file is missing."""
    path = Path(db_path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no ledger database at {path}")
    conn = sqlite3.connect(path.as_uri() + "?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


def table_exists(conn: sqlite3.Connection, table: str) -> bool:
    """Whether the ledger table exists (a server that never started left an empty file)."""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    return row is not None


def build_server(
    name: str,
    instructions: str,
    tools: list[ToolDef],
    conn: sqlite3.Connection,
    *,
    inline: bool = False,
) -> Server[Any]:
    """An mcp lowlevel Server answering tools/list and tools/call from the tool table; `inline`:
    run each tool on the event loop (a ledger in memory: no fsync to keep off the loop)."""
    by_name = {tool.name: tool for tool in tools}
    listing = types.ListToolsResult(tools=[tool.listing for tool in tools])
    # One statement sequence at a time on the shared connection; worker threads serialise here.
    lock = anyio.Lock()

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listing

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            return error_answer("unknown_tool", f"there is no tool named {params.name!r}")
        try:
            args = tool.args.model_validate(params.arguments or {})
        except ValidationError as exc:
            return error_answer("invalid_input", describe_validation_error(exc))
        try:
            async with lock:
                if inline:
                    payload = tool.run(conn, args)
                else:
                    payload = await anyio.to_thread.run_sync(tool.run, conn, args)
        except ToolError as exc:
            return error_answer(exc.code, exc.message)
        return answer(payload)

    return Server(
        name,
        version="1.0.0",
        instructions=instructions,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


@dataclass(frozen=True)
class Ledger:
    """A SQLite-backed service: its schema, its tools and how to read its ground truth."""

    table: str
    schema: str
    tools: tuple[ToolDef, ...]
    ground_truth: Callable[[sqlite3.Connection], list[dict[str, Any]]]
    real_rows: Callable[[sqlite3.Connection, str, dict[str, Any]], int | None]
