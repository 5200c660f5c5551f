"""The local model server's end is told as it happened (L1): a crashed llama.cpp server is
named with its signal, not left to surface as "connection refused" in every run."""

from __future__ import annotations

import sys

from runner.models.local import LocalModelError, ended, serve

# Stands for `python -P -m llama_cpp.server ... --port N`: serves /v1/models, prints the
# ready line, and at its first chat request dies the way an unsupported instruction does.
FAKE_SERVER = """\
import http.server, os, signal, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"data": []}')
    def do_POST(self):
        print("crashing at the first token", flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", port), Handler)
print("Uvicorn running on http://127.0.0.1:%d" % port, flush=True)
server.serve_forever()
"""


def _fake_python(tmp_path, body):
    script = tmp_path / "server.py"
    script.write_text(body, encoding="utf-8")
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    return python


def test_l1_a_server_that_dies_at_its_first_request_is_named_by_its_signal(tmp_path):
    import urllib.request

    python = _fake_python(tmp_path, FAKE_SERVER)
    with serve(python=python, model=tmp_path / "model.gguf") as server:
        request = urllib.request.Request(f"{server.api_base}/chat/completions", data=b"{}")
        try:
            urllib.request.urlopen(request, timeout=30)
        except OSError:
            pass  # the connection drops with the process
        server.process.wait(timeout=30)
        assert ended(server).startswith("was killed by SIGSEGV")


def test_l1_a_server_that_exits_before_it_serves_is_one_error_with_its_code(tmp_path):
    python = _fake_python(tmp_path, 'print("no such model file"); raise SystemExit(3)\n')
    try:
        with serve(python=python, model=tmp_path / "model.gguf"):
            raise AssertionError("serve() yielded a server that had exited")
    except LocalModelError as exc:
        assert str(exc) == "the model server exited with 3: no such model file"
