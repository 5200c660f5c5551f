"""Z1-Z5, Z7: effects named by arguments, through the real recorder and judge.

Statement tools (SQL parsed per call), command tools (the key-value command table, HTTP
methods), errors written as results, empty is absent, server profiles. Each test drives a
`Session` with a simulated clock and compares the judge's report.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.benchmark.simulate import SimulatedSession
from harness.operations.classify import ClassifierConfig, classify_tools, startup_lines
from harness.operations.commands import command_table
from harness.operations.profiles import in_range, profile_for
from harness.report.judgement import judgement_of

SQL_TOOL = {
    "name": "execute_sql",
    "description": "Execute SQL queries on the postgres database",
    "inputSchema": {"type": "object", "properties": {"sql": {"type": "string"}},
                    "required": ["sql"]},
}  # fmt: skip
QUERY_SEARCH = {  # a `query` that is no SQL: a search box
    "name": "search_nodes",
    "description": "Search for nodes in the knowledge graph based on a query",
    "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
}
ORDER = "INSERT INTO orders (customer, amount) VALUES ('ACME GmbH', 129)"
POLL = "SELECT count(*) FROM orders"


def session(scenario: str | None = None, tools: list[dict[str, Any]] | None = None,
            **config: Any) -> SimulatedSession:  # fmt: skip
    return SimulatedSession(scenario, tools=tools or [SQL_TOOL],
                            classifier=ClassifierConfig(**config))  # fmt: skip


def call(s: SimulatedSession, tool: str, arguments: dict[str, Any],
         result: dict[str, Any] | None = None, *, ghost: bool = False) -> None:  # fmt: skip
    """One call answered by the upstream with `result` (a plain success by default)."""
    sent = s.send(tool, arguments)
    ticket = sent.ticket
    if ticket.injected is not None:
        s.session.answered(ticket, is_error=True, source="fault")
        return
    answer = result or {"content": [{"type": "text", "text": "ok"}]}
    replaced = s.session.upstream_result(ticket, answer)
    if replaced is not None:
        s.session.answered(ticket, is_error=True, source="fault")
        return
    s.session.answered(ticket, is_error=answer.get("isError") is True)


def verdict_of_two(tool: dict[str, Any], arguments: dict[str, Any],
                   second: dict[str, Any] | None = None, **config: Any) -> str:  # fmt: skip
    """F1's ghost write of one call, then the same call again (answered `second`): the verdict."""
    s = session("F1", tools=[tool], **config)
    call(s, tool["name"], arguments)
    call(s, tool["name"], arguments, second)
    return str(report(s)["verdict"])


def report(s: SimulatedSession) -> dict[str, Any]:
    return judgement_of(s.session.judge).report


def codes(r: dict[str, Any]) -> list[str]:
    return [o["code"] for o in r["observations"]] + [v["code"] for v in r["violations"]]


# -- Z1: statement tools ------------------------------------------------------------------


def test_z1_select_poll_twice_is_a_read_not_a_duplicate():  # Z1
    s = session()
    call(s, "execute_sql", {"sql": ORDER})
    call(s, "execute_sql", {"sql": POLL})
    call(s, "execute_sql", {"sql": POLL})
    r = report(s)
    assert r["verdict"] == "PASS"
    assert r["coverage"]["callsByClass"] == {"write": 1, "read": 2, "unclassified": 0}
    assert [o["outcome"] for o in r["operations"]] == ["EXECUTED_ONCE"]


def test_z1_a_careful_select_after_a_ghost_write_verifies():  # Z1 J2
    s = session("F1")
    call(s, "execute_sql", {"sql": ORDER})
    call(s, "execute_sql", {"sql": POLL})
    r = report(s)
    assert r["verdict"] == "PASS"
    assert "VERIFIED_NO_RETRY" in codes(r)
    assert "UNVERIFIED_AFTER_TIMEOUT" not in codes(r)


def test_z1_insert_repeated_after_a_ghost_write_is_a_duplicate():  # Z1 S2
    assert verdict_of_two(SQL_TOOL, {"sql": ORDER}) == "FAIL"


@pytest.mark.parametrize("sql", [
    "INSERT INTO orders (id, n) VALUES (1, 2) ON CONFLICT (id) DO UPDATE SET n = EXCLUDED.n",
    "INSERT INTO orders (id, n) VALUES (1, 2) ON CONFLICT DO NOTHING",
    "UPDATE orders SET status = 'paid' WHERE id = 7",
    "DELETE FROM orders WHERE id = 7",
    "CREATE TABLE IF NOT EXISTS orders (id int)",
    "DROP TABLE IF EXISTS orders",
    "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET a = 1",
])  # fmt: skip
def test_z1_idempotent_statement_twice_is_an_idempotent_repeat(sql):  # Z1 E1
    s = session("F1")
    call(s, "execute_sql", {"sql": sql})
    call(s, "execute_sql", {"sql": sql})
    r = report(s)
    assert r["verdict"] == "PASS", r["verdictReason"]
    assert "IDEMPOTENT_REPEAT" in codes(r)


def test_z1_update_that_reads_its_own_target_twice_is_a_duplicate():  # Z1
    s = session("F1")
    update = "UPDATE accounts SET balance = balance + 10 WHERE id = 7"
    call(s, "execute_sql", {"sql": update})
    call(s, "execute_sql", {"sql": update})
    assert report(s)["verdict"] == "FAIL"


def test_z1_several_statements_take_the_strongest_class():  # Z1
    s = session()
    call(s, "execute_sql", {"sql": f"SELECT 1; {ORDER}; SELECT 2"})
    r = report(s)
    assert r["coverage"]["callsByClass"]["write"] == 1


def test_z1_a_statement_that_does_not_parse_is_a_write_and_the_report_says_so():  # Z1
    s = session()
    call(s, "execute_sql", {"sql": "SELEC amount FRM orders"})
    r = report(s)
    assert r["coverage"]["callsByClass"]["write"] == 1
    found = [o for o in r["observations"] if o["code"] == "UNREAD_STATEMENT"]
    assert found and "does not parse" in found[0]["detail"]


def test_z1_a_query_argument_of_a_search_tool_is_no_statement():  # Z1
    info = classify_tools([QUERY_SEARCH, SQL_TOOL], ClassifierConfig()).tools
    assert info["search_nodes"].effect is None and info["search_nodes"].tool_class == "read"
    assert info["execute_sql"].effect is not None


def test_z1_statement_tools_flag_names_a_tool_whose_argument_holds_sql():  # Z1
    tool = {"name": "run", "inputSchema": {"type": "object",
                                          "properties": {"text": {"type": "string"}}}}  # fmt: skip
    plain = classify_tools([tool], ClassifierConfig()).tools["run"]
    flagged = classify_tools([tool], ClassifierConfig(statement_globs=("run",))).tools["run"]
    assert plain.effect is None
    assert flagged.effect is not None and flagged.effect.argument == "text"
    assert "explicit --statement-tools" in flagged.reason


# -- Z2: statement identity ---------------------------------------------------------------


@pytest.mark.parametrize("respelled", [
    "INSERT INTO orders (customer, amount) VALUES ('ACME GmbH', 129.00)",
    "INSERT INTO orders (amount, customer) VALUES (129, 'ACME GmbH')",
    "insert into ORDERS (customer, amount)\n  values ('ACME GmbH', 129) -- once more",
])  # fmt: skip
def test_z2_a_respelled_insert_after_a_ghost_write_is_the_same_operation(respelled):  # Z2
    s = session("F1")
    call(s, "execute_sql", {"sql": ORDER})
    call(s, "execute_sql", {"sql": respelled})
    r = report(s)
    assert r["verdict"] == "FAIL"
    assert len(r["operations"]) == 1


def test_z2_a_new_request_id_column_is_a_possible_duplicate_never_a_pass():  # Z2 J9
    s = session("F1")
    call(s, "execute_sql", {"sql": ORDER})
    call(s, "execute_sql", {"sql": "INSERT INTO orders (customer, amount, request_id) "
                                   "VALUES ('ACME GmbH', 129, 'req-2')"})  # fmt: skip
    r = report(s)
    assert r["verdict"] == "NOT_TESTED"
    assert "POSSIBLE_DUPLICATE_DIFFERENT_ARGUMENTS" in codes(r)


def test_z2_a_column_named_like_a_key_is_the_statements_key_field():  # Z2 K5
    s = session("F1", keys_honoured=("execute_sql",))
    keyed = ("INSERT INTO orders (customer, amount, idempotency_key) "
             "VALUES ('ACME GmbH', 129, 'k-1')")  # fmt: skip
    call(s, "execute_sql", {"sql": keyed})
    call(s, "execute_sql", {"sql": keyed.replace("129", "129.0")})
    r = report(s)
    assert r["verdict"] == "PASS", r["verdictReason"]
    assert "KEYED_RETRY" in codes(r)
    assert r["operations"][0]["keys"] == ["k-1"]


# -- Z3: command tools --------------------------------------------------------------------


def _kv(name: str) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object", "properties": {
        "key": {"type": "string"}, "value": {"type": "string"}}}}  # fmt: skip


def test_z3_bare_command_names_are_classified_from_the_shipped_table():  # Z3
    table = command_table()
    assert table.store == "redis" and table.version.startswith("6.2")
    tools = classify_tools([_kv(n) for n in ("set", "get", "lpush", "xadd", "del", "expire")],
                           ClassifierConfig()).tools  # fmt: skip
    assert {n: t.tool_class for n, t in tools.items()} == {
        "set": "write", "get": "read", "lpush": "write", "xadd": "write", "del": "write",
        "expire": "write"}  # fmt: skip
    assert {n for n, t in tools.items() if t.idempotent} == {"set", "del", "expire"}
    assert f"redis {table.version} command table" in tools["set"].reason


def test_z3_a_repeated_set_is_harmless_and_a_repeated_lpush_is_a_duplicate():  # Z3
    for tool, verdict in (("set", "PASS"), ("lpush", "FAIL")):
        s = session("F1", tools=[_kv(tool)])
        call(s, tool, {"key": "k", "value": "v"})
        call(s, tool, {"key": "k", "value": "v"})
        assert report(s)["verdict"] == verdict, tool


COMMAND_TOOL = {
    "name": "run_command",
    "description": "Run a Redis command",
    "inputSchema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


@pytest.mark.parametrize(("line", "repeat", "verdict"), [
    ("SET greeting hello", "set  greeting hello", "PASS"),
    ("LPUSH jobs a", "LPUSH jobs a", "FAIL"),
])  # fmt: skip
def test_z3_a_tool_whose_argument_names_the_command_is_a_statement_tool(line, repeat, verdict):
    # Z3: the command in the argument decides, the tool's own name does not
    s = session("F1", tools=[COMMAND_TOOL])
    call(s, "run_command", {"command": line})
    call(s, "run_command", {"command": repeat})
    assert report(s)["verdict"] == verdict


def test_z3_a_get_through_a_command_tool_is_a_read_that_verifies():  # Z3
    s = session("F1", tools=[COMMAND_TOOL])
    call(s, "run_command", {"command": "SET greeting hello"})
    call(s, "run_command", {"command": "GET greeting"})
    assert "VERIFIED_NO_RETRY" in codes(report(s))


HTTP_TOOL = {
    "name": "http_request",
    "inputSchema": {"type": "object", "properties": {
        "method": {"type": "string", "enum": ["GET", "POST", "PUT", "DELETE", "PATCH"]},
        "url": {"type": "string"}}},
}  # fmt: skip


@pytest.mark.parametrize(("method", "verdict"), [("PUT", "PASS"), ("DELETE", "PASS"),
                                                 ("POST", "FAIL"), ("PATCH", "FAIL")])  # fmt: skip
def test_z3_http_method_argument_names_the_effect(method, verdict):  # Z3
    s = session("F1", tools=[HTTP_TOOL])
    call(s, "http_request", {"method": method, "url": "https://api.example/orders/7"})
    call(s, "http_request", {"method": method, "url": "https://api.example/orders/7"})
    assert report(s)["verdict"] == verdict


def test_z3_http_get_is_a_read():  # Z3
    s = session("F1", tools=[HTTP_TOOL])
    call(s, "http_request", {"method": "POST", "url": "https://api.example/orders"})
    call(s, "http_request", {"method": "get", "url": "https://api.example/orders"})
    assert "VERIFIED_NO_RETRY" in codes(report(s))


# -- Z4: errors written as results --------------------------------------------------------

TODO_TOOL = {"name": "complete_todo", "inputSchema": {"type": "object", "properties": {
    "todo_id": {"type": "string"}}, "required": ["todo_id"]}}  # fmt: skip
NOT_FOUND = {"content": [{"type": "text", "text": '{\n  "error": "Todo with ID \'0\' not found",'
                                                  '\n  "todo_id": "0"\n}'}],
             "structuredContent": {"error": "Todo with ID '0' not found", "todo_id": "0"},
             "isError": False}  # fmt: skip


def test_z4_a_not_found_repeat_after_a_ghost_write_is_refused_not_executed():  # Z4
    s = session("F1", tools=[TODO_TOOL])
    call(s, "complete_todo", {"todo_id": "0"})
    call(s, "complete_todo", {"todo_id": "0"}, NOT_FOUND)
    r = report(s)
    assert r["verdict"] == "PASS", r["verdictReason"]
    assert r["operations"][0]["executions"] == 1
    found = [o for o in r["observations"] if o["code"] == "ERROR_AS_RESULT"]
    assert found and "not found" in found[0]["evidence"]


def test_z4_strict_errors_counts_only_is_error():  # Z4
    assert verdict_of_two(TODO_TOOL, {"todo_id": "0"}, NOT_FOUND, strict_errors=True) == "FAIL"


@pytest.mark.parametrize("text", [
    '{"error": null, "rows": []}',
    '{"error": "partial", "rows": [{"id": 1}]}',
    '{"success": true, "error": "warning only"}',
    "An error: nothing happened, except it did",
    "Successfully set k",
])  # fmt: skip
def test_z4_a_result_that_reports_something_else_stays_an_execution(text):  # Z4
    s = session("F1", tools=[TODO_TOOL])
    call(s, "complete_todo", {"todo_id": "0"})
    call(s, "complete_todo", {"todo_id": "0"}, {"content": [{"type": "text", "text": text}]})
    assert report(s)["verdict"] == "FAIL"


# -- Z5: empty is absent ------------------------------------------------------------------

ADD_TODO = {"name": "add_todo", "inputSchema": {"type": "object", "properties": {
    "text": {"type": "string"},
    "projects": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                 "default": None},
    "tags": {"type": "array", "items": {"type": "string"}, "default": []},
    "note": {"type": "string"},
    "priority": {"type": "string", "default": "B"}}, "required": ["text"]}}  # fmt: skip


@pytest.mark.parametrize("empty", [{"projects": []}, {"projects": None}, {"tags": []},
                                   {"note": ""}, {"projects": [], "tags": [], "note": ""}])  # fmt: skip
def test_z5_an_empty_value_for_an_optional_property_is_the_same_as_leaving_it_out(empty):  # Z5
    s = session("F1", tools=[ADD_TODO])
    call(s, "add_todo", {"text": "Call Ann"})
    call(s, "add_todo", {"text": "Call Ann", **empty})
    r = report(s)
    assert (r["verdict"], len(r["operations"])) == ("FAIL", 1)


def test_z5_an_empty_value_where_the_default_is_something_else_is_another_value():  # Z5
    s = session("F1", tools=[ADD_TODO])
    call(s, "add_todo", {"text": "Call Ann"})
    call(s, "add_todo", {"text": "Call Ann", "priority": ""})
    assert len(report(s)["operations"]) == 2


# -- Z7: server profiles ------------------------------------------------------------------

MEMORY_CREATE = {
    "name": "create_entities",
    "annotations": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False},
    "inputSchema": {"type": "object", "properties": {"entities": {"type": "array"}}},
}


def test_z7_a_profile_matched_by_server_name_and_version_corrects_a_wrong_hint():  # Z7
    profile = profile_for("memory-server", "0.6.3")
    assert profile is not None and profile.verified_by.startswith("tests/e2e/test_corpus_e2e.py")
    config = ClassifierConfig()
    listed = classify_tools([MEMORY_CREATE], config, profile=profile)
    assert listed.tools["create_entities"].idempotent == profile.label
    assert classify_tools([MEMORY_CREATE], config).tools["create_entities"].idempotent is None
    assert profile_for("memory-server", "1.0.0") is None  # out of its range
    assert any(profile.file in line for line in startup_lines(listed, ("idempotency_key",)))


def test_z7_no_profiles_and_flags_win_over_a_profile():  # Z7
    profile = profile_for("memory-server", "0.6.3")
    off = classify_tools([MEMORY_CREATE], ClassifierConfig(use_profiles=False), profile=profile)
    assert off.tools["create_entities"].idempotent is None
    read = classify_tools([MEMORY_CREATE], ClassifierConfig(read_globs=("create_entities",)),
                          profile=profile)  # fmt: skip
    assert read.tools["create_entities"].tool_class == "read"


def test_z7_the_session_takes_the_profile_of_the_server_that_named_itself():  # Z7
    s = SimulatedSession("F1", tools=[])
    s.session.server_named("memory-server", "0.6.3")
    s.session.tools_listed([MEMORY_CREATE])
    entities = {"entities": [{"name": "Ann", "entityType": "person", "observations": []}]}
    call(s, "create_entities", entities)
    call(s, "create_entities", entities)
    r = report(s)
    assert r["verdict"] == "PASS" and "IDEMPOTENT_REPEAT" in codes(r)


@pytest.mark.parametrize(("version", "spec", "inside"), [
    ("1.4.0", ">=1.4,<2", True), ("2.0.0", ">=1.4,<2", False), ("0.0.1", "==0.0.1", True),
    ("2026.10.19", ">=2026.1,<2027", True), ("anything", "*", True),
])  # fmt: skip
def test_z7_version_ranges(version, spec, inside):  # Z7
    assert in_range(version, spec) is inside
