"""Flags of `agent-harness record` and `agent-harness replay` (U2).

`record` takes the proxy's upstream flags (--upstream-command/--upstream-arg/--upstream-url,
env and header flags, --upstream-timeout, --max-message-bytes), read by the proxy's own parser
so they mean exactly what they mean there, plus its own: -o/--output and --max-answer-bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.base.errors import UsageError
from harness.cassette.format import DEFAULT_MAX_ANSWER_BYTES
from harness.proxy.args import ProxyConfig, parse

UPSTREAM_FLAGS = (
    "--upstream-command", "--upstream-arg", "--upstream-args", "--upstream-cwd",
    "--upstream-env", "--upstream-env-var", "--upstream-url", "--upstream-header",
    "--upstream-header-env", "--upstream-timeout", "--max-message-bytes", "--listen",
)  # fmt: skip
UNMATCHED = ("error", "nearest")


@dataclass(frozen=True)
class RecordConfig:
    upstream: ProxyConfig
    output: str
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES


@dataclass(frozen=True)
class ReplayConfig:
    cassette: str
    count_file: str | None = None
    unmatched: str = "error"
    listen: tuple[str, int] | None = None
    idempotent_tools: tuple[str, ...] = ()  # Z6: writes whose repeats are harmless (E1)


def _pairs(argv: list[str], command: str) -> list[tuple[str, str]]:
    """(--flag, value) pairs; a bare word is ("", word); --help/--version have value ""."""
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg in ("--help", "-h", "--version"):
            pairs.append((arg, ""))
            continue
        if not arg.startswith("-") or arg == "-":
            pairs.append(("", arg))
            continue
        name, eq, value = arg.partition("=")
        if not eq:
            if i >= len(argv):
                raise UsageError(f"{name} needs a value; see agent-harness {command} --help")
            value = argv[i]
            i += 1
        if value == "":
            raise UsageError(f"{name} needs a non-empty value")
        pairs.append((name, value))
    return pairs


def _positive(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{name} must be a whole number, got {text!r}") from None
    if value < 1:
        raise UsageError(f"{name} must be at least 1")
    return value


def parse_record(argv: list[str]) -> RecordConfig | str:
    """A RecordConfig, or "help"/"version"; UsageError (one line) on anything wrong."""
    output: str | None = None
    max_answer = DEFAULT_MAX_ANSWER_BYTES
    upstream: list[str] = []
    for name, value in _pairs(argv, "record"):
        if name in ("--help", "-h"):
            return "help"
        if name == "--version":
            return "version"
        if name in ("-o", "--output"):
            if output is not None:
                raise UsageError("-o/--output is given more than once")
            output = value
        elif name == "--max-answer-bytes":
            max_answer = _positive(name, value)
        elif name in UPSTREAM_FLAGS:
            upstream.append(f"{name}={value}")
        elif name == "":
            raise UsageError(f"unexpected argument {value!r}; every value belongs to a --flag")
        else:
            raise UsageError(f"unknown flag {name}; see agent-harness record --help")
    if output is None:
        raise UsageError("-o/--output CASSETTE is required (the file to record into)")
    parsed = parse(upstream)
    assert parsed.config is not None
    return RecordConfig(parsed.config, output, max_answer)


def parse_replay(argv: list[str]) -> ReplayConfig | str:
    """A ReplayConfig, or "help"/"version"; UsageError (one line) on anything wrong."""
    cassette: str | None = None
    count_file: str | None = None
    unmatched = "error"
    listen: tuple[str, int] | None = None
    idempotent: tuple[str, ...] = ()
    for name, value in _pairs(argv, "replay"):
        if name in ("--help", "-h"):
            return "help"
        if name == "--version":
            return "version"
        if name == "":
            if cassette is not None:
                raise UsageError(f"one cassette only; unexpected argument {value!r}")
            cassette = value
        elif name == "--count-file":
            count_file = value
        elif name == "--unmatched":
            if value not in UNMATCHED:
                raise UsageError(f"--unmatched must be error or nearest, got {value!r}")
            unmatched = value
        elif name == "--listen":
            listen = _listen(value)
        elif name == "--idempotent-tools":
            idempotent = tuple(part.strip() for part in value.split(",") if part.strip())
        else:
            raise UsageError(f"unknown flag {name}; see agent-harness replay --help")
    if cassette is None:
        raise UsageError("the cassette to replay is required: agent-harness replay CASSETTE")
    return ReplayConfig(cassette, count_file, unmatched, listen, idempotent)


def _listen(text: str) -> tuple[str, int]:
    config = parse(["--upstream-command=replay", f"--listen={text}"]).config
    assert config is not None and config.listen is not None
    return config.listen


RECORD_HELP = """\
Usage: agent-harness record (--upstream-command CMD | --upstream-url URL) -o CASSETTE [FLAGS]

Records a real upstream session into a cassette (U2): the agent talks to `record` as it
would to the server, over stdio (or streamable HTTP with --listen HOST:PORT: every session
gets an upstream connection of its own, all go into one cassette, written when record is
stopped). Every message is forwarded unchanged both ways and written down: the server's info
and capabilities, every tools/list page, each tools/call and its answer, other requests
(resources, prompts) and their answers, notifications. Text is redacted as the run store
redacts it (known secrets, Bearer and Authorization credentials, URL user info); the
upstream's env values and header values are never written. Over stdio the cassette is written
when the session ends (end of input, the upstream's exit, SIGTERM or SIGINT). No fault is
injected and nothing is judged. Details: docs/cassettes.md.

Flags:
  -o, --output CASSETTE
      The cassette to write (replaced atomically). It is locked from the start until it is
      written: a second recorder into the same file fails at once.
  --max-answer-bytes N
      Largest answer kept (default 1048576); a larger one is written as omitted with its
      size, and replay answers it with an error.
  --upstream-command, --upstream-arg, --upstream-args, --upstream-cwd, --upstream-env,
  --upstream-env-var, --upstream-url, --upstream-header, --upstream-header-env,
  --upstream-timeout, --max-message-bytes, --listen
      As for `agent-harness proxy` (see agent-harness proxy --help).

Exit codes: 0 recorded, 1 bad arguments, an upstream that did not start, or a cassette that
could not be written."""

REPLAY_HELP = """\
Usage: agent-harness replay CASSETTE [--count-file PATH] [--unmatched error|nearest]
                                     [--listen HOST:PORT] [--idempotent-tools G,...]

Serves a cassette as an MCP server over stdio (or streamable HTTP with --listen) that
executes nothing (U2). initialize and every list answer as recorded; a tools/call is matched
by its tool and canonical arguments (numbers by value, as the harness identifies an
operation); repeated calls are answered in recorded order, then with the last answer, except
a write (as the harness classifies it, a statement tool per call) that is not idempotent:
repeated more often than recorded, its effect is unknown (a recording holds answers, not
state), so it is answered with a JSON-RPC error and counted as unknown. Other requests are
matched by method and params. Every call answered is counted: the count is the ground truth
of a run against the cassette. Details: docs/cassettes.md.

Flags:
  --count-file PATH
      Write the count (per operation: how often answered, how often with a success, from a
      first recorded answer, from a recorded repeat, unknown; the tool's recorded
      annotations) as JSON to PATH, replaced atomically after every answer. PATH may not be
      the cassette.
  --unmatched error|nearest
      A call with no recorded match: `error` (default) answers a tool error naming the
      nearest recorded call; `nearest` answers with the nearest recorded call of the same
      tool (an error if that tool was never recorded).
  --listen HOST:PORT
      Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (the proxy's listener).
  --idempotent-tools G,...
      Tool globs whose repeats are harmless (as the proxy's flag): their repeats beyond the
      recording get the last answer, never an unknown one.

The cassette is validated whole against the JSON-RPC shapes before anything is served; every
request gets exactly one answer (or one JSON-RPC error), whatever its _meta holds.

Exit codes: 0 served, 1 bad arguments or a cassette that cannot be read (one line)."""
