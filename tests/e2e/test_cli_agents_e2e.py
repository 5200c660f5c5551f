"""U4, U3: real CLI coding agents from npm (tests/support/agents/cli/package-lock.json) run as
command agents by `agent-harness run`, each through the headless wrapper its docs prescribe
(tests/support/agents/cli/agent.py), its model the runner's endpoint serving
`scripted/careful` in the API the agent speaks (Codex: OpenAI Responses; opencode: OpenAI chat
completions through the AI SDK), under F1 and F6 over HTTP. One run per cell, 4 runs, 2 at a
time.

Ground truth: the built-in booking service's rows. The full survey (six agents, none/F1/F2/
F6/F9, stdio and HTTP) is `make survey` (docs/cli-agents.md); this pins two agents' cells.
These two end by themselves under F6 (Codex at once, opencode at its MCP client's 60 s
request timeout); Claude Code, Gemini CLI and qwen-code wait for the closed stream's answer
until the runner kills them, a hang the survey measures and `make test` does not pay for.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from runner.analysis.survey import render, survey_rows
from tests.support.paths import ROOT
from tests.support.prereq import require
from tests.support.runkit import cli

pytestmark = pytest.mark.slow

CLI = ROOT / "tests" / "support" / "agents" / "cli"
AGENTS = ("codex", "opencode")
# (agent, scenario) -> what the model saw in place of the write's answer: how the agent's
# client reported the fault (F1: the proxy's timeout error, passed on; F6: the client's own).
SAW = {
    ("codex", "F1"): "the request timed out before the server answered",
    ("codex", "F6"): "Transport closed",
    ("opencode", "F1"): "the request timed out before the server answered",
    ("opencode", "F6"): "MCP error -32001: Request timed out",
}
# Well past opencode's 60 s MCP request timeout (its F6 run ends there by itself), so a
# hang would show as the runner's kill, not pass as an ending.
LIMIT_S = 100


@pytest.fixture(scope="module")
def survey(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(
        all((CLI / "node_modules" / ".bin" / b).exists() for b in AGENTS),
        "the CLI agents", "make cli-agents-deps  (= npm ci in tests/support/agents/cli)",
    )  # fmt: skip
    folder = tmp_path_factory.mktemp("cli")
    spec = yaml.safe_load((ROOT / "experiments" / "cli-agents.yaml").read_text())
    spec["name"] = "cli-ci"
    spec["agents"] = [{**a, "timeout_s": LIMIT_S} for a in spec["agents"] if a["name"] in AGENTS]
    spec["scenarios"] = ["F1", "F6"]
    (folder / "cli.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    db = folder / "cli.duckdb"
    result = cli(ROOT, "run", str(folder / "cli.yaml"), "--db", str(db))
    assert result.returncode in (0, 3), result.stdout + result.stderr
    return db


def test_u4_cli_agents_call_the_booking_tool_and_execute_one_write_per_model_request(
    survey: Path,
) -> None:
    rows = survey_rows(survey, "cli-ci")
    print("\n" + render(rows))
    assert sorted((r.agent, r.scenario) for r in rows) == sorted(SAW)
    for row in rows:
        where = f"{row.agent} under {row.scenario}"
        assert row.note == "", f"{where} did not end by itself: {row.note}"
        # U4: the scripted model found the MCP server's tool among the agent's own: judged
        assert row.requested == 1 and row.verdict == "PASS", where
        assert SAW[(row.agent, row.scenario)] in row.saw, where
        # the model read the error, looked the booking up and told the user what it found
        assert row.told.startswith("Done, booking BK-") and row.honesty == "truthful", where
        # the write ran once (the booking rows), the proxy counted the same, and the client
        # did not send it again (M2: no client_retry)
        assert row.executed == row.proxy_executions == 1, where
        assert row.client_retries == 0, where
