"""The framework survey's table (docs/frameworks.md): per agent and scenario, how many executions
reached the upstream per write the model asked for.

The model's requests are the tool calls the runner's model endpoint handed out (U1: the
transcript's assistant messages); the executions are the built-in upstream's real rows (ground
truth), beside the proxy's own count. A number above 1 per requested write is a duplicate that
no model turn asked for: the agent's client layer sent the write again (`client_retry`).

    python -m runner.analysis.survey reports/frameworks.duckdb [--experiment frameworks]
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from runner.models._conversation import ERROR_MARKER
from runner.store import Store

SAW_CHARS = 60
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class SurveyRow:
    """One run of one agent under one scenario."""

    agent: str
    scenario: str
    requested: int  # writes the model asked for
    executed: int | None  # the upstream's real rows (None: not known)
    proxy_executions: int
    client_retries: int  # duplicates attributed client_retry
    verdict: str | None
    note: str  # how the agent ended (a time limit, an exit code), else ""
    saw: str  # the first tool result the model saw, as the agent sent it (whitespace folded)
    told: str = ""  # what the agent told its user: its output's last line with text
    honesty: str | None = None  # the honesty judge's label of what it told (H1)

    @property
    def per_write(self) -> str:
        """Executions per requested write, as the table shows it."""
        if self.executed is None or not self.requested:
            return "-"
        return f"{self.executed / self.requested:g}"


def survey_rows(db: Path, experiment: str = "frameworks") -> list[SurveyRow]:
    """The table's rows from a run store (read-only)."""
    with Store.open(db, read_only=True) as store:
        con = store.connection
        runs = con.execute(
            "select run_id, model, scenario, verdict, error, stopped_by, honesty_label from runs "
            "where experiment = ? order by model, scenario",
            [experiment],
        ).fetchall()
        rows = []
        for run_id, agent, scenario, verdict, error, stopped_by, honesty in runs:
            ops = con.execute(
                "select tool, executions, real_rows from operations where run_id = ?", [run_id]
            ).fetchall()
            writes = {tool for tool, _, _ in ops}
            calls = con.execute(
                "select tool_calls_json from transcripts where run_id = ? and role = 'assistant' "
                "and tool_calls_json is not null",
                [run_id],
            ).fetchall()
            requested = sum(
                1
                for (text,) in calls
                for call in json.loads(text)
                if call["function"]["name"] in writes
            )
            real = [r for _, _, r in ops]
            retries = con.execute(
                "select count(*) from duplicates where run_id = ? and attribution = 'client_retry'",
                [run_id],
            ).fetchall()[0][0]
            seen = con.execute(
                "select content from transcripts where run_id = ? and role = 'tool' "
                "order by idx limit 1",
                [run_id],
            ).fetchall()
            # as the agent passed it on: without the line that marks it an error for the model
            saw = " ".join(seen[0][0].removeprefix(ERROR_MARKER).split()) if seen else ""
            printed = con.execute(
                "select content from transcripts where run_id = ? and role = 'stdout' order by idx",
                [run_id],
            ).fetchall()
            told = _last_line("".join(text for (text,) in printed))
            # Q1: an exit code is how it ended (the error adds its last output lines)
            note = "hung: killed at its time limit" if error and "time limit" in error else (
                stopped_by or error or "")  # fmt: skip
            rows.append(
                SurveyRow(
                    agent, scenario, requested,
                    None if any(r is None for r in real) else sum(real),
                    sum(e for _, e, _ in ops), retries, verdict, note, saw, told, honesty,
                )
            )  # fmt: skip
    return rows


def render(rows: list[SurveyRow]) -> str:
    """The rows as a Markdown table."""
    head = (
        "| agent | scenario | writes the model asked for | executions upstream (real rows) "
        "| per asked write | client_retry duplicates | verdict | how the agent ended "
        "| what the model saw first | what the agent told the user |"
    )
    lines = [head, "|" + " --- |" * 10]
    for r in rows:
        lines.append(
            f"| {r.agent} | {r.scenario} | {r.requested} | "
            f"{'-' if r.executed is None else r.executed} | {r.per_write} | {r.client_retries} | "
            f"{r.verdict or '-'} | {r.note or 'finished'} | {_cell(r.saw[:SAW_CHARS]) or '-'} | "
            f"{_told(r)} |"
        )
    return "\n".join(lines)


def _last_line(output: str) -> str:
    """An agent's final words: the last line of its output that has text (agents that print
    their tool calls as they go, such as Cline, print the answer last), without colours."""
    lines = [" ".join(line.split()) for line in _ANSI.sub("", output).splitlines()]
    return next((line for line in reversed(lines) if line), "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _told(row: SurveyRow) -> str:
    """The agent's words for its user, shortened, with the honesty judge's label."""
    if not row.told:
        return "-"
    return _cell(row.told[:SAW_CHARS]) + (f" ({row.honesty})" if row.honesty else "")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[-1].strip())
        return 0 if argv else 2
    experiment = argv[argv.index("--experiment") + 1] if "--experiment" in argv else "frameworks"
    print(render(survey_rows(Path(argv[0]), experiment)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
