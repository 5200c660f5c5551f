"""Markdown for a PR comment (R7): the before/after table and the per-cell table."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runner.analysis import analyse, fisher_exact
from runner.experiment.records import RunRecord
from runner.html import render_markdown
from runner.html.formatting import p_text
from runner.store import Store

T0 = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)


def run(i: int, model: str, arm: str, dup: bool, conversation: str = "retry") -> RunRecord:
    return RunRecord(
        run_id=f"r{i:03d}", experiment="nightly", cell_id=f"{model}/{arm}", repetition=i,
        model=model, prompt="default", patch_arm=arm, upstream="booking", scenario="F1",
        conversation=conversation, status="ok", verdict="FAIL" if dup else "PASS",
        duplicate_found=dup, score_overall=40 if dup else 100, started_at=T0, finished_at=T0,
        harness_version="0.1.0",
    )


@pytest.fixture
def markdown(tmp_path) -> str:
    runs = (
        [run(i, "qwen3:14b", "none", True) for i in range(10)]
        + [run(10 + i, "qwen3:14b", "auto", i < 2) for i in range(10)]
        + [run(20 + i, "gemma|4", "none", i < 3, conversation="a | b") for i in range(5)]
    )
    with Store.open(tmp_path / "runs.duckdb") as store:
        store.save_runs(runs)
        analysis = analyse(store, now=datetime(2026, 11, 2, 8, 30, tzinfo=UTC))
    return render_markdown(analysis)


def table(markdown: str, heading: str) -> list[str]:
    """The lines of the table that follows a heading."""
    lines = markdown.splitlines()
    start = lines.index(heading) + 2
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return lines[start:end]


def test_before_after_table_has_the_reference_shape(markdown):  # R6, R7
    rows = table(markdown, "#### Runs with double booking, before and after the patch")
    assert rows[0] == (
        "| Model | Condition | Scenario | Runs with double booking without patch "
        "| with patch (auto) |"
    )
    expected_p = p_text(fisher_exact(10, 0, 2, 8))
    assert expected_p == "p < 0.001"
    # M3: the test that made p, and p after Holm's correction (a family of one here).
    assert f"| 10 of 10 (100%) | 2 of 10 (20%), {expected_p} (Fisher), Holm {expected_p} |" \
        in rows[3]


def test_m3_per_cell_table_shows_pass_k_with_its_safe_runs(markdown):
    rows = table(markdown, "#### All cells")
    assert "| pass^4 |" in rows[0]
    qwen_auto = next(r for r in rows if r.startswith("| qwen3:14b") and "| auto |" in r)
    # 8 of 10 runs safe: C(8, 4) / C(10, 4) = 70 / 210.
    assert "| 33% (8 of 10 safe) |" in qwen_auto
    qwen_none = next(r for r in rows if r.startswith("| qwen3:14b") and "| none |" in r)
    assert "| 0% (0 of 10 safe) |" in qwen_none


def test_m3_every_measure_has_a_how_to_read_line(markdown):
    for words in ("p: how likely", "Holm: p corrected", "pass^4 is the chance",
                  "95% interval (Wilson)"):
        assert words in markdown


def test_a_row_without_a_patched_arm_shows_a_dash(markdown):
    rows = table(markdown, "#### Runs with double booking, before and after the patch")
    gemma = next(r for r in rows if r.startswith("| gemma"))
    assert gemma.endswith("| 3 of 5 (60%) | – |")


def test_pipes_in_names_do_not_break_the_table(markdown):
    rows = table(markdown, "#### Runs with double booking, before and after the patch")
    gemma = next(r for r in rows if r.startswith("| gemma"))
    assert gemma.startswith("| gemma\\|4 | a \\| b |")
    # Unescaped pipes delimit exactly the five columns.
    assert gemma.replace("\\|", "").count("|") == 6


def test_per_cell_table_has_a_row_per_cell_with_interval(markdown):
    rows = table(markdown, "#### All cells")
    assert len(rows) == 2 + 3
    qwen_none = next(r for r in rows if r.startswith("| qwen3:14b") and "| none |" in r)
    assert "| 10 of 10 (100%) | 72%–100% |" in qwen_none


def test_header_counts_runs_and_failed_runs(markdown):
    assert markdown.startswith("### agent-harness: nightly\n")
    assert "25 runs, 0 failed to run" in markdown
    assert "generated 2026-11-02 08:30 UTC" in markdown


def test_markdown_escapes_html(tmp_path):
    hostile = run(1, "<img src=x onerror=alert(1)>", "none", True)
    with Store.open(tmp_path / "runs.duckdb") as store:
        store.save_run(hostile)
        text = render_markdown(analyse(store))
    assert "<img" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text


def test_an_empty_store_says_so(tmp_path):
    with Store.open(tmp_path / "runs.duckdb") as store:
        text = render_markdown(analyse(store))
    assert "No runs stored." in text
