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
