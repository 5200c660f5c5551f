"""The slotted report publisher: every published version is complete, only changes written."""

import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.reportwriter import SlottedPublisher


def pieces_for(values):
    """A JSON object as keyed pieces: one piece per member, as the report renders them."""
    pieces = [("head", b'{"n":' + str(len(values)).encode())]
    for i, value in enumerate(values):
        pieces.append((("item", i), b',"k%d":' % i + json.dumps(value).encode()))
    pieces.append(("tail", b"}"))
    return pieces


def expected(values):
    return {"n": len(values), **{f"k{i}": v for i, v in enumerate(values)}}


texts = st.text(alphabet="ab\u00e9\u4e2d\"\\", max_size=300)
steps = st.lists(
    st.tuples(st.sampled_from(["append", "change", "grow", "settle"]), st.integers(0, 50), texts),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(steps)
def test_o3_every_published_version_is_complete_json_equal_to_its_pieces(tmp_path_factory, script):
    target = tmp_path_factory.mktemp("pub") / "report.json"
    publisher = SlottedPublisher(target)
    values = ["start"]
    try:
        for action, index, text in script:
            if action == "append":
                values.append(text)
            elif action == "change":
                values[index % len(values)] = text
            elif action == "grow":
                values[index % len(values)] = text * 20
            else:
                publisher.settle()  # spares ready: the next publish writes only changed slots
            publisher.publish(pieces_for(values))
            assert json.loads(target.read_bytes()) == expected(values)
    finally:
        publisher.close()
    leftovers = [p for p in os.listdir(target.parent) if p.endswith(".tmp")]
    assert leftovers == []


def test_n1_a_settled_publisher_writes_only_changed_slots_into_a_spare(tmp_path):
    target = tmp_path / "report.json"
    publisher = SlottedPublisher(target)
    values = ["x" * 100 for _ in range(50)]
    publisher.publish(pieces_for(values))
    publisher.settle()
    values[7] = "changed"
    publisher.publish(pieces_for(values))
    publisher.close()
    assert (publisher.full_writes, publisher.slot_writes) == (1, 1)
    assert json.loads(target.read_bytes()) == expected(values)


def test_o4_a_reader_of_an_old_version_keeps_a_consistent_snapshot(tmp_path):
    target = tmp_path / "report.json"
    publisher = SlottedPublisher(target)
    publisher.publish(pieces_for(["old"] * 20))
    with target.open("rb") as old_reader:
        for i in range(10):
            publisher.settle()
            publisher.publish(pieces_for([f"new {i}"] * 20))
        assert json.loads(old_reader.read()) == expected(["old"] * 20)
    publisher.close()
