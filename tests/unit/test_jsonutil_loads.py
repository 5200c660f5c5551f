"""K2, X7 (issue 24): jsonutil.loads with one decoder made once does what json.loads with the
same hooks does, for every input type and error."""

import json
from decimal import Decimal

import pytest

from harness.base import jsonutil


def _reference(text):
    def no_constants(name):
        raise ValueError(f"{name} is not valid JSON")

    return json.loads(text, parse_float=Decimal, parse_constant=no_constants)


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1.50,"b":[1,2e3,"x",true,null]}',
        b'{"price":129.00}',
        bytearray(b"[1]"),
        '"\\ud800"',
        '{"a":"é"}'.encode("utf-16"),
        '{"a":"é"}'.encode("utf-32-le"),
        "[" * 10 + "]" * 10,
    ],
)
def test_k2_loads_is_json_loads_with_exact_numbers(text):
    got = jsonutil.loads(text)
    assert got == _reference(text) and repr(got) == repr(_reference(text))


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", "\ufeff{}", "{", 5, None])
def test_k2_loads_refuses_what_json_loads_refuses(text):
    with pytest.raises(Exception) as expected:
        _reference(text)
    with pytest.raises(type(expected.value)):
        jsonutil.loads(text)


def test_x7_loads_too_deep_raises_too_deep():
    with pytest.raises(jsonutil.TooDeep):
        jsonutil.loads("[" * 100_000 + "]" * 100_000)
