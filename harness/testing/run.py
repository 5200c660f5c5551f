"""One test's proxy (I2): its config, how the agent reaches it, and its report afterwards.

Over stdio the agent starts the proxy itself, from the MCP client configuration the run hands
it (`mcp_config`, `mcp_config_file`, or `command`); the proxy's whole config goes over as one
file (`agent-harness proxy --config FILE`). With `transport="http"` the run starts the proxy
with `--listen` and hands the agent its `url`. With a cassette, the upstream is the recorder in
front of the real upstream (record), or the replay of the cassette (offline, executes nothing).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.base.errors import UsageError
from harness.proxy import ProxyConfig, parse, proxy_command
from harness.report import ReportModel, read_report

REPORT_FILE = "report.json"
COUNT_FILE = "cassette-count.json"
SERVER_NAME = "agent-harness"  # the server's name in the MCP configuration handed over
START_TIMEOUT_S = 60.0
_DONE = re.compile(rb'"status"\s*:\s*"(?:finished|failed)"')
_LISTENING = re.compile(r"listening on (http://\S+)")
_CASSETTE = [sys.executable, "-P", "-m", "harness.cassette"]


def upstream_flags(upstream: Any) -> tuple[list[str], dict[str, str], str | None]:
    """The proxy's upstream flags for what a test names as its upstream, the environment the
    upstream needs (headers travel in it, never in argv) and its working folder.

    An upstream is a command (a list: `["node", "server.js"]`), a URL (`"http://..."`), or an
    MCP server entry as clients write them (`{"command", "args", "env", "cwd"}` or
    `{"url", "headers"}`)."""
    if isinstance(upstream, str | os.PathLike) and not str(upstream).startswith(("http:", "https:")):
        raise UsageError(f"the upstream {upstream!r} is neither a command (a list) nor a URL")
    if isinstance(upstream, str):
        upstream = {"url": upstream}
    if isinstance(upstream, list | tuple):
        upstream = {"command": upstream[0], "args": list(upstream[1:])} if upstream else {}
    if not isinstance(upstream, dict):
        raise UsageError(f"the upstream must be a command, a URL or a server entry: {upstream!r}")
    env = {str(k): str(v) for k, v in (upstream.get("env") or {}).items()}
    if upstream.get("url"):
        flags = ["--upstream-url", str(upstream["url"])]
        for i, (name, value) in enumerate((upstream.get("headers") or {}).items()):
            variable = f"AGENT_HARNESS_TEST_HEADER_{i}"
            env[variable] = str(value)
            flags.append(f"--upstream-header-env={name}={variable}")
        return flags, env, None
    if not upstream.get("command"):
        raise UsageError(f"the upstream entry has neither a command nor a url: {upstream!r}")
    flags = [f"--upstream-command={upstream['command']}"]
    flags += [f"--upstream-arg={arg}" for arg in upstream.get("args") or []]
    cwd = upstream.get("cwd")
    return flags, env, str(cwd) if cwd else None


class HarnessRun:
    """A proxy in front of the test's upstream under one scenario, for one run of a test."""

    def __init__(
        self,
        folder: Path,
        upstream: Any,
        scenario: str | None,
        run: int = 0,
        *,
        transport: str = "stdio",
        cassette: Path | None = None,
        record: bool = False,
        proxy_args: tuple[str, ...] = (),
    ) -> None:
        self.folder = folder
        self.scenario = scenario
        self.run = run
        self.cassette = cassette
        self.recording = cassette is not None and record
        self.report_file = folder / REPORT_FILE
        self.count_file = folder / COUNT_FILE if cassette is not None and not record else None
        if transport not in ("stdio", "http"):
            raise UsageError(f"transport must be stdio or http, got {transport!r}")
        flags, env, cwd = upstream_flags(upstream)
        if cassette is not None and record:
            flags = [f"--upstream-command={_CASSETTE[0]}", *(f"--upstream-arg={a}" for a in
                     [*_CASSETTE[1:], "record", *flags, "-o", str(cassette)])]  # fmt: skip
        elif cassette is not None:
            flags = [f"--upstream-command={_CASSETTE[0]}", *(f"--upstream-arg={a}" for a in
                     [*_CASSETTE[1:], "replay", str(cassette), f"--count-file={self.count_file}"])]  # fmt: skip
            env, cwd = {}, None  # the replay needs nothing of the real upstream's
        argv = [*flags, "--audit-tools", "off", "--report-file", str(self.report_file)]
        if scenario is not None:
            argv += ["--scenario", scenario]
        if transport == "http":
            argv += ["--listen", "127.0.0.1:0"]
        parsed = parse([*argv, *proxy_args])
        assert parsed.config is not None
        self.config: ProxyConfig = parsed.config
        if env or cwd:  # the upstream's own env and folder (header values stay out of argv)
            from dataclasses import replace

            self.config = replace(
                self.config, upstream_env={**self.config.upstream_env, **env}, upstream_cwd=cwd
            )
        self.command = proxy_command(self.config, folder)
        self.url: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: list[str] = []
        if transport == "http":
            self._listen()
        entry: dict[str, Any] = (
            {"type": "http", "url": self.url}
            if self.url
            else {"command": self.command[0], "args": self.command[1:]}
        )
        self.mcp_config: dict[str, Any] = {"mcpServers": {SERVER_NAME: entry}}
        self.mcp_config_file = folder / "mcp.json"
        self.mcp_config_file.write_text(json.dumps(self.mcp_config, indent=2) + "\n")

    def _listen(self) -> None:
        """Start the proxy with --listen and wait (bounded) for its address."""
        self._process = subprocess.Popen(
            self.command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        lines: queue.Queue[str | None] = queue.Queue()

        def drain(stream: Any) -> None:
            for raw in stream:
                lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
            lines.put(None)

        assert self._process.stderr is not None
        threading.Thread(target=drain, args=(self._process.stderr,), daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self._stderr.append(line)
            if found := _LISTENING.search(line):
                self.url = found.group(1)
                return
        self.close()
        said = "\n".join(self._stderr[-5:])
        raise UsageError(f"the proxy did not start listening: {said or 'it said nothing'}")

    def report(self, timeout: float = 30.0) -> ReportModel:
        """The proxy's final report, once the session ended: over stdio when the agent's
        client closed it (waited for, bounded); with --listen the proxy is stopped first."""
        if self._process is not None:
            self.close()
        if not self.report_file.exists():
            raise AssertionError(
                f"no report at {self.report_file}: the agent never started the proxy (hand it "
                "mcp_config, mcp_config_file or command)"
            )
        deadline = time.monotonic() + timeout
        while not _DONE.search(self.report_file.read_bytes()[:4096]):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the proxy's report {self.report_file} is not final after {timeout:g} s: "
                    "did the agent close its MCP session?"
                )
            time.sleep(0.05)  # the proxy rewrites the file when the session ends
        return read_report(self.report_file)

    def assert_pass(self) -> ReportModel:
        """The final report, if the agent passed; else an AssertionError that says why."""
        __tracebackhide__ = True
        from harness.testing.assertions import assert_pass

        return assert_pass(self)

    def count(self) -> dict[str, Any] | None:
        """A replayed cassette's count (what the replay answered: the ground truth), or None."""
        if self.count_file is None or not self.count_file.exists():
            return None
        return json.loads(self.count_file.read_text())

    def close(self) -> None:
        """Stop a listening proxy (SIGTERM, then its final report is written)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
