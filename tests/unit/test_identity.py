"""Operation identity (K2, K4, K5) and exact JSON handling."""

from decimal import Decimal

import pytest

from harness.base import jsonutil
from harness.operations.classify import ClassifierConfig
from harness.operations.identity import operation_id, strip_key_fields

KEYS = ClassifierConfig().normalised_key_fields


def op(args, tool="create_booking"):
    return operation_id(tool, args, KEYS)


def test_k2_object_key_order_does_not_change_the_operation():  # K2
    assert op({"a": 1, "b": {"x": 1, "y": 2}}) == op({"b": {"y": 2, "x": 1}, "a": 1})


def test_k2_key_fields_are_not_part_of_the_operation():  # K2
    assert op({"a": 1, "idempotency_key": "k1"}) == op({"a": 1, "Idempotency-Key": "k2"})
    assert op({"a": 1, "idempotency_key": "k1"}) == op({"a": 1})


def test_k2_string_and_number_are_different_operations():  # K2 (literal comparison)
    assert op({"amount": "12"}) != op({"amount": 12})


def test_k2_big_integers_stay_exact_beyond_2_pow_53():  # K2
    a = jsonutil.loads('{"n": 9007199254740993}')
    b = jsonutil.loads('{"n": 9007199254740992}')
    assert a["n"] == 9007199254740993
    assert op(a) != op(b)


def test_e6_numbers_compare_by_value_though_the_canonical_text_keeps_them_as_sent():  # E6 K2
    assert op(jsonutil.loads('{"x": 1.50}')) == op(jsonutil.loads('{"x": 1.5}'))
    assert jsonutil.canonical(jsonutil.loads('{"x": 1.50}')) == '{"x":1.50}'


def test_k2_the_tool_is_part_of_the_operation():  # K2
    assert op({"a": 1}, "create_a") != op({"a": 1}, "create_b")


def test_k2_array_order_matters_for_identity():  # K2 (J9 handles near-misses separately)
    assert op({"a": [1, 2]}) != op({"a": [2, 1]})


def test_k1_version_1_logs_strip_only_top_level_key_fields():  # K1 as logs of version 1 read
    args = {"meta": {"idempotency_key": "k"}, "idempotency_key": "top"}
    assert strip_key_fields(args, KEYS) == {"meta": {"idempotency_key": "k"}}


def test_k5_key_fields_are_not_part_of_the_operation_at_any_depth():  # K5
    assert op({"a": 1, "options": {"X-Idempotency-Key": "k1"}}) == op({"a": 1, "options": {}})
    assert op({"a": [{"client_token": "t1"}]}) == op({"a": [{"ClientToken": "t2"}]})
    assert op({"a": 1, "request_id": "r1"}) != op({"a": 1, "request_id": "r2"})  # not a key


def test_canonical_form_has_sorted_keys_and_no_whitespace():  # K2
    assert jsonutil.canonical({"b": [1, {"d": None, "c": True}], "a": "ü"}) == (
        '{"a":"ü","b":[1,{"c":true,"d":null}]}'
    )


def test_x7_deep_nesting_canonicalises_without_recursion():  # X7
    deep = current = []
    for _ in range(100_000):
        nxt = []
        current.append(nxt)
        current = nxt
    text = jsonutil.canonical({"a": deep})
    assert text.startswith('{"a":[[[') and len(text) == 2 * 100_001 + 6
    assert op({"a": deep}) == op({"a": deep})


def test_x7_parsing_too_deep_json_raises_a_clear_error():  # X7
    with pytest.raises(jsonutil.TooDeep):
        jsonutil.loads("[" * 100_000 + "]" * 100_000)


def test_json_dumps_writes_decimals_as_literals():
    assert jsonutil.dumps({"x": Decimal("1E+3"), "y": Decimal("0.10")}) == '{"x":1E+3,"y":0.10}'
    assert jsonutil.loads(jsonutil.dumps({"x": Decimal("1E+3")})) == {"x": Decimal("1E+3")}


def test_depth_counts_nesting_and_stops_past_the_limit():
    assert jsonutil.depth({"a": [1, {"b": 2}]}) == 3
    assert jsonutil.depth(5) == 0
    assert jsonutil.depth([[[[[]]]]], limit=2) == 3
