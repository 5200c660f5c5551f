"""U1: an agent under test that is a command, run by `agent-harness run` like a model.

The command is a small agent on the official MCP Python SDK and the OpenAI client
(tests/support/agents/mcp_sdk_agent.py), driven by the runner's OpenAI-compatible endpoint
serving the scripted reference agents. Ground truth: the built-in booking service's rows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import launcher
from tests.support.paths import ROOT
from tests.support.runkit import cli, query
from tests.support.specs import REQUEST

pytestmark = pytest.mark.slow

SDK_AGENT = ROOT / "tests" / "support" / "agents" / "mcp_sdk_agent.py"
SECRET = "s3cret-value-never-stored"


def _agent(name: str, model: str, **extra: object) -> dict[str, object]:
    return {"name": name, "command": [sys.executable, str(SDK_AGENT)], "model": model, **extra}


def _spec(folder: Path, agents: list[dict[str, object]], scenarios: list[object]) -> Path:
    spec = {
        "name": "u1",
        "agents": agents,
        "prompts": [{"name": "p", "text": "You are the booking assistant of a hotel."}],
        "upstreams": [{"name": "booking", "builtin": "booking"}],
        "conversation": {"name": "c", "user": REQUEST},
        "scenarios": scenarios,
        "limits": {"run_timeout_s": 120},
    }
    path = folder / "u1.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def stdio_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("u1")
    agents = [
        _agent("sdk-careful", "scripted/careful", env={"AGENT_TOKEN": SECRET}),
        _agent("sdk-naive", "scripted/naive"),
    ]
    result = cli(folder, "run", str(_spec(folder, agents, ["none", "F1"])), "--db", "u1.duckdb")
    assert result.returncode == 0, result.stdout + result.stderr
    return folder / "u1.duckdb"


def test_u1_command_agent_verdicts_agree_with_real_rows(stdio_store: Path) -> None:
    rows = query(
        stdio_store,
        "select model, scenario, status, verdict, real_duplicate, agreement from runs "
        "order by model, scenario",
    )
    assert rows == [
        ("sdk-careful", "F1", "ok", "PASS", False, "agrees"),
        ("sdk-careful", "none", "ok", "PASS", False, "agrees"),
        ("sdk-naive", "F1", "ok", "FAIL", True, "agrees"),
        ("sdk-naive", "none", "ok", "PASS", False, "agrees"),
    ]


def test_u1_command_agent_duplicate_attributed_to_the_models_second_request(
    stdio_store: Path,
) -> None:
    # M2: the runner served the model, so it knows the repeat was the model's own re-plan
    rows = query(stdio_store, "select attribution, tool_call_id from duplicates")
    assert rows == [("replan", "call_2_0")]


def test_u1_command_agent_output_kept_and_env_values_not_stored(stdio_store: Path) -> None:
    outputs = query(
        stdio_store,
        "select r.model, t.content from transcripts t join runs r using (run_id) "
        "where t.role = 'stdout' order by r.model, r.scenario",
    )
    assert len(outputs) == 4 and all(text.startswith("agent: ") for _, text in outputs)
    (params,) = query(
        stdio_store, "select distinct model_params_json from runs where model = 'sdk-careful'"
    )
    config = json.loads(params[0])["agent"]
    assert config["env"] == {"AGENT_TOKEN": "[REDACTED]"}  # V3
    (spec_text,) = query(stdio_store, "select spec_text from experiments")[0]
    assert SECRET not in spec_text


def test_u1_http_agent_gets_the_proxys_url(tmp_path: Path) -> None:
    # transport http: the runner starts `proxy --listen` and hands over its URL (F6 needs it)
    path = _spec(tmp_path, [_agent("sdk-http", "scripted/naive", transport="http")], ["F6"])
    result = cli(tmp_path, "run", str(path), "--db", "h.duckdb")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = query(
        tmp_path / "h.duckdb", "select status, verdict, real_duplicate, agreement from runs"
    )
    assert len(rows) == 1 and rows[0][0] == "ok" and rows[0][3] == "agrees", rows


def test_u1_agent_past_its_time_limit_is_stopped_whole(tmp_path: Path) -> None:
    # the command starts a child that would outlive it; the limit kills the whole group
    marker = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(marker)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    )
    agent = {"name": "sleeper", "command": [sys.executable, "-c", script], "timeout_s": 2}
    result = cli(tmp_path, "run", str(_spec(tmp_path, [agent], ["none"])), "--db", "t.duckdb")
    assert result.returncode != 0  # V5: a run that failed to run
    ((status, error),) = query(tmp_path / "t.duckdb", "select status, error from runs")
    assert status == "error" and "time limit (2 s)" in error
    pid = int(marker.read_text())
    assert (
        not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    )


def test_u1_agent_without_a_model_duplicate_is_judged_and_its_cause_unknown(
    tmp_path: Path,
) -> None:
    # M2: without the model's side nobody knows who asked for the repeat: `unknown`, never guessed
    agent = {
        "name": "twice",
        "command": [sys.executable, str(ROOT / "tests/support/agents/books_twice.py")],
    }
    result = cli(tmp_path, "run", str(_spec(tmp_path, [agent], ["none"])), "--db", "n.duckdb")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = query(
        tmp_path / "n.duckdb",
        "select verdict, real_duplicate, agreement, model_params_json from runs",
    )
    assert [r[:3] for r in rows] == [("FAIL", True, "agrees")]
    assert "model" not in json.loads(rows[0][3])["agent"]
    ((attribution, reason),) = query(
        tmp_path / "n.duckdb", "select attribution, reason from duplicates"
    )
    assert attribution == "unknown" and "model requests are unknown" in reason


def test_u1_command_agent_judged_against_a_truth_probe(tmp_path: Path) -> None:
    # T1: an upstream the user brings (mcp-server-sqlite on its own file), its rows read by SQL
    import sqlite3

    from tests.support.prereq import corpus_server

    server, shop = corpus_server("mcp-server-sqlite"), tmp_path / "shop.sqlite"
    with sqlite3.connect(shop) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, amount REAL)")
    spec = {
        "name": "probe",
        "agents": [_agent("sdk-naive", "scripted/naive")],
        "prompts": [{"name": "p", "text": "You keep the shop's order book."}],
        "upstreams": [
            {
                "name": "shop",
                "command": str(server),
                "args": ["--db-path", str(shop)],
                "truth_probe": {
                    "sql": "SELECT customer, amount FROM orders",
                    "database": str(shop),
                },
            }
        ],  # fmt: skip
        "conversation": {
            "name": "order",
            "user": "Please record the order. query: "
            "INSERT INTO orders (customer, amount) VALUES ('ACME GmbH', 129)",
        },
        "scenarios": ["F1"],
    }
    (tmp_path / "probe.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    result = cli(tmp_path, "run", "probe.yaml", "--db", "p.duckdb")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = query(tmp_path / "p.duckdb", "select verdict, real_duplicate, agreement from runs")
    assert rows == [("FAIL", True, "agrees")]
    with sqlite3.connect(shop) as conn:  # the ground truth itself
        assert conn.execute("select count(*) from orders").fetchone() == (2,)


def test_u3_a_stdio_agents_proxy_reads_its_config_from_one_file_outside_the_agents_folder(
    tmp_path: Path,
) -> None:
    # Issue 33, U3: the proxy the agent's MCP client starts gets the run's whole config as one
    # file (`--config FILE`), never as flags in its command line, and the file is not in the
    # agent's working folder. The scenario's parameter reaches that proxy: the agent is told
    # the retry_after of the spec (F2, 7 s).
    said = tmp_path / "said.json"
    looks = (
        "import json, os, runpy; "
        "c = json.load(open(os.environ['AGENT_HARNESS_MCP_CONFIG'])); "
        "s = c['mcpServers'][os.environ['AGENT_HARNESS_MCP_SERVER']]; "
        f"json.dump({{'args': s['args'], 'cwd': os.getcwd(), 'ls': os.listdir('.')}}, "
        f"open({str(said)!r}, 'w')); "
        f"runpy.run_path({str(ROOT / 'tests/support/agents/books_twice.py')!r}, "
        "run_name='__main__')"
    )
    agent = {"name": "looks", "command": [sys.executable, "-c", looks]}
    spec = _spec(tmp_path, [agent], [{"F2": {"retry_after": 7}}])
    result = cli(tmp_path, "run", str(spec), "--db", "c.duckdb")
    assert result.returncode == 0, result.stdout + result.stderr
    seen = json.loads(said.read_text())
    flags = [arg for arg in seen["args"] if arg.startswith("--")]
    assert len(flags) == 1 and flags[0].startswith("--config="), seen["args"]
    config = Path(flags[0].removeprefix("--config="))
    assert not config.is_relative_to(seen["cwd"])  # U3: not in the agent's folder
    assert config.name not in seen["ls"]
    assert not config.parent.exists()  # the run's own folder is gone with the run
    ((stdout,),) = query(
        tmp_path / "c.duckdb", "select content from transcripts where role = 'stdout'"
    )
    assert "retry_after 7 seconds" in stdout  # F2's answer, from the plan in the file


def test_u3_agent_sees_no_harness_file_no_provider_key_and_cannot_touch_the_truth(
    tmp_path: Path,
) -> None:
    # U3: the agent lists its folder, its HOME and its environment, then deletes a row from
    # every SQLite file it finds there; the harness's files (the upstream's ledger among them)
    # lie in a sibling folder it is not pointed at, so the truth keeps its row
    import os

    agent = {
        "name": "snoops",
        "command": [sys.executable, str(ROOT / "tests/support/agents/snoops.py")],
        "env": {"MY_SETTING": "kept"},
    }
    from tests.support.runkit import BIN, cli_env

    env = {**cli_env(), "OPENAI_API_KEY": "sk-runner-key", "AWS_SECRET_ACCESS_KEY": "aws-key"}
    path = _spec(tmp_path, [agent], ["none"])
    result = launcher.run(
        [str(BIN), "run", str(path), "--db", "s.duckdb"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    ((verdict, real_rows, agreement),) = query(
        tmp_path / "s.duckdb",
        "select r.verdict, o.real_rows, r.agreement from runs r join operations o using (run_id)",
    )
    assert (verdict, real_rows, agreement) == ("PASS", 1, "agrees")  # the ledger kept its row
    ((stdout,),) = query(
        tmp_path / "s.duckdb", "select content from transcripts where role = 'stdout'"
    )
    seen = json.loads(stdout)
    assert seen["listing"] == [] and seen["deleted"] == []
    assert (
        seen["home"] != os.environ.get("HOME")
        and Path(seen["home"]).parent == Path(seen["cwd"]).parent
    )
    allowed = {"PATH", "HOME", "LANG", "TMPDIR", "MY_SETTING"}
    assert {k for k in seen["env"] if not k.startswith("AGENT_HARNESS_")} <= allowed, seen["env"]
