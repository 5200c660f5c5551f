"""`agent-harness merge STORES -o OUT`: join the run stores of one experiment (G2)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.base.textsafe import terminal
from runner.exits import print_error as _error  # one line per problem


def merge_command(
    stores: Annotated[
        list[Path],
        typer.Argument(
            help="Run stores to join, e.g. the stores of a sweep's shards: read-only, never changed, each named once."
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "-o",
            "--out",
            help="The run store to merge into, created if missing (a file path: not :memory:, md:, a URL).",
        ),
    ],
) -> None:
    """Join run stores of one experiment (e.g. --shard jobs of a CI matrix) into one.

    A run already in the output is not stored again; stores made with two versions of one experiment's spec are refused. The inputs may come from anywhere: a file that is not a run store, or holds a view or a macro, is refused, and no input is changed. Exit codes: 0 merged, 1 bad input or a conflict (the output is left as it was; a new one is not created).
    """
    raise typer.Exit(merge(stores, out))


def merge(stores: list[Path], out: Path) -> int:
    """Merge run stores into `out`; print what each input added (G2)."""
    from runner.store import StoreError
    from runner.store.merge import merge_stores

    try:
        result = merge_stores(stores, out)
    except StoreError as exc:
        return _error("merge", str(exc))
    for path in stores:
        added, skipped = result.added[str(path)], result.skipped[str(path)]
        print(terminal(f"{path}: {added} runs added, {skipped} already there", lines=True))
    names = ", ".join(result.experiments) or "none"
    print(terminal(f"{out}: {result.runs} runs in all (experiments: {names})", lines=True))
    return 0
