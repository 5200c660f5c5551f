"""A recording stdio relay: what a stdio MCP server really received and sent, as exact bytes.

Run: python tests/support/servers/stdio_tap.py RECORD -- COMMAND [ARG...]

Starts COMMAND with pipes for stdin and stdout (stderr is inherited) and relays lines both
ways unchanged. Every line that went to the server is appended to RECORD.in, every line that
came from it to RECORD.out, each with its own line ending and flushed before it is relayed, so
the record is complete even when the tap is killed with the server's process group. A SIGTERM
to the tap is passed on to the server. Put it in
front of a server in both runs of a differential test: it then sees the same place of the
wire whether a client or a proxy sits before it.

Standalone on purpose: it imports nothing of the project under test.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from typing import BinaryIO


def relay(source: BinaryIO, sink: BinaryIO, record: BinaryIO) -> None:
    """Copy lines from `source` to `sink`, keeping each in `record` first; close `sink` at EOF."""
    try:
        for line in iter(source.readline, b""):
            record.write(line)
            record.flush()
            sink.write(line)
            sink.flush()
    except (BrokenPipeError, ValueError):
        pass  # the other side is gone: nothing more can be relayed
    finally:
        try:
            sink.close()
        except (BrokenPipeError, ValueError):
            pass


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: stdio_tap.py RECORD -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    record, command = argv[0], argv[2:]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    # A SIGTERM to the tap ends the server too (a direct run's client has no process group
    # to kill); the tap then ends when the server's output does.
    signal.signal(signal.SIGTERM, lambda *_: server.terminate())
    with open(f"{record}.in", "ab") as sent, open(f"{record}.out", "ab") as answered:
        inbound = threading.Thread(
            target=relay, args=(sys.stdin.buffer, server.stdin, sent), daemon=True
        )
        inbound.start()
        relay(server.stdout, sys.stdout.buffer, answered)
        return server.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
