"""The fault table of the docs (README.md, docs/proxy.md), generated from the registry."""

from __future__ import annotations

from harness.faults.base import SESSION_REVISIONS, Fault, shown
from harness.faults.registry import FAULTS


def fault_table_markdown() -> str:
    """The registry as a Markdown table (README.md, docs/proxy.md; `make docs` writes it)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    def transports(kind: type[Fault]) -> str:
        if kind.needs_session:
            return f"HTTP agent (`--listen`) with a session ({', '.join(SESSION_REVISIONS)})"
        return "HTTP agent (`--listen`)" if kind.http_only else "stdio or HTTP"

    def params(kind: type[Fault]) -> str:
        if not kind.scenario:  # chaos is a mode: its flags are PlanConfig's, not Params
            return "`--mode chaos --error-rate R` (0-1), `--seed N` makes it reproducible"
        return (
            "<br>".join(
                f"`{p.flag} {p.metavar}` (spec `{p.key}`): default {shown(p.default)}, {p.bounds()}"
                for p in kind.params
            )
            or "none"
        )

    def benchmark(kind: type[Fault]) -> str:
        verdicts = kind.reference_verdicts
        if verdicts:
            return ", ".join(f"{agent} {verdict}" for agent, verdict in verdicts.items())
        return "none said: refused" if kind.simulated and kind.scenario else "not played"

    rows = [
        "| Fault | On | What the agent sees | Runs upstream first | Agent transport "
        "| Parameters | In the demo | `benchmark` verdicts | FAIL when |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, kind in FAULTS.items():
        cells = (
            f"**{name}** {kind.brief}", kind.applies_to, kind.summary, kind.wire.value,
            transports(kind), params(kind), "yes" if kind.simulated else "no", benchmark(kind),
            kind.duplicate_when,
        )  # fmt: skip
        rows.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return "\n".join(rows) + "\n"
