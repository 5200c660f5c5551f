"""Q7: the user docs say things in plain words. A rule id of the rulebook (docs/spec.md) may
stand in README.md and docs/ (other than the rulebook and decisions.md, which are about the
rules) only as a trailing "(rule J9)" or "(rules V10-V12)": at the end of a sentence, a table
cell or a heading, never inside a sentence. Code (blocks and `spans`) and link targets are not
prose; fault names (F1-F9) are no rule ids."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import ROOT

USER_DOCS = [
    ROOT / "README.md",
    *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in ("spec.md", "decisions.md")),
]
_ID = r"[A-Z]{1,2}[1-9]\d?"
TRAILING = re.compile(rf"\(rules? {_ID}(?:(?:, | and |-){_ID})*\)")
# What may follow a trailing citation: the end of a sentence, clause, cell or paragraph.
ENDS = re.compile(r"\s*(?:[.;:|)]|$|\n\s*(?:\n|[-*|#>]|\d+\.))")


def _prose(text: str) -> str:
    """The text with code blocks, code spans and link targets blanked (lines kept)."""
    text = re.sub(r"^```.*?^```", lambda m: "\n" * m.group().count("\n"), text, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group()), text)
    return re.sub(r"\]\([^)\n]*\)", lambda m: "]" + " " * (len(m.group()) - 1), text)


def misplaced_ids(path: Path, known: set[str]) -> list[str]:
    """`FILE:LINE: ID` for every rule id not in a trailing "(rule ...)"."""
    prefixes = {re.sub(r"\d", "", rule) for rule in known}
    text = _prose(path.read_text(encoding="utf-8"))
    found = []
    for match in TRAILING.finditer(text):
        if not ENDS.match(text, match.end()):
            found.append((match.start(), match.group()))
    masked = TRAILING.sub(lambda m: " " * len(m.group()), text)
    for match in re.finditer(rf"\b({_ID})\b", masked):
        if re.sub(r"\d", "", match.group()) in prefixes:
            found.append((match.start(), match.group()))
    return [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, at) + 1}: {what}"
        for at, what in sorted(found)
    ]


def test_q7_rule_ids_in_the_user_docs_only_trail_a_sentence() -> None:
    rulebook = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    known = set(re.findall(rf"^- \*\*({_ID})\.\*\*", rulebook, re.M))
    assert len(known) > 100  # the rulebook's ids were found
    found = [line for path in USER_DOCS for line in misplaced_ids(path, known)]
    assert found == [], "say it in words; at most a trailing (rule J9):\n" + "\n".join(found)
