"""`agent-harness record` and `agent-harness replay` (U2): the command lines."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable

from harness import __version__
from harness.base.errors import OutputFileError, UsageError
from harness.base.textsafe import terminal
from harness.cassette.args import (
    RECORD_HELP,
    REPLAY_HELP,
    ReplayConfig,
    parse_record,
    parse_replay,
)
from harness.cassette.format import CassetteError, load
from harness.cassette.replay import Replayer
from harness.cassette.serving import CountFile, serve_lines


def _log(command: str) -> Callable[[str], None]:
    def log(message: str) -> None:
        with contextlib.suppress(OSError):
            print(f"[agent-harness {command}] {terminal(message)}", file=sys.stderr, flush=True)

    return log


def record_main(argv: list[str]) -> int:
    """`agent-harness record ...`: 0 recorded, 1 otherwise (one line says why)."""
    from harness.cassette.record import record

    try:
        parsed = parse_record(argv)
    except UsageError as exc:
        print(f"agent-harness record: error: {terminal(str(exc))}", file=sys.stderr)
        return 1
    if parsed == "help":
        print(RECORD_HELP)
        return 0
    if parsed == "version":
        print(f"agent-harness {__version__}")
        return 0
    assert not isinstance(parsed, str)
    return asyncio.run(record(parsed, _log("record")))


def replay_main(argv: list[str]) -> int:
    """`agent-harness replay CASSETTE ...`: 0 served, 1 bad arguments or cassette."""
    try:
        parsed = parse_replay(argv)
        if isinstance(parsed, str):
            print(REPLAY_HELP if parsed == "help" else f"agent-harness {__version__}")
            return 0
        from harness.base.outfile import check_roles

        # V18: the count file is never the cassette (it would overwrite the recording).
        check_roles({"count file": parsed.count_file}, {"cassette": parsed.cassette})
        replayer = Replayer(load(parsed.cassette), parsed.cassette, parsed.unmatched,
                            parsed.idempotent_tools)  # fmt: skip
        counter = CountFile(parsed.count_file, replayer)
        counter.write()  # V1 before serving: a bad path is refused at once
    except (UsageError, CassetteError, OutputFileError) as exc:
        print(f"agent-harness replay: error: {terminal(str(exc))}", file=sys.stderr)
        return 1
    log = _log("replay")
    if parsed.listen is not None:
        from harness.cassette.listen import serve_http

        return asyncio.run(serve_http(parsed, replayer, counter, log))
    return asyncio.run(serve_stdio(parsed, replayer, counter, log))


async def serve_stdio(
    config: ReplayConfig, replayer: Replayer, counter: CountFile, log: Callable[[str], None]
) -> int:
    from harness.wire.fdlines import MessageTooLarge
    from harness.wire.transport import DEFAULT_MAX_MESSAGE_BYTES, stdio_lines

    reader, writer = await stdio_lines(DEFAULT_MAX_MESSAGE_BYTES)
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(serve_lines(reader, writer, replayer, counter, log))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, task.cancel)
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    except MessageTooLarge as exc:
        log(f"ERROR: {exc}")
        return 1
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        counter.update(log)
        await writer.close()
    count = replayer.count()
    log(f"answered {count['calls_answered']} tool calls ({len(count['operations'])} operations) "
        f"from {config.cassette}")  # fmt: skip
    return 0
