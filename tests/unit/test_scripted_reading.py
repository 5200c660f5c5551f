"""R4, T2: how a scripted model reads a request to a real server: the tool the user names,
JSON values for arrays and objects, values that hold a colon (URLs, data URIs)."""

from __future__ import annotations

from typing import Any

from runner.models._task import extract_task, parse_pairs


def tool(name: str, description: str = "", **properties: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties,
                           "required": list(properties)}}}  # fmt: skip


def test_r4_a_value_may_hold_a_url_or_a_data_uri():
    pairs = parse_pairs("name: notes.gz, data: data:text/plain;base64,aGk=, url: http://x/y")
    assert (pairs["name"], pairs["data"], pairs["url"]) == (
        "notes.gz", "data:text/plain;base64,aGk=", "http://x/y",
    )  # fmt: skip


def test_t2_the_tool_the_user_names_is_the_write_whatever_its_verb():
    tools = [
        tool("git_status", repo_path={"type": "string"}),
        tool("git_commit", repo_path={"type": "string"}, message={"type": "string"}),
        tool("create_note", text={"type": "string"}),
    ]
    task = extract_task("Please run git_commit. repo_path: /r, message: Add notes", tools)
    assert task is not None and task.write.name == "git_commit"
    assert dict(task.write.arguments) == {"repo_path": "/r", "message": "Add notes"}
    # Without a name, a creating verb is still what it looks for.
    assert extract_task("Please note this. text: call Ann", tools).write.name == "create_note"


def test_t2_json_fills_arrays_and_objects_and_a_bare_word_a_list_of_strings():
    tools = [
        tool("create_entities", entities={"type": "array", "items": {"type": "object"}}),
        tool("add_files", files={"type": "array", "items": {"type": "string"}}),
    ]
    task = extract_task(
        'Please run create_entities. entities: [{"name": "Ann", "observations": ["tea"]}]', tools
    )
    assert task.write.arguments == {"entities": [{"name": "Ann", "observations": ["tea"]}]}
    task = extract_task("Please add the files. files: notes.txt", tools)
    assert (task.write.name, task.write.arguments) == ("add_files", {"files": ["notes.txt"]})
