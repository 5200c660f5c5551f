"""R10: every summary shows how many verdicts the upstream's real rows contradict.

A hand-made store with runs in each agreement state goes through the analysis, the terminal
summary, the Markdown and the HTML report; each must show the count, and list the runs that
disagree, so an experiment with a disagreement cannot pass unnoticed.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from runner.analysis import analyse
from runner.execute.terminal import summary_table
from runner.experiment.records import FindingRow, RunRecord
from runner.html import render_markdown, write_report
from runner.store import Store

T0 = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
WRONG = "FAIL DUPLICATE_EXECUTION, but no operation has more than one real row."


def run(
    i: int,
    arm: str,
    agreement: str | None,
    *,
    dup: bool = False,
    real: bool | None = None,
    verdict: str | None = None,
    upstream: str = "booking",
    **fields,
) -> RunRecord:
    """A run in a given agreement state; `real` defaults to what the harness found."""
    verdict = verdict or ("FAIL" if dup else "PASS")
    base = dict(
        run_id=f"run-{i:03d}", experiment="exp", cell_id=f"m/{arm}", repetition=i, model="m",
        prompt="p", patch_arm=arm, upstream=upstream, scenario="F1", conversation="single",
        status="ok", verdict=verdict, duplicate_found=dup,
        real_duplicate=dup if real is None and agreement != "not_checkable" else real,
        agreement=agreement, agreement_reason=f"reason {i}", started_at=T0, finished_at=T0,
        harness_version="0.1.0",
        findings=[FindingRow(kind="violation", code="DUPLICATE_EXECUTION")] if dup else [],
    )  # fmt: skip
    base.update(fields)
    return RunRecord(**base)


def runs_with_disagreements() -> list[RunRecord]:
    return [
        run(0, "none", "agrees", dup=True),
        run(1, "none", "agrees"),
        run(2, "none", "disagrees", dup=True, real=False, agreement_reason=WRONG),
        run(3, "none", "no_claim", verdict="NOT_TESTED", real=True),
        run(4, "auto", "agrees"),
        run(5, "auto", "disagrees", real=True, agreement_reason="PASS, but 2 rows."),
        run(6, "auto", "not_checkable", upstream="booking"),
        run(7, "auto", None, status="error", error="boom", verdict=None, duplicate_found=None),
    ]


def store_of(tmp_path: Path, records: list[RunRecord]) -> Path:
    path = tmp_path / "runs.duckdb"
    with Store.open(path) as store:
        store.save_runs(records)
    return path


@pytest.fixture
def bad_store(tmp_path: Path) -> Path:
    return store_of(tmp_path, runs_with_disagreements())


@pytest.fixture
def clean_store(tmp_path: Path) -> Path:
    return store_of(tmp_path, [r for r in runs_with_disagreements() if r.agreement != "disagrees"])


def test_r10_the_analysis_counts_each_agreement_state_and_lists_the_disagreeing_runs(bad_store):
    with Store.open(bad_store) as store:
        analysis = analyse(store)
    ov = analysis.overview
    assert ov.agreement == {
        "agrees": 3, "disagrees": 2, "no_claim": 1, "not_checkable": 1, "unknown": 0,
    }  # fmt: skip
    assert ov.disagreements == 2
    assert [(r["run_id"], r["agreement_reason"]) for r in ov.disagreeing] == [
        ("run-005", "PASS, but 2 rows."),
        ("run-002", WRONG),  # auto before none
    ]
    cells = {r["patch_arm"]: r for r in analysis.cells.iter_rows(named=True)}
    assert (cells["none"]["disagreements"], cells["none"]["checked"]) == (1, 3)
    assert (cells["auto"]["disagreements"], cells["auto"]["checked"]) == (1, 2)
    # A disagreeing run is always among the runs shown in full.
    with Store.open(bad_store) as store:
        shown = {d.run["run_id"] for d in analyse(store, max_detail_runs=2).details}
    assert shown == {"run-002", "run-005"}


def test_r10_the_before_after_table_carries_real_double_bookings_where_the_upstream_tells(
    bad_store,
):
    with Store.open(bad_store) as store:
        (row,) = analyse(store).before_after
    # Harness: runs 0 and 2 found a duplicate of the 4 unpatched; real rows: runs 0 and 3.
    assert (row.unpatched.k, row.unpatched.n) == (2, 4)
    assert (row.unpatched_real.k, row.unpatched_real.n) == (2, 4)
    auto = row.arms["auto"]
    assert (auto.count.k, auto.count.n) == (0, 3)
    assert (auto.real.k, auto.real.n) == (1, 2)  # run 6's upstream cannot tell


def test_r10_no_real_count_where_no_upstream_can_tell(tmp_path):
    records = [run(i, "none", "not_checkable", upstream="ext") for i in range(3)]
    with Store.open(store_of(tmp_path, records)) as store:
        analysis = analyse(store)
    (row,) = analysis.before_after
    assert row.unpatched_real is None
    assert "0 of 3 (0%) |" in render_markdown(analysis)
    assert "; real" not in render_markdown(analysis)


def test_r10_the_terminal_summary_warns_and_lists_every_disagreeing_run(bad_store):
    with Store.open(bad_store) as store:
        text = summary_table(store.load_runs())
    lines = text.splitlines()
    header = lines[0].split()
    assert header[-2:] == ["disagree", "cost"]
    warning = next(i for i, line in enumerate(lines) if line.startswith("WARNING"))
    assert lines[warning] == (
        "WARNING: 2 verdicts DISAGREE with the upstream's real rows; 3 agree, 1 NOT_TESTED "
        "claim nothing, 1 not checkable:"
    )
    assert lines[warning + 1].startswith("  run-005  m  booking / F1 / single / auto #5: PASS")
    assert lines[warning + 2].endswith(f"#2: {WRONG}")


def test_r10_the_terminal_summary_says_zero_disagreements_too(clean_store):
    with Store.open(clean_store) as store:
        text = summary_table(store.load_runs())
    assert text.splitlines()[-1] == (
        "Verdicts against the upstream's real rows: 0 disagree, 3 agree, 1 NOT_TESTED claim "
        "nothing, 1 not checkable."
    )


def test_r10_markdown_opens_with_the_disagreements_and_counts_them_per_cell(bad_store):
    with Store.open(bad_store) as store:
        text = render_markdown(analyse(store))
    head = text.split("#### Runs with double booking")[0]
    assert "> **WARNING: 2 verdicts disagree with the upstream's real rows**" in head
    escaped = WRONG.replace("_", "\\_")  # V6: stored text is escaped for Markdown
    assert f"> - `run-002` m, booking, F1, single, patch none #2: {escaped}" in head
    assert "2 of 4 (50%); real rows 2 of 4 |" in text  # before/after, unpatched
    cells = text.split("#### All cells")[1]
    assert "| **1 of 3** |" in cells and "| **1 of 2** |" in cells


def test_r10_markdown_says_zero_disagreements(clean_store):
    with Store.open(clean_store) as store:
        text = render_markdown(analyse(store))
    assert "**Verdicts against the upstream's real rows: 0 disagree**; 3 agree" in text
    assert "WARNING" not in text


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _html(db: Path, tmp_path: Path) -> tuple[str, list[tuple[str, dict[str, str | None]]]]:
    text = write_report(db, tmp_path / "report.html").read_text(encoding="utf-8")
    parser = _Tags()
    parser.feed(text)
    return text, parser.tags


def test_r10_html_puts_the_disagreements_first_and_links_each_run(bad_store, tmp_path):
    text, tags = _html(bad_store, tmp_path)
    alert = text.index('id="disagreement-alert"')
    assert alert < text.index('id="overview"')
    # the words are escaped as any text is (&#39;), and read as they are written
    assert "2 verdicts disagree with the upstream's real rows" in html.unescape(text)
    links = [a["href"] for t, a in tags if t == "a" and (a.get("href") or "").startswith("#run-")]
    assert links[:2] == ["#run-run-005", "#run-run-002"]
    (card,) = [a for t, a in tags if a.get("id") == "disagreements"]
    assert (card["data-n"], card["data-checked"]) == ("2", "5")
    per_cell = [a["data-disagreements"] for _t, a in tags if "data-disagreements" in a]
    assert per_cell == ["1", "1"]
    real = [(a["data-real-k"], a["data-real-n"]) for _t, a in tags if "data-real-k" in a]
    assert real == [("2", "4"), ("1", "2")]  # before/after: without patch, with patch
    states = [a["data-agreement"] for _t, a in tags if "data-agreement" in a]
    assert sorted(states) == ["", "agrees", "agrees", "agrees", "disagrees", "disagrees",
                              "no_claim", "not_checkable"]  # fmt: skip


def test_r10_html_without_disagreements_has_no_alert_but_still_says_zero(clean_store, tmp_path):
    text, tags = _html(clean_store, tmp_path)
    assert 'id="disagreement-alert"' not in text
    (card,) = [a for t, a in tags if a.get("id") == "disagreements"]
    assert card["data-n"] == "0"
    assert "0 disagree, 3 agree" in " ".join(text.split())
