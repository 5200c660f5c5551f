"""Cassettes (U2): a real upstream session recorded once, replayed as an MCP server that executes
nothing and counts every call it answers (the ground truth of a run against it).

`record_main` and `replay_main` are the two commands; `load` reads and validates a cassette;
`Replayer` answers from one and counts.
"""

from harness.cassette.format import VERSION, Cassette, CassetteError, load
from harness.cassette.main import record_main, replay_main
from harness.cassette.replay import Replayer

__all__ = ["VERSION", "Cassette", "CassetteError", "Replayer", "load", "record_main", "replay_main"]
