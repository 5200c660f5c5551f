"""The static HTML report (R7) rendered from a small hand-made run store."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from runner.experiment.records import FindingRow, OperationRow, PatchRow, RunRecord, TranscriptEntry
from runner.html import write_report
from runner.store import Store, StoreOpenError
from tests.support.htmlpage import HOSTILE, Page

T0 = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)


def run(i: int, model: str, arm: str, dup: bool, **fields) -> RunRecord:
    call = json.dumps([{"id": "call_1", "type": "function",
                        "function": {"name": "book_room", "arguments": '{"guest": "Ada"}'}}])
    base = dict(
        run_id=f"run-{i:03d}", experiment="exp", cell_id=f"{model}/{arm}", repetition=i,
        model=model, prompt="default", patch_arm=arm,
        patch_text=None if arm == "none" else "Check before you retry.", upstream="booking",
        scenario="F1", conversation="follow-up 'please try again'", status="ok",
        verdict="FAIL" if dup else "PASS", verdict_reason="why", duplicate_found=dup,
        real_duplicate=dup, score_overall=40 if dup else 100, started_at=T0, finished_at=T0,
        harness_version="0.1.0", report_json=json.dumps({"verdict": "FAIL" if dup else "PASS"}),
        operations=[OperationRow(index=0, tool="book_room", arguments_json='{"guest":"Ada"}',
                                 attempts=2, executions=2 if dup else 1, failed_attempts=1,
                                 outcome="executed", real_rows=2 if dup else 1)],
        findings=[FindingRow(kind="violation", code="DUPLICATE_EXECUTION")] if dup else [],
        patches=[PatchRow(patch_id="GHOST_WRITE", severity="CRITICAL", trigger="1 duplicate",
                          text="Never re-send blindly.")] if dup else [],
        transcript=[
            TranscriptEntry(idx=0, role="user", content="Book a room for Ada."),
            TranscriptEntry(idx=1, role="assistant", tool_calls_json=call),
            TranscriptEntry(idx=2, role="tool", tool_call_id="call_1", tool_name="book_room",
                            content="timeout", is_error=True, fault="F1"),
        ],
    )
    base.update(fields)
    return RunRecord(**base)


def hand_made_runs() -> list[RunRecord]:
    records = [run(i, "alpha", "none", i < 4) for i in range(5)]
    records += [run(10 + i, "alpha", "auto", i < 1) for i in range(5)]
    records += [run(20 + i, "beta", "none", i < 2) for i in range(3)]
    records.append(run(30, "beta", "none", False, status="error", verdict=None,
                       duplicate_found=None, real_duplicate=None, error="provider down"))
    # The hostile run has a finding so the drill-down always shows it.
    records.append(run(40, "beta", "auto", True, final_answer=HOSTILE, transcript=[
        TranscriptEntry(idx=0, role="user", content=HOSTILE),
        TranscriptEntry(idx=1, role="assistant", tool_calls_json=HOSTILE),
        TranscriptEntry(idx=2, role="tool", tool_name=HOSTILE, content=HOSTILE, is_error=True,
                        fault=HOSTILE),
    ], findings=[FindingRow(kind="violation", code="DUPLICATE_EXECUTION", tool=HOSTILE,
                            detail_json=json.dumps({"note": HOSTILE}))],
        patch_text=HOSTILE, report_json=HOSTILE))
    return records


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("html") / "runs.duckdb"
    with Store.open(path) as store:
        store.save_runs(hand_made_runs())
        store.save_experiment("exp", "experiments/exp.yaml", "spec")
    return path


@pytest.fixture(scope="module")
def html(db, tmp_path_factory) -> str:
    out = write_report(db, tmp_path_factory.mktemp("out") / "report.html")
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def page(html) -> Page:
    parser = Page()
    parser.feed(html)
    parser.close()
    return parser


def test_page_is_well_formed(page):  # R7
    assert page.errors == []
    assert page.stack == []


def test_page_has_no_script_and_no_external_resource(page, html):  # R7
    assert page.find("script") == [] and page.find("link") == [] and page.find("iframe") == []
    for _tag, attrs in page.tags:
        for name in ("src", "href", "action", "srcset", "data", "poster"):
            value = attrs.get(name)
            if value is not None:
                assert value.startswith("#"), (name, value)
        assert not any(name.startswith("on") for name in attrs)
    assert not re.search(r"url\(|@import", html)


def test_hostile_transcript_text_is_shown_as_text(page, html):  # R7
    text = "".join(page.text)
    assert HOSTILE in text
    # Hostile text may sit (escaped) in a tooltip, never in an attribute that loads or runs.
    carriers = {name for _t, a in page.tags for name, v in a.items() if v and "evil" in v}
    assert carriers <= {"title"}
    # Jinja syntax in data is not evaluated.
    # (Times such as "23:49 UTC" are the page's own, not the template's arithmetic.)
    untimed = re.sub(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", "", text)
    assert "{{ 7*7 }}" in text and "49" not in untimed.replace("{{ 7*7 }}", "")


def test_content_security_policy_forbids_everything_but_inline_style(page):
    (csp,) = page.find("meta", **{"http-equiv": "Content-Security-Policy"})
    assert csp["content"].startswith("default-src 'none'")


def test_before_after_table_carries_findable_counts(page):  # R6, R7
    tables = page.find("table", id="before-after")
    assert len(tables) == 1
    cells = [(a["data-k"], a["data-n"], a.get("data-label")) for _t, a in page.tags
             if "data-k" in a and a.get("data-label")]
    # alpha: 4 of 5 without patch, 1 of 5 with; beta: 2 of 3 without (one error left out),
    # 1 of 1 with.
    assert cells == [
        ("4", "5", "Without patch"), ("1", "5", "With patch auto"),
        ("2", "3", "Without patch"), ("1", "1", "With patch auto"),
    ]


def test_overview_counts_runs_and_failures(page):
    (total,) = page.find("div", id="total-runs")
    (errors,) = page.find("div", id="error-runs")
    assert (total["data-n"], errors["data-n"]) == ("15", "1")
    text = "".join(page.text)
    assert "provider down" in text
    assert "exp" in text and "experiments/exp.yaml" in text


def test_per_cell_table_and_charts_are_present(page):
    assert len(page.find("table", id="cells")) == 1
    rows = [a for t, a in page.tags if t == "tr" and (a.get("id") or "").startswith("cell-")]
    assert len(rows) == 4
    charts = page.find("svg", **{"class": "chart"})
    assert len(charts) == 1
    assert all(c.get("role") == "img" for c in charts)


def test_per_cell_rows_count_runs_failures_and_verdicts(page):  # R6, R7
    runs = [(a["data-runs"], a["data-errors"]) for _t, a in page.tags if "data-runs" in a]
    verdicts = [(a["data-pass"], a["data-fail"], a["data-not-tested"]) for _t, a in page.tags
                if "data-pass" in a]
    assert runs == [("5", "0"), ("5", "0"), ("4", "1"), ("1", "0")]
    assert verdicts == [("1", "4", "0"), ("4", "1", "0"), ("1", "2", "0"), ("0", "1", "0")]
    assert "1 failed to run" in "".join(page.text)


def test_drill_down_shows_fault_is_error_and_ground_truth(page):
    text = "".join(page.text)
    assert "injected fault: F1" in text and "isError" in text
    assert page.find("tr", **{"class": "mismatch"}) == []
    runs = page.find("details", **{"class": "run"})
    assert len(runs) == 15


def test_drill_down_is_bounded_and_says_how_many_were_left_out(db, tmp_path):  # R7
    out = write_report(db, tmp_path / "r.html", max_detail_runs=5)
    page = Page()
    page.feed(out.read_text(encoding="utf-8"))
    runs = page.find("details", **{"class": "run"})
    assert len(runs) == 5
    (left,) = page.find("strong", id="runs-left-out")
    assert left["data-n"] == "10"
    # One run per cell at least: four cells, each linked to a shown run.
    shown = {a["id"] for a in runs}
    links = [a["href"] for t, a in page.tags if t == "a" and (a.get("href") or "").startswith(
        "#run-")]
    assert len(links) >= 4 and {h[1:] for h in links} <= shown


def test_markdown_format(db, tmp_path):
    out = write_report(db, tmp_path / "r.md", fmt="md")
    assert out.read_text(encoding="utf-8").startswith("### agent-harness: exp")


def test_unknown_format_is_refused(db, tmp_path):
    with pytest.raises(ValueError):
        write_report(db, tmp_path / "r.pdf", fmt="pdf")  # type: ignore[arg-type]


def test_report_of_a_missing_store_is_a_clear_error(tmp_path):
    with pytest.raises(StoreOpenError):
        write_report(tmp_path / "missing.duckdb", tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_an_empty_store_renders(tmp_path):
    db = tmp_path / "empty.duckdb"
    Store.open(db).close()
    page = Page()
    page.feed(write_report(db, tmp_path / "r.html").read_text(encoding="utf-8"))
    assert page.errors == []
    assert "No runs stored." in "".join(page.text)


def test_m3_before_after_cells_name_their_test_and_holm_p(page):
    from runner.analysis.stats import fisher_exact, holm

    patched = [a for _t, a in page.tags if a.get("data-label") == "With patch auto"]
    assert [a["data-test"] for a in patched] == ["fisher", "fisher"]
    raw = [fisher_exact(4, 1, 1, 4), fisher_exact(2, 1, 1, 0)]
    assert [float(a["data-p"]) for a in patched] == pytest.approx(raw, rel=1e-5)
    assert [float(a["data-p-holm"]) for a in patched] == pytest.approx(holm(raw), rel=1e-5)


def test_m3_per_cell_pass_k_with_its_safe_runs(page):
    cells = [(a["data-safe"], a["data-n"], a.get("data-pass-k")) for t, a in page.tags
             if t == "td" and "pass-k" in (a.get("class") or "")]
    # alpha none: 1 of 5 safe, C(1,4) = 0; alpha auto: 4 of 5, C(4,4)/C(5,4) = 0.2;
    # beta: fewer than 4 runs that ran, so no pass^4.
    assert cells == [("1", "5", "0"), ("4", "5", "0.2"), ("1", "3", None), ("0", "1", None)]


def test_m3_pass_k_curves_draw_one_line_per_arm_of_each_row(page):
    curves = [a for t, a in page.tags if t == "svg" and a.get("class") == "chart curves"]
    assert len(curves) == 2  # alpha and beta, each with both arms
    lines = [(a["data-arm"], a["data-safe"], a["data-n"]) for t, a in page.tags
             if t == "g" and (a.get("class") or "").startswith("curve ")]
    assert lines == [("none", "1", "5"), ("auto", "4", "5"), ("none", "1", "3"),
                     ("auto", "0", "1")]
    assert len(page.find("polyline")) == 4


def test_m3_each_measure_has_a_how_to_read_line(html):
    for section in ("before-after-section", "cells-section", "charts", "honesty-section"):
        start = html.index(f'id="{section}"')
        assert "How to read this." in html[start:html.index("</section>", start)], section
    assert 'id="pass-k"' in html


def test_h2_a_parameterised_scenario_label_is_shown_as_its_own_row(tmp_path):  # H2 R7
    # A fault with parameters (F9 with latency_ms) is its own scenario, with a readable label.
    records = [run(50 + i, "alpha", "none", i == 0, scenario="F9(latency_ms=1500)")
               for i in range(2)]  # fmt: skip
    records += [run(60, "alpha", "none", False, scenario="F9")]
    path = tmp_path / "runs.duckdb"
    with Store.open(path) as store:
        store.save_runs(records)
        store.save_experiment("exp", "experiments/exp.yaml", "spec")
    parser = Page()
    parser.feed(write_report(path, tmp_path / "report.html").read_text(encoding="utf-8"))
    cells = [t.strip() for t in parser.text if t.strip().startswith("F9")]
    assert "F9(latency_ms=1500)" in cells and "F9" in cells
