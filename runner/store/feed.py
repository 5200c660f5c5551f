"""A batch's rows on their way to DuckDB: Arrow slices redacted and converted beside the
insert (N2).

Redacting Python lists and turning them into Arrow arrays holds the GIL; DuckDB's INSERT
releases it while it works. So a helper thread redacts (the store's `clean`, V3) and converts
the batch slice by slice, table by table in the order the store inserts them, while DuckDB
inserts the slices already converted (it reads each table as an Arrow stream). On two cores
the 100,000 run rows of `bench/analysis.py` reach DuckDB in about the time of their
conversion: 0.49 s from the lists to the commit instead of 0.62 (one-off loop, load ~1,
DuckDB's default row groups). Every slice is queued until DuckDB takes it, so a batch never
holds more Arrow memory than when it was converted in one piece. A batch of one slice per
table (the sweep's group commits of a few runs) is redacted and converted up front on the
caller's thread, as before: a thread would cost more than it saves there.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Iterator
from datetime import datetime

import pyarrow as pa

from runner.store.rows import Clean, RunBatch

SLICE_ROWS = 8192  # the fastest of 8,192 / 16,384 / 32,768 rows per slice (0.49 / 0.52 / 0.60 s)

# While a helper thread converts, Python's switch interval is 0.5 ms instead of 5. DuckDB's
# INSERT runs on the caller's thread and takes the GIL again and again (binding the Arrow
# stream, pulling each slice), and each time it waited up to a whole interval for the
# converting thread to yield it: the bench's 100,000 run rows 0.56 -> 0.42 s of wall from the
# batch to the commit, the CPU the same (load 0.5). The interval is the process's: it is
# restored when the last feed converting ends.
_SWITCH_S = 0.0005
_switching = threading.Lock()
_converting = 0
_interval = 0.0


def _fast_switching(on: bool) -> None:
    global _converting, _interval
    with _switching:
        if on:
            if not _converting:
                _interval = sys.getswitchinterval()
                sys.setswitchinterval(min(_interval, _SWITCH_S))
            _converting += 1
        else:
            _converting -= 1
            if not _converting:
                sys.setswitchinterval(_interval)


_END = object()  # a table's last slice was queued
_FAILED = object()  # the conversion failed: `Feed.error` says why


class Feed:
    """The Arrow record batches of every non-empty table of a batch, for one transaction."""

    def __init__(
        self, batch: RunBatch, saved_at: datetime, tables: tuple[str, ...], clean: Clean
    ) -> None:
        self._batch = batch
        self._saved_at = saved_at
        self._clean = clean
        self.tables = tuple(table for table in tables if batch.rows(table))
        self.error: BaseException | None = None
        self._queues: dict[str, queue.SimpleQueue[object]] = {}
        self._converted: dict[str, list[pa.RecordBatch]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        if all(batch.rows(table) <= SLICE_ROWS for table in self.tables):
            # Raises here, before the transaction begins, when a value does not fit.
            self._converted = {table: list(self._slices(table)) for table in self.tables}
        else:
            self._queues = {table: queue.SimpleQueue() for table in self.tables}
            self._thread = threading.Thread(target=self._convert, name="store-arrow", daemon=True)

    def start(self) -> None:
        """Start converting, right before the first INSERT: from here on the caller's every
        step that needs the GIL waits for the converting thread to yield it (up to Python's
        switch interval, 5 ms, each: the existence check and the registrations took 0.2 s
        when they came after the start)."""
        if self._thread is not None and self._thread.ident is None:
            _fast_switching(True)
            try:
                self._thread.start()
            except BaseException:
                _fast_switching(False)
                raise

    def reader(self, table: str) -> pa.RecordBatchReader:
        """One table's rows as an Arrow stream, for DuckDB to scan once."""
        if self._thread is None:
            slices: Iterator[pa.RecordBatch] = iter(self._converted.pop(table))
        else:
            slices = self._queued(table)
        return pa.RecordBatchReader.from_batches(self._batch.arrow_schema(table), slices)

    def close(self) -> None:
        """Stop converting (after a failed insert) and wait for the helper thread."""
        self._stop.set()
        if self._thread is not None and self._thread.ident is not None and not self._closed:
            self._closed = True
            self._thread.join()
            _fast_switching(False)

    def _slices(self, table: str) -> Iterator[pa.RecordBatch]:
        return self._batch.arrow_slices(table, self._saved_at, SLICE_ROWS, self._clean)

    def _queued(self, table: str) -> Iterator[pa.RecordBatch]:
        waiting = self._queues[table]
        while (item := waiting.get()) is not _END:
            if item is _FAILED:
                raise RuntimeError("the batch could not be converted to Arrow")
            yield item  # type: ignore[misc]

    def _convert(self) -> None:
        try:
            for table in self.tables:
                for piece in self._slices(table):
                    if self._stop.is_set():
                        return
                    self._queues[table].put(piece)
                self._queues[table].put(_END)
        except Exception as err:  # handed to the inserting thread, which raises it
            self.error = err
            for waiting in self._queues.values():
                waiting.put(_FAILED)
