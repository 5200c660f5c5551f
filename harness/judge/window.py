"""J10: the most recent attempts of one tool, indexed for the spelling comparison.

A new attempt is compared with each recent attempt that may differ from it only in spelling.
Most attempts carry an object whose every field folds to a certain value (harness.judge.similar
`fold`): two such attempts with the same fields can only be similar when all folded values are
equal, so they are found by one dictionary lookup instead of a comparison with each of them.
Only attempts with other fields, or with a field that does not fold, are compared one by one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from harness.judge.model import Attempt


def signature(fold: dict[str, Any] | None) -> tuple[frozenset[str], tuple[Any, ...]] | None:
    """(fields, folded values) when every field folds, else None."""
    if fold is None or any(v is None for v in fold.values()):
        return None
    return frozenset(fold), tuple(sorted(fold.items(), key=lambda item: item[0]))


class SpellingWindow:
    """The last `size` attempts of one tool, grouped by fields and folded values."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._order: deque[tuple[Attempt, Any]] = deque()  # (attempt, its signature)
        # fields -> folded values -> attempts; None holds attempts without a signature
        self._groups: dict[frozenset[str] | None, dict[Any, list[Attempt]]] = {}

    def candidates(self, sig: tuple[frozenset[str], tuple[Any, ...]] | None) -> Iterable[Attempt]:
        """The recent attempts that may be spellings of an attempt with this signature."""
        if sig is None:
            return [attempt for attempt, _ in self._order]
        fields, values = sig
        found: list[Attempt] = []
        for group_fields, by_values in self._groups.items():
            if group_fields == fields:
                found += by_values.get(values, ())
            else:
                for attempts in by_values.values():
                    found += attempts
        return found

    def add(
        self, attempt: Attempt, sig: tuple[frozenset[str], tuple[Any, ...]] | None
    ) -> Attempt | None:
        """Add the attempt; the one that dropped out to make room, if any."""
        dropped = None
        if len(self._order) >= self.size:
            dropped, dropped_sig = self._order.popleft()
            self._drop(dropped, dropped_sig)
        self._order.append((attempt, sig))
        fields, values = sig if sig is not None else (None, None)
        self._groups.setdefault(fields, {}).setdefault(values, []).append(attempt)
        return dropped

    def holds(self, op: object) -> bool:
        """Whether an attempt of this operation is still in the window."""
        return any(attempt.op is op for attempt, _ in self._order)

    def _drop(self, attempt: Attempt, sig: tuple[frozenset[str], tuple[Any, ...]] | None) -> None:
        fields, values = sig if sig is not None else (None, None)
        by_values = self._groups[fields]
        bucket = by_values[values]
        bucket.remove(attempt)
        if not bucket:
            del by_values[values]
            if not by_values:
                del self._groups[fields]


class UncertainAttempts:
    """J9: the last uncertain attempts of one tool, in order, indexed by each field's folded
    value (issue 24).

    With many calls in flight every open attempt is uncertain, so a new attempt would be
    compared with each of them. Two attempts whose folds have the same fields, one of them
    folded to a value on both sides that differs, are surely different (`surely_different`):
    so the attempts that may be spellings of a new one are those whose fold, on one field the
    new one folds to a value, holds the same value or none. They are found in two dictionary
    lookups; the rest are never looked at. When the attempts' folds do not all have the new
    one's fields (or it has no fold), all of them are candidates, in order, as before.
    """

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self._number: dict[Attempt, int] = {}  # the order they came in
        self._entries: dict[Attempt, tuple[frozenset[str] | None, list[Any]]] = {}
        self._fields: dict[frozenset[str] | None, int] = {}  # fold fields -> attempts with them
        self._by_value: dict[Any, dict[Attempt, None]] = {}  # (field, folded value) -> attempts
        self._unfolded: dict[str, dict[Attempt, None]] = {}  # field -> attempts without a value
        self._count = 0

    def candidates(self, mine: dict[str, Any] | None) -> list[Attempt]:
        """The attempts (in order) that may be spellings of one whose fold is `mine`: a
        superset of those `surely_different` does not rule out."""
        if mine is None or len(self._fields) != 1 or frozenset(mine) not in self._fields:
            return self.attempts
        best: tuple[int, dict[Attempt, None], dict[Attempt, None]] | None = None
        for name, value in mine.items():
            if value is None:
                continue
            try:
                same = self._by_value.get((name, value), _NONE)
            except TypeError:  # not hashable: not an index key
                continue
            unfolded = self._unfolded.get(name, _NONE)
            if best is None or len(same) + len(unfolded) < best[0]:
                best = (len(same) + len(unfolded), same, unfolded)
        if best is None:
            return self.attempts
        found = [*best[1], *best[2]]
        if len(found) > 1:
            found.sort(key=self._number.__getitem__)
        return found

    def replace(
        self,
        attempts: list[Attempt],
        kept: set[Attempt],
        added: Attempt,
        fold: dict[str, Any] | None,
    ) -> None:
        """The list is now `attempts` (`kept`: as a set): `added` (whose operation folds to
        `fold`) came, the attempts of the old list that are not in it left."""
        for gone in self.attempts:
            if gone not in kept:
                self._remove(gone)
        self.attempts = attempts
        if added in kept:
            self._add(added, fold)

    def _add(self, attempt: Attempt, fold: dict[str, Any] | None) -> None:
        self._count += 1
        self._number[attempt] = self._count
        fields = None if fold is None else frozenset(fold)
        self._fields[fields] = self._fields.get(fields, 0) + 1
        keys: list[Any] = []
        for name, value in (fold or {}).items():
            try:
                if value is None:
                    raise TypeError
                self._by_value.setdefault((name, value), {})[attempt] = None
                keys.append((name, value))
            except TypeError:  # no value, or not hashable: a candidate whatever the value
                self._unfolded.setdefault(name, {})[attempt] = None
                keys.append(name)
        self._entries[attempt] = (fields, keys)

    def _remove(self, attempt: Attempt) -> None:
        del self._number[attempt]
        fields, keys = self._entries.pop(attempt)
        left = self._fields[fields] - 1
        if left:
            self._fields[fields] = left
        else:
            del self._fields[fields]
        for key in keys:
            table = self._by_value if isinstance(key, tuple) else self._unfolded
            bucket = table[key]
            del bucket[attempt]
            if not bucket:
                del table[key]


_NONE: dict[Attempt, None] = {}
