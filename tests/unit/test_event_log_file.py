"""X14: the event log a restarted proxy appends to (harness/proxy/eventlog.py), on real files."""

from __future__ import annotations

import os

import pytest

from harness.base.errors import ReportFileError
from harness.events import SessionEnded
from harness.proxy.eventlog import EventLogFile
from harness.session import Session


def test_x14_a_half_written_last_event_is_cut_off_and_the_rest_is_history(tmp_path):
    path = tmp_path / "events.jsonl"
    sink = EventLogFile(str(path))
    Session(sinks=[sink]).end("client_closed")
    sink.close()
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"t_ns":1,"type":"call_rec')  # a proxy killed mid-line
    again = EventLogFile(str(path))
    try:
        assert again.cut == len(b'{"t_ns":1,"type":"call_rec')
        assert path.read_bytes() == whole
        history = list(again.history())
        assert isinstance(history[-1], SessionEnded) and len(history) == 2
    finally:
        again.close()


def test_x14_a_log_with_whole_lines_is_not_touched(tmp_path):
    path = tmp_path / "events.jsonl"
    sink = EventLogFile(str(path))
    Session(sinks=[sink]).end("client_closed")
    sink.close()
    before = path.read_bytes()
    again = EventLogFile(str(path))
    again.close()
    assert again.cut == 0 and path.read_bytes() == before


def test_x14_one_writer_at_a_time(tmp_path):
    path = tmp_path / "events.jsonl"
    first = EventLogFile(str(path))
    try:
        with pytest.raises(ReportFileError, match="another agent-harness proxy is writing"):
            EventLogFile(str(path))
    finally:
        first.close()


def test_o4_a_failed_write_is_reported_once_and_later_events_are_dropped_not_raised(tmp_path):
    # docs/decisions.md: the proxy must still answer what is in flight, so the sink never
    # raises into the call that records an event; it tells the proxy once and writes no more.
    path = tmp_path / "events.jsonl"
    sink = EventLogFile(str(path))
    failures: list[ReportFileError] = []
    sink.on_failure = failures.append
    session = Session(sinks=[sink])
    before = path.read_bytes()
    os.close(sink.fd)
    sink.fd = os.open(path, os.O_RDONLY)  # every write now fails (EBADF), as on a full disk
    session.end("client_closed")
    session.end("again")
    sink.close()
    assert len(failures) == 1 and "cannot write the event log" in str(failures[0])
    assert path.read_bytes() == before  # whole lines only
    assert session.judgement().report is not None  # the judgement in memory goes on
