"""E1-E4, E6: what a call is, table-driven: classification, key fields, defaults, identity.

Pure functions only (no judge, no process): the end-to-end tests against real servers are in
tests/e2e/test_effects_real_servers.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from harness.base import jsonutil
from harness.operations.classify import (
    IDEMPOTENT_BY_ANNOTATION,
    IDEMPOTENT_BY_FLAG,
    REASON_STATE_NAME,
    ClassifierConfig,
    classify_tool,
    classify_tools,
    key_of,
    startup_lines,
)
from harness.operations.defaults import complete, defaults_plan
from harness.operations.identity import digest_of, identity_arguments
from harness.operations.keys import ANYWHERE, find_keys, key_plan

DEFAULT = ClassifierConfig()
KEYS = DEFAULT.normalised_key_fields


def tool(name: str, annotations: dict[str, Any] | None = None, **schema: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name}
    if annotations is not None:
        entry["annotations"] = annotations
    if schema:
        entry["inputSchema"] = {"type": "object", **schema}
    return entry


# -- E1: idempotent tools --------------------------------------------------------------------

WRITE_IDEMPOTENT = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}


@pytest.mark.parametrize(
    ("annotations", "config", "expected"),
    [
        (WRITE_IDEMPOTENT, DEFAULT, IDEMPOTENT_BY_ANNOTATION),  # server-filesystem write_file
        ({"idempotentHint": True}, DEFAULT, IDEMPOTENT_BY_ANNOTATION),  # a write by its name
        ({"readOnlyHint": True, "idempotentHint": True}, DEFAULT, None),  # a read: not a write
        ({"readOnlyHint": False, "idempotentHint": False}, DEFAULT, None),
        (WRITE_IDEMPOTENT, ClassifierConfig(distrust_annotations=True), None),  # flag only
        (None, ClassifierConfig(idempotent_globs=("write_*",)), IDEMPOTENT_BY_FLAG),
        (
            WRITE_IDEMPOTENT,
            ClassifierConfig(idempotent_globs=("write_*",), distrust_annotations=True),
            IDEMPOTENT_BY_FLAG,
        ),
    ],
)
def test_e1_a_write_is_idempotent_by_its_hint_or_the_flag(annotations, config, expected):
    info = classify_tool(tool("write_file", annotations), config)
    assert info.idempotent == expected


def test_e1_the_flag_matches_namespaced_names_and_unlisted_tools():  # E1 C8 C10
    config = ClassifierConfig(idempotent_globs=("create_entities",))
    assert classify_tool(tool("memory__create_entities"), config).idempotent == IDEMPOTENT_BY_FLAG
    listed = classify_tools([], config)
    assert listed.get("create_entities").idempotent == IDEMPOTENT_BY_FLAG  # not listed: C10


def test_e1_reads_and_unclassified_tools_are_never_idempotent_writes():  # E1
    config = ClassifierConfig(idempotent_globs=("*",))
    assert classify_tool(tool("get_booking"), config).idempotent is None
    assert classify_tool(tool("sync_ledger"), config).idempotent is None


def test_e1_startup_lines_name_the_idempotent_writes_and_why():  # E1 C7
    classification = classify_tools([tool("write_file", WRITE_IDEMPOTENT)], DEFAULT)
    lines = startup_lines(classification, [])
    assert any("write_file (annotation idempotentHint=true)" in line for line in lines)


# -- E2: names and read-only hints -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        # a noun-like verb followed only by a state or listing noun: not a write (a read)
        ("order_status", "read"),
        ("deploy_status", "read"),
        ("deploy_logs", "read"),
        ("close_price", "read"),
        ("release_notes", "read"),
        ("store_hours", "read"),
        ("tag_list", "read"),
        ("orderStatus", "read"),
        ("shop__order_status", "read"),
        # a verb that only acts: still a write
        ("update_status", "write"),
        ("set_state", "write"),
        ("add_notes", "write"),
        ("delete_history", "write"),
        # more than the verb and the noun: the verb pattern decides as before
        ("order_status_update", "write"),
        ("close_price_alert", "write"),
        ("order_pizza", "write"),
        # E2: a bare write verb as the last segment of a namespaced name
        ("payments.create", "write"),
        ("orders/cancel", "write"),
        ("mcp__bank__transfer", "write"),
        ("payments.Create", "write"),
        ("payments.get", "read"),
        ("create", "unclassified"),  # not namespaced: the name alone says too little
        ("payments.status", "unclassified"),
    ],
)
def test_e2_state_names_and_bare_namespaced_verbs(name, cls):  # E2 C4 C8
    info = classify_tool(tool(name), DEFAULT)
    assert info.tool_class == cls
    if name in ("order_status", "tag_list"):
        assert info.reason == REASON_STATE_NAME


def test_e2_an_explicit_write_glob_still_wins_over_a_state_name():  # E2 C1
    config = ClassifierConfig(write_globs=("order_*",))
    assert classify_tool(tool("order_status"), config).tool_class == "write"


@pytest.mark.parametrize(
    ("name", "annotations", "cls", "conflict"),
    [
        ("order_status", {"readOnlyHint": True}, "read", False),  # the name agrees now
        ("deploy_status", {"readOnlyHint": True}, "read", False),
        ("create_report", {"readOnlyHint": True}, "unclassified", True),  # neither (E2)
        ("get_status", {"readOnlyHint": False}, "write", True),  # C9: stays a write
    ],
)
def test_e2_a_read_only_hint_on_a_writing_name_makes_the_tool_neither(
    name, annotations, cls, conflict
):  # E2 C9
    info = classify_tool(tool(name, annotations), DEFAULT)
    assert (info.tool_class, info.conflict is not None) == (cls, conflict)


# -- E3: key fields ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"amount": 5, "idempotency_key": None}, (None, None)),
        ({"amount": 5, "idempotency_key": ""}, (None, None)),
        ({"amount": 5, "idempotency_key": "k"}, ("idempotency_key", "k")),
        (
            {"idempotency_key": None, "options": {"client_token": "t"}},
            ("options.client_token", "t"),
        ),
        ({"amount": 5, "idempotency_key": 0}, ("idempotency_key", 0)),  # a value, if odd
    ],
)
def test_e3_a_null_or_empty_key_field_is_no_key(arguments, expected):  # E3
    assert key_of(arguments, KEYS) == expected


def test_e3_a_null_key_is_still_left_out_of_the_operation():  # E3 K2
    with_null = identity_arguments({"amount": 5, "idempotency_key": None}, KEYS)
    assert with_null == {"amount": 5} == identity_arguments({"amount": 5}, KEYS)


@pytest.mark.parametrize(
    "name", ["client_order_id", "clientOrderId", "newClientOrderId", "ClientOrderId"]
)
def test_e3_client_order_ids_are_keys_by_default(name):  # E3 K5
    assert key_of({"symbol": "BTC", name: "o-1"}, KEYS) == (name, "o-1")


ENV_SCHEMA = {
    "type": "object",
    "properties": {
        "service": {"type": "string"},
        "variables": {"type": "object", "additionalProperties": {"type": "string"}},
        "labels": {"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
        "idempotency_key": {"type": "string"},
        "options": {"$ref": "#/$defs/Options"},
        "orders": {"type": "array", "items": {"$ref": "#/$defs/Order"}},
        "metadata": {"type": "object"},  # says nothing about its names: K5 below it
    },
    "$defs": {
        "Options": {
            "type": "object",
            "properties": {"client_token": {"type": "string"}, "next": {"$ref": "#/$defs/Options"}},
        },
        "Order": {"type": "object", "properties": {
            "client_order_id": {"type": "string"},
            "tags": {"type": "object", "additionalProperties": {"type": "string"}}}},
    },
}  # fmt: skip


@pytest.mark.parametrize(
    ("arguments", "found"),
    [
        ({"service": "api", "variables": {"CLIENT_TOKEN": "abc"}}, []),  # data, not a key
        ({"labels": {"x-idempotency-key": "v"}}, []),  # patternProperties: data too
        ({"variables": {"idempotency_key": "x"}, "idempotency_key": "k"}, ["idempotency_key"]),
        ({"options": {"client_token": "t", "next": {"client_token": "u"}}},
         ["options.client_token", "options.next.client_token"]),
        ({"orders": [{"client_order_id": "a", "tags": {"dedup_key": "d"}}, {"x": 1}]},
         ["orders[0].client_order_id"]),
        ({"metadata": {"deep": {"dedup_key": "d"}}}, ["metadata.deep.dedup_key"]),
        # a name the agent added to a record is read by K5: the same operation with a key
        ({"service": "api", "Idempotency-Key": "k"}, ["Idempotency-Key"]),
    ],
)  # fmt: skip
def test_e3_key_like_names_in_free_form_maps_are_data(arguments, found):  # E3 K5
    plan = key_plan(ENV_SCHEMA, KEYS)
    assert [path for path, _ in find_keys(arguments, KEYS, plan)] == found


def test_e3_two_env_maps_that_differ_in_a_key_like_name_are_two_operations():  # E3: the issue
    info = classify_tool(tool("set_env_vars", **ENV_SCHEMA), DEFAULT)
    a = {"service": "api", "variables": {"CLIENT_TOKEN": "abc"}}
    b = {"service": "api", "variables": {"CLIENT_TOKEN": "xyz"}}

    def op(arguments: dict[str, Any]) -> str:
        return digest_of(
            info.name, identity_arguments(arguments, info.key_names, info.defaults, info.key_plan)
        )

    assert op(a) != op(b)
    # without a schema (a tool the upstream did not list) K5's rule stays: any depth
    unlisted = classify_tools([], DEFAULT).get("set_env_vars")
    assert unlisted.key_plan is ANYWHERE


@pytest.mark.parametrize(
    ("schema", "found"),
    [
        # a map on top: its own names are data; what a value holds is another object's names
        ({"type": "object", "additionalProperties": {"type": "string"}}, ["x.client_token"]),
        ({"type": "object", "properties": {}, "additionalProperties": True}, ["x.client_token"]),
        ({"type": "object", "properties": {"amount": {"type": "number"}}},
         ["idempotency_key", "x.client_token"]),  # a record: K5, declared or not
        ({"type": "object", "properties": {"x": {"type": "object", "additionalProperties": True}}},
         ["idempotency_key"]),  # x is a map
    ],
)  # fmt: skip
def test_e3_only_a_map_makes_names_data(schema, found):  # E3 K5
    arguments = {"idempotency_key": "k", "x": {"client_token": "t"}}
    assert [p for p, _ in find_keys(arguments, KEYS, key_plan(schema, KEYS))] == found


@pytest.mark.parametrize(
    "schema", [None, {}, {"type": "object"}, {"type": "object", "properties": {"a": {}}}]
)
def test_e3_without_a_map_the_any_depth_rule_stays(schema):  # E3 K5
    assert key_plan(schema, KEYS) is ANYWHERE


def test_e3_a_recursive_schema_ends_and_finds_keys_at_any_depth():  # E3
    schema = {"$ref": "#/$defs/Node", "$defs": {"Node": {
        "type": "object",
        "properties": {"child": {"$ref": "#/$defs/Node"}, "dedup_key": {"type": "string"},
                       "env": {"type": "object", "additionalProperties": {"type": "string"}}},
    }}}  # fmt: skip
    deep: dict[str, Any] = {"dedup_key": "bottom", "env": {"dedup_key": "data"}}
    for _ in range(200):
        deep = {"child": deep}
    found = find_keys(deep, KEYS, key_plan(schema, KEYS))
    assert [value for _, value in found] == ["bottom"]


# -- E4: defaults beside a $ref ------------------------------------------------------------------


def test_e4_a_default_beside_a_ref_is_a_default():  # E4: pydantic's enum with a default
    from enum import StrEnum

    class Room(StrEnum):
        standard = "standard"
        suite = "suite"

    class Booking(BaseModel):
        guest: str
        room: Room = Room.standard

    schema = Booking.model_json_schema()
    assert schema["properties"]["room"] == {"$ref": "#/$defs/Room", "default": "standard"}
    plan = defaults_plan(schema)
    assert complete({"guest": "Ann"}, plan) == {"guest": "Ann", "room": "standard"}
    a = identity_arguments({"guest": "Ann"}, KEYS, plan)
    b = identity_arguments({"guest": "Ann", "room": "standard"}, KEYS, plan)
    assert digest_of("book_room", a) == digest_of("book_room", b)
    c = identity_arguments({"guest": "Ann", "room": "suite"}, KEYS, plan)
    assert digest_of("book_room", a) != digest_of("book_room", c)


def test_e4_a_default_beside_a_ref_wins_over_one_in_the_referenced_schema():  # E4
    schema = {
        "type": "object",
        "properties": {"room": {"$ref": "#/$defs/Room", "default": "suite"}},
        "$defs": {"Room": {"type": "string", "default": "standard"}},
    }
    assert complete({}, defaults_plan(schema)) == {"room": "suite"}


# -- E6: numbers by value --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ('{"amount": 129.00}', '{"amount": 129}', True),
        ('{"amount": 129.0}', '{"amount": 129}', True),
        ('{"n": 1e3}', '{"n": 1000}', True),
        ('{"n": 1E+3}', '{"n": 1000.000}', True),
        ('{"x": 1.50}', '{"x": 1.5}', True),
        ('{"x": -0.0}', '{"x": 0}', True),
        ('{"x": [1.0, {"y": 2.50}]}', '{"x": [1, {"y": 2.5}]}', True),
        ('{"x": 0.1}', '{"x": 0.10000000000000001}', False),  # exact: no float rounding
        ('{"n": 9007199254740993}', '{"n": 9007199254740992}', False),  # big ints stay exact
        ('{"n": 9007199254740993.0}', '{"n": 9007199254740993}', True),
        ('{"n": 1e400}', '{"n": 1e401}', False),
        ('{"amount": "129"}', '{"amount": 129}', False),  # a string is no number (J9 may say)
        ('{"flag": true}', '{"flag": 1}', False),  # a boolean is no number
    ],
)
def test_e6_identity_compares_numbers_by_value_exactly(a, b, same):  # E6 K2
    def op(text: str) -> str:
        return digest_of("create_payment", identity_arguments(jsonutil.loads(text), KEYS))

    assert (op(a) == op(b)) is same


def test_e6_a_huge_exponent_is_not_written_out():  # E6: 1e999999999 costs nothing
    text = jsonutil.canonical(jsonutil.by_value(jsonutil.loads('{"n": 1e999999999}')))
    assert text == '{"n":1E+999999999}'


def test_e6_arguments_without_decimals_are_not_copied():  # E6: the common case costs a walk
    arguments = {"guest": "Ann", "nights": 2, "tags": ["a", {"b": 1}]}
    assert jsonutil.by_value(arguments) is arguments
