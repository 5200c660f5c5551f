"""One MCP server entry of a client configuration, and the proxy entry that stands in for it.

A client starts a stdio server from `command`, `args`, `env` and `cwd`, or reaches a remote
one at `url` with `headers`. Wrapped, the client starts `agent-harness proxy` instead, and the
proxy starts (or reaches) the server: the server's command and arguments become
`--upstream-command`/`--upstream-arg`, its URL `--upstream-url`. What the client gives the
process stays where it is: `env` and `cwd` reach the proxy, and the server inherits them from
it, so no value of them is copied anywhere.

A remote server's headers never go onto a command line: each header's value moves into the
wrapped entry's `env` under a variable of its own (`AGENT_HARNESS_HEADER_AUTHORIZATION`), as
the client wrote it (with its `${...}` references, which the client expands in `env` as in
`headers`), and the proxy reads it from there (`--upstream-header-env`). A client that reaches
servers by URL speaks stdio too (Claude Desktop, Cursor, Claude Code, VS Code, Codex), so the
wrapped entry is a stdio entry: the agent talks to the proxy over stdio, the proxy to the
server over streamable HTTP. Faults that need an agent on HTTP (F6-F8) cannot be played so.
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base.errors import UsageError
from harness.faults import HTTP_ONLY, SCENARIOS

# A flag whose name says its value is a credential (`--api-key X`, `--token=X`).
_SECRET_FLAG = re.compile(
    r"(?i)^--?[a-z0-9_-]*(api[-_]?key|token|secret|passw(or)?d|passphrase|auth|credential|"
    r"bearer|cookie|private[-_]?key|access[-_]?key)[a-z0-9_-]*$"
)
# A value shaped like a credential: well-known key prefixes, a Bearer token, URL user info.
_SECRET_VALUE = re.compile(
    r"(?i)(\bsk-[A-Za-z0-9_-]{16,}|\bsk-ant-|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_|"
    r"\bxox[abpr]-|\bAKIA[0-9A-Z]{16}\b|\bAIza[0-9A-Za-z_-]{30,}|\bbearer\s+[A-Za-z0-9._~+/=-]{12,}|"
    r"\b[a-z][a-z0-9+.-]*://[^/\s@]+:[^/\s@]+@)"
)
# A value that is only references the client expands (`${API_KEY}`, `${env:TOKEN}`,
# `${input:key}`): no secret is written in it.
_REFERENCE_ONLY = re.compile(r"^(\$\{[^}]+\})+$")
HEADER_ENV_PREFIX = "AGENT_HARNESS_HEADER_"


@dataclass(frozen=True)
class WrapPlan:
    """What a wrapped server runs with: its scenario, its report file, more proxy flags."""

    scenario: str | None
    report_file: str
    proxy_flags: tuple[str, ...] = ()


def proxy_head() -> list[str]:
    """The command (and its first arguments) that starts `agent-harness proxy`: the console
    script by its full path, since a desktop client starts servers with a short PATH."""
    exe = Path(sys.executable).parent / "agent-harness"
    if exe.exists():
        return [str(exe), "proxy"]
    return [sys.executable, "-P", "-m", "harness", "proxy"]


def is_proxy(command: Any, args: Any) -> bool:
    """Whether an entry already starts `agent-harness proxy` (wrapped, or written by hand)."""
    if not isinstance(command, str) or not isinstance(args, list):
        return False
    if Path(command).name == "agent-harness":
        return args[:1] == ["proxy"]
    tail = [a for a in args if a != "-P"]
    return tail[:3] == ["-m", "harness", "proxy"]


def _flag(name: str, value: str) -> list[str]:
    """`--flag value`, or `--flag=value` for a value that looks like a flag itself."""
    return [f"{name}={value}"] if value.startswith("-") else [name, value]


def secret_in_args(args: list[str]) -> int | None:
    """The position of the first argument that holds a credential, or None."""
    for i, arg in enumerate(args):
        if _REFERENCE_ONLY.match(arg):
            continue
        name, eq, value = arg.partition("=")
        if eq and _SECRET_FLAG.match(name) and value and not _REFERENCE_ONLY.match(value):
            return i
        if i and _SECRET_FLAG.match(args[i - 1]) and not arg.startswith("-"):
            return i
        if _SECRET_VALUE.search(arg):
            return i
    return None


def stdio_upstream(name: str, command: str, args: list[str]) -> list[str]:
    """The proxy flags that start a stdio server; UsageError when its arguments hold a
    credential (wrap would copy it onto the proxy's command line)."""
    if not command:
        raise UsageError(f"server {name!r}: its command is empty")
    found = secret_in_args([command, *args])
    if found is not None:
        raise UsageError(
            f"server {name!r}: argument {found} looks like a credential; wrap would copy it "
            "onto the proxy's command line. Move it into the server's env (the proxy passes "
            "its environment on) and wrap again, or leave the server out (--server NAMES)"
        )
    flags = _flag("--upstream-command", command)
    for arg in args:
        if arg == "":
            raise UsageError(f"server {name!r}: an empty argument cannot be handed on")
        flags += _flag("--upstream-arg", arg)
    return flags


def header_variable(header: str) -> str:
    """The environment variable a header's value moves to in the wrapped entry."""
    return HEADER_ENV_PREFIX + re.sub(r"[^A-Z0-9]", "_", header.upper())


def url_upstream(
    name: str, url: str, header_vars: dict[str, str], bearer_var: str | None = None
) -> list[str]:
    """The proxy flags that reach a remote server; each header from the variable that holds
    it (never its value), a bearer token from its variable."""
    if not url:
        raise UsageError(f"server {name!r}: its url is empty")
    flags = _flag("--upstream-url", url)
    for header, variable in header_vars.items():
        flags += ["--upstream-header-env", f"{header}={variable}"]
    if bearer_var:
        flags += ["--upstream-bearer-env", bearer_var]
    return flags


def proxy_args(name: str, upstream: list[str], plan: WrapPlan) -> list[str]:
    """The whole argument list after the proxy's command, checked by the proxy's own parser
    (a bad scenario or flag is one line naming the server)."""
    args = [*upstream]
    if plan.scenario is not None:
        args += ["--scenario", plan.scenario]
    if not any(f.split("=")[0] == "--audit-tools" for f in plan.proxy_flags):
        args += ["--audit-tools", "off"]  # a real measurement: the agent does not see its judge
    args += ["--report-file", plan.report_file, *plan.proxy_flags]
    _check(name, args)
    return args


def _check(name: str, args: list[str]) -> None:
    from harness.proxy.args import parse

    # The client expands `${...}` in the entry: a URL made of references is checked as one.
    shown = [
        "http://placeholder.invalid/mcp"
        if a.startswith("${") or ("${" in a and "://" not in a)
        else a
        for a in args
    ]
    try:
        parse(shown)
    except UsageError as exc:
        raise UsageError(f"server {name!r}: {exc}") from None


def scenario_for(name: str, scenarios: dict[str | None, str]) -> str | None:
    """The scenario a server runs under: its own (`NAME=F2`), else the one for all."""
    return scenarios.get(name, scenarios.get(None))


def parse_scenarios(values: list[str]) -> dict[str | None, str]:
    """`--scenario F1` (every server) and `--scenario NAME=F2` (one server), checked."""
    out: dict[str | None, str] = {}
    for value in values:
        server, eq, scenario = value.rpartition("=")
        key = server if eq else None
        scenario = scenario.strip().upper()
        if scenario not in SCENARIOS:
            raise UsageError(
                f"--scenario {value!r}: no scenario {scenario!r}; one of {', '.join(SCENARIOS)}"
            )
        if scenario in HTTP_ONLY:
            raise UsageError(
                f"--scenario {value!r}: {scenario} needs an agent on HTTP, and a client reaches "
                "a wrapped server over stdio"
            )
        if key in out:
            raise UsageError(f"--scenario: {'every server' if key is None else key} is given twice")
        out[key] = scenario
    return out


def report_name(name: str, taken: set[str]) -> str:
    """A file name for a server's report: its name made safe, unique among `taken`."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip(".") or "server"
    if safe.lower() in taken:
        safe = f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    taken.add(safe.lower())
    return f"{safe}.json"
