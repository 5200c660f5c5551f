"""K4: operation identity completes arguments with the defaults the input schema declares."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.operations.classify import ClassifierConfig
from harness.operations.defaults import complete, defaults_plan
from harness.operations.identity import operation_id

KEYS = ClassifierConfig().normalised_key_fields

BOOKING = {
    "type": "object",
    "properties": {
        "guest": {"type": "string"},
        "date": {"type": "string"},
        "nights": {"type": "integer", "default": 1},
        "room_type": {"type": "string", "default": "standard"},
        "options": {
            "type": "object",
            "properties": {"breakfast": {"type": "boolean", "default": False}},
        },
        "extras": {
            "type": "array",
            "items": {"type": "object", "properties": {"qty": {"default": 1}}},
        },
    },
}


def op(arguments: Any, schema: Any = BOOKING) -> str:
    return operation_id("create_booking", arguments, KEYS, defaults_plan(schema))


def test_k4_an_omitted_property_equals_its_declared_default():  # K4: the issue's case
    base = {"guest": "Alice", "date": "2026-12-31", "nights": 2}
    assert op(base) == op({**base, "room_type": "standard"})
    assert op(base) != op({**base, "room_type": "suite"})


def test_k4_defaults_apply_inside_nested_objects_and_array_elements():  # K4
    base = {"guest": "A", "date": "d"}
    assert op({**base, "options": {}}) == op({**base, "options": {"breakfast": False}})
    assert op({**base, "extras": [{}]}) == op({**base, "extras": [{"qty": 1}]})


def test_k4_an_omitted_nested_object_is_not_made_up():  # K4: defaults apply where it exists
    base = {"guest": "A", "date": "d"}
    assert op(base) != op({**base, "options": {}})


def test_k4_missing_arguments_equal_an_empty_object():  # K4
    assert op(None, {}) == op({}, {})
    assert complete(None, None) == {}


def test_k4_local_refs_and_optional_models_are_followed():  # K4: pydantic's schema shapes
    schema = {
        "type": "object",
        "properties": {
            "payment": {"$ref": "#/$defs/Payment"},
            "shipping": {"anyOf": [{"$ref": "#/$defs/Shipping"}, {"type": "null"}]},
        },
        "$defs": {
            "Payment": {"type": "object", "properties": {"currency": {"default": "EUR"}}},
            "Shipping": {"type": "object", "properties": {"express": {"default": False}}},
        },
    }
    assert op({"payment": {}, "shipping": {}}, schema) == op(
        {"payment": {"currency": "EUR"}, "shipping": {"express": False}}, schema
    )


def test_k4_a_recursive_schema_ends():  # K4: a $ref cycle must not loop
    schema = {"$ref": "#/$defs/Node", "$defs": {"Node": {
        "type": "object",
        "properties": {"next": {"$ref": "#/$defs/Node"}, "n": {"default": 0}},
    }}}  # fmt: skip
    assert complete({"next": {"next": {}}}, defaults_plan(schema)) == {
        "next": {"next": {"n": 0}, "n": 0},
        "n": 0,
    }


# -- properties -------------------------------------------------------------------------

scalars = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.booleans(), st.none())
names = st.sampled_from(["a", "b", "c", "d"])


@st.composite
def schemas(draw: Any, depth: int = 0) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for name in draw(st.sets(names, max_size=4)):
        prop: dict[str, Any] = {}
        if draw(st.booleans()):
            prop["default"] = draw(scalars)
        if depth < 2 and draw(st.booleans()):
            prop.update(type="object", properties=draw(schemas(depth + 1))["properties"])
        properties[name] = prop
    return {"type": "object", "properties": properties}


def arguments_for(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    children: dict[str, Any] = {}
    for name, prop in schema["properties"].items():
        if "properties" in prop:
            children[name] = st.one_of(scalars, arguments_for(prop))
        else:
            children[name] = scalars
    return st.fixed_dictionaries({}, optional=children)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_k4_completing_is_idempotent_and_never_changes_what_was_sent(data):  # K4
    schema = data.draw(schemas())
    arguments = data.draw(arguments_for(schema))
    before = copy.deepcopy(arguments)
    plan = defaults_plan(schema)
    completed = complete(arguments, plan)
    assert arguments == before  # the input is never modified
    assert complete(completed, plan) == completed  # idempotent
    for name, value in arguments.items():  # what was sent stays (nested: completed inside)
        if value in (None, "", []) and name not in completed:
            continue  # Z5: an empty value of an optional property is no value
        if not isinstance(value, dict):
            assert completed[name] == value


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_k4_spelling_out_a_default_never_changes_the_operation(data):  # K4
    schema = data.draw(schemas())
    arguments = data.draw(arguments_for(schema))
    with_defaults = dict(arguments)
    for name, prop in schema["properties"].items():
        if "default" in prop and name not in arguments and data.draw(st.booleans()):
            with_defaults[name] = prop["default"]
    assert op(arguments, schema) == op(with_defaults, schema)
