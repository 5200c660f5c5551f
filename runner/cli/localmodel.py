"""`python -m runner.cli.localmodel run SPEC --db DB -o HTML` (what `make run-local` calls).

Serves the local model (runner/models/local.py) on a free port of 127.0.0.1, runs the experiment
through litellm's real HTTP path with `AGENT_HARNESS_LOCAL_API_BASE` set to the server's
address (the spec names it as `os.environ/AGENT_HARNESS_LOCAL_API_BASE`, so the port never
changes a run id), writes the report, and stops the server on every way out (Ctrl-C and
SIGTERM included).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from runner.models.local import API_BASE_VAR, MODEL_ALIAS, LocalModelError, ended, serve


def _terminate_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # the with-blocks stop the server on the way out


def run(spec: Path, db: Path, html: Path, experiment: str | None, context: int = 4096) -> int:
    """Serve the local model, run the experiment against it, write the HTML report."""
    from runner.analysis.details import DEFAULT_MAX_DETAIL_RUNS
    from runner.cli.report import report
    from runner.execute.experiment import run_experiment

    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    started = time.monotonic()
    with serve(context=context) as server:
        os.environ[API_BASE_VAR] = server.api_base
        print(
            f"local model {MODEL_ALIAS} serving at {server.api_base} "
            f"(ready after {time.monotonic() - started:.1f} s)",
            file=sys.stderr,
        )
        code = run_experiment(
            spec, db=db, concurrency=None, resume=True, retry_errors=False, only=[],
            dry_run=False, in_process=None,
        )  # fmt: skip
        if server.process.poll() is not None:
            # The runs say only "connection refused"; the cause is the server's end (e.g. a
            # llama.cpp built for instructions this CPU does not grant: SIGSEGV at the first token).
            print(f"error: the local model server {ended(server)}", file=sys.stderr)
            code = code or 1
    if code in (130, 143):  # Ctrl-C, SIGTERM
        print("The model server is stopped.", file=sys.stderr)
    if code != 0:
        return code
    return report(db, html, "html", experiment, max_detail_runs=DEFAULT_MAX_DETAIL_RUNS)


def main(argv: list[str] | None = None) -> int:
    """`python -m runner.cli.localmodel run SPEC --db DB -o HTML` (used by `make run-local`)."""
    parser = argparse.ArgumentParser(prog="python -m runner.cli.localmodel", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="serve the local model, run a spec, write the report")
    run_p.add_argument("spec", type=Path)
    run_p.add_argument("--db", type=Path, default=Path("reports/local.duckdb"))
    run_p.add_argument("-o", "--output", type=Path, default=Path("reports/local.html"))
    run_p.add_argument("--experiment", default=None, help="report only this experiment")
    run_p.add_argument(
        "--context", type=int, default=4096, metavar="TOKENS",
        help="the model's context window (default 4096; SmolLM2 was trained to 8192): a CLI "
        "agent's system prompt and tools alone pass 4096",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.context < 512:
        parser.error(f"--context must be at least 512 tokens, not {args.context}")
    try:
        return run(args.spec, args.db, args.output, args.experiment, args.context)
    except LocalModelError as exc:
        print(f"run-local: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        from runner.exits import interrupt_handled

        print(
            "\nInterrupted: the model server is stopped; finished runs are stored.", file=sys.stderr
        )
        return interrupt_handled()


if __name__ == "__main__":
    sys.exit(main())
