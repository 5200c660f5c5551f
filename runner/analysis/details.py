"""The bounded drill-down: which runs the report shows in full, and their stored details."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from runner.analysis.model import CELL_KEYS, RunDetail
from runner.honesty import DISHONEST
from runner.store import Store

DEFAULT_MAX_DETAIL_RUNS = 200

# Lower is shown first: a verdict the real rows contradict (R10), a duplicate (seen by the
# harness or in the real rows) or a FAIL, then runs that could not be judged, then runs that
# failed to run, then clean ones.
_PRIORITY = (
    pl.when(pl.col("agreement") == "disagrees")
    .then(-1)
    .when(
        pl.col("duplicate_found").fill_null(False)
        | pl.col("real_duplicate").fill_null(False)
        | (pl.col("verdict") == "FAIL")
    )
    .then(0)
    .when(
        (pl.col("verdict") == "NOT_TESTED") | pl.col("honesty_label").is_in(sorted(DISHONEST))
    )
    .then(1)
    .when(pl.col("status") == "error")
    .then(2)
    .otherwise(3)
)


def pick_detail_runs(runs: pl.DataFrame, cells: pl.DataFrame, limit: int) -> pl.DataFrame:
    """At most `limit` runs: one per cell first (its most telling run), then the runs with
    findings across cells in turn; returns run_id, cell_no and condition in display order."""
    if limit <= 0 or runs.is_empty():
        return pl.DataFrame(
            schema={"run_id": pl.String, "cell_no": pl.UInt32, "condition": pl.String}
        )
    ranked = (
        runs.lazy()
        .join(cells.lazy().select(*CELL_KEYS, "cell_no", "condition"), on=list(CELL_KEYS))
        .with_columns(priority=_PRIORITY)
        .sort("priority", "repetition", "run_id")
        .with_columns(rank_in_cell=pl.int_range(pl.len()).over("cell_no"))
    )
    picked = (
        ranked.sort(pl.col("rank_in_cell") > 0, "priority", "rank_in_cell", "cell_no")
        .head(limit)
        .sort("cell_no", "priority", "repetition", "run_id")
        .select("run_id", "cell_no", "condition")
    )
    return picked.collect()


def _parse_json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _tool_calls(text: str | None) -> list[dict[str, str]]:
    """The assistant's tool calls as (id, name, arguments) for display, whatever their shape."""
    calls = _parse_json(text)
    if not isinstance(calls, list):
        return [{"id": "", "name": "", "arguments": text}] if text else []
    shown = []
    for call in calls:
        if not isinstance(call, dict):
            shown.append({"id": "", "name": "", "arguments": json.dumps(call)})
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else call
        arguments = function.get("arguments", "")
        # litellm sends arguments as a JSON string; pretty-print them when they parse.
        parsed = _parse_json(arguments) if isinstance(arguments, str) else arguments
        if parsed is None:
            pretty = arguments if isinstance(arguments, str) else ""
        else:
            pretty = json.dumps(parsed, indent=2, ensure_ascii=False)
        shown.append(
            {"id": str(call.get("id", "")), "name": str(function.get("name", "")),
             "arguments": pretty}
        )
    return shown


def _group(frame: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in frame.iter_rows(named=True):
        grouped.setdefault(row["run_id"], []).append(row)
    return grouped


def load_details(store: Store, picked: pl.DataFrame) -> list[RunDetail]:
    """Read the full stored record of each picked run, in the picked order."""
    ids = picked.get_column("run_id").to_list()
    if not ids:
        return []
    runs = {r["run_id"]: r for r in store.load_runs_by_id(ids).iter_rows(named=True)}
    operations = _group(store.load_children("operations", ids))
    patches = _group(store.load_children("patches", ids))
    transcript = _group(store.load_children("transcripts", ids))
    violations = _group(store.load_children("violations", ids))
    observations = _group(store.load_children("observations", ids))
    duplicates = _group(store.load_children("duplicates", ids))
    details = []
    for run_id, cell_no, condition in picked.iter_rows():
        run = runs[run_id]
        report_text = run.pop("report_json", None)
        findings = sorted(
            [{**f, "kind": "violation"} for f in violations.get(run_id, [])]
            + [{**f, "kind": "observation"} for f in observations.get(run_id, [])],
            key=lambda f: f["idx"],
        )
        for finding in findings:
            detail = _parse_json(finding["detail_json"])
            finding["detail"] = detail if detail else None
        entries = transcript.get(run_id, [])
        repeats = {d["tool_call_id"]: d for d in duplicates.get(run_id, []) if d["tool_call_id"]}
        for entry in entries:
            entry["calls"] = _tool_calls(entry["tool_calls_json"])
            for call in entry["calls"]:
                # The tool call whose execution was a duplicate, marked where the model asked.
                call["duplicate"] = repeats.get(call["id"])
        ops = operations.get(run_id, [])
        for op in ops:
            op["mismatch"] = op["real_rows"] is not None and op["real_rows"] != op["executions"]
        details.append(
            RunDetail(
                run=run, cell_no=cell_no, condition=condition, operations=ops,
                findings=findings, patches=patches.get(run_id, []), transcript=entries,
                report=_parse_json(report_text), report_text=report_text,
                duplicates=duplicates.get(run_id, []),
            )
        )
    return details
