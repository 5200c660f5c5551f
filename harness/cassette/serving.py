"""The replay's serving loop over any line pair (stdio, an HTTP session's lane) and its count
file, replaced atomically after every answered call (V1, through the one writer)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.base import jsonutil
from harness.base.errors import OutputFileError
from harness.cassette.replay import Replayer


class CountFile:
    """The count, replaced atomically after every answer (V1, through the one writer)."""

    def __init__(self, path: str | None, replayer: Replayer) -> None:
        self.path = path
        self.replayer = replayer
        self.failed: str | None = None

    def write(self) -> None:
        if self.path is None:
            return
        from harness.base.outfile import write_file

        write_file(self.path, jsonutil.dumps(self.replayer.count()) + "\n", "count file")

    def update(self, log: Callable[[str], None]) -> None:
        try:
            self.write()
        except OutputFileError as exc:
            if self.failed is None:
                log(f"ERROR: {exc}")  # once; the replay goes on
            self.failed = str(exc)


async def serve_lines(reader: Any, writer: Any, replayer: Replayer, counter: CountFile,
                      log: Callable[[str], None]) -> None:  # fmt: skip
    """Answer every line until the agent's end of input."""
    from harness.wire.fdlines import StreamClosed

    while (line := await reader.read_line()) is not None:
        if not line.strip():
            continue
        before = replayer.calls_answered
        out = replayer.answer_line(line)
        if replayer.calls_answered != before:  # a call was answered: the count changed
            counter.update(log)
        try:
            for answer in out:
                await writer.write_line(answer)
        except StreamClosed:
            return
