"""Every rule id that the code, the tests and the benchmarks cite is a rule of docs/spec.md,
the project's rulebook: comments (`# J9`), docstrings ("... (S7)") and test names
(`test_..._j9_...`)."""

import ast
import io
import re
import tokenize
from collections import defaultdict
from pathlib import Path

from tests.support.paths import ROOT

SCANNED = ("harness", "runner", "tests", "bench")

# A rule of the rulebook: a list item that opens with its id in bold, `- **J9.** ...`.
RULE = re.compile(r"^- \*\*([A-Z]{1,2}[1-9]\d?)\.\*\*", re.M)
# A citation: one or two capital letters and a number without a leading zero (C3, J11, V14).
# Only ids whose letters are a section of the rulebook count: fault names (F1-F9) and AWS's
# EC2 are no citations, as there is no F or EC section; C0 controls and migrations (m001)
# are not read as ids, their numbers start with 0.
CITED = re.compile(r"\b([A-Z]{1,2})([1-9]\d?)\b")
NAME_PART = re.compile(r"^([a-z]{1,2})([1-9]\d?)$")  # `j9` in test_..._j9_...
# The codes of linter and type-checker pragmas (ruff's E501, B008) are no citations.
PRAGMA = re.compile(r"\b(?:noqa|type:\s*ignore|pragma)\b.*", re.I)


def rules() -> list[str]:
    return RULE.findall((ROOT / "docs/spec.md").read_text(encoding="utf-8"))


def _texts(source: str, tree: ast.Module) -> list[str]:
    """The comments and docstrings of one module."""
    texts = [
        PRAGMA.sub("", token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                texts.append(docstring)
    return texts


def _test_names(path: Path, tree: ast.Module) -> list[str]:
    """The names of the test module, its test functions and test classes."""
    names = [path.stem] if path.stem.startswith("test_") else []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name.lower().startswith("test"):
                names.append(node.name)
    return names


def citations(prefixes: set[str]) -> dict[str, set[str]]:
    """Every cited id whose letters are one of `prefixes`, with the files that cite it."""
    cited: dict[str, set[str]] = defaultdict(set)
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "node_modules" in path.parts:  # npm packages' own files (Python 2 among them)
                continue
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
            where = str(path.relative_to(ROOT))
            for text in _texts(source, tree):
                for match in CITED.finditer(text):
                    if match.group(1) in prefixes:
                        cited[match.group(0)].add(where)
            for name in _test_names(path, tree):
                for part in name.split("_"):
                    match = NAME_PART.match(part)
                    if match and match.group(1).upper() in prefixes:
                        cited[part.upper()].add(where)
    return cited


def test_every_cited_rule_id_is_a_rule_of_the_rulebook():
    known = set(rules())
    prefixes = {re.sub(r"\d", "", rule) for rule in known}
    cited = citations(prefixes)
    assert {"J9", "C10", "H2"} <= set(cited), "the scan found none of the usual citations"
    unknown = {rule: files for rule, files in cited.items() if rule not in known}
    assert not unknown, "cited but not a rule of docs/spec.md:\n" + "\n".join(
        f"  {rule}: {', '.join(sorted(files))}" for rule, files in sorted(unknown.items())
    )


def test_each_rule_is_defined_once():
    found = rules()
    assert len(found) > 100
    assert len(found) == len(set(found)), sorted({r for r in found if found.count(r) > 1})
