"""Where things are: the repository, the installed command, the test servers."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent / "agent-harness"  # the console script `make setup` installs
SERVERS = Path(__file__).resolve().parent / "servers"
COUNTING_SERVER = SERVERS / "counting_server.py"
