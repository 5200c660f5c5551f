"""`replay --listen` and `record --listen`: a cassette's side over streamable HTTP (U2).

The proxy's own listener (harness/wire/http/listen.py, with its bounds V10-V12) hands each
agent session a lane. For `replay` the lane's lines are answered by the one Replayer, so
repeats across sessions are answered in recorded order and counted together, as one upstream
would be; `record` gives each lane an upstream connection of its own (harness/cassette/record.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from harness.cassette.args import ReplayConfig
from harness.cassette.replay import Replayer
from harness.cassette.serving import serve_lines
from harness.wire.http.lanes import Lane
from harness.wire.http.listen import Listener
from harness.wire.transport import DEFAULT_MAX_MESSAGE_BYTES

_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


async def listen_until_stopped(
    address: tuple[str, int],
    start_lane: Callable[[Lane], Awaitable[None]],
    max_bytes: int,
    doing: str,
    log: Callable[[str], None],
) -> bool:
    """Serve until SIGTERM, SIGINT or SIGHUP, every session ended; False when the address
    cannot be bound (one line says why)."""
    host, port = address
    listener = Listener(host, port, start_lane=start_lane, max_bytes=max_bytes, log=log)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in _SIGNALS:
        loop.add_signal_handler(sig, stopped.set)
    try:
        try:
            url = await listener.start()
        except OSError as exc:
            log(f"ERROR: cannot listen on {host}:{port}: {exc.strerror or exc}")
            return False
        log(f"listening on {url} ({doing}; stop with Ctrl-C or SIGTERM)")
        await stopped.wait()
    finally:
        for sig in _SIGNALS:
            loop.remove_signal_handler(sig)
        with contextlib.suppress(Exception):
            await listener.stop()
    return True


async def serve_http(
    config: ReplayConfig, replayer: Replayer, counter: Any, log: Callable[[str], None]
) -> int:
    """`replay --listen`: 0 when stopped, 1 when the address cannot be bound."""
    assert config.listen is not None

    async def start_lane(lane: Lane) -> None:
        lane.task = asyncio.create_task(serve_lines(lane.inbox, lane, replayer, counter, log))

    try:
        doing = f"replaying {config.cassette}"
        if not await listen_until_stopped(
            config.listen, start_lane, DEFAULT_MAX_MESSAGE_BYTES, doing, log
        ):
            return 1
    finally:
        counter.update(log)
    count = replayer.count()
    log(f"answered {count['calls_answered']} tool calls ({len(count['operations'])} operations) "
        f"from {config.cassette}")  # fmt: skip
    return 0
