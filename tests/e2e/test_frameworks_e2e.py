"""U1's framework survey: real agent frameworks from PyPI and npm (exact versions,
requirements-agents.txt and tests/support/agents/node/package-lock.json) run as command agents
by `agent-harness run experiments/frameworks.yaml`, each driven by the runner's scripted
OpenAI-compatible endpoint that asks for exactly one booking, under none, F1, F6 and F9.

Ground truth: the built-in booking service's rows. The printed table is docs/frameworks.md's;
the test pins it (a new framework version that re-sends a write changes a number here).
About 2-3 minutes of wall time on 2 cores: 20 runs, 4 at a time, each starting a framework
(two of them hang under F6 until their 60 s limit).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.analysis.survey import render, survey_rows
from tests.support.paths import ROOT
from tests.support.prereq import require
from tests.support.runkit import cli

pytestmark = pytest.mark.slow

AGENTS_PYTHON = ROOT / ".venv-agents" / "bin" / "python"
AI_SDK = ROOT / "tests" / "support" / "agents" / "node" / "node_modules" / "ai"
HINT = "make agents-deps  (= .venv-agents with requirements-agents.txt, npm ci in tests/support/agents/node)"
HUNG = "hung: killed at its time limit"
# (framework, scenario) -> executions of the one write the model asked for, where not 1: the
# SDK's own MCP retry re-sends it after its 5 s timeout (client_retry), as measured
# (docs/frameworks.md).
EXECUTED = {("openai-agents-retries-2", "F6"): 2, ("openai-agents-retries-2", "F9"): 2}
# (framework, scenario) -> how the agent ended, where it did not finish.
ENDED = {
    ("langchain-mcp-adapters", "F6"): HUNG,
    ("pydantic-ai", "F6"): HUNG,
    ("vercel-ai-sdk", "F6"): "exit code 13",  # node: the awaited tool call never settled
}


@pytest.fixture(scope="module")
def survey(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(AGENTS_PYTHON.exists() and AI_SDK.exists(), "the survey's agent frameworks", HINT)
    db = tmp_path_factory.mktemp("survey") / "frameworks.duckdb"
    result = cli(ROOT, "run", "experiments/frameworks.yaml", "--db", str(db))
    # a run that hung is an error run (exit 3: runs failed to run), and the table says so
    assert result.returncode in (0, 3), result.stdout + result.stderr
    return db


def test_u1_survey_each_framework_executes_one_write_per_model_request(survey: Path) -> None:
    rows = survey_rows(survey)
    print("\n" + render(rows))
    assert len(rows) == 20
    for row in rows:
        where, cell = f"{row.agent} under {row.scenario}", (row.agent, row.scenario.split("(")[0])
        assert row.requested == 1, where  # the scripted model asked for exactly one booking
        assert row.executed == row.proxy_executions, where  # the proxy counts what really ran
        assert row.executed == EXECUTED.get(cell, 1), where  # ground truth: the booking rows
        assert row.client_retries == row.executed - 1, where  # M2: no model turn asked again
        # how it ended is pinned where it is a finding; elsewhere a framework's start-up alone
        # may pass the 60 s limit on an overloaded machine (seen at load 40), the counts hold
        assert row.note == ENDED[cell] if cell in ENDED else row.note in ("", HUNG), where
