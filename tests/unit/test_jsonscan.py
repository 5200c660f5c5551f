"""The proxy's top-level JSON scanner (harness/base/jsonscan.py, X7 X10) against json itself."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base import jsonscan
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


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 7 or roll < 0.3:
        return rng.choice([1, -2.5, 1e21, 0, "s\u00e9\n", "q\"\\", None, True, False, ""])
    if roll < 0.65:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"k{i}": _random_json(rng, depth + 1) for i in range(rng.randrange(4))}


def test_v17_validate_agrees_with_the_json_module_on_valid_and_broken_text():
    # V17: the validator that checks a cassette without building it accepts exactly what
    # json.loads accepts (NaN and Infinity aside, which JSON does not have).
    rng = random.Random(17)
    for _ in range(3000):
        text = json.dumps(_random_json(rng), indent=rng.choice([None, 1]))
        jsonscan.validate(text)
        spot = rng.randrange(len(text))
        mark = rng.choice(["", ",", "]", "}", "x", '"', "1", " ", "\x01"])
        broken = text[:spot] + mark + text[spot + 1 :]
        try:
            json.loads(broken)
            valid = True
        except ValueError:
            valid = False
        try:
            jsonscan.validate(broken)
            accepted = True
        except jsonscan.ScanError:
            accepted = False
        assert accepted == valid, broken


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", "-Infinity", "01", "[1,]", "{,}", '"\\x"'])
def test_v17_validate_refuses_what_json_does_not_allow(text):
    with pytest.raises(jsonscan.ScanError):
        jsonscan.validate(text)


def test_v17_validate_walks_nesting_far_deeper_than_the_json_module():
    # No recursion: 100,000 levels are walked, not refused or crashed on.
    jsonscan.validate("[" * 100_000 + "]" * 100_000)
    with pytest.raises(jsonscan.ScanError):
        jsonscan.validate("[" * 100_000 + "]" * 99_999)
