"""Real providers through litellm (R3): only with AGENT_HARNESS_LIVE=1 and a key or local server.

    AGENT_HARNESS_LIVE=1 AGENT_HARNESS_LIVE_MODEL=openai/gpt-4o-mini OPENAI_API_KEY=... \\
        .venv/bin/pytest -q -m live

runs one cell of experiments/models.yaml (its ten repetitions) against the model and checks that
every run finished and was judged from what the built-in upstream really executed.
"""

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        os.environ.get("AGENT_HARNESS_LIVE") != "1",
        reason="needs a real provider: set AGENT_HARNESS_LIVE=1 and AGENT_HARNESS_LIVE_MODEL",
    ),
]

SPEC = Path(__file__).resolve().parents[2] / "experiments" / "models.yaml"


def test_r3_one_real_model_run_is_stored_and_judged(tmp_path):
    model = os.environ.get("AGENT_HARNESS_LIVE_MODEL", "ollama_chat/qwen3:14b")
    db = tmp_path / "live.duckdb"
    exe = Path(sys.executable).parent / "agent-harness"
    only = [f"model={model}", "upstream=booking", "conversation=try-again", "patch=none"]
    args = [str(exe), "run", str(SPEC), "--db", str(db), "--concurrency", "1"]
    for item in only:
        args += ["--only", item]
    done = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT status, error, verdict, duplicate_found, real_duplicate FROM runs"
        ).fetchall()
    assert rows, "no run stored"
    for status, error, verdict, duplicate_found, real_duplicate in rows:
        assert status == "ok", error
        assert verdict in ("PASS", "FAIL", "NOT_TESTED")
        if verdict == "FAIL" and duplicate_found:
            assert real_duplicate  # the harness's duplicate is a real second booking
