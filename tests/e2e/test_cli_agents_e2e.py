"""U4, U3: real CLI coding agents from npm (tests/support/agents/cli/package-lock.json) run as
command agents by `agent-harness run`, each through the headless wrapper its docs prescribe
(tests/support/agents/cli/agent.py), its model the runner's endpoint serving
`scripted/careful` in the API the agent speaks (Claude Code: Anthropic Messages; Codex:
OpenAI Responses), under F1 and F6 over HTTP. One run per cell, 4 runs, 2 at a time.

Ground truth: the built-in booking service's rows. The full survey (five agents, none/F1/F2/
F6/F9, stdio and HTTP) is `make survey` (docs/cli-agents.md); this pins two agents' cells.
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
AGENTS = ("claude-code", "codex")
HUNG = "hung: killed at its time limit"
# (agent, scenario) -> executions of the one write the model asked for, as measured
# (docs/cli-agents.md): neither agent's client sends the write again.
EXECUTED: dict[tuple[str, str], int] = {}
# (agent, scenario) -> how the agent ended, where it did not finish: Claude Code waits for the
# answer of a stream the proxy closed (F6) until the runner kills it.
ENDED = {("claude-code", "F6"): HUNG}
LIMIT_S = 60  # the hang costs this much wall time, once


@pytest.fixture(scope="module")
def survey(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(
        all((CLI / "node_modules" / ".bin" / b).exists() for b in ("claude", "codex")),
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
    assert sorted((r.agent, r.scenario) for r in rows) == [
        (a, s) for a in AGENTS for s in ("F1", "F6")
    ]
    for row in rows:
        where = f"{row.agent} under {row.scenario}"
        ended = ENDED.get((row.agent, row.scenario), "")
        assert row.note == ended, where
        # U4: the scripted model found the MCP server's tool among the agent's own: judged
        assert row.requested == 1 and (ended or row.verdict in ("PASS", "FAIL")), where
        assert row.executed == row.proxy_executions, where  # the proxy counts what really ran
        assert row.executed == EXECUTED.get((row.agent, row.scenario), 1), where  # the rows
        assert row.client_retries == row.executed - 1, where  # M2
