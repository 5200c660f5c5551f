"""A batch's rows on their way to DuckDB: Arrow slices converted beside the insert (N2).

Turning Python lists into Arrow arrays holds the GIL; DuckDB's INSERT releases it while it
works. So a helper thread converts the batch slice by slice, table by table in the order the
store inserts them, while DuckDB inserts the slices already converted (it reads each table
as an Arrow stream). On two cores the 100,000 run rows of `bench/analysis.py` reach DuckDB
in about the time of their conversion: 0.49 s from the lists to the commit instead of 0.62
(one-off loop, load ~1, DuckDB's default row groups). Every slice is queued until DuckDB takes it, so a batch never holds
more Arrow memory than when it was converted in one piece. A batch of one slice per table
(the sweep's group commits of a few runs) is converted up front on the caller's thread, as
before: a thread would cost more than it saves there.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from datetime import datetime

import pyarrow as pa

from runner.store.rows import RunBatch

SLICE_ROWS = 8192  # the fastest of 8,192 / 16,384 / 32,768 rows per slice (0.49 / 0.52 / 0.60 s)

_END = object()  # a table's last slice was queued
_FAILED = object()  # the conversion failed: `Feed.error` says why


class Feed:
    """The Arrow record batches of every non-empty table of a batch, for one transaction."""

    def __init__(self, batch: RunBatch, saved_at: datetime, tables: tuple[str, ...]) -> None:
        self._batch = batch
        self._saved_at = saved_at
        self.tables = tuple(table for table in tables if batch.rows(table))
        self.run_ids = pa.array(batch.run_ids, type=pa.string())
        self.error: BaseException | None = None
        self._queues: dict[str, queue.SimpleQueue[object]] = {}
        self._converted: dict[str, list[pa.RecordBatch]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if all(batch.rows(table) <= SLICE_ROWS for table in self.tables):
            # Raises here, before the transaction begins, when a value does not fit.
            self._converted = {table: list(self._slices(table)) for table in self.tables}
        else:
            self._queues = {table: queue.SimpleQueue() for table in self.tables}
            self._thread = threading.Thread(target=self._convert, name="store-arrow", daemon=True)
            self._thread.start()

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
        if self._thread is not None:
            self._thread.join()

    def _slices(self, table: str) -> Iterator[pa.RecordBatch]:
        return self._batch.arrow_slices(table, self._saved_at, SLICE_ROWS, self.run_ids)

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
