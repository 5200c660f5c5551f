"""From an upstream's state before and after a run to its real effects (T1, R10, E1).

A truth probe's state is a multiset of records (runner/execute/probe.py). A run's effects are
the difference: a record that is there k more times after the run than before was written k
times (k copies appeared); a record that is there fewer times was removed (one effect,
however many copies went: one delete removes them all). A changed record (a file with new
content) is one record gone and one new one: two effects of one write, neither a duplicate.

The effects are ground truth in the shape of the built-in services' (`runner.upstreams.
ground_truth`): one entry per distinct record with `rows`, the copies that appeared, so R10's
agreement reads them the same way: a duplicate is an entry with more than one row, i.e. the
same record written twice by the run. That is why a probe must print what an operation
writes without what the server makes up per call (ids, timestamps): two executions of one
operation then leave two equal records.

Which operation wrote which record is not printed by a probe. For the per-operation columns
(`operations.real_rows`) and for E1's ANNOTATION_CONTRADICTED the records are matched to the
judged operations by their values: an operation's argument values (text of 3 characters or
more, numbers) found in a record, or a record's values found in the operation's arguments
(an SQL statement that holds the row's values). A record goes to the one operation it
matches best; a tie leaves it unmatched.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

_MIN_TEXT = 3  # shorter text values (a "1", "EU") would match nearly any record


@dataclass(frozen=True)
class Entry:
    """One record the run changed: how many copies appeared, or that it was removed."""

    record: str
    rows: int  # copies that appeared (0 for a removed record)
    removed: int = 0  # copies that went

    def as_truth(self) -> dict[str, Any]:
        """The entry as ground truth (R10 reads `rows`)."""
        if self.removed:
            return {"record": self.record, "rows": 0, "removed": self.removed}
        return {"record": self.record, "rows": self.rows}


def effects(before: Counter[str], after: Counter[str]) -> list[Entry]:
    """The records the run changed, appeared ones first, each in order of its text."""
    appeared = sorted((r, n - before[r]) for r, n in after.items() if n > before[r])
    removed = sorted((r, n - after[r]) for r, n in before.items() if n > after[r])
    return [Entry(r, k) for r, k in appeared] + [Entry(r, 0, k) for r, k in removed]


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _number_texts(value: Any) -> set[str]:
    """A number as records spell it: 129, 129.0, 129.00 are found as `129`."""
    number = Decimal(str(value))
    texts = {str(value)}
    if number == number.to_integral_value():
        texts.add(str(int(number)))
    return texts


def _needles(arguments: Any) -> set[str]:
    """The values of an operation that can be looked for in a record."""
    found: set[str] = set()
    for leaf in _leaves(arguments):
        if isinstance(leaf, bool) or leaf is None:
            continue
        if isinstance(leaf, int | float | Decimal):
            found |= _number_texts(leaf)
        elif isinstance(leaf, str) and len(leaf.strip()) >= _MIN_TEXT:
            found.add(leaf.strip())
    return found


def _record_values(record: str) -> set[str]:
    """A record's own values: a row's (JSON list) or a line's words."""
    try:
        values = json.loads(record)
    except ValueError:
        values = None
    if isinstance(values, list):
        words = [str(v) for v in _leaves(values) if v is not None and not isinstance(v, bool)]
    else:
        words = record.split()
    return {w for w in words if len(w) >= _MIN_TEXT}


def _score(record: str, values: set[str], needles: set[str], texts: Sequence[str]) -> int:
    forward = sum(1 for n in needles if n in record)
    backward = sum(1 for v in values if any(v in t for t in texts))
    return forward + backward


def match(entries: Sequence[Entry], operations: Sequence[Any]) -> list[int | None]:
    """Per entry, the index (in `operations`) of the operation that wrote or removed it; None
    when none matches or two match equally well. `operations` have `.arguments`."""
    needles = [_needles(op.arguments) for op in operations]
    texts = [[t for t in _leaves(op.arguments) if isinstance(t, str)] for op in operations]
    owners: list[int | None] = []
    for entry in entries:
        values = _record_values(entry.record)
        scores = [_score(entry.record, values, n, t) for n, t in zip(needles, texts, strict=True)]
        best = max(scores, default=0)
        winners = [i for i, s in enumerate(scores) if s == best]
        owners.append(winners[0] if best > 0 and len(winners) == 1 else None)
    return owners


def effects_per_operation(
    entries: Sequence[Entry], owners: Sequence[int | None], count: int
) -> list[int | None]:
    """Per operation, the real effects matched to it (copies written, or one per removed
    record); None for an operation no record was matched to (the probe cannot tell)."""
    per: list[int | None] = [None] * count
    for entry, owner in zip(entries, owners, strict=True):
        if owner is not None:
            per[owner] = (per[owner] or 0) + (entry.rows if not entry.removed else 1)
    return per


@dataclass(frozen=True)
class Contradiction:
    """E1: a tool declared idempotent whose repeat changed the upstream's state."""

    operation: int
    tool: str
    declared_by: str | None
    executions: int
    evidence: str

    def detail(self) -> dict[str, Any]:
        """The finding's fields beyond code, tool and operation."""
        return {
            "declared": self.declared_by,  # who declared the tool idempotent (E1)
            "executions": self.executions,
            "evidence": self.evidence,
            "source": "runner: the upstream's real state",
        }


def contradicted_by_rows(
    operations: Sequence[Any], real: Sequence[int | None], declared: Mapping[int, str | None]
) -> list[Contradiction]:
    """E1 where each operation's real rows are known (the built-in services): an
    IDEMPOTENT_REPEAT operation with more than one real row."""
    return [
        Contradiction(op.index, op.tool, declared.get(op.index), op.executions,
                      f"{rows} real rows for one operation executed {op.executions} times")
        for op, rows in zip(operations, real, strict=True)
        if op.outcome == "IDEMPOTENT_REPEAT" and rows is not None and rows > 1
    ]  # fmt: skip


def contradicted_by_records(
    operations: Sequence[Any],
    entries: Sequence[Entry],
    owners: Sequence[int | None],
    declared: Mapping[int, str | None],
) -> list[Contradiction]:
    """E1 from a truth probe: a record written more than once that belongs to an
    IDEMPOTENT_REPEAT operation, by its values, or (unmatched) when the repeated operations
    are all IDEMPOTENT_REPEAT ones: no other repeat can have written it twice."""
    repeated = [op for op in operations if op.executions > 1 or op.outcome == "IDEMPOTENT_REPEAT"]
    blamed: dict[int, Entry] = {}
    for entry, owner in zip(entries, owners, strict=True):
        if entry.rows < 2:
            continue
        if owner is not None:
            suspects = [operations[owner]]
        elif repeated and all(op.outcome == "IDEMPOTENT_REPEAT" for op in repeated):
            suspects = repeated
        else:
            suspects = []
        for op in suspects:
            if op.outcome == "IDEMPOTENT_REPEAT":
                blamed.setdefault(op.index, entry)
    by_index = {op.index: op for op in operations}
    return [
        Contradiction(i, by_index[i].tool, declared.get(i), by_index[i].executions,
                      f"{entry.rows} copies of the record {_clip(entry.record)} appeared")
        for i, entry in sorted(blamed.items())
    ]  # fmt: skip


def _clip(record: str, most: int = 200) -> str:
    return repr(record if len(record) <= most else record[: most - 3] + "...")
