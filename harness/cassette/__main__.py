"""`python -m harness.cassette record|replay ...`: the cassette commands without the runner's
command line (the runner starts a spec's cassette upstream this way)."""

import sys

from harness.cassette.main import record_main, replay_main

args = sys.argv[1:]
if args[:1] == ["record"]:
    sys.exit(record_main(args[1:]))
if args[:1] == ["replay"]:
    sys.exit(replay_main(args[1:]))
print("usage: python -m harness.cassette record|replay ...", file=sys.stderr)
sys.exit(1)
