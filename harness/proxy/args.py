"""`agent-harness proxy` flags (X1): strict parsing into a validated ProxyConfig.

Flags come as `--flag value` or `--flag=value`. Unknown flags, misspelt values, empty values,
flags without a value, and a value that begins with `--` (write `--flag=--value` for that) all
end with one clear error line. Parsing is a pure function, so every rule is a table test.

`ProxyConfig` is the one definition of what a proxy is asked to do: the flags parse into it,
an in-process proxy takes it as it is, and a proxy process started by a program (the runner)
reads it from one file (`--config FILE`, written by `ProxyConfig.to_json`) instead of flags
that the program would have to spell and the proxy parse back. The fault plan in it is
checked by the fault registry as it is built (PlanConfig), whichever way it came.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pydantic import TypeAdapter, ValidationError

from harness.base.errors import InputFileError, UsageError
from harness.base.infile import read_bytes
from harness.faults import (
    FAULTS,
    HTTP_ONLY,
    PARAMS,
    Param,
    PlanConfig,
    scenario_help,
    scenario_range,
    users_of,
)
from harness.operations.classify import DEFAULT_KEY_FIELDS, ClassifierConfig
from harness.operations.keys import KeySpec
from harness.wire.http.headers import HeaderSpec, SecretValue, valid_header_name, valid_header_value
from harness.wire.http.limits import ListenLimits
from harness.wire.transport import DEFAULT_MAX_MESSAGE_BYTES


@dataclass(frozen=True)
class Flag:
    name: str
    metavar: str
    help: str
    repeatable: bool = False
    switch: bool = False  # takes no value: given or not


def _param_help(param: Param) -> str:
    shown = param.text(param.default).removesuffix(".0")
    return (f"With --scenario {'/'.join(users_of(param))}: {param.help} (default {shown}; "
            f"{param.bounds()}).")  # fmt: skip


FLAGS: tuple[Flag, ...] = (
    Flag("--config", "FILE", "Every setting from FILE, one JSON object as a program that "
         "starts the proxy writes it (the runner does: ProxyConfig.to_json); no other flag "
         "goes with it."),
    Flag("--upstream-command", "CMD", "Command that starts the upstream MCP server over stdio "
         "(this or --upstream-url is required)."),
    Flag("--upstream-url", "URL", "The upstream MCP server's streamable HTTP endpoint "
         "(http:// or https://), instead of --upstream-command."),
    Flag("--upstream-header", "NAME:VALUE", "A header for every request to --upstream-url, e.g. "
         "'Authorization: Bearer ...'; repeatable. Never printed or stored.", repeatable=True),
    Flag("--upstream-header-env", "NAME=VAR", "A header for --upstream-url whose value is read "
         "from the environment variable VAR (keeps secrets off the command line); repeatable.",
         repeatable=True),
    Flag("--upstream-bearer-env", "VAR", "With --upstream-url: the header 'Authorization: Bearer "
         "<token>', the token read from the environment variable VAR (as Codex's "
         "bearer_token_env_var)."),
    Flag("--listen", "HOST:PORT", "Serve the agent over streamable HTTP at http://HOST:PORT/mcp "
         "instead of stdio (port 0: any free port; the address is printed). Bind a loopback "
         "address (127.0.0.1) unless you mean otherwise."),
    Flag("--allowed-origin", "ORIGIN", "With --listen: a browser Origin allowed besides local "
         "ones (e.g. https://app.example); repeatable.", repeatable=True),
    *(Flag(name, metavar, f"With --listen: {text}") for name, metavar, text in (
        ("--max-sessions", "N", "sessions open at once (default 32); each holds an upstream "
         "connection (a process, for a command). Over it a new session is answered 503."),
        ("--session-idle-timeout", "S", "seconds a session may go without a request before it "
         "ends and its upstream stops (default 600)."),
        ("--max-connections", "N", "HTTP connections open at once (default 256); over it, or "
         "short of file descriptors, a connection is answered 503."),
        ("--http-header-timeout", "S", "seconds a request's head may take once begun (default "
         "10); a slower connection is closed."),
        ("--http-body-timeout", "S", "seconds a request's body may take (default 30); then 408."),
        ("--http-idle-timeout", "S", "seconds a connection may stay open without a request in "
         "progress (default 60)."),
    )),
    Flag("--upstream-arg", "ARG", "One argument for the upstream; repeat the flag for more. "
         "May contain commas.", repeatable=True),
    Flag("--upstream-args", "A,B", "Comma-separated upstream arguments (no commas inside); they "
         "come before the --upstream-arg values."),
    Flag("--upstream-cwd", "DIR", "Working directory of the upstream process."),
    Flag("--upstream-env-var", "K=V", "One environment variable for the upstream; repeatable; "
         "the value may contain commas.", repeatable=True),
    Flag("--upstream-env", "K=V,K2=V2", "Comma-separated environment variables (values without "
         "commas). The upstream always inherits the proxy's whole environment too."),
    Flag("--scenario", scenario_range(), "Deterministic fault scenario on the agent's writes: "
         f"{scenario_help()}. Without it: plain pass-through (a baseline)."),
    Flag("--mode", "MODE", "deterministic (default) or chaos; not together with --scenario."),
    Flag("--error-rate", "R", "With --mode chaos: probability 0-1 that any call fails with a "
         "generic server error (never executed)."),
    Flag("--seed", "N", "With --mode chaos: seed that makes the chaos reproducible."),
    *(Flag(p.flag, p.metavar, _param_help(p)) for p in PARAMS),  # the faults' parameters
    Flag("--fault-delay", "MS", "Delay every injected answer by MS milliseconds, F1 included, "
         "to imitate a real timeout (default 0)."),
    Flag("--write-tools", "G,...", "Comma-separated globs (* only, case-sensitive) of write "
         "tools; replaces the default write patterns."),
    Flag("--read-tools", "G,...", "Comma-separated globs of extra read tools."),
    Flag("--key-fields", "N,...", "Argument names that carry an idempotency key, matched at any "
         "depth, ignoring case, - and _ and an x- prefix; TOOL:NAME for one tool only (TOOL a "
         "glob). Replaces the default list; the entry 'default' brings it back. Default: "
         + ", ".join(DEFAULT_KEY_FIELDS) + "."),
    Flag("--keys-honoured", "G,...", "Tool globs for which the upstream deduplicates repeats "
         "that carry the same idempotency key: such a repeat after a fault is then the "
         "observation KEYED_RETRY, not a duplicate execution."),
    Flag("--idempotent-tools", "G,...", "Tool globs whose repeats are harmless (the upstream "
         "ends in the same state however often the same call runs): an exact repeat is the "
         "observation IDEMPOTENT_REPEAT, not a duplicate execution. Tools annotated "
         "idempotentHint=true (and not readOnlyHint=true) count as listed here."),
    Flag("--distrust-annotations", "", "Ignore the upstream's idempotentHint annotations: only "
         "--idempotent-tools makes a tool's repeats harmless.", switch=True),
    Flag("--statement-tools", "G,...", "Tool globs whose calls carry an SQL statement in an "
         "argument (the one named like sql, query or statement): each call is classified by "
         "its parsed statement (SELECT reads, INSERT writes, an upsert is an idempotent write) "
         "and identified by it. A tool with an argument named sql, or a query argument of a "
         "tool that speaks of SQL or a database, is one without this flag."),
    Flag("--strict-errors", "", "Only isError refuses an attempt: a result whose whole content "
         "is an error ({\"error\": ...} or text beginning Error:) then counts as executed.",
         switch=True),
    Flag("--no-profiles", "", "Do not use the shipped server profiles (verified tool classes, "
         "idempotence and statement tools of popular MCP servers, matched by serverInfo).",
         switch=True),
    Flag("--audit-tools", "on|off", "Offer harness__get_report and harness__get_score to the "
         "agent (default on; use off for a real measurement)."),
    Flag("--report-file", "PATH", "Keep report, score and patches as JSON in this file: current "
         "before every upstream call and every answer, replaced atomically. Without "
         "--event-log the events go to PATH.events.jsonl beside it. Without this flag (and "
         "without --event-log) the report goes to a new file under "
         "$XDG_STATE_HOME/agent-harness/reports (else ~/.local/state/...), printed at the "
         "start; the verdict line at the end names it."),
    Flag("--no-report-file", "", "Write no report file (the verdict line is printed at the end "
         "all the same).", switch=True),
    Flag("--event-log", "PATH", "Append every event as a JSON line (re-judge it later with "
         "`agent-harness judge PATH`). A proxy started on a log that holds earlier sessions "
         "continues their judgement: the report judges every session in it."),
    Flag("--otel", "", "Export OpenTelemetry spans when the session ends: one for the run "
         "(scenario, verdict, score) and one per tool call (fault, operation, executions), "
         "over OTLP to OTEL_EXPORTER_OTLP_ENDPOINT (the standard OTEL_* variables). Needs "
         "pip install 'agent-harness[otel]'.", switch=True),
    Flag("--upstream-timeout", "S", "Seconds to wait for an upstream answer (default 60); then "
         "the attempt's outcome is unknown."),
    Flag("--max-message-bytes", "N", f"Largest JSON-RPC message in either direction (default "
         f"{DEFAULT_MAX_MESSAGE_BYTES})."),
)  # fmt: skip

_BY_NAME = {f.name: f for f in FLAGS}


@dataclass(frozen=True)
class ProxyConfig:
    """Everything `agent-harness proxy` was asked to do, validated."""

    upstream_command: str | None = None
    upstream_args: tuple[str, ...] = ()
    upstream_cwd: str | None = None
    upstream_env: dict[str, str] = field(default_factory=dict)
    plan: PlanConfig = field(default_factory=PlanConfig)
    classifier: ClassifierConfig = field(default_factory=ClassifierConfig)
    audit_tools: bool = True
    report_file: str | None = None
    event_log: str | None = None
    upstream_timeout_s: float = 60.0
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    upstream_url: str | None = None
    upstream_headers: tuple[HeaderSpec, ...] = ()
    listen: tuple[str, int] | None = None
    allowed_origins: tuple[str, ...] = ()
    listen_limits: ListenLimits = field(default_factory=ListenLimits)  # V10
    # Q3: without --report-file (and without --no-report-file) the report goes to a file of
    # its own under the user's state folder (harness.proxy.verdict); a program that starts
    # the proxy with --config names its report file or none.
    default_report: bool = False
    otel: bool = False  # I3: spans of the session exported when it ends (--otel)

    __pydantic_config__ = {"extra": "forbid"}  # a config file names only these

    def to_json(self) -> bytes:
        """The config as `--config FILE` reads it back: from_json(c.to_json()) == c.

        A header value given directly (not named by an environment variable) is in it: the
        file belongs in a folder only its user can read, and the agent under test never sees
        (U3)."""
        # ASCII with escapes: a value that came from argv may hold the lone surrogates Python
        # reads undecodable bytes as (a path), which UTF-8 cannot carry; `inf` stays too.
        return json.dumps(_ADAPTER.dump_python(self), ensure_ascii=True).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> ProxyConfig:
        """A config written by `to_json`, checked as the flags are (the fault plan by the
        registry, the key fields); UsageError naming `where` and the field that is wrong."""
        try:
            body = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise UsageError(f"{where}: not a proxy config: not JSON ({exc})") from None
        try:
            config = _ADAPTER.validate_python(body)
            KeySpec.parse(config.classifier.key_fields)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            at = ".".join(map(str, error["loc"])) or "the file"
            why = error["msg"].removeprefix("Value error, ")
            raise UsageError(f"{where}: not a proxy config: {at}: {why}") from None
        except UsageError as exc:
            raise UsageError(f"{where}: {exc}") from None
        return config


# A config file is a few kilobytes; a bigger one is not one (V4: read bounded).
MAX_CONFIG_BYTES = 1024 * 1024


@dataclass
class Parsed:
    """The outcome of parsing: a config, or a request for help or the version."""

    config: ProxyConfig | None = None
    help: bool = False
    version: bool = False
    # --config: a program started the proxy and reads its report itself (no verdict line)
    from_file: bool = False


def _split_flags(argv: list[str]) -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg in ("--help", "-h"):
            values.setdefault("--help", []).append("")
            continue
        if arg == "--version":
            values.setdefault("--version", []).append("")
            continue
        if not arg.startswith("--"):
            raise UsageError(f"unexpected argument {arg!r}; every value belongs to a --flag")
        name, eq, value = arg.partition("=")
        flag = _BY_NAME.get(name)
        if flag is None:
            close = difflib.get_close_matches(name, list(_BY_NAME), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UsageError(f"unknown flag {name}{hint}; see agent-harness proxy --help")
        if flag.switch:
            if eq:
                raise UsageError(f"{name} takes no value")
            if name in values:
                raise UsageError(f"{name} is given more than once")
            values[name] = [""]
            continue
        if not eq:
            if i >= len(argv):
                raise UsageError(f"{name} needs a value ({flag.metavar})")
            value = argv[i]
            if value.startswith("--"):
                raise UsageError(
                    f"{name} needs a value ({flag.metavar}), got the flag-like {value!r}; "
                    f"write {name}={value} if that really is the value"
                )
            i += 1
        if value == "":
            raise UsageError(f"{name} needs a non-empty value ({flag.metavar})")
        if name in values and not flag.repeatable:
            raise UsageError(f"{name} is given more than once")
        values.setdefault(name, []).append(value)
    return values


def _number(name: str, text: str, kind: type[float] | type[int]) -> float:
    try:
        return kind(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise UsageError(f"{name} must be {what}, got {text!r}") from None


def _list(name: str, text: str) -> tuple[str, ...]:
    items = tuple(part.strip() for part in text.split(","))
    if any(not item for item in items):
        raise UsageError(f"{name} has an empty item in {text!r}")
    return items


def _env_pair(name: str, text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise UsageError(f"{name} expects KEY=VALUE, got {text!r}")
    return key, value


def parse(argv: list[str]) -> Parsed:
    """X1: parse and validate; UsageError with one clear sentence on anything wrong."""
    values = _split_flags(argv)
    if "--help" in values:
        return Parsed(help=True)
    if "--version" in values:
        return Parsed(version=True)
    if "--config" in values:
        return Parsed(config=_config_file(values), from_file=True)
    one = {k: v[-1] for k, v in values.items()}
    url = _upstream_url(one, values)
    headers = _upstream_headers(values) if url else ()

    args: list[str] = []
    if "--upstream-args" in one:
        args += _list("--upstream-args", one["--upstream-args"])
    args += values.get("--upstream-arg", [])

    env: dict[str, str] = {}
    if "--upstream-env" in one:
        for pair in _list("--upstream-env", one["--upstream-env"]):
            key, value = _env_pair("--upstream-env", pair)
            env[key] = value
    for pair in values.get("--upstream-env-var", []):
        key, value = _env_pair("--upstream-env-var", pair)
        env[key] = value

    # Which flags go together is checked here; the plan they make is checked by the fault
    # registry as PlanConfig is built (the scenario's name, the parameters' bounds).
    scenario = one.get("--scenario")
    scenario = scenario.upper() if scenario else None
    mode = one.get("--mode")
    if mode is not None and mode.lower() not in ("deterministic", "chaos"):
        raise UsageError(f"--mode must be deterministic or chaos, got {mode!r}")
    chaos = mode is not None and mode.lower() == "chaos"
    if mode is not None and scenario is not None:
        raise UsageError("--mode and --scenario exclude each other")
    if chaos and "--error-rate" not in one:
        raise UsageError("--mode chaos needs --error-rate (a probability from 0 to 1)")
    if not chaos and "--error-rate" in one:
        raise UsageError("--error-rate works only with --mode chaos")
    if not chaos and "--seed" in one:
        raise UsageError("--seed works only with --mode chaos")
    if scenario in HTTP_ONLY and "--listen" not in one:
        raise UsageError(f"--scenario {scenario} needs an agent on HTTP: add --listen HOST:PORT")
    for param in PARAMS:
        if param.flag in one and scenario not in users_of(param):
            raise UsageError(f"{param.flag} works only with --scenario {'/'.join(users_of(param))}")
    if "--fault-delay" in one and scenario is None and not chaos:
        raise UsageError("--fault-delay works only with --scenario or --mode chaos")

    error_rate = _number("--error-rate", one["--error-rate"], float) if chaos else None
    given = {  # the scenario's parameters (PlanConfig checks their bounds); others default
        param.field: _number(param.flag, one[param.flag], param.kind)
        for param in PARAMS
        if param.flag in one
    }
    fault_delay = int(_number("--fault-delay", one.get("--fault-delay", "0"), int))
    seed = int(_number("--seed", one["--seed"], int)) if "--seed" in one else None

    if "--report-file" in one and "--no-report-file" in one:
        raise UsageError("--report-file and --no-report-file exclude each other")
    audit = one.get("--audit-tools", "on").lower()
    if audit not in ("on", "off"):
        raise UsageError(f"--audit-tools must be on or off, got {one['--audit-tools']!r}")
    timeout = _number("--upstream-timeout", one.get("--upstream-timeout", "60"), float)
    if not timeout > 0:  # `not >`: NaN is refused too
        raise UsageError("--upstream-timeout must be above 0 seconds")
    max_bytes = int(
        _number(
            "--max-message-bytes",
            one.get("--max-message-bytes", str(DEFAULT_MAX_MESSAGE_BYTES)),
            int,
        )
    )
    if max_bytes < 1024:
        raise UsageError("--max-message-bytes must be at least 1024")

    key_fields = (
        _list("--key-fields", one["--key-fields"]) if "--key-fields" in one else DEFAULT_KEY_FIELDS
    )
    KeySpec.parse(key_fields)  # validated here, at the edge
    classifier = ClassifierConfig(
        write_globs=_list("--write-tools", one["--write-tools"])
        if "--write-tools" in one
        else None,
        read_globs=_list("--read-tools", one["--read-tools"]) if "--read-tools" in one else (),
        key_fields=key_fields,
        keys_honoured=(
            _list("--keys-honoured", one["--keys-honoured"]) if "--keys-honoured" in one else ()
        ),
        idempotent_globs=(
            _list("--idempotent-tools", one["--idempotent-tools"])
            if "--idempotent-tools" in one
            else ()
        ),
        distrust_annotations="--distrust-annotations" in one,
        statement_globs=(
            _list("--statement-tools", one["--statement-tools"])
            if "--statement-tools" in one
            else ()
        ),
        strict_errors="--strict-errors" in one,
        use_profiles="--no-profiles" not in one,
    )
    plan = PlanConfig(
        scenario=scenario,
        chaos_error_rate=error_rate,
        seed=seed,
        fault_delay_ms=fault_delay,
        **given,
    )
    return Parsed(
        config=ProxyConfig(
            upstream_command=one.get("--upstream-command"),
            upstream_url=url,
            upstream_headers=headers,
            listen=_listen(one["--listen"]) if "--listen" in one else None,
            allowed_origins=_origins(values, "--listen" in one),
            listen_limits=_listen_limits(one, "--listen" in one),
            upstream_args=tuple(args),
            upstream_cwd=one.get("--upstream-cwd"),
            upstream_env=env,
            plan=plan,
            classifier=classifier,
            audit_tools=audit == "on",
            report_file=one.get("--report-file"),
            default_report="--report-file" not in one and "--no-report-file" not in one,
            event_log=one.get("--event-log"),
            upstream_timeout_s=timeout,
            max_message_bytes=max_bytes,
            otel="--otel" in one,
        )
    )


def _config_file(values: dict[str, list[str]]) -> ProxyConfig:
    """`--config FILE`: the whole config from its file, no flag beside it."""
    others = [name for name in values if name != "--config"]
    if others or len(values["--config"]) > 1:
        extra = others[0] if others else "--config"
        raise UsageError(f"--config takes every setting from its file; {extra} cannot go with it")
    path = values["--config"][0]
    try:
        data = read_bytes(path, "proxy config", MAX_CONFIG_BYTES)
    except InputFileError as exc:
        raise UsageError(f"--config {exc}") from None
    return ProxyConfig.from_json(data, f"--config {path}")


_COMMAND_ONLY = (
    "--upstream-arg",
    "--upstream-args",
    "--upstream-cwd",
    "--upstream-env",
    "--upstream-env-var",
)


def _upstream_url(one: dict[str, str], values: dict[str, list[str]]) -> str | None:
    """H1: exactly one upstream, a command or a URL; the flags of the other are refused."""
    url = one.get("--upstream-url")
    if url is None:
        if "--upstream-command" not in one:
            raise UsageError(
                "--upstream-command or --upstream-url is required (your MCP server: the command "
                "that starts it, or its streamable HTTP endpoint)"
            )
        for name in ("--upstream-header", "--upstream-header-env", "--upstream-bearer-env"):
            if name in values:
                raise UsageError(f"{name} works only with --upstream-url")
        return None
    if "--upstream-command" in one:
        raise UsageError("--upstream-command and --upstream-url exclude each other")
    for name in _COMMAND_ONLY:
        if name in values:
            raise UsageError(f"{name} works only with --upstream-command")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--upstream-url must be an http:// or https:// URL, got {_shown(url)!r}")
    try:
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        raise UsageError(f"--upstream-url has a bad port: {_shown(url)!r}") from None
    return url


def _shown(url: str) -> str:
    """A URL as an error may show it: without user name and password (V3)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return url.replace(parts.netloc, "***@" + parts.netloc.rpartition("@")[2], 1)


def _upstream_headers(values: dict[str, list[str]]) -> tuple[HeaderSpec, ...]:
    specs: list[HeaderSpec] = []
    for text in values.get("--upstream-header", []):
        name, colon, value = text.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not valid_header_name(name):
            raise UsageError(
                f"--upstream-header expects NAME:VALUE with a header name, got a value starting "
                f"{text[:12]!r}"
            )  # never more of it: it may be a secret
        if not valid_header_value(value):
            raise UsageError(f"--upstream-header {name}: the value has a line break or NUL")
        specs.append(HeaderSpec(name, value=SecretValue(value)))
    for text in values.get("--upstream-header-env", []):
        name, eq, variable = text.partition("=")
        name, variable = name.strip(), variable.strip()
        if not eq or not valid_header_name(name) or not variable:
            raise UsageError(f"--upstream-header-env expects NAME=VARIABLE, got {text!r}")
        specs.append(HeaderSpec(name, env=variable))
    if "--upstream-bearer-env" in values:
        variable = values["--upstream-bearer-env"][-1].strip()
        if not variable or "=" in variable:
            raise UsageError(f"--upstream-bearer-env expects a variable's name, got {variable!r}")
        specs.append(HeaderSpec("Authorization", env=variable, prefix="Bearer "))
    names = [spec.name.lower() for spec in specs]
    for name in names:
        if names.count(name) > 1:
            raise UsageError(f"the upstream header {name} is given more than once")
    return tuple(specs)


def _listen(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[v6]:PORT` or `:PORT` (127.0.0.1)."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--listen expects HOST:PORT (e.g. 127.0.0.1:8765), got {text!r}")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


_LIMIT_FLAGS = {  # V10: flag -> ListenLimits field (counts are integers, times seconds)
    "--max-sessions": "max_sessions",
    "--session-idle-timeout": "session_idle_s",
    "--max-connections": "max_connections",
    "--http-header-timeout": "header_timeout_s",
    "--http-body-timeout": "body_timeout_s",
    "--http-idle-timeout": "idle_timeout_s",
}


def _listen_limits(one: dict[str, str], listening: bool) -> ListenLimits:
    """V10: the listener's bounds; each a positive number, and only with --listen."""
    given: dict[str, Any] = {}
    for flag, name in _LIMIT_FLAGS.items():
        if flag not in one:
            continue
        if not listening:
            raise UsageError(f"{flag} works only with --listen")
        count = name.startswith("max_")
        value = _number(flag, one[flag], int if count else float)
        if not value > 0 or value == float("inf"):  # `not >`: NaN is refused too
            raise UsageError(f"{flag} must be a number above 0, got {one[flag]!r}")
        given[name] = int(value) if count else float(value)
    return ListenLimits(**given)


def _origins(values: dict[str, list[str]], listening: bool) -> tuple[str, ...]:
    origins = tuple(values.get("--allowed-origin", []))
    if origins and not listening:
        raise UsageError("--allowed-origin works only with --listen")
    for origin in origins:
        parts = urlsplit(origin)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path not in ("", "/")
        ):
            raise UsageError(f"--allowed-origin expects scheme://host[:port], got {origin!r}")
    return origins


def _and(names: list[str]) -> str:
    """`F1, F4 and F6`."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def help_text() -> str:
    """`agent-harness proxy --help`: every flag."""
    lines = [
        "Usage: agent-harness proxy (--upstream-command CMD | --upstream-url URL) [FLAGS]",
        "",
        "A chaos proxy between an MCP client (your agent) and a real MCP server. It injects",
        "faults on the agent's write calls and judges from what was really executed whether the",
        "agent executed a write twice. Only against test or staging backends: "
        f"{_and([n for n, f in FAULTS.items() if f.executes_upstream])} really",
        "execute writes. Stdio on both sides by default; streamable HTTP to the upstream with",
        "--upstream-url and for the agent with --listen (protocol revisions 2025-06-18,",
        "2025-11-25 and 2026-07-28). With --listen the proxy runs until SIGTERM or Ctrl-C; every",
        "session of the agent is part of the same run and report.",
        "",
        "Every message that could execute a write is judged or refused, never forwarded",
        "unjudged: batch elements are judged one by one and answered as a batch; a tools/call",
        "without an id or with a null id, a request whose id is not a string or an integer, a",
        "request reusing the id of one in flight, and bytes that are not JSON are refused with",
        "a JSON-RPC error. The proxy's own requests follow the client's protocol revision",
        "(2025-06-18, 2025-11-25, stateless 2026-07-28). The upstream's answers and JSON-RPC",
        "errors reach the agent as they came; an answer the proxy cannot read becomes one",
        "UPSTREAM_INVALID_ANSWER tool error. A task-augmented call is judged by its task's",
        "result; a fault on it answers as a task that failed.",
        "",
        "When the agent closes its input (stdin may be a regular file: proxy < requests.jsonl),",
        "the proxy waits for the answers to its requests in flight until each is answered, the",
        "upstream exits or --upstream-timeout passes; requests it cancelled are not waited for.",
        "After SIGTERM, SIGINT or SIGHUP answers still count for about 2 s.",
        "",
        "Flags (as --flag value or --flag=value):",
    ]
    for flag in FLAGS:
        lines.append(f"  {flag.name} {flag.metavar}".rstrip())
        lines.append(f"      {flag.help}")
    lines += [
        "  --version",
        "      Print the version and exit.",
        "  --help",
        "      Show this help and exit.",
        "",
        "At the end the proxy prints its verdict on stderr in one line: verdict, score, why,",
        "and where the report file is.",
        "",
        "Exit codes: 0 normal end (the verdict is in the last line and the report file), 1 bad",
        "arguments, an upstream that did not start, or a report file or event log that could",
        "not be written.",
    ]
    return "\n".join(lines)


# pydantic's reader and writer of ProxyConfig, built once at import (3 ms): a fork server that
# imported this module hands it ready to every proxy it forks.
_ADAPTER = TypeAdapter(ProxyConfig)
