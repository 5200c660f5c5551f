"""`make run`'s experiment end to end: experiments/example.yaml run offline, its HTML report
read in headless Chromium. The report is the project's showcase; every measure must be on it
and its tables must fit a desktop window (R7, M1-M3)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.support.once import copy_of
from tests.support.runkit import cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def example(
    tmp_path_factory: pytest.TempPathFactory, example_experiment: dict
) -> tuple[Path, Path]:
    """The example experiment's store (the session's one run of it) and its HTML report."""
    root = tmp_path_factory.mktemp("example")
    db, out = copy_of(example_experiment["db"], root), root / "example.html"
    made = cli(root, "report", "--db", str(db), "--experiment", "example", "-o", str(out))
    assert made.returncode == 0, made.stderr
    return db, out


def test_r7_example_tables_fit_a_1280_pixel_window_with_its_scrollbar(chromium, example):
    # The all-cells table was 8 px too wide here once: the last column (cost) was cut.
    _, html = example
    page = chromium.new_page(html)
    try:
        page.set_window(1280, 900)
        boxes = page.evaluate(
            """[...document.querySelectorAll('main > section > .table-wrap')].map(e =>
                 [e.querySelector('table').id, e.scrollWidth - e.clientWidth])"""
        )
    finally:
        page.close()
    assert {"before-after", "cells", "honesty"} <= {table for table, _ in boxes}
    assert [(table, px) for table, px in boxes if px > 0] == []


def test_m3_example_report_shows_pass_k_and_corrected_p_values_from_the_store(chromium, example):
    db, html = example
    with duckdb.connect(str(db), read_only=True) as con:
        safe = dict(
            con.execute(
                "SELECT cell_id, count(*) FILTER (WHERE NOT duplicate_found AND verdict <> 'FAIL' "
                "AND NOT coalesce(real_duplicate, false)) FROM runs GROUP BY ALL"
            ).fetchall()
        )
    page = chromium.new_page(html)
    try:
        shown = page.evaluate(
            """[...document.querySelectorAll('#cells td.pass-k')].map(td =>
                 [Number(td.dataset.safe), Number(td.dataset.n), td.dataset.passK ?? null])"""
        )
        tests = page.evaluate(
            """[...document.querySelectorAll('#before-after td[data-test]')].map(td =>
                 [td.dataset.test, Number(td.dataset.p), Number(td.dataset.pHolm)])"""
        )
        curves = page.evaluate("document.querySelectorAll('svg.curves g.curve').length")
        how = page.evaluate(
            "[...document.querySelectorAll('p.how, #honesty-section p.note')].length"
        )
    finally:
        page.close()
    assert sorted(s for s, _, _ in shown) == sorted(safe.values())
    assert all(n == 5 and p is not None for _, n, p in shown)  # 5 runs per cell >= k = 4
    assert len(tests) == 16 and {t for t, _, _ in tests} == {"fisher"}  # F1 only: no chaos
    assert all(holm >= p for _, p, holm in tests)
    # obeys-retry-request after "please try again": 5 of 5 before, 0 of 5 after, p = 2/252;
    # Holm over the six comparisons that can come out significant keeps it below 0.05.
    assert sum(1 for _, p, holm in tests if p < 0.01 and holm < 0.05) == 2
    assert curves == 32  # a line per cell
    assert how >= 5
