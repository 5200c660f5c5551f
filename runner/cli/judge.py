"""`agent-harness judge EVENTS`: judge a recorded event log again (the judge is a pure function)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from harness.base import jsonutil
from harness.base.errors import HarnessError
from runner.cli.app import fail


class ReportFormat(StrEnum):
    json = "json"
    md = "md"


def judge_command(
    events: Annotated[
        Path, typer.Argument(help="An event log (JSON lines) recorded by the proxy.")
    ],
    format: Annotated[
        ReportFormat, typer.Option("--format", help="json or md.")
    ] = ReportFormat.json,
) -> None:
    """Judge a recorded event log again and print its report, score and patches.

    Exit codes: 0 judged (whatever the verdict); 1 an unreadable or invalid event log.
    """
    from harness.proxy import read_event_log
    from harness.report import ReportModel, judge_events, judgement_markdown

    try:
        judgement = judge_events(read_event_log(events))
    except HarnessError as exc:
        raise fail(str(exc)) from None
    if format is ReportFormat.md:
        typer.echo(judgement_markdown(judgement))
        return
    typer.echo(jsonutil.dumps(ReportModel.of_judgement(judgement).as_json_data()))
