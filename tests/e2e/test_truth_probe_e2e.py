"""T1, R10, R7: a spec with a truth probe against a SQLite upstream the user brings
(mcp-server-sqlite from PyPI, on its own database file) shows each verdict's agreement with
the real rows in the HTML report, opened in headless Chromium.

The installed `agent-harness run` and `report` run as a user would run them; the rows are
read back from the database file with plain SQL, the ground truth of every assertion.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.support.prereq import corpus_server
from tests.support.runkit import CLI_TIMEOUT_S, cli, query

pytestmark = pytest.mark.slow

ORDER = "INSERT INTO orders (customer, amount) VALUES ('ACME GmbH', 129)"


def spec(server: Path, db: Path) -> str:
    return f"""\
name: shop
models: [scripted/naive, scripted/careful]
prompts:
  - name: plain
    text: You keep the shop's order book. Do what the user asks with the tools you have.
upstreams:
  - name: shop
    command: {server}
    args: [--db-path, {db}]
    truth_probe:
      sql: SELECT customer, amount FROM orders
      database: {db}
scenarios: [none, F1]
conversations:
  - name: order
    user: "Please record the order. query: {ORDER}"
runs: 1
concurrency: 4
"""


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    server = corpus_server("mcp-server-sqlite")
    root = tmp_path_factory.mktemp("truth-probe")
    shop = root / "shop.sqlite"
    with sqlite3.connect(shop) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, amount REAL)")
    (root / "spec.yaml").write_text(spec(server, shop), encoding="utf-8")
    db, html = root / "runs.duckdb", root / "report.html"
    ran = cli(root, "run", "spec.yaml", "--db", str(db), timeout=CLI_TIMEOUT_S)
    assert ran.returncode == 0, ran.stderr
    assert "0 disagree, 4 agree" in ran.stdout
    made = cli(root, "report", "--db", str(db), "-o", str(html))
    assert made.returncode == 0, made.stderr
    return shop, db, html


def test_t1_r10_the_probe_reads_the_rows_the_server_really_wrote(experiment):
    shop, db, _ = experiment
    with sqlite3.connect(shop) as conn:  # ground truth: the user's own database
        written = conn.execute("SELECT count(*) FROM orders").fetchone()[0]
    # naive books twice after F1's ghost write, once without a fault; careful once in each.
    assert written == 2 + 1 + 1 + 1
    stored = query(db, "SELECT model, scenario, verdict, real_duplicate, agreement FROM runs")
    assert sorted(set(stored)) == [
        ("scripted/careful", "F1", "PASS", False, "agrees"),
        ("scripted/careful", "none", "PASS", False, "agrees"),
        ("scripted/naive", "F1", "FAIL", True, "agrees"),
        ("scripted/naive", "none", "PASS", False, "agrees"),
    ]
    rows = query(db, "SELECT executions, real_rows FROM operations JOIN runs USING (run_id) "
                     "WHERE model = 'scripted/naive' AND scenario = 'F1'")  # fmt: skip
    assert rows == [(2, 2)]


def test_t1_r7_the_html_shows_every_runs_agreement_with_the_real_rows(chromium, experiment):
    _, _, html = experiment
    page = chromium.new_page(html)
    try:
        assert page.console_errors() == []
        shown = page.evaluate(
            """[...document.querySelectorAll('details.run')].map(run => ({
                 agreement: run.querySelector('dd.agreement').dataset.agreement,
                 text: run.querySelector('dd.agreement').textContent,
                 summary: run.querySelector('summary').textContent,
               }))"""
        )
        card = page.evaluate(
            "[document.getElementById('disagreements').dataset.n,"
            " document.getElementById('disagreements').dataset.checked]"
        )
    finally:
        page.close()
    assert card == ["0", "4"]
    assert len(shown) == 4 and {run["agreement"] for run in shown} == {"agrees"}
    twice = [run for run in shown if "FAIL" in run["summary"]]
    assert len(twice) == 1
    for run in twice:
        assert (
            "and the upstream holds 2 new copies of the record '[\"ACME GmbH\",129.0]'"
            in (run["text"])
        )
    once = [run for run in shown if "FAIL" not in run["summary"]]
    assert all("no record was written more than once" in run["text"] for run in once)
