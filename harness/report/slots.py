"""The report file's layout: each keyed piece of the report in a slot of its own.

A slot is padded with spaces to a capacity with room to grow (JSON allows white space between
tokens). While the rendered report keeps the same pieces and each fits its slot, the layout
stays put, so a file that holds an older version of the report is brought up to date by
overwriting only the slots whose piece changed since that version: the work per publish
follows what changed, not the size of the report (SPEC N1, issue 3).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import is_not, itemgetter

Piece = tuple[Hashable, bytes]


def _group(key: Hashable) -> Hashable:
    return key[0] if isinstance(key, tuple) else key


@dataclass(frozen=True)
class Layout:
    """Where each piece lives: a numbered arrangement of slots."""

    number: int
    keys: tuple[Hashable, ...]
    offsets: tuple[int, ...]
    capacities: tuple[int, ...]
    size: int

    @classmethod
    def plan(cls, pieces: Sequence[Piece], number: int, padded: bool) -> Layout:
        """Slots for these pieces; pieces of one array share a capacity (a reserved empty chunk
        must fit a full one), with half as much again to grow into."""
        largest: dict[Hashable, int] = {}
        for key, data in pieces:
            group = _group(key)
            largest[group] = max(largest.get(group, 0), len(data))
        offsets, capacities, offset = [], [], 0
        for key, data in pieces:
            room = max(len(data), largest[_group(key)])
            capacity = (room + max(room // 2, 256) + 63) // 64 * 64 if padded else len(data)
            offsets.append(offset)
            capacities.append(capacity)
            offset += capacity
        return cls(number, tuple(k for k, _ in pieces), tuple(offsets), tuple(capacities), offset)


def padded(data: bytes, capacity: int) -> bytes:
    return data if len(data) == capacity else data + b" " * (capacity - len(data))


class Slots:
    """The current layout, and in which version each slot's content last changed."""

    RECENT = 4096  # changes remembered one by one; an older version means a whole rewrite

    def __init__(self) -> None:
        self.layout: Layout | None = None
        self.version = 0
        self._last: list[bytes] = []
        self._recent: deque[tuple[int, int]] = deque(maxlen=self.RECENT)  # (version, slot)
        self._since = 0  # versions after this one are all in `_recent`

    def update(self, pieces: Sequence[Piece], padded_slots: bool) -> Layout:
        """Take in a new version; re-plan the layout when the pieces no longer fit it.

        One pass comparing each piece with the last by identity (rendered pieces are cached
        objects), then by value: only the pieces that changed are looked at further. The keys
        need no comparison: the list of pieces only ever grows, so the same length means the
        same keys.
        """
        self.version += 1
        layout = self.layout
        last = self._last
        datas = list(map(itemgetter(1), pieces))
        changed: list[int] = []
        fits = layout is not None and len(datas) == len(last)
        if fits:
            assert layout is not None
            capacities = layout.capacities
            # C-level passes over the pieces: only those not identical to the last are visited.
            for i in compress(range(len(datas)), map(is_not, datas, last)):
                data = datas[i]
                if data != last[i]:
                    if len(data) > capacities[i]:
                        fits = False
                        break
                    changed.append(i)
        if not fits:
            number = layout.number + 1 if layout else 1
            self.layout = Layout.plan(pieces, number, padded_slots)
            self._recent.clear()
            self._since = self.version  # nothing older can be patched: a new arrangement
        else:
            if len(self._recent) + len(changed) > self.RECENT:
                self._since = self.version - 1
                self._recent.clear()
            self._recent.extend((self.version, i) for i in changed)
        self._last = datas
        assert self.layout is not None
        return self.layout

    def changed_since(self, version: int) -> list[tuple[int, bytes]] | None:
        """(offset, padded bytes) of every slot that changed after `version`; None when that
        version is too old to tell (write the whole file then)."""
        layout = self.layout
        assert layout is not None
        if version < self._since:
            return None
        slots: dict[int, None] = {}
        for at, i in reversed(self._recent):
            if at <= version:
                break
            slots[i] = None
        return [(layout.offsets[i], padded(self._last[i], layout.capacities[i])) for i in slots]

    def whole(self) -> list[bytes]:
        """Every slot's bytes and padding, in file order, as buffers for writev."""
        layout = self.layout
        assert layout is not None
        buffers: list[bytes] = []
        for data, capacity in zip(self._last, layout.capacities, strict=True):
            buffers.append(data)
            if capacity > len(data):
                buffers.append(b" " * (capacity - len(data)))
        return buffers
