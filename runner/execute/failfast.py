"""Q2: stop a model's remaining runs once its setup is clearly broken.

A sweep of a model with no key, or against a local server that is not running, fails every
run the same way, each after the runner's retries: 126 of 240 runs in ten minutes, seen. After
STREAK runs of one model in a row fail with the same setup failure (a missing or refused key,
a refused connection, a model the server does not know, or a command agent that ended before
its MCP session started), the model's runs not yet started are not run: they count as not run
(exit 3); once the cause is mended, the same command with `--retry-errors` runs the failed
ones and the rest (`--keep-going`: never stop). Runs already in flight finish and are stored.

Why 3: each of those runs already had the spec's retries (`retry.attempts`) for a refused
connection, so three in a row rule out a one-off (a local server restarting between two runs)
while a broken setup costs at most three runs plus the ones in flight; a missing key is
deterministic, and a larger number only burns more runs before saying so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from runner.models.calls import INFRASTRUCTURE_KINDS

STREAK = 3
AGENT_DID_NOT_START = "the agent did not start its MCP session"
# How the run's error names its kind: `model call failed (missing or refused key): ...`
# (runner.execute.run), `the agent exited with code 2 before its MCP session started ...`
# (runner.execute.command).
_MODEL_KIND = re.compile(
    r"^model call failed \((" + "|".join(map(re.escape, INFRASTRUCTURE_KINDS)) + r")\):"
)
_NO_SESSION = "before its MCP session started"


def failure_kind(error: str | None) -> str | None:
    """The setup failure a run's error names, or None (a run that ran, or failed otherwise)."""
    if not error:
        return None
    found = _MODEL_KIND.match(error)
    if found:
        return found.group(1)
    return AGENT_DID_NOT_START if error.startswith("the agent ") and _NO_SESSION in error else None


@dataclass
class _Streak:
    kind: str | None = None
    count: int = 0
    label: str = ""
    error: str = ""


@dataclass
class FailFast:
    """Per model of the matrix: the failures of one kind in a row, and which models stopped."""

    keep_going: bool = False
    streak: int = STREAK
    _streaks: dict[Any, _Streak] = field(default_factory=dict)
    stopped: dict[Any, _Streak] = field(default_factory=dict)
    skipped: dict[Any, int] = field(default_factory=dict)  # model -> runs not started

    def add(self, model: Any, label: str, error: str | None) -> None:
        """A finished run of `model` (labelled `label`) with its error, if any."""
        if self.keep_going or model in self.stopped:
            return
        kind = failure_kind(error)
        streak = self._streaks.setdefault(model, _Streak(label=label))
        streak.count = streak.count + 1 if kind is not None and kind == streak.kind else 1
        streak.kind, streak.error = kind, error or ""
        if kind is not None and streak.count >= self.streak:
            self.stopped[model] = streak

    def skip(self, model: Any) -> bool:
        """Whether a run of `model` is not to start (then counted as skipped)."""
        if model not in self.stopped:
            return False
        self.skipped[model] = self.skipped.get(model, 0) + 1
        return True

    def lines(self) -> list[str]:
        """One line per stopped model: why, and how many of its runs were not started."""
        return [
            f"Stopped {s.label}: {s.count} runs in a row failed the same way ({s.kind}), so its "
            f"other {self.skipped.get(model, 0)} runs were not started (mend it, then run the "
            "same command with --retry-errors; --keep-going never stops). The last error: "
            f"{s.error}"
            for model, s in self.stopped.items()
        ]
