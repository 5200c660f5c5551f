"""A cassette upstream (U2): how the runner starts its replay, and its count as ground truth.

The replay (`python -m harness.cassette replay`) executes nothing and writes, per operation
(tool and canonical arguments, numbers by value), how often it answered and how often with a
success. A recording shows answers, not state, so which calls count as effects is what the
tools declare:

- a call answered with a success counts once per answer;
- a tool the recording annotates `readOnlyHint: true`, or that the report classifies as a read
  (its name, the spec's `read_tools`), has no effects;
- a tool declared idempotent (its recorded `idempotentHint`, or the spec's `idempotent_tools`,
  as the report says) has at most one: its repeats leave the state of one execution.

A write answered with a success more than once is a real duplicate; R10's agreement holds the
verdict against that. A count file that is missing or unreadable makes the agreement
`unknown` (never a guess).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base import jsonutil
from harness.base.errors import InputFileError
from harness.base.infile import read_text

CASSETTE_COUNT = "cassette-count.json"
_COUNT_LIMIT = 64 * 1024 * 1024


def cassette_replay_args(cassette: str, unmatched: str | None, workdir: Path) -> tuple[str, ...]:
    """The replay's arguments after the interpreter (the cassette resolved from where the
    runner is started, the count into the run's own folder)."""
    args = ["-m", "harness.cassette", "replay", str(Path(cassette).absolute()),
            "--count-file", str(workdir / CASSETTE_COUNT)]  # fmt: skip
    if unmatched is not None:
        args += ["--unmatched", unmatched]
    return tuple(args)


@dataclass
class CassetteTruth:
    """The count made ground truth: entries for judge_agreement, real effects per operation."""

    truth: list[dict[str, Any]] | None = None
    real: list[int | None] = field(default_factory=list)
    failed: str | None = None
    duplicate: bool | None = None


def _key(tool: str, arguments: Any) -> tuple[str, str]:
    return tool, jsonutil.canonical(jsonutil.by_value(arguments or {}))


def cassette_truth(path: Path, operations: list[Any], classified: list[Any]) -> CassetteTruth:
    """The ground truth of one run against a cassette, from its count file (`operations`: the
    report's, `classified`: its tool_classification)."""
    try:
        count = json.loads(read_text(path, "cassette count", _COUNT_LIMIT))
        counted = count["operations"]
        assert isinstance(counted, list)
    except (InputFileError, ValueError, KeyError, TypeError, AssertionError) as exc:
        reason = str(exc) if isinstance(exc, InputFileError) else "not a count file"
        return CassetteTruth(None, [None] * len(operations), f"the cassette's count: {reason}")
    tools = {t.name: t for t in classified}
    truth: list[dict[str, Any]] = []
    effects: dict[tuple[str, str], int] = {}
    for entry in counted:
        tool = str(entry.get("tool"))
        classified = tools.get(tool)
        rows = int(entry.get("succeeded", 0))
        if entry.get("readOnlyHint") is True or (classified and classified.tool_class == "read"):
            rows = 0
        elif classified is not None and classified.idempotent:
            rows = min(rows, 1)
        elif classified is None and entry.get("idempotentHint") is True:
            rows = min(rows, 1)
        key = _key(tool, entry.get("arguments"))
        effects[key] = rows
        if rows:
            truth.append({
                "tool": tool, "call": jsonutil.canonical(entry.get("arguments")), "rows": rows,
                "answered": int(entry.get("answered", 0)),
            })  # fmt: skip
    real: list[int | None] = [effects.get(_key(op.tool, op.arguments), 0) for op in operations]
    return CassetteTruth(truth, real, None, any(e["rows"] > 1 for e in truth))
