"""OpenTelemetry spans of judged sessions (I3): built after a session from its events and its
judgement (spans.py, plain data), exported through the SDK (export.py, the `otel` extra,
imported only then)."""

from harness.otel.spans import CallBook, SpanRecord, run_spans, session_spans

__all__ = [
    "CallBook",
    "SpanRecord",
    "export_spans",
    "missing_sdk",
    "run_spans",
    "session_spans",
]


def export_spans(runs: list[SpanRecord]) -> str | None:
    """Export runs' spans through the SDK; None when done, else why not in one line."""
    from harness.otel.export import export as _export

    return _export(runs)


def missing_sdk() -> str | None:
    """Why spans cannot be exported (the extra is not installed), or None."""
    from harness.otel.export import missing as _missing

    return _missing()
