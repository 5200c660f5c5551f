"""The proxy's top-level JSON scanner (harness/base/jsonscan.py, X7 X10) against json itself."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base.jsonscan import ScanError, array_elements, top_level

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(), values, max_size=5), st.sampled_from([None, 2]))
def test_x7_top_level_members_are_the_raw_text_of_each_value(obj, indent):
    members = top_level(json.dumps(obj, indent=indent))
    assert list(members) == list(obj)
    assert {k: json.loads(v) for k, v in members.items()} == obj


@settings(max_examples=200, deadline=None)
@given(st.lists(values, max_size=5), st.sampled_from([None, 2]))
def test_x10_array_elements_are_the_raw_text_of_each_element(items, indent):
    elements = array_elements(json.dumps(items, indent=indent))
    assert [json.loads(e) for e in elements] == items


def test_x7_nesting_far_beyond_pythons_json_limit_is_read_without_recursion():
    deep = "[" * 100_000 + "]" * 100_000
    members = top_level('{"method": "tools/call", "params": ' + deep + ', "id": 7}')
    assert (members["method"], members["id"], len(members["params"])) == ('"tools/call"', "7", 200_000)
    assert array_elements(f"[{deep}, 1]") == [deep, "1"]


@pytest.mark.parametrize(
    ("text", "scan"),
    [('{"a": 1 "b": 2}', top_level), ('{"a": 1', top_level), ("[1 2]", array_elements),
     ("[1,", array_elements), ("[1", array_elements), ("[]", top_level), ("{}", array_elements),
     ('{"a": [1}', top_level)],
)  # fmt: skip
def test_x7_what_is_not_one_object_or_array_is_refused(text, scan):
    with pytest.raises(ScanError):
        scan(text)
