"""SpanRecords out through the OpenTelemetry SDK (I3), configured as every OpenTelemetry program
is: `OTEL_TRACES_EXPORTER` (otlp, the default; console, to stderr: stdout may be an MCP
channel; none), `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
`OTEL_EXPORTER_OTLP_HEADERS` / `..._TRACES_HEADERS`, `OTEL_EXPORTER_OTLP_PROTOCOL`
(http/protobuf; grpc with opentelemetry-exporter-otlp-proto-grpc installed),
`OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (the service
is `agent-harness` unless they name one). The SDK is the `otel` extra; it is imported here,
only when spans are exported.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from harness.otel.spans import SpanRecord

INSTALL = "pip install 'agent-harness[otel]'"


def missing() -> str | None:
    """Why spans cannot be exported here (the SDK or its exporter is not installed), or None."""
    for module in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"--otel needs the OpenTelemetry SDK and its OTLP exporter: {INSTALL}"
    return None


def _exporters() -> list[Any]:
    names = [
        n.strip().lower()
        for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
        if n.strip()
    ]
    out: list[Any] = []
    for name in names:
        if name == "none":
            continue
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            out.append(ConsoleSpanExporter(out=sys.stderr))
        elif name == "otlp":
            protocol = os.environ.get(
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            )
            if protocol == "grpc":
                try:
                    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                        OTLPSpanExporter,
                    )
                except ImportError:
                    raise ValueError(
                        "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc"
                    ) from None
            elif protocol == "http/protobuf":
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )
            else:
                raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL {protocol!r}: http/protobuf or grpc")
            out.append(OTLPSpanExporter())
        else:
            raise ValueError(f"OTEL_TRACES_EXPORTER {name!r}: otlp, console or none")
    return out


def export(runs: list[SpanRecord]) -> str | None:
    """Export the runs' spans (each run with its calls under it) in one batch; None when done,
    else why not, in one line (spans lost, never a run)."""
    try:
        exporters = _exporters()
    except ValueError as exc:
        return f"no spans exported: {exc}"
    if not exporters or not runs:
        return None
    from opentelemetry import trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExportResult

    from harness import __version__

    class Collect(SpanProcessor):
        """Keeps ended spans, to be exported together, once: no thread, no timer."""

        def __init__(self) -> None:
            self.spans: list[Any] = []

        def on_end(self, span: Any) -> None:
            self.spans.append(span)

    named = "OTEL_SERVICE_NAME" in os.environ or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    resource = Resource.create({} if named else {SERVICE_NAME: "agent-harness"})
    provider = TracerProvider(resource=resource)
    collect = Collect()
    provider.add_span_processor(collect)
    tracer = provider.get_tracer("agent-harness", __version__)
    kinds = {"server": trace.SpanKind.SERVER, "internal": trace.SpanKind.INTERNAL}
    for run in runs:
        _emit(tracer, run, None, kinds)
    failed = []
    for exporter in exporters:
        try:
            if exporter.export(collect.spans) is not SpanExportResult.SUCCESS:
                failed.append(type(exporter).__name__)
        except Exception as exc:  # noqa: BLE001 - an exporter's failure costs spans, not the run
            failed.append(f"{type(exporter).__name__} ({exc})")
        finally:
            exporter.shutdown()
    if failed:
        return f"{len(collect.spans)} spans not exported by {', '.join(failed)}"
    return None


def _emit(tracer: Any, record: SpanRecord, parent: Any, kinds: dict[str, Any]) -> None:
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    context = trace.set_span_in_context(parent) if parent is not None else None
    span = tracer.start_span(
        record.name,
        context=context,
        kind=kinds[record.kind],
        attributes=record.attributes,
        start_time=record.start_ns,
    )
    if record.error is not None:
        span.set_status(Status(StatusCode.ERROR, record.error))
    for child in record.children:
        _emit(tracer, child, span, kinds)
    span.end(end_time=max(record.end_ns, record.start_ns))
