"""I3: `agent-harness proxy --otel` exports its spans over OTLP/HTTP, configured by the standard
OTEL_* variables, to a real receiver: an HTTP server in this test that decodes each request
with the OpenTelemetry protocol's own protobuf classes (opentelemetry-proto), as a collector
does. The agent is the official SDK client over stdio, the upstream the built-in booking
service; ground truth is its rows.
"""

from __future__ import annotations

import ast
import os
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from runner.upstreams import stdio_command
from tests.support import launcher
from tests.support.imports import imported_modules
from tests.support.paths import BIN, ROOT
from tests.support.prereq import in_ci
from tests.support.proxyproc import mcp_process

try:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )
except ImportError:  # CI must run it (tests/support/prereq.py's rule); elsewhere a skip
    if in_ci():
        raise
    pytest.skip("the otel extra is not installed: make otel-deps", allow_module_level=True)

BOOKING = {"guest": "Alice Example", "date": "2026-12-01", "nights": 2}


class Receiver:
    """An OTLP/HTTP traces endpoint: each POST to /v1/traces decoded and kept."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], ExportTraceServiceRequest]] = []
        self.got = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                receiver.requests.append(({k.lower(): v for k, v in self.headers.items()}, request))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                receiver.got.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[Any]:
        return [
            span
            for _, request in self.requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    thread = threading.Thread(target=found.server.serve_forever, daemon=True)
    thread.start()
    yield found
    found.server.shutdown()


def _attributes(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        out[kv.key] = (
            [v.string_value for v in value.array_value.values]
            if kind == "array_value"
            else getattr(value, kind)
        )
    return out


async def _book_twice(args: list[str], env: dict[str, str], err: Path) -> None:
    # the proxy's own exit is awaited: its export runs after stdin closed, and the SDK's
    # stdio_client would kill it 2 s later (a receiver that is down takes its OTLP timeout)
    async with mcp_process([str(BIN), *args], err, env) as (session, _tap):
        for _ in range(2):  # F1: told it timed out, the booking had run
            await session.call_tool("create_booking", BOOKING)


@pytest.mark.anyio
async def test_i3_the_proxy_exports_a_run_span_and_a_span_per_tool_call_over_otlp(
    tmp_path: Path, receiver: Receiver
) -> None:
    db = tmp_path / "booking.sqlite"
    program, *rest = stdio_command("booking", db)
    args = ["proxy", "--upstream-command", program, *(f"--upstream-arg={a}" for a in rest),
            "--scenario", "F1", "--audit-tools", "off", "--no-report-file", "--otel"]  # fmt: skip
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
           "OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=acme", "OTEL_SERVICE_NAME": "booking-tests"}  # fmt: skip
    env.pop("OTEL_TRACES_EXPORTER", None)
    await _book_twice(args, env, tmp_path / "err.txt")
    assert receiver.got.wait(30), (tmp_path / "err.txt").read_text()
    (headers, request), *more = receiver.requests
    assert not more and headers["x-tenant"] == "acme"  # one batch, with the configured header
    (resource,) = request.resource_spans
    service = {kv.key: kv.value.string_value for kv in resource.resource.attributes}
    assert service["service.name"] == "booking-tests"

    spans = receiver.spans()
    (run,) = [s for s in spans if s.name == "agent_harness.session"]
    calls = sorted((s for s in spans if s.name == "tools/call create_booking"),
                   key=lambda s: s.start_time_unix_nano)  # fmt: skip
    assert len(spans) == 3 and len(calls) == 2
    assert all(c.trace_id == run.trace_id and c.parent_span_id == run.span_id for c in calls)
    seen = _attributes(run)
    assert seen["agent_harness.scenario"] == "F1" and seen["agent_harness.verdict"] == "FAIL"
    assert seen["agent_harness.violations"] == ["DUPLICATE_EXECUTION"]
    assert seen["agent_harness.score"] < 50 and "executed 2 times" in run.status.message
    first, second = map(_attributes, calls)
    ids = [first["jsonrpc.request.id"], second["jsonrpc.request.id"]]  # the client's own
    assert ids[0] != ids[1] and all(i.isdigit() for i in ids)
    for call in (first, second):
        assert call["mcp.method.name"] == "tools/call"
        assert call["gen_ai.operation.name"] == "execute_tool"
        assert call["gen_ai.tool.name"] == "create_booking"
        assert call["network.transport"] == "pipe"
        assert call["agent_harness.operation.index"] == 0
        assert call["agent_harness.operation.executions"] == 2
        assert call["agent_harness.operation.outcome"] == "DUPLICATE"
    assert first["agent_harness.fault"] == "F1" and first["error.type"] == "tool_error"
    assert first["agent_harness.fault.executes_upstream"] is True
    assert "agent_harness.fault" not in second and "error.type" not in second
    assert calls[0].kind == calls[1].kind == 2  # SPAN_KIND_SERVER
    assert run.start_time_unix_nano <= calls[0].start_time_unix_nano
    assert calls[1].end_time_unix_nano <= run.end_time_unix_nano
    with sqlite3.connect(db) as conn:  # ground truth: two real bookings
        assert conn.execute("select count(*) from bookings").fetchone() == (2,)


@pytest.mark.anyio
async def test_i3_a_receiver_that_is_down_costs_the_spans_not_the_session(tmp_path: Path) -> None:
    db = tmp_path / "booking.sqlite"
    program, *rest = stdio_command("booking", db)
    args = ["proxy", "--upstream-command", program, *(f"--upstream-arg={a}" for a in rest),
            "--scenario", "F1", "--no-report-file", "--otel"]  # fmt: skip
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
           "OTEL_EXPORTER_OTLP_TIMEOUT": "2"}  # fmt: skip
    await _book_twice(args, env, tmp_path / "err.txt")
    lines = (tmp_path / "err.txt").read_text().splitlines()
    assert any(line.startswith("[agent-harness] WARNING: OpenTelemetry: 3 spans not exported")
               for line in lines), lines[-3:]  # fmt: skip
    assert lines[-1].startswith("[agent-harness] verdict: FAIL")


def test_i3_the_proxy_imports_opentelemetry_only_when_asked() -> None:
    # the proxy's start (bench/proxy_startup.py) and its calls never load the SDK: only the
    # functions that run with --otel import harness.otel, whose modules import it in functions
    main = ROOT / "harness" / "proxy" / "main.py"
    assert not {m for m in imported_modules(main, at_load=True) if m.startswith("harness.otel")}
    for path in (ROOT / "harness" / "otel").glob("*.py"):
        loaded = imported_modules(path, at_load=True)
        assert not {m for m in loaded if m.startswith("opentelemetry")}, path
    assert ast.parse(main.read_text())  # the file the test reads is the proxy's


SPEC = """
name: traced
models: [scripted/naive]
prompts: [{name: hotel, text: "You book hotel rooms."}]
upstreams: [{name: booking, builtin: booking}]
scenarios: [F1]
conversations:
  - name: try-again
    user: "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"
    follow_ups: ["That did not work. Please try again."]
runs: 1
otel: true
"""


def test_i3_a_spec_with_otel_exports_each_run_with_the_runners_labels(
    tmp_path: Path, receiver: Receiver
) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    env.pop("OTEL_TRACES_EXPORTER", None)
    done = launcher.run(
        [str(BIN), "run", "spec.yaml", "--db", "runs.duckdb"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert receiver.got.wait(30)
    spans = receiver.spans()
    (run,) = [s for s in spans if s.name == "agent_harness.session"]
    seen = _attributes(run)
    assert seen["gen_ai.request.model"] == "scripted/naive"
    assert seen["agent_harness.experiment"] == "traced" and seen["agent_harness.run.id"]
    assert seen["agent_harness.verdict"] == "FAIL" and seen["agent_harness.real_duplicate"] is True
    calls = [_attributes(s) for s in spans if s.name == "tools/call create_booking"]
    assert [c["agent_harness.operation.executions"] for c in calls] == [2, 2]
    assert all(s.parent_span_id == run.span_id for s in spans if s is not run)
