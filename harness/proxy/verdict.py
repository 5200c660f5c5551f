"""What a proxy started by hand says at its end (Q3): the verdict in one line, and where the
report is, even when nobody asked for a report file.

A proxy put into a desktop agent's MCP configuration, or started as in the first example of
docs/proxy.md, has no `--report-file`: its verdict would go nowhere. Such a proxy keeps its
report in a file of its own under the user's state folder, `$XDG_STATE_HOME/agent-harness/
reports/` (else `~/.local/state/agent-harness/reports/`), named by its start time and pid, so
that two proxies never share one and no proxy continues another's judgement (X14 continues a
report only from its own event log). A desktop agent starts its servers in a folder of its
choosing (`/` on macOS), so the current folder is no place for it. `--no-report-file` writes
none; the verdict line is printed all the same. A proxy given `--event-log` keeps no default
report: `agent-harness judge LOG` makes it from the log.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.judge.summary import Verdict


def state_folder() -> Path:
    """`$XDG_STATE_HOME/agent-harness/reports`, else under `~/.local/state`."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "agent-harness" / "reports"


def default_report_path(now: float | None = None, pid: int | None = None) -> Path:
    """A new report file's path under the state folder (the folder is made, owner-only)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    folder = state_folder()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder / f"proxy-{stamp}-{pid or os.getpid()}.json"


def verdict_line(v: Verdict, score: Mapping[str, Any], where: str) -> str:
    """`verdict: FAIL, score 31/100: <why>; report: PATH`, from the session's verdict and score
    (`Session.verdict`: not the whole report, which a long session would build only to say one
    line); `where`: the report file, or why there is none."""
    overall = score.get("overall")
    scored = f", score {overall}/100" if isinstance(overall, int) else " (no score)"
    reason = v.reason.rstrip(".")
    return f"verdict: {v.verdict}{scored}: {reason}; report: {where}"
