"""Real providers through litellm (R3, L2): only on request, any model, any api_base.

    AGENT_HARNESS_LIVE=1 AGENT_HARNESS_LIVE_MODEL=openai/gpt-4o-mini OPENAI_API_KEY=... \\
        .venv/bin/pytest -q -m live

    AGENT_HARNESS_LIVE=1 AGENT_HARNESS_LIVE_MODEL=openai/qwen \\
        AGENT_HARNESS_LIVE_API_BASE=http://127.0.0.1:8080/v1 .venv/bin/pytest -q -m live

runs the model (AGENT_HARNESS_LIVE_RUNS times, default 3) on the booking service under F1 with
the user's "please try again", and checks that every run finished and was judged from what the
built-in upstream really executed. The pytest timeout is the subprocess's plus a margin, so the
subprocess's own timeout is the one that fires, with its output.
"""

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

LIVE_TIMEOUT_S = 1800  # for the whole `agent-harness run` of the live spec

pytestmark = [
    pytest.mark.live,
    pytest.mark.timeout(LIVE_TIMEOUT_S + 60),
    pytest.mark.skipif(
        os.environ.get("AGENT_HARNESS_LIVE") != "1"
        or not os.environ.get("AGENT_HARNESS_LIVE_MODEL"),
        reason="needs a real provider: set AGENT_HARNESS_LIVE=1 and AGENT_HARNESS_LIVE_MODEL "
        "(and AGENT_HARNESS_LIVE_API_BASE for a local server)",
    ),
]

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def live_spec(folder: Path) -> Path:
    """The model from the environment against the booking service, F1, 'please try again'."""
    params = {"temperature": 0.7}
    if os.environ.get("AGENT_HARNESS_LIVE_API_BASE"):
        params["api_base"] = os.environ["AGENT_HARNESS_LIVE_API_BASE"]
    spec = {
        "name": "live",
        "models": [{"name": os.environ["AGENT_HARNESS_LIVE_MODEL"], "params": params}],
        "prompts": [
            {
                "name": "hotel-assistant",
                "file": str(EXPERIMENTS / "prompts" / "hotel-assistant.txt"),
            }
        ],
        "upstreams": [{"name": "booking", "builtin": "booking"}],
        "scenarios": ["F1"],
        "conversations": [
            {
                "name": "try-again",
                "user": "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2",
                "follow_ups": ["That did not work. Please try again."],
            }
        ],
        "runs": int(os.environ.get("AGENT_HARNESS_LIVE_RUNS", "3")),
        "concurrency": 1,
        "limits": {"model_timeout_s": 300, "run_timeout_s": 900},
    }
    path = folder / "live.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def test_r3_real_model_runs_are_stored_and_judged_from_real_rows(tmp_path):
    db = tmp_path / "live.duckdb"
    exe = Path(sys.executable).parent / "agent-harness"
    args = [str(exe), "run", str(live_spec(tmp_path)), "--db", str(db)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=LIVE_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT status, error, verdict, duplicate_found, real_duplicate FROM runs"
        ).fetchall()
    assert rows, "no run stored"
    for status, error, verdict, duplicate_found, real_duplicate in rows:
        assert status == "ok", error
        assert verdict in ("PASS", "FAIL", "NOT_TESTED")
        if duplicate_found:
            assert real_duplicate  # the harness's duplicate is a real second booking
