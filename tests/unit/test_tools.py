"""Tool classification (C1-C10) and key fields (K1, K5)."""

import pytest

from harness.base.errors import ConfigError
from harness.operations.classify import (
    ClassifierConfig,
    classify_tool,
    classify_tools,
    glob_match,
    key_of,
    normalise_field_name,
    snake_case,
    startup_lines,
)
from harness.operations.keys import find_key_field

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
        ("check_in_guest", "write", "default write pattern"),  # C8: no longer read as a read
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


def test_c3_annotation_decides_where_the_name_says_nothing():  # C1 order: annotations first
    assert classify_tool(tool("sync_ledger", {"readOnlyHint": True}), DEFAULT).tool_class == "read"
    info = classify_tool(tool("get_or_create", {"readOnlyHint": False}), DEFAULT)
    assert (info.tool_class, info.conflict) == ("write", None)  # no pattern: no conflict


@pytest.mark.parametrize(
    ("name", "annotations", "judged"),
    [
        # E2 (refines C9): a read-only hint on a writing name makes the tool neither
        ("create_report_view", {"readOnlyHint": True}, "unclassified"),
        ("get_or_create_customer", {"readOnlyHint": True}, "unclassified"),
        ("search_bookings", {"readOnlyHint": False}, "write"),  # the other direction: a write
    ],
)
def test_c9_e2_a_name_annotation_conflict_is_flagged_and_never_a_verification(
    name, annotations, judged
):
    # C9: never a verification, with a WARNING and a flag; E2: a read-only hint on a writing
    # name is not a write either (its repeats are no violation).
    info = classify_tool(tool(name, annotations), DEFAULT)
    assert info.tool_class == judged
    assert info.conflict is not None and "contradicts the name" in info.reason
    lines = startup_lines(classify_tools([tool(name, annotations)], DEFAULT), [])
    says = "judged as a write" if judged == "write" else "judged as neither"
    assert [line for line in lines if line.startswith(f'WARNING: tool "{name}"')] == [
        next(line for line in lines if says in line)
    ]


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


def test_c2_the_startup_error_comes_again_for_the_same_list_and_flags():  # C2
    # A listed tool's classification is kept for the next session with the same flags (issue
    # 24); a list the flags refuse is refused every time, nothing of it kept.
    config = ClassifierConfig(write_globs=("*_booking",), read_globs=("get_*",))
    for _ in range(2):
        with pytest.raises(ConfigError, match='"get_booking"'):
            classify_tools([tool("get_booking")], config)


def test_a_kept_classification_is_the_one_the_tool_and_flags_give():
    listed = [
        tool("create_booking", properties={"idempotency_key": {"type": "string"}}),
        tool("get_booking", {"readOnlyHint": True}),
        tool("frobnicate"),
    ]
    for config in (DEFAULT, ClassifierConfig(write_globs=("frob*",)), DEFAULT):
        first, again = classify_tools(listed, config), classify_tools(listed, config)
        fresh = {t["name"]: classify_tool(t, config) for t in listed}
        assert first.tools == again.tools == fresh
        assert [first.tools[n].key_plan for n in fresh] == [fresh[n].key_plan for n in fresh]
    changed = [tool("create_booking", {"readOnlyHint": True})]  # same name, other listing
    assert classify_tools(changed, DEFAULT).tools["create_booking"].tool_class == "unclassified"


@pytest.mark.parametrize(
    ("config", "name", "cls", "reason"),
    [
        (ClassifierConfig(write_globs=("*",)), "invented_tool", "write", "explicit --write-tools"),
        (DEFAULT, "create_refund", "write", "default write pattern"),
        (DEFAULT, "get_refund", "read", "read prefix"),
        (DEFAULT, "frobnicate", "unclassified", "no annotation, no pattern match"),
    ],
)
def test_c10_a_tool_the_upstream_did_not_list_is_classified_by_flags_and_names(
    config, name, cls, reason
):  # C10 (replaces C6)
    classification = classify_tools([tool("create_booking")], config)
    info = classification.get(name)
    assert (info.tool_class, info.listed) == (cls, False)
    assert info.reason == f"{reason}; not listed by the upstream"
    assert classification.might_exist(name) is False  # the list is complete: S7 stays armed


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("mcp__stripe__create_refund", "write"),  # the example
        ("a__b__tool_get", "unclassified"),
        ("payments.process_payment", "write"),
        ("github/merge_pull_request", "write"),
        ("db.execute_sql", "write"),
        ("crm__upsert_record", "write"),
        ("slack/send_message", "write"),
        ("server.get_booking", "read"),
        ("mcp__fs__list_directory", "read"),
        ("get_or_create_customer", "write"),  # C8: a write, not a read by its first word
        ("find_or_create_user", "write"),
        ("set_status", "write"),
        ("edit_file", "write"),
        ("move_file", "write"),
        ("make_payment", "write"),
        ("publish_post", "write"),
        ("push_files", "write"),
        ("settle_invoice", "write"),
        ("settings_view", "unclassified"),  # set_* needs the whole word
        ("issues", "unclassified"),
    ],
)
def test_c8_namespaced_names_and_the_broad_write_verbs(name, cls):  # C8
    assert classify_tool(tool(name), DEFAULT).tool_class == cls


def test_c8_an_explicit_glob_also_matches_the_last_segment():  # C8 C2
    config = ClassifierConfig(read_globs=("sync_*",))
    assert classify_tool(tool("mcp__ledger__sync_all"), config).tool_class == "read"


@pytest.mark.parametrize(
    "name",
    [
        "idempotency_key", "Idempotency-Key", "idempotencyKey", "IDEMPOTENCY_KEY",
        "X-Idempotency-Key", "x_idempotency_key", "xIdempotencyKey",  # K5: the cases
    ],
)  # fmt: skip
def test_k1_k5_key_fields_match_ignoring_case_separators_and_an_x_prefix(name):  # K1 K5
    schema = {"type": "object", "properties": {"amount": {}, name: {}}}
    assert find_key_field(schema, DEFAULT.normalised_key_fields) == name
    assert key_of({name: "k"}, DEFAULT.normalised_key_fields) == (name, "k")


@pytest.mark.parametrize(
    "name",
    ["ClientToken", "client_token", "ClientRequestToken", "IdempotencyToken",
     "MessageDeduplicationId", "deduplication_id", "dedup_key"],
)  # fmt: skip
def test_k5_aws_and_deduplication_spellings_are_keys_by_default(name):  # K5
    assert key_of({"amount": 1, name: "t"}, DEFAULT.normalised_key_fields) == (name, "t")


@pytest.mark.parametrize("name", ["request_id", "X-Request-ID", "requestId", "id", "token"])
def test_k5_request_ids_are_not_keys_by_default(name):  # K5: they often name the resource
    assert key_of({name: "r"}, DEFAULT.normalised_key_fields) == (None, None)


def test_k5_key_fields_are_found_at_any_depth_in_arguments_and_schemas():  # K5
    keys = DEFAULT.normalised_key_fields
    assert key_of({"options": {"idempotency_key": "k"}}, keys) == ("options.idempotency_key", "k")
    assert key_of({"items": [{"a": 1}, {"clientToken": "t"}]}, keys) == (
        "items[1].clientToken",
        "t",
    )
    # the top level comes first
    assert key_of({"meta": {"client_token": "n"}, "idempotency_key": "t"}, keys)[1] == "t"
    schema = {
        "type": "object",
        "properties": {"options": {"$ref": "#/$defs/Options"}},
        "$defs": {"Options": {"type": "object", "properties": {"X-Idempotency-Key": {}}}},
    }
    assert find_key_field(schema, keys) == "options.X-Idempotency-Key"


def test_k1_k5_custom_key_fields_replace_the_default_and_default_brings_it_back():  # K1 K5
    config = ClassifierConfig(key_fields=("request_id", "client-token"))
    keys = config.normalised_key_fields
    assert key_of({"clientToken": "t"}, keys) == ("clientToken", "t")
    assert key_of({"request_id": "r"}, keys) == ("request_id", "r")
    assert key_of({"idempotency_key": "k"}, keys) == (None, None)
    both = ClassifierConfig(key_fields=("default", "txn_ref")).normalised_key_fields
    assert key_of({"idempotency_key": "k"}, both) == ("idempotency_key", "k")
    assert key_of({"txnRef": "r"}, both) == ("txnRef", "r")


def test_k5_per_tool_key_fields_apply_to_that_tool_only():  # K5: --key-fields TOOL:FIELD
    config = ClassifierConfig(key_fields=("default", "create_payment:reference", "book_*:ref"))
    spec = config.key_spec
    assert normalise_field_name("reference") in spec.for_tool("create_payment")
    assert normalise_field_name("reference") not in spec.for_tool("create_booking")
    assert normalise_field_name("ref") in spec.for_tool("book_room")
    assert normalise_field_name("ref") in spec.for_tool("mcp__hotel__book_room")  # C8 too
    info = classify_tool(tool("create_payment", properties={"reference": {}}), config)
    assert info.key_field == "reference"


@pytest.mark.parametrize("entry", [":x", "tool:", "a:"])
def test_k5_a_malformed_per_tool_entry_is_a_usage_error(entry):  # K5 X1
    from harness.base.errors import UsageError
    from harness.operations.keys import KeySpec

    with pytest.raises(UsageError, match="TOOL:FIELD"):
        KeySpec.parse([entry])


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
