"""The report file written in slots: complete after every write, only changes written (O3, N1)."""

import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.report.file import ReportFile
from harness.report.slots import Layout, Slots


def pieces_for(values):
    """A JSON object as keyed pieces, one per member, as the report renders its chunks."""
    pieces = [("head", b'{"n":' + str(len(values)).encode())]
    for i, value in enumerate(values):
        pieces.append((("item", i), b',"k%d":' % i + json.dumps(value).encode()))
    pieces.append(("tail", b"}"))
    return pieces


def expected(values):
    return {"n": len(values), **{f"k{i}": v for i, v in enumerate(values)}}


steps = st.lists(
    st.tuples(
        st.sampled_from(["append", "change", "grow", "hold-reader", "drop-reader"]),
        st.integers(0, 40),
        st.text(alphabet='ab\u00e9\u4e2d"\\ ', max_size=200),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(steps)
def test_o3_every_write_leaves_complete_json_equal_to_its_pieces(tmp_path_factory, script):
    folder = tmp_path_factory.mktemp("slots")
    report = ReportFile(str(folder / "report.json"))
    values = ["start"]
    readers = []
    report.write_pieces(pieces_for(values))
    try:
        for action, index, text in script:
            if action == "append":
                values.append(text)
            elif action == "change":
                values[index % len(values)] = text
            elif action == "grow":
                values[index % len(values)] = text * 30
            elif action == "hold-reader":
                readers.append(
                    (
                        open(folder / "report.json", "rb"),
                        json.loads((folder / "report.json").read_bytes()),
                    )
                )
            elif readers:
                handle, _ = readers.pop(0)
                handle.close()
            report.write_pieces(pieces_for(values))
            assert json.loads((folder / "report.json").read_bytes()) == expected(values)
        for handle, seen in readers:  # every reader still reads the version it opened
            assert json.loads(handle.read()) == seen
    finally:
        for handle, _ in readers:
            handle.close()
        report.release()
    assert sorted(p.name for p in folder.iterdir()) == ["report.json", "report.json.lock"]


def test_n1_once_warm_a_write_touches_only_the_slots_that_changed(tmp_path, monkeypatch):
    report = ReportFile(str(tmp_path / "report.json"))
    values = ["x" * 200 for _ in range(500)]
    for _ in range(4):  # every kept file now holds a version in the same layout
        report.write_pieces(pieces_for(values))
    written = []
    real = os.pwrite
    monkeypatch.setattr(
        os, "pwrite", lambda fd, data, at: written.append(len(data)) or real(fd, data, at)
    )
    values[123] = "changed"
    report.write_pieces(pieces_for(values))
    size = os.path.getsize(tmp_path / "report.json")
    report.release()
    assert 0 < sum(written) < 2_000 < size  # one slot of a file of over 100 kB
    assert json.loads((tmp_path / "report.json").read_bytes()) == expected(values)


def test_a_piece_that_outgrows_its_slot_gets_a_new_layout():
    slots = Slots()
    first = slots.update(pieces_for(["a"]), padded_slots=True)
    same = slots.update(pieces_for(["b"]), padded_slots=True)
    bigger = slots.update(pieces_for(["c" * 10_000]), padded_slots=True)
    assert first is same and bigger.number == first.number + 1
    assert slots.changed_since(slots.version - 1) is None  # a new layout: write it whole


def test_slots_name_exactly_the_pieces_that_changed_since_a_version():
    slots = Slots()
    slots.update(pieces_for(["a", "b", "c"]), padded_slots=True)
    held = slots.version
    slots.update(pieces_for(["a", "B", "c"]), padded_slots=True)
    slots.update(pieces_for(["a", "B", "C"]), padded_slots=True)
    layout = slots.layout
    changed = slots.changed_since(held)
    assert sorted(offset for offset, _ in changed) == [layout.offsets[2], layout.offsets[3]]
    assert all(len(data) == layout.capacities[layout.offsets.index(o)] for o, data in changed)
    assert slots.changed_since(slots.version) == []


def test_slots_of_one_array_share_a_capacity_so_reserved_chunks_fit_a_full_one():
    layout = Layout.plan(
        [(("ops", 0), b"x" * 5000), (("ops", 1), b""), ("tail", b"}")], 1, padded=True
    )
    assert layout.capacities[0] == layout.capacities[1] >= 5000
    assert layout.capacities[2] < 1000


def test_n1_a_growing_array_changes_the_report_layout_twice_per_doubling():
    # Issue 24: every change of the number of pieces is a new layout, the report file written
    # whole; reserving one empty chunk ahead at a time did so every 256 operations (8 GB of
    # writes over 50,000 pipelined ones).
    from harness.judge.summary import _Chunks

    chunks = _Chunks("operations")
    layouts, slots = set(), Slots()
    for i in range(256 * 256):
        chunks.set(i, b'{"index":%d}' % i)
        if i % 64 == 63:
            pieces: list = []
            chunks.pieces(pieces, False)
            assert b",".join(filter(None, (b for _, b in pieces))).count(b"index") == i + 1
            layouts.add(slots.update(pieces, padded_slots=True).number)
    assert len(layouts) <= 2 * 8 + 4  # 256 chunks: 8 doublings (was one per chunk: 256)
