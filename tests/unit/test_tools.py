"""Tool classification (C1-C7) and key fields (K1)."""

import pytest

from harness.errors import ConfigError
from harness.tools import (
    ClassifierConfig,
    classify_tool,
    classify_tools,
    find_key_field,
    glob_match,
    key_of,
    normalise_field_name,
    snake_case,
    startup_lines,
)

DEFAULT = ClassifierConfig()


def tool(name, annotations=None, properties=None):
    t = {"name": name, "inputSchema": {"type": "object", "properties": properties or {}}}
    if annotations is not None:
        t["annotations"] = annotations
    return t


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("create_*", "create_booking", True),
        ("create_*", "create_", True),
        ("create_*", "create", False),
        ("*_booking", "create_booking", True),
        ("*", "", True),
        ("a*b*c", "aXbYc", True),
        ("a*b*c", "acb", False),
        ("a*a", "a", False),  # head and tail may not overlap
        ("exact", "exact", True),
        ("exact", "Exact", False),  # C2: case-sensitive
        ("Create_*", "create_booking", False),
        ("**", "x", True),
        ("*ab*ab*", "xxabyyab", True),
        ("*ab*ab*", "xxab", False),
    ],
)
def test_c2_glob_matches_star_only_patterns(pattern, name, expected):  # C2
    assert glob_match(pattern, name) is expected


class CountingName(str):
    """A name that counts how often the matcher searches it."""

    calls = 0

    def find(self, *args):
        CountingName.calls += 1
        return super().find(*args)


def test_c2_glob_with_many_stars_searches_once_per_piece():  # C2: linear time, no backtracking
    pattern = "*a" * 200 + "*b"
    name = CountingName("a" * 100_000 + "c")
    CountingName.calls = 0
    assert glob_match(pattern, name) is False
    # one search per literal piece at most: the greedy matcher never goes back
    assert CountingName.calls <= 201


@pytest.mark.parametrize(
    ("name", "snake"),
    [
        ("createAppointment", "create_appointment"),
        ("getHTTPStatus", "get_http_status"),
        ("isOpen", "is_open"),
        ("create_booking", "create_booking"),
        ("send-mail", "send_mail"),
        ("URLFetch", "url_fetch"),
    ],
)
def test_c4_snake_case_splits_camel_words(name, snake):  # C4
    assert snake_case(name) == snake


@pytest.mark.parametrize(
    ("name", "cls", "reason"),
    [
        ("create_booking", "write", "default write pattern"),
        ("createAppointment", "write", "default write pattern"),  # C4 camelCase
        ("writeFile", "write", "default write pattern"),
        ("write_file", "write", "default write pattern"),
        ("pay_invoice", "write", "default write pattern"),
        ("issue_refund", "write", "default write pattern"),
        ("approve_request", "write", "default write pattern"),
        ("get_booking", "read", "read prefix"),
        ("getBooking", "read", "read prefix"),
        ("is_open", "read", "read prefix"),
        ("isOpen", "read", "read prefix"),
        ("has_room", "read", "read prefix"),
        ("list", "read", "read prefix"),
        ("check_in_guest", "read", "read prefix"),  # documented limit: a write read as read
        ("update_status_view", "write", "default write pattern"),  # documented limit
        ("sync_ledger", "unclassified", "no annotation, no pattern match"),
        ("issues", "unclassified", "no annotation, no pattern match"),  # 'is' is a whole word
        ("create", "unclassified", "no annotation, no pattern match"),
        ("listing_sync", "unclassified", "no annotation, no pattern match"),
    ],
)
def test_c4_c5_default_patterns_classify_by_name(name, cls, reason):  # C4 C5
    info = classify_tool(tool(name), DEFAULT)
    assert (info.tool_class, info.reason) == (cls, reason)


def test_c5_write_patterns_are_tried_before_read_prefixes():  # C5
    # "update_*" is a write pattern; nothing reads "update" as a read prefix, but a name that
    # matches both kinds must be a write: add_ and a read-looking rest.
    assert classify_tool(tool("add_get_handler"), DEFAULT).tool_class == "write"


@pytest.mark.parametrize(
    ("annotations", "cls", "reason"),
    [
        ({"readOnlyHint": True}, "read", "annotation readOnlyHint=true"),
        ({"readOnlyHint": False}, "write", "annotation readOnlyHint=false"),
        ({"destructiveHint": True}, "write", "annotation destructiveHint=true"),
        ({"readOnlyHint": True, "destructiveHint": True}, "read", "annotation readOnlyHint=true"),
        ({"title": "x"}, "unclassified", "no annotation, no pattern match"),
        ({"destructiveHint": False}, "unclassified", "no annotation, no pattern match"),
    ],
)
def test_c3_annotations_decide_before_name_patterns(annotations, cls, reason):  # C3
    info = classify_tool(tool("sync_ledger", annotations), DEFAULT)
    assert (info.tool_class, info.reason) == (cls, reason)


def test_c3_annotation_overrides_a_misleading_name():  # C1 order: annotations before patterns
    info = classify_tool(tool("get_or_create", {"readOnlyHint": False}), DEFAULT)
    assert info.tool_class == "write"
    info = classify_tool(tool("create_report_view", {"readOnlyHint": True}), DEFAULT)
    assert info.tool_class == "read"


def test_c1_explicit_flags_win_over_annotations():  # C1
    config = ClassifierConfig(write_globs=("get_*",), read_globs=("create_*",))
    assert classify_tool(tool("get_x", {"readOnlyHint": True}), config).reason == (
        "explicit --write-tools"
    )
    assert classify_tool(tool("create_x", {"readOnlyHint": False}), config).reason == (
        "explicit --read-tools"
    )


def test_c2_write_tools_replace_the_default_write_patterns():  # C2
    config = ClassifierConfig(write_globs=("do_*",))
    assert classify_tool(tool("do_thing"), config).tool_class == "write"
    # create_* is no longer a default write pattern
    assert classify_tool(tool("create_booking"), config).tool_class == "unclassified"
    # the read prefixes still apply
    assert classify_tool(tool("get_booking"), config).tool_class == "read"


def test_c2_read_tools_add_to_the_default_prefixes():  # C2
    config = ClassifierConfig(read_globs=("sync_*",))
    assert classify_tool(tool("sync_ledger"), config).tool_class == "read"
    assert classify_tool(tool("get_booking"), config).tool_class == "read"


def test_c2_a_tool_in_both_explicit_lists_is_a_startup_error_naming_it():  # C2
    config = ClassifierConfig(write_globs=("*_booking",), read_globs=("get_*",))
    with pytest.raises(ConfigError, match='"get_booking"'):
        classify_tools([tool("get_booking")], config)


def test_c6_a_tool_the_upstream_did_not_list_is_unclassified_even_if_it_matches():  # C6
    config = ClassifierConfig(write_globs=("*",))
    classification = classify_tools([tool("create_booking")], config)
    info = classification.get("invented_tool")
    assert info.tool_class == "unclassified"
    assert info.reason == "not listed by the upstream"


@pytest.mark.parametrize(
    "name", ["idempotency_key", "Idempotency-Key", "idempotencyKey", "IDEMPOTENCY_KEY"]
)
def test_k1_key_fields_match_ignoring_case_dash_and_underscore(name):  # K1
    assert normalise_field_name(name) == "idempotencykey"
    schema = {"type": "object", "properties": {"amount": {}, name: {}}}
    assert find_key_field(schema, DEFAULT.normalised_key_fields) == name


def test_k1_only_top_level_arguments_are_key_fields():  # K1
    keys = DEFAULT.normalised_key_fields
    assert key_of({"meta": {"idempotency_key": "k"}}, keys) == (None, None)
    assert key_of({"idempotencyKey": "k", "x": 1}, keys) == ("idempotencyKey", "k")


def test_k1_custom_key_fields_replace_the_default():  # K1
    config = ClassifierConfig(key_fields=("request_id", "client-token"))
    keys = config.normalised_key_fields
    assert key_of({"clientToken": "t"}, keys) == ("clientToken", "t")
    assert key_of({"idempotency_key": "k"}, keys) == (None, None)


def test_c7_startup_lines_name_class_reason_warnings_and_key_fields():  # C7
    classification = classify_tools(
        [
            tool("create_booking", properties={"idempotency_key": {}}),
            tool("get_booking"),
            tool("apply_discount", {"readOnlyHint": False}),
            tool("sync_ledger"),
        ],
        DEFAULT,
    )
    lines = startup_lines(classification, ["idempotency_key"])
    assert lines[0] == "Upstream tools (4):"
    assert "write" in lines[1] and "create_booking" in lines[1]
    assert lines[1].endswith("(default write pattern)")
    assert lines[3].endswith("(annotation readOnlyHint=false)")
    assert lines[4].endswith("(no annotation, no pattern match)")
    assert any(line.startswith('WARNING: tool "sync_ledger"') for line in lines)
    assert lines[-1] == "Tools with a key field [idempotency_key]: create_booking (idempotency_key)"
    assert classification.as_json()[0] == {
        "name": "create_booking",
        "class": "write",
        "reason": "default write pattern",
        "keyField": "idempotency_key",
    }
