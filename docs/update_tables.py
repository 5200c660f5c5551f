"""Rewrite the generated blocks of the docs from the code: `make docs`.

The fault table (docs/proxy.md) comes from the fault registry, `FAULTS` in
harness/faults/registry.py, and stands between `<!-- fault-table:begin -->` and
`<!-- fault-table:end -->`. tests/unit/test_fault_table.py fails when a block differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's harness, not an installed one

from harness.faults import fault_table_markdown  # noqa: E402

BEGIN = "<!-- fault-table:begin -->"
END = "<!-- fault-table:end -->"
FILES = ("docs/proxy.md",)


def rewrite(text: str, table: str) -> str:
    """`text` with the one block between BEGIN and END replaced by `table`."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"expected one {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{table}{END}{tail}"


def main() -> int:
    table = fault_table_markdown()
    for name in FILES:
        path = ROOT / name
        text = path.read_text(encoding="utf-8")
        try:
            new = rewrite(text, table)
        except ValueError as error:
            print(f"{name}: {error}", file=sys.stderr)
            return 1
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"{name}: fault table rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
