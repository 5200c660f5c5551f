"""How a runner command ends: its exit code, its one-line errors, its status lines on stderr.

Every user error ends as one line on stderr and exit code 1; no tracebacks (V4). Exit codes
(V5; the same in `--help` and docs): 0 done, 1 bad input, 2 a regression (`sweep`), 3 a run
failed to run or was not run, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM). The command
line (runner/cli/) and the engines it calls (runner/execute/) both end this way.
"""

from __future__ import annotations

import sys

from harness.base.textsafe import terminal

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_REGRESSION = 2
EXIT_RUNS_FAILED = 3
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT)
EXIT_TERMINATED = 143  # SIGTERM (128 + 15, as a shell reports it): ended like Ctrl-C (V14)


def interrupt_handled() -> int:
    """Ctrl-C was caught and handled: returns EXIT_INTERRUPTED, and makes it the exit code.

    CPython 3.11 marks the process to kill itself with SIGINT at exit, caught or not, once a
    KeyboardInterrupt has passed through `exec` of a string (dataclasses and namedtuples build
    their methods that way while modules import) when it runs as `python -m` (`make run-local`);
    the exit status would then be "killed by SIGINT" instead of 130. A fresh `exec` of a string
    clears the mark."""
    exec("pass")
    return EXIT_INTERRUPTED


def print_error(command: str, message: str) -> int:
    """One error line per problem (a spec can have several, one per FILE:LINE), each escaped
    on its own so no foreign text can drive the terminal (V4, V6); returns EXIT_ERROR."""
    for line in message.splitlines() or [""]:
        print(f"agent-harness {command}: error: {terminal(line)}", file=sys.stderr)
    return EXIT_ERROR


def say(line: str) -> None:
    """A line for the user on stderr; names and errors in it cannot drive the terminal (V6)."""
    print(terminal(line, lines=True), file=sys.stderr)
