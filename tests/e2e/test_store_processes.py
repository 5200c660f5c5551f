"""The DuckDB run store (R5) against other real processes: a lock held elsewhere, a writer killed.

Moved from tests/unit/test_store.py: these start processes (DESIGN: unit tests do not).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from runner.store import Store
from tests.support.paths import ROOT
from tests.support.records import child_counts


@pytest.mark.parametrize("read_only", [False, True])
def test_a_store_held_by_another_process_is_a_clear_error(tmp_path, read_only):  # R5
    path = tmp_path / "runs.duckdb"
    probe = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from runner.store import Store, StoreOpenError
        try:
            Store.open({str(path)!r}, read_only={read_only})
        except StoreOpenError as err:
            print(err)
        """
    )
    with Store.open(path):
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
        )
    assert "in use by another process" in out.stdout


_WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from tests.support.records import make_run
    from runner.store import Store
    store = Store.open(sys.argv[1])
    i = 0
    while True:
        store.save_run(make_run(f"r{{i:05d}}"))
        print(f"r{{i:05d}}", flush=True)
        i += 1
    """
)


@pytest.mark.slow
def test_a_killed_writer_loses_at_most_the_run_in_flight(tmp_path):  # R5
    script = tmp_path / "writer.py"
    script.write_text(_WRITER.format(root=str(ROOT)))
    db = tmp_path / "runs.duckdb"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db)], stdout=subprocess.PIPE, text=True
    )
    committed = []
    try:
        assert proc.stdout is not None
        while len(committed) < 25:
            line = proc.stdout.readline()
            assert line, "the writer ended early"
            committed.append(line.strip())
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    # Lines the writer printed before it died: each was committed before it was printed.
    committed += proc.stdout.read().split()
    with Store.open(db) as store:
        stored = store.finished_run_ids("exp")
        assert set(committed) <= stored
        # At most one run was committed but not yet reported when the kill came.
        assert len(stored) <= len(committed) + 1
        # Every stored run is whole: no run without its children.
        counts = child_counts(store)
        assert counts["transcripts"] == 3 * counts["runs"]
        assert counts["operations"] == counts["runs"] == counts["patches"]


_BATCH_WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from runner.store import Store, feed, opening
    from tests.support.records import make_run
    # Small row groups and slices: DuckDB writes row groups to the file during the INSERT
    # (before the commit) and the helper thread converts, as for the bench's 100,000 runs.
    opening.ROW_GROUP_ROWS, feed.SLICE_ROWS = 2048, 1000
    store = Store.open(sys.argv[1])
    first = [make_run(f"a{{i:05d}}") for i in range(12_000)]
    second = [make_run(f"b{{i:05d}}") for i in range(12_000)]
    store.save_runs(first)
    print("committed", flush=True)
    store.save_runs(second)
    print("second committed", flush=True)
    """
)


@pytest.mark.slow
def test_a_large_batch_committed_before_a_kill_is_whole_after_it(tmp_path):  # R5, N2
    script = tmp_path / "writer.py"
    script.write_text(_BATCH_WRITER.format(root=str(ROOT)))
    db = tmp_path / "runs.duckdb"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "committed"
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # the second batch in flight, or just committed
        proc.wait()
    with Store.open(db) as store:
        stored = store.finished_run_ids("exp")
        first = {f"a{i:05d}" for i in range(12_000)}
        second = {f"b{i:05d}" for i in range(12_000)}
        assert stored in (first, first | second)  # each batch whole or absent
        counts = child_counts(store)
        assert counts["transcripts"] == 3 * counts["runs"]
        assert counts["operations"] == counts["runs"] == counts["patches"]
