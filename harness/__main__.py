"""`python -m harness proxy ARGS`: the chaos proxy alone, without the runner's command line."""

import sys

from harness.proxy.main import main

args = sys.argv[1:]
sys.exit(main(args[1:] if args[:1] == ["proxy"] else args))
