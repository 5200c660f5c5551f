"""Issue 21's agent shapes as scripted models in real runs against real servers (E1, E2).

Each run is the runner's own `execute_run`: the scripted model through litellm, a real
`agent-harness proxy` subprocess, and a third-party or SDK server whose own state is the ground
truth: server-filesystem's file on disk, the SQLite rows of tests/support/servers/shop_server.py.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from runner.execute import execute_run  # noqa: E402
from runner.experiment import load_spec  # noqa: E402
from runner.experiment.matrix import expand  # noqa: E402
from runner.experiment.records import RunRecord  # noqa: E402
from tests.support.paths import SERVERS  # noqa: E402
from tests.support.specs import write_spec  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SHOP = SERVERS / "shop_server.py"


async def run(tmp_path: Path, model: str, upstream: dict[str, Any], user: str) -> RunRecord:
    spec = load_spec(write_spec(
        tmp_path, "shapes", models=[model], upstreams=[{"name": "server", **upstream}],
        scenarios=["none"], conversations=[{"name": "single", "user": user}],
    ))  # fmt: skip
    (cell,) = expand(spec)
    return await execute_run(cell, spec, keep_dir=tmp_path / "kept")


def findings(record: RunRecord) -> list[str]:
    return [f.code for f in record.findings]


async def test_e1_idempotent_rewrite_of_a_file_is_a_pass_that_shows_the_repeat(
    tmp_path, filesystem_server_cmd, filesystem_root
):
    note = filesystem_root / "note.txt"
    upstream = {"command": filesystem_server_cmd[0], "args": filesystem_server_cmd[1:]}
    record = await run(tmp_path, "scripted/idempotent-rewrite", upstream,
                       f"Please write the file. path: {note}, content: hello")  # fmt: skip
    assert record.error is None, record.error
    assert note.read_text() == "hello"  # ground truth: the state of one write
    writes = [e for e in record.transcript if e.role == "tool" and e.tool_name == "write_file"]
    assert len(writes) == 2
    assert record.verdict == "PASS"
    assert "IDEMPOTENT_REPEAT" in findings(record)


async def test_e2_polls_status_of_an_order_is_a_pass(tmp_path):
    db = tmp_path / "shop.sqlite"
    upstream = {"command": sys.executable, "args": [str(SHOP), "--db", str(db)]}
    record = await run(tmp_path, "scripted/polls-status", upstream,
                       "Place an order. symbol: ACME, qty: 1")  # fmt: skip
    assert record.error is None, record.error
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 1
        polls = conn.execute("SELECT tool FROM polls").fetchall()
    assert polls == [("order_status",), ("order_status",)]  # polled twice, wrote nothing
    assert record.verdict == "PASS"
    report = json.loads(record.report_json or "{}")
    classes = {t["name"]: t["class"] for t in report["toolClassification"]}
    assert classes["order_status"] == "read"
