"""`python -m harness ...`: the harness's own commands (proxy, judge, benchmark, demo)."""

from harness.cli import harness_app

harness_app()()
