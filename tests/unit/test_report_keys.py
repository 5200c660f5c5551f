"""O1, O2: the runner reads a report only through its typed model (harness.report.read_report).

A camelCase report field spelt as a string in the runner (`report["verdictReason"]`,
`score.get("duplicateSafety")`, `{"toolClassification": ...}`) bypasses the model: a renamed
or retyped field would then fail at run time, far from the model. The names come from the
model's own aliases, so a field added to the model is covered at once. camelCase strings that
are not report fields stay allowed (MCP's `inputSchema`, `isError`, `structuredContent`; JSON
Schema's `anyOf`).
"""

from __future__ import annotations

import ast
from pathlib import Path

from harness.report import report_field_names

ROOT = Path(__file__).resolve().parents[2]
KEY_METHODS = {"get", "pop", "setdefault"}


def _camel(text: str) -> bool:
    return text[:1].islower() and any(c.isupper() for c in text)


def report_keys_by_string(source: str) -> list[tuple[int, str]]:
    """(line, name) of each camelCase report field used as a key by string: a subscript, a
    get/pop/setdefault argument, or a dict literal's key."""
    names = {n for n in report_field_names() if _camel(n)}
    found: list[tuple[int, str]] = []

    def check(node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            found.append((node.lineno, node.value))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript):
            check(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in KEY_METHODS and node.args:
                check(node.args[0])
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                check(key)
    return found


def test_o2_the_runner_reads_no_report_field_by_string():
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {name!r}"
        for path in sorted((ROOT / "runner").rglob("*.py"))
        for line, name in report_keys_by_string(path.read_text(encoding="utf-8"))
    ]
    assert not wrong, (
        "the runner reads report fields by string; read the report through "
        "harness.report.read_report and its attributes instead:\n" + "\n".join(wrong)
    )


def test_the_scan_finds_each_way_of_reading_a_field_by_string():
    source = """
report["verdictReason"]
score.get("duplicateSafety")
op.pop("failedAttempts", None)
{"toolClassification": []}
data.get("inputSchema")          # MCP's, not a report field
report["verdict"]                # not camelCase: not this rule's
"""
    assert report_keys_by_string(source) == [
        (2, "verdictReason"), (3, "duplicateSafety"), (4, "failedAttempts"),
        (5, "toolClassification"),
    ]  # fmt: skip
    assert {"verdictReason", "stateDiff", "retryAfterS"} <= report_field_names()
