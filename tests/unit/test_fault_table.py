"""The fault tables of the docs are generated from the registry (H2): adding a fault touches
its class and its tests; `make docs` writes the tables, and this test says when it is due."""

import importlib.util
from pathlib import Path

import pytest

from harness.faults import FAULTS, fault_table_markdown

ROOT = Path(__file__).resolve().parents[2]


def _updater():
    spec = importlib.util.spec_from_file_location("update_tables", ROOT / "docs/update_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


UPDATER = _updater()


@pytest.mark.parametrize("name", UPDATER.FILES)
def test_h2_fault_table_in_docs_is_the_registrys(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    assert text.count(UPDATER.BEGIN) == 1 and text.count(UPDATER.END) == 1, (
        f"{name} needs one {UPDATER.BEGIN} ... {UPDATER.END} block"
    )
    assert UPDATER.rewrite(text, fault_table_markdown()) == text, (
        f"the fault table in {name} differs from the registry (harness/faults/): run `make docs`"
    )


def test_h2_fault_table_has_a_row_per_registered_fault():
    rows = fault_table_markdown().splitlines()[2:]
    assert [row.split("**")[1] for row in rows] == list(FAULTS)


def test_rewrite_replaces_only_the_block():
    text = f"a\n{UPDATER.BEGIN}\nold\n{UPDATER.END}\nb\n"
    assert UPDATER.rewrite(text, "new\n") == f"a\n{UPDATER.BEGIN}\nnew\n{UPDATER.END}\nb\n"
    with pytest.raises(ValueError):
        UPDATER.rewrite("no block", "new\n")
