"""The HTML report bounds what it shows of each value (SPEC V14).

Issue 22: an 8-run HTML with 5 MB messages was 200 MB. Every value a template prints passes
one step (jinja's `finalize`, `runner.html.render.bounded`), names made breakable and SVG
labels too: at most MAX_SHOWN_CHARS (20,000) characters of it, then one line saying how many
were left out. The store keeps the whole text. The file size is measured here.
"""

from __future__ import annotations

from pathlib import Path

from runner.experiment.records import FindingRow, PatchRow, TranscriptEntry
from runner.html.formatting import MAX_SHOWN_CHARS
from runner.html.report import write_report
from runner.store import Store
from tests.support.storekit import make_run

MB = 1_000_000
BIG = 5 * MB
RUNS = 8


def big(tag: str) -> str:
    """5 MB of text, different per field, so that no copy can hide behind another."""
    return (f"{tag}-" + "x" * 99 + "\n") * (BIG // (len(tag) + 101))


def test_v14_an_8_run_report_of_5_mb_messages_stays_small_and_the_store_keeps_them(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.duckdb"
    with Store.open(db) as store:
        store.save_runs(
            make_run(
                f"r{i}",
                error=big("error") if i == 0 else None,
                final_answer=big("final"),
                report_json='{"answer": "' + "y" * BIG + '"}',
                honesty_label="false_success",
                honesty_claim="success",
                honesty_evidence=big("evidence"),
                patch_arm="p",
                patch_text=big("patch"),
                verdict_reason=big("reason"),
                findings=[
                    FindingRow(
                        kind="violation",
                        code="DUPLICATE_EXECUTION",
                        detail_json='{"d": "' + "z" * BIG + '"}',
                    )
                ],
                patches=[
                    PatchRow(patch_id="P", severity="CRITICAL", trigger="t", text=big("emitted"))
                ],
                transcript=[
                    TranscriptEntry(idx=0, role="user", content=big("user")),
                    TranscriptEntry(
                        idx=1,
                        role="assistant",
                        content=big("assistant"),
                        tool_calls_json='[{"id": "c1", "function": {"name": "book", '
                        '"arguments": "' + "a" * BIG + '"}}]',
                    ),
                    TranscriptEntry(
                        idx=2,
                        role="tool",
                        content=big("tool"),
                        tool_call_id="c1",
                        tool_name="book",
                        is_error=True,
                    ),
                ],
            )  # fmt: skip
            for i in range(RUNS)
        )
        kept = store.load_runs_by_id(["r1"])["final_answer"][0]
    assert len(kept) >= BIG - 200  # the store keeps the whole text

    out = tmp_path / "report.html"
    write_report(db, out)
    size = out.stat().st_size
    html = out.read_text()
    print(f"{RUNS} runs, 5 MB in each of 13 fields per run: report {size / MB:.2f} MB")
    # 13 clipped fields per run, each at most 20,000 characters (+ the note), plus the page:
    # well under 4 MB, against the 200 MB the issue measured.
    assert size < 4 * MB, size
    assert "more characters not shown here; the run store keeps the whole text" in html
    longest_run = max(len(chunk) for chunk in html.split("<"))
    assert longest_run < MAX_SHOWN_CHARS + 200, longest_run
