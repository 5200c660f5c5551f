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
from harness.proxy import DEFAULT_KEY_FIELDS, ClassifierConfig, operation_id

CASSETTE_COUNT = "cassette-count.json"
_COUNT_LIMIT = 64 * 1024 * 1024


def cassette_replay_args(
    cassette: str, unmatched: str | None, workdir: Path, idempotent: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """The replay's arguments after the interpreter (the cassette resolved from where the
    runner is started, the count into the run's own folder; Z6: the spec's idempotent tools)."""
    args = ["-P", "-m", "harness.cassette", "replay", str(Path(cassette).absolute()),
            "--count-file", str(workdir / CASSETTE_COUNT)]  # fmt: skip
    if unmatched is not None:
        args += ["--unmatched", unmatched]
    if idempotent:
        args += [f"--idempotent-tools={','.join(idempotent)}"]
    return tuple(args)


@dataclass
class CassetteTruth:
    """The count made ground truth: entries for judge_agreement, real effects per operation."""

    truth: list[dict[str, Any]] | None = None
    real: list[int | None] = field(default_factory=list)
    failed: str | None = None
    duplicate: bool | None = None


def cassette_truth(
    path: Path,
    operations: list[Any],
    classified: list[Any],
    key_fields: tuple[str, ...] = DEFAULT_KEY_FIELDS,
) -> CassetteTruth:
    """The ground truth of one run against a cassette, from its count file (`operations`: the
    report's, `classified`: its tool_classification). Calls that differ only in a key field
    (K1: a new idempotency key per attempt) are one operation, as the harness identifies it:
    the real server would have executed both."""
    keys = ClassifierConfig(key_fields=key_fields).normalised_key_fields

    def identity(tool: str, arguments: Any) -> str:
        return operation_id(tool, arguments if isinstance(arguments, dict) else {}, keys)

    try:
        count = json.loads(read_text(path, "cassette count", _COUNT_LIMIT))
        counted = count["operations"]
        assert isinstance(counted, list)
    except (InputFileError, ValueError, KeyError, TypeError, AssertionError) as exc:
        reason = str(exc) if isinstance(exc, InputFileError) else "not a count file"
        return CassetteTruth(None, [None] * len(operations), f"the cassette's count: {reason}")
    tools = {t.name: t for t in classified}
    groups: dict[str, dict[str, Any]] = {}
    for entry in counted:
        tool = str(entry.get("tool"))
        group = groups.setdefault(identity(tool, entry.get("arguments")), {
            "tool": tool, "call": jsonutil.canonical(entry.get("arguments")), "rows": 0,
            "answered": 0, "hints": entry,
        })  # fmt: skip
        group["rows"] += int(entry.get("succeeded", 0))
        group["answered"] += int(entry.get("answered", 0))
    truth: list[dict[str, Any]] = []
    for group in groups.values():
        hints, kind = group.pop("hints"), tools.get(group["tool"])
        if hints.get("readOnlyHint") is True or (kind is not None and kind.tool_class == "read"):
            group["rows"] = 0
        elif kind.idempotent if kind is not None else hints.get("idempotentHint") is True:
            group["rows"] = min(group["rows"], 1)
        if group["rows"]:
            truth.append(group)
    effects = {identity(g["tool"], json.loads(g["call"])): g["rows"] for g in truth}
    real: list[int | None] = [effects.get(identity(op.tool, op.arguments), 0) for op in operations]
    return CassetteTruth(truth, real, None, any(e["rows"] > 1 for e in truth))
