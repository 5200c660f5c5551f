"""V15 on a real run: secrets in a command agent's argv (`--api-key sk-...`, `--password=...`)
and in what it prints (a credential shape lying across its output bound, its env value) never
reach the store, the HTML or the Markdown, whole or in part. Before, the argv was stored in clear (run parameters, spec text, HTML) and the output
was cut before it was redacted, so the first 20 characters of a key survived.

The files' bytes are searched for each secret and for its first 12 characters; markers that
are no secret must be found, so the search itself is shown to work on these files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.support import launcher
from tests.support.paths import BIN, COUNTING_SERVER, ROOT

pytestmark = pytest.mark.slow

SHAPED = "sk-proj-" + "A1b2C3d4E5f6G7h8" * 4  # an OpenAI key's shape: known to nobody here
GITHUB = "ghp_" + "Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8"
PASSWORD = "hunter2-correct-horse"
ENV_VALUE = "agent-env-secret-0123456789"
SECRETS = {"argv shape": SHAPED, "argv password": PASSWORD, "output shape": GITHUB,
           "env value": ENV_VALUE}  # fmt: skip
MARKER = "VISIBLE-OUTPUT-MARKER"
HANDSHAKE = ROOT / "tests" / "support" / "agents" / "handshake.py"
LIMIT = 300  # the agent's max_output_bytes


def _agent_script() -> str:
    # stdout: its env value begins 10 bytes before the output bound (cut first, its first 10
    # characters were stored); stderr: its argv and a GitHub token's shape.
    return (
        f"import runpy; runpy.run_path({str(HANDSHAKE)!r})\n"  # a session: the run counts
        "import os, sys\n"
        f"sys.stdout.write('{MARKER} ' + 'x' * ({LIMIT} - 10 - {len(MARKER) + 2}) + ' ' "
        "+ os.environ['AGENT_TOKEN'] + ' tail\\n')\n"
        f"sys.stderr.write(' '.join(sys.argv[1:]) + ' token={GITHUB}\\n')\n"
    )


def spec(root: Path) -> dict[str, object]:
    script = root / "agent.py"
    script.write_text(_agent_script())
    return {
        "name": "argv",
        "agents": [{
            "name": "printer",
            "command": [sys.executable, str(script), "--api-key", SHAPED,
                        f"--password={PASSWORD}", "--max-tokens", "100"],
            "env": {"AGENT_TOKEN": ENV_VALUE},
            "max_output_bytes": LIMIT,
            "transport": "http",  # the runner starts the proxy: the agent needs no MCP client
        }],
        "prompts": [{"name": "p", "text": "You book hotel rooms."}],
        "upstreams": [{
            "name": "counting", "command": sys.executable,
            "args": [str(COUNTING_SERVER), "--ground-truth", str(root / "truth.jsonl")],
        }],
        "scenarios": ["none"],
        "conversation": {"name": "c", "user": "Please book a room."},
    }  # fmt: skip


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("argv")
    (root / "argv.yaml").write_text(yaml.safe_dump(spec(root), sort_keys=False))
    for argv in (
        ["run", "argv.yaml", "--db", "runs.duckdb"],
        ["report", "--db", "runs.duckdb", "-o", "report.html"],
        ["report", "--db", "runs.duckdb", "--format", "md", "-o", "report.md"],
    ):
        done = launcher.run([str(BIN), *argv], cwd=root, capture_output=True, text=True,
                            timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert not any(s[:12] in done.stdout + done.stderr for s in SECRETS.values())
    return root


@pytest.mark.parametrize("name", ["runs.duckdb", "report.html", "report.md"])
def test_v15_no_secret_nor_its_start_in_the_store_or_the_reports(stored, name):
    # V15
    data = b"".join(p.read_bytes() for p in stored.iterdir() if p.name.startswith(name))
    for what, secret in SECRETS.items():
        assert secret[:12].encode() not in data, f"{what} found in {name}"
    if name == "runs.duckdb":
        assert MARKER.encode() in data  # the agent's output is kept, redacted


def test_v15_the_agent_output_is_redacted_then_cut_and_argv_stored_by_place(stored):
    # V15
    with duckdb.connect(str(stored / "runs.duckdb"), read_only=True) as con:
        (params,) = con.execute("SELECT model_params_json FROM runs").fetchone()
        stdout, stderr = (row[0] for row in con.execute(
            "SELECT content FROM transcripts WHERE role IN ('stdout', 'stderr') ORDER BY role DESC"
        ).fetchall())  # fmt: skip
        (spec_text,) = con.execute("SELECT spec_text FROM experiments").fetchone()
    command = json.loads(params)["agent"]["command"]
    assert command[2:] == ["--api-key", "[REDACTED]", "--password=[REDACTED]",
                           "--max-tokens", "100"]  # fmt: skip
    # Redacted whole, then cut: no part of the value, and no half of its [REDACTED] either.
    assert stdout.startswith(MARKER) and stdout.endswith("x \n[... 16 more bytes not kept]")
    assert stderr == "--api-key [REDACTED] --password=[REDACTED] --max-tokens 100 token=[REDACTED]\n"
    stored_agent = yaml.safe_load(spec_text)["agents"][0]
    assert stored_agent["command"][2:] == command[2:]
    assert stored_agent["env"] == {"AGENT_TOKEN": "[REDACTED]"}
