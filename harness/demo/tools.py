"""The demo's seven tools (D1): their schemas and descriptions, and what each one does.

Schemas are plain JSON schema (no $schema, pattern, format or propertyNames), which every
client understands. Arguments are checked against the same schemas here, since the MCP server
does not do it; a bad argument is answered as an error result naming it, never thrown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness import CERTIFICATION, __version__
from harness.base import jsonutil
from harness.base.errors import OutputFileError, UsageError
from harness.benchmark.output import write_json_atomically
from harness.demo.sessions import NOTICE, DemoSession, SessionStore, tool_result
from harness.faults import (
    FAULTS,
    MAX_RETRY_AFTER_S,
    RETRY_AFTER,
    RETRY_WINDOWS,
    PlanConfig,
)
from harness.report.markdown import judgement_markdown

AUDIT_PATH = Path(".agent-harness") / "audit-report.json"
_ID = {"session_id": {"type": "string", "description": "The id start_session returned."}}

SCENARIO_TABLE = [
    (name, f.applies_to, f.summary, f.duplicate_when)
    for name, f in FAULTS.items()
    if f.simulated  # the demo server speaks stdio and answers each call at once
]  # the fault registry, as list_scenarios shows it


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "start_session": (
        "Start a demo session with a fault scenario and get its session id.",
        _schema(
            {
                "scenario": {
                    "type": "string",
                    "enum": [*(row[0] for row in SCENARIO_TABLE), "none"],
                    "description": "Fault plan (see list_scenarios); none = pass-through.",
                },
                "error_rate": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "description": "Only with chaos: failure probability per call.",
                },
                "seed": {"type": "integer", "description": "Only with chaos: reproducible."},
                "retry_after": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": MAX_RETRY_AFTER_S,
                    "description": f"Only with {'/'.join(sorted(RETRY_WINDOWS))}: seconds "
                    "(more than 0) the 429 asks for; 60.",
                },
            },  # fmt: skip
            ("scenario",),
        ),
    ),
    "execute_call": (
        "Send one tool call through the session's fault plan and judge. The answer says openly "
        "which fault was injected and whether the simulated backend executed the call. A tool's "
        "class is fixed by its first call in a session.",
        _schema(
            {
                **_ID,
                "tool_name": {"type": "string", "description": "e.g. create_booking"},
                "arguments": {"type": "object", "description": "The tool's arguments."},
                "tool_type": {
                    "type": "string",
                    "enum": ["read", "write", "auto"],
                    "description": "auto (default) classifies by name: create_*, pay_* ... "
                    "are writes, get*, list*, search* ... are reads.",
                },
            },
            ("session_id", "tool_name"),
        ),
    ),
    "get_report": (
        f"The session's report (verdict, operations, findings, prompt patches); also writes "
        f"{AUDIT_PATH} in the server's working directory.",
        _schema(
            {**_ID, "format": {"type": "string", "enum": ["json", "markdown"]}}, ("session_id",)
        ),
    ),
    "get_score": ("The session's score (0-100) and prompt patches.", _schema(_ID, ("session_id",))),
    "list_scenarios": ("The fault scenarios a session can use.", _schema({})),
    "reset_session": (
        "Clear a session's history and violations; its scenario starts over.",
        _schema(_ID, ("session_id",)),
    ),
    "delete_session": ("Delete a session.", _schema(_ID, ("session_id",))),
}

_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
}


def check_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """The first way the arguments break the tool's schema, as a sentence, or None."""
    properties = schema["properties"]
    for name in schema.get("required", ()):
        if name not in arguments:
            return f"missing argument {name!r}"
    for name, value in arguments.items():
        spec = properties.get(name)
        if spec is None:
            return f"unknown argument {name!r}; expected {', '.join(properties) or 'none'}"
        if not _TYPES[spec["type"]](value):
            return f"argument {name!r} must be of type {spec['type']}"
        if "enum" in spec and value not in spec["enum"]:
            return f"argument {name!r} must be one of {', '.join(spec['enum'])}"
        low, high = spec.get("minimum"), spec.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            return f"argument {name!r} must be from {spec['minimum']} to {spec['maximum']}"
    return None


def _answer(payload: dict[str, Any], *, is_error: bool = False) -> dict[str, Any]:
    body = {"notice": NOTICE, **payload}
    return tool_result(jsonutil.dumps(body), is_error=is_error, payload=body)


def _error(message: str) -> dict[str, Any]:
    return _answer({"error": message}, is_error=True)


def _plan(args: Mapping[str, Any]) -> PlanConfig:
    scenario = args["scenario"]
    chaos = scenario == "chaos"
    if chaos != ("error_rate" in args):
        raise UsageError("error_rate goes with scenario chaos, and chaos needs an error_rate")
    if "seed" in args and not chaos:
        raise UsageError("seed only applies to scenario chaos")
    if "retry_after" in args and scenario not in RETRY_WINDOWS:
        raise UsageError(
            f"retry_after only applies to scenario {'/'.join(sorted(RETRY_WINDOWS))}"
        )
    # The registry's bounds, in this tool's words (PlanConfig would name the proxy's flags).
    problem = RETRY_AFTER.problem(args.get("retry_after", RETRY_AFTER.default), "retry_after")
    if problem is not None:
        raise UsageError(problem)
    return PlanConfig(
        scenario=None if chaos or scenario == "none" else scenario,
        chaos_error_rate=args.get("error_rate"),
        seed=args.get("seed"),
        retry_after_s=args.get("retry_after", RETRY_AFTER.default),
    )


class Demo:
    """The demo's state and its seven tools, independent of the transport."""

    def __init__(self, store: SessionStore | None = None) -> None:
        self.store = store or SessionStore()
        self._on_session: dict[str, Callable[[DemoSession, dict[str, Any]], dict[str, Any]]] = {
            "execute_call": self._execute,
            "get_report": self._report,
            "get_score": self._score,
            "reset_session": self._reset,
            "delete_session": self._delete,
        }

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Answer one tools/call as an MCP tool result (plain data); errors are results too."""
        if name not in TOOLS:
            return _error(f"unknown tool {name!r}; the demo has {', '.join(TOOLS)}")
        args = dict(arguments or {})
        problem = check_arguments(TOOLS[name][1], args)
        if problem is not None:
            return _error(f"{name}: {problem}")
        if name == "start_session":
            return self._start(args)
        if name == "list_scenarios":
            return self._scenarios()
        session = self.store.get(args["session_id"])
        if session is None:
            return _error(
                f"unknown session id {args['session_id']!r} (deleted, or dropped: the demo keeps "
                f"the {self.store.limit} most recent sessions); call start_session"
            )
        return self._on_session[name](session, args)

    def _start(self, args: Mapping[str, Any]) -> dict[str, Any]:
        try:
            plan = _plan(args)
        except UsageError as exc:
            return _error(f"start_session: {exc}")
        session, dropped = self.store.start(plan)
        return _answer(
            {
                "sessionId": session.id,
                "scenario": args["scenario"],
                "droppedSessions": dropped,
                "next": "send tool calls with execute_call, then read get_report or get_score",
            }
        )

    def _scenarios(self) -> dict[str, Any]:
        rows = [
            {"id": i, "triggersOn": on, "whatHappens": what, "failsWhen": fails}
            for i, on, what, fails in SCENARIO_TABLE
        ]
        return _answer({"scenarios": rows})

    def _execute(self, session: DemoSession, args: dict[str, Any]) -> dict[str, Any]:
        declared = args.get("tool_type", "auto")
        result = session.execute(
            args["tool_name"], args.get("arguments", {}), None if declared == "auto" else declared
        )
        # The agent should notice a failed call the way it would notice the real one.
        return _answer(result, is_error=result["result"].get("isError") is True)

    def _report(self, session: DemoSession, args: dict[str, Any]) -> dict[str, Any]:
        j = session.judgement()
        audit: dict[str, Any] = {
            "verdict": j.report["verdict"],
            "certification": CERTIFICATION,
            "kind": "demo",
            "notice": NOTICE,
            "sessionId": session.id,
            "report": j.report,
            "score": j.score,
            "patches": j.patches,
            "toolClassification": j.tool_classification,
            "harnessVersion": __version__,
        }
        try:
            write_json_atomically(AUDIT_PATH, audit)
            written = f"written to {AUDIT_PATH}"
        except OutputFileError as exc:  # the report itself is still worth giving
            written = f"could not write it: {exc}"
        if args.get("format") == "markdown":
            return tool_result(f"{NOTICE}\n\n{judgement_markdown(j)}\n\nAudit file: {written}")
        return _answer({**audit, "auditFile": written})

    def _score(self, session: DemoSession, args: dict[str, Any]) -> dict[str, Any]:
        j = session.judgement()
        return _answer({"sessionId": session.id, "score": j.score, "patches": j.patches})

    def _reset(self, session: DemoSession, args: dict[str, Any]) -> dict[str, Any]:
        session.clear()
        detail = "history and violations cleared; the scenario starts over"
        return _answer({"sessionId": session.id, "reset": True, "detail": detail})

    def _delete(self, session: DemoSession, args: dict[str, Any]) -> dict[str, Any]:
        self.store.delete(session.id)
        return _answer({"sessionId": session.id, "deleted": True})
