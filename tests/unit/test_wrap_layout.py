"""I1: wrap edits a JSON client configuration in its own layout: line endings, a byte order
mark, tabs, an entry without `args`; nothing outside the wrapped entries moves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.clients import unwrap_config, wrap_config
from harness.clients.jsonc import JsoncError, parse

SERVERS = {"a": {"command": "srv-a"}, "b": {"command": "srv-b", "args": ["--port", "1"]}}


def _round_trip(tmp_path: Path, text: str) -> str:
    path = tmp_path / "mcp.json"
    path.write_bytes(text.encode())
    wrap_config(path, scenarios=["F1"], report_dir=tmp_path / "r")
    wrapped = path.read_bytes().decode()
    unwrap_config(path)
    assert path.read_bytes() == text.encode()
    return wrapped


def test_i1_crlf_line_endings_stay_crlf(tmp_path: Path) -> None:
    text = json.dumps({"mcpServers": SERVERS}, indent=2).replace("\n", "\r\n") + "\r\n"
    wrapped = _round_trip(tmp_path, text)
    assert "\r\n" in wrapped and "\n" not in wrapped.replace("\r\n", "")
    assert parse(wrapped).plain()["mcpServers"]["a"]["args"][:3] == [
        "proxy", "--upstream-command", "srv-a",
    ]  # fmt: skip


def test_i1_an_entry_without_args_gets_them_in_its_own_indentation(tmp_path: Path) -> None:
    text = json.dumps({"mcpServers": SERVERS}, indent="\t") + "\n"
    wrapped = _round_trip(tmp_path, text)
    lines = wrapped.splitlines()
    at = lines.index('\t\t\t"args": [')
    assert lines[at - 1].startswith('\t\t\t"command": "') and lines[at - 1].endswith('",')
    assert lines[at + 1] == '\t\t\t\t"proxy",'


def test_i1_a_byte_order_mark_and_a_one_line_file_are_kept(tmp_path: Path) -> None:
    wrapped = _round_trip(tmp_path, "\ufeff" + json.dumps({"mcpServers": SERVERS}))
    assert wrapped.startswith("\ufeff{") and "\n" not in wrapped


@pytest.mark.parametrize(
    ("text", "where"),
    [("{", "line 1, column 2"), ('{"a": 1,\n "a": 2}', "line 2, column 2"),
     ('{"a": /* open', "line 1, column 7"), ("[1] 2", "line 1, column 5")],
)  # fmt: skip
def test_i1_text_that_is_not_json_names_its_line_and_column(text: str, where: str) -> None:
    with pytest.raises(JsoncError, match=where):
        parse(text)
