"""V3: secrets in a spec never reach the store or a report, checked on a real run.

`agent-harness run` with a real proxy subprocess in front of a real upstream command, a
scripted model through litellm, a real DuckDB file; then `agent-harness report` to HTML and
Markdown. The files' bytes are searched for each secret; a marker that is no secret must be
found, so the search itself is shown to work on these files.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.support import launcher
from tests.support.paths import BIN, COUNTING_SERVER

pytestmark = pytest.mark.slow

SERVER = COUNTING_SERVER
SECRETS = {
    "url password": "URLPASS-0123456789",
    "authorization header": "HEADERTOKEN-0123456789",
    "upstream env": "ENVSECRET-0123456789",
    "referenced env value": "REFERENCED-KEY-0123456789",
}
VISIBLE = "VISIBLE-MARKER-4242"  # an ordinary header value: stored and shown


def spec(tmp_path: Path) -> str:
    return f"""\
name: secrets
models:
  - name: scripted/naive
    params:
      api_base: https://alice:{SECRETS["url password"]}@llm.example.com/v1
      extra_headers:
        Authorization: Bearer {SECRETS["authorization header"]}
        X-Title: {VISIBLE}
        X-Api-Key: os.environ/HOSTILE_TEST_KEY
prompts: [{{name: p, text: You book hotel rooms.}}]
upstreams:
  - name: counting
    command: {sys.executable}
    args: [{SERVER}, --ground-truth, {tmp_path / "truth.jsonl"}]
    env: {{UPSTREAM_SECRET: {SECRETS["upstream env"]}}}
scenarios: [F1]
conversations:
  - name: c
    user: "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"
"""


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("secrets")
    (root / "secrets.yaml").write_text(spec(root))
    env = {**os.environ, "HOSTILE_TEST_KEY": SECRETS["referenced env value"]}
    for argv in (
        ["run", "secrets.yaml", "--db", "runs.duckdb", "--in-process", "never"],
        ["report", "--db", "runs.duckdb", "-o", "report.html"],
        ["report", "--db", "runs.duckdb", "--format", "md", "-o", "report.md"],
    ):
        done = launcher.run(
            [str(BIN), *argv], cwd=root, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        assert not any(s in done.stdout + done.stderr for s in SECRETS.values())
    return root


def test_v3_the_run_really_reached_the_upstream_with_its_env(stored):
    # Ground truth: the upstream executed the agent's writes (so the run was real).
    truth = [json.loads(x) for x in (stored / "truth.jsonl").read_text().splitlines()]
    assert [t["tool"] for t in truth if "tool" in t][:1] == ["create_booking"]


@pytest.mark.parametrize("name", ["runs.duckdb", "report.html", "report.md"])
def test_v3_no_secret_in_the_bytes_of_the_store_or_the_reports(stored, name):
    data = b"".join(p.read_bytes() for p in stored.iterdir() if p.name.startswith(name))
    for what, secret in SECRETS.items():
        assert secret.encode() not in data, f"{what} found in {name}"
    if name != "report.md":  # the Markdown has no parameters; the others must show them
        assert VISIBLE.encode() in data


def test_v3_params_and_spec_text_are_stored_redacted_with_references_kept(stored):
    with duckdb.connect(str(stored / "runs.duckdb"), read_only=True) as con:
        (params,) = con.execute("SELECT model_params_json FROM runs").fetchone()
        (spec_text,) = con.execute("SELECT spec_text FROM experiments").fetchone()
    assert json.loads(params) == {
        "api_base": "https://[REDACTED]@llm.example.com/v1",
        "extra_headers": {
            "Authorization": "[REDACTED]",
            "X-Title": VISIBLE,
            "X-Api-Key": "os.environ/HOSTILE_TEST_KEY",  # litellm's reference, not a secret
        },
    }
    stored_spec = yaml.safe_load(spec_text)  # still YAML: comments and layout kept
    upstream = stored_spec["upstreams"][0]
    assert upstream["env"] == {"UPSTREAM_SECRET": "[REDACTED]"}
    headers = stored_spec["models"][0]["params"]["extra_headers"]
    assert headers["X-Api-Key"] == "os.environ/HOSTILE_TEST_KEY"
    assert headers["X-Title"] == VISIBLE
