"""A small OpenAI-compatible chat endpoint for tests: real HTTP on 127.0.0.1, port 0.

litellm's real code path (its OpenAI client, httpx, its exception mapping) runs against it,
so provider failures can be tested without a provider and without patching litellm: each
request takes the next scripted answer (a completion, an HTTP error with headers, a hang, or a
closed connection) and is recorded with its arrival time, headers and body.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A hanging answer waits at most this long for the stub to be stopped (never forever).
HANG_LIMIT_S = 120


@dataclass(frozen=True)
class Answer:
    """One scripted answer: `kind` is reply, hang or close."""

    kind: str = "reply"
    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)


def completion(
    content: str | None = "done",
    tool_calls: list[dict[str, Any]] | None = None,
    model: str = "stub-model",
    usage: tuple[int, int] = (10, 5),
) -> Answer:
    """A successful chat completion (a text answer, or tool calls)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return Answer(
        body={
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if tool_calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
            },
        }
    )


def error(
    status: int, message: str = "stub error", headers: dict[str, str] | None = None
) -> Answer:
    """An HTTP error in OpenAI's error shape."""
    body = {"error": {"message": message, "type": "stub_error", "code": status}}
    return Answer(status=status, body=body, headers=headers or {})


HANG = Answer(kind="hang")
CLOSE = Answer(kind="close")


@dataclass
class Seen:
    """A request the stub received."""

    at: float  # time.monotonic() on arrival
    path: str
    headers: dict[str, str]  # names in lower case
    body: dict[str, Any]


class OpenAIStub:
    """The endpoint: `url` is its api_base; `script` answers in order, then `default`."""

    def __init__(self, script: list[Answer], default: Answer | None = None) -> None:
        self._script = list(script)
        self._default = default or completion()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.requests: list[Seen] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                self._send(200, {"object": "list", "data": [{"id": "stub-model"}]}, {})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                answer = stub._take(self.path, headers, raw)
                if answer.kind == "hang":
                    stub._stopping.wait(HANG_LIMIT_S)
                    self.close_connection = True
                    return
                if answer.kind == "close":
                    self.close_connection = True
                    return
                self._send(answer.status, answer.body or {}, answer.headers)

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _take(self, path: str, headers: dict[str, str], raw: bytes) -> Answer:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unparsed": raw.decode(errors="replace")}
        with self._lock:
            self.requests.append(Seen(time.monotonic(), path, headers, body))
            return self._script.pop(0) if self._script else self._default

    def start(self) -> OpenAIStub:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hanging answers, stop serving, free the port."""
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def openai_stub(script: list[Answer], default: Answer | None = None) -> Iterator[OpenAIStub]:
    """A running stub for the duration of a `with` block."""
    stub = OpenAIStub(script, default).start()
    try:
        yield stub
    finally:
        stub.stop()


def refused_url() -> str:
    """An api_base on a local port where nothing listens (bound, then closed)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
