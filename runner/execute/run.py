"""One cell of the matrix -> one run record (R3, R4, R5).

A run: start the proxy (subprocess or in process) in front of the cell's upstream, connect an
MCP client, drive the model through litellm over the conversation, end the session, then read
what the harness judged (the report file), what happened (the event log, the transcript) and,
for built-in upstreams, how many rows really exist per operation (ground truth).

This is the run of the runner's own agent loop (`execute_loop_run`); the frame around the
conversation (the proxy target, the truth probe, what the run left and its record) serves a
command agent's run too (command.py). `execute_run` (cell.py) picks one by the cell's agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import __version__
from harness.base import jsonutil
from harness.base.errors import HarnessError, low_space, no_space
from harness.base.infile import read_text
from harness.proxy import DEFAULT_KEY_FIELDS, ClassifierConfig, HeaderSpec
from harness.report import MAX_REPORT_BYTES, ReportModel, read_report
from runner.analysis.agreement import judge_agreement
from runner.analysis.attribution import attribute
from runner.execute import record as rec
from runner.execute.cassettes import CASSETTE_COUNT, cassette_replay_args, cassette_truth
from runner.execute.connect import (
    EVENT_LOG_FILE,
    REPORT_FILE,
    Connection,
    ProxyTarget,
    in_process_connection,
    subprocess_connection,
)
from runner.execute.effects import (
    Contradiction,
    Entry,
    contradicted_by_records,
    contradicted_by_rows,
    effects,
    effects_per_operation,
    match,
)
from runner.execute.judging import judge_honesty
from runner.execute.probe import ProbeFailed, read_state
from runner.experiment import AgentSpec, ExperimentSpec, TruthProbe
from runner.experiment.matrix import RunCell
from runner.experiment.records import FindingRow, RunRecord
from runner.models.calls import takes_seed
from runner.models.loop import (
    AgentResult,
    LoopLimits,
    ModelCallFailed,
    RetryPolicy,
    render_tool_error,
    render_tool_result,
    run_conversation,
    to_openai_tool,
)
from runner.processes.workdirs import UnmadeFolder, run_workdir

# How a run reaches its proxy: (the proxy's target, the run's folder) -> an MCP connection.
Connect = Callable[[ProxyTarget, Path], AbstractAsyncContextManager[Connection]]


def proxy_target(cell: RunCell, spec: ExperimentSpec, workdir: Path) -> ProxyTarget:
    """The proxy flags and upstream for a cell."""
    upstream = cell.upstream
    plan = cell.scenario.plan(cell.seed, spec.proxy.fault_delay_ms)
    classifier = ClassifierConfig(
        write_globs=tuple(upstream.write_tools) if upstream.write_tools else None,
        read_globs=tuple(upstream.read_tools or ()),
        key_fields=tuple(upstream.key_fields) if upstream.key_fields else DEFAULT_KEY_FIELDS,
        keys_honoured=_keys_honoured(upstream.builtin),
        idempotent_globs=tuple(upstream.idempotent_tools or ()),
        distrust_annotations=upstream.distrust_annotations,
        statement_globs=tuple(upstream.statement_tools or ()),
        strict_errors=upstream.strict_errors,
        use_profiles=upstream.profiles,
    )
    common = {
        "agent_over_http": spec.proxy.agent == "http",
        "plan": plan,
        "classifier": classifier,
        "upstream_timeout_s": spec.limits.upstream_timeout_s,
    }
    if upstream.builtin is not None:
        from runner.upstreams import http_command, stdio_command

        db = workdir / "upstream.sqlite"
        command = stdio_command(upstream.builtin, db)
        return ProxyTarget(
            upstream_command=command[0],
            upstream_args=tuple(command[1:]),
            upstream_env={},
            upstream_cwd=None,
            builtin_kind=upstream.builtin,
            builtin_db=db,
            serve_over_http=tuple(http_command(upstream.builtin, db))
            if upstream.transport == "http"
            else None,
            **common,
        )
    if upstream.url is not None:
        return ProxyTarget(
            upstream_command=None,
            upstream_args=(),
            upstream_env={},
            upstream_cwd=None,
            upstream_url=upstream.url,
            # V3: the proxy reads each value from the runner's environment; only names travel.
            upstream_headers=tuple(
                HeaderSpec(name, env=value.removeprefix("os.environ/"))
                for name, value in upstream.headers.items()
            ),
            **common,
        )
    if upstream.cassette is not None:  # U2: the replay counts what it answers into the workdir
        return ProxyTarget(
            upstream_command=sys.executable,
            upstream_args=cassette_replay_args(
                upstream.cassette, upstream.unmatched, workdir,
                tuple(upstream.idempotent_tools or ()),
            ),
            upstream_env={},
            upstream_cwd=None,
            **common,
        )
    return ProxyTarget(
        upstream_command=upstream.command or "",
        upstream_args=tuple(upstream.args),
        upstream_env=dict(upstream.env),
        # Relative to where the runner is started (the proxy runs in the run's own folder).
        upstream_cwd=str(Path(upstream.cwd).absolute()) if upstream.cwd is not None else None,
        **common,
    )


def _keys_honoured(builtin: str | None) -> tuple[str, ...]:
    """K6: what a built-in upstream declares about its idempotency keys."""
    if builtin is None:
        return ()
    from runner.upstreams import BUILTIN_UPSTREAMS

    return BUILTIN_UPSTREAMS[builtin].keys_honoured


def uses_in_process(cell: RunCell, spec: ExperimentSpec, override: str | None = None) -> bool:
    mode = override or spec.proxy.in_process
    builtin_stdio = cell.upstream.builtin is not None and cell.upstream.transport == "stdio"
    return builtin_stdio and spec.proxy.agent == "stdio" and mode in ("auto", "always")


def system_prompt(cell: RunCell, patch_text: str | None) -> str:
    """The cell's prompt with the patch text appended verbatim (R2)."""
    if not patch_text:
        return cell.prompt.text
    return f"{cell.prompt.text.rstrip()}\n\n{patch_text}"


async def execute_loop_run(
    cell: RunCell,
    spec: ExperimentSpec,
    *,
    patch_text: str | None = None,
    in_process: str | None = None,
    keep_dir: Path | None = None,
    connect: Connect | None = None,
) -> RunRecord:
    """Run one cell once with the runner's own agent loop (`execute_run` in cell.py picks it);
    provider and proxy failures become a record with status=error. `connect`: as there."""
    started_at = datetime.now(UTC)
    started = time.perf_counter()
    hosted_here = connect is None and uses_in_process(cell, spec, in_process)
    # In process the ledger and the report stay in memory: no folder unless one is kept.
    unmade = UnmadeFolder(cell.run_id) if hosted_here else None
    workdir_ctx = unmade or run_workdir(cell.run_id)
    workdir = Path(workdir_ctx.name)
    connection: Connection | None = None
    try:  # the folder is removed however the run ends, a cancelled run's too
        target = proxy_target(cell, spec, workdir)
        if connect is None:
            connect = in_process_connection if hosted_here else subprocess_connection
        agent = AgentResult()
        error: str | None = None
        probe = cell.upstream.truth_probe
        probed: Probed | None = None
        async with _probe_lock(cell.experiment, cell.upstream.name, probe):
            before = await _read_probe(probe) if probe is not None else None
            try:
                async with asyncio.timeout(spec.limits.run_timeout_s):
                    async with connect(target, workdir) as connection:
                        await _converse(cell, spec, connection, patch_text, agent)
            except TimeoutError:
                error = f"run timed out after {spec.limits.run_timeout_s:g} s"
            except Exception as exc:  # one run inside a batch: it becomes an error record (DESIGN)
                error = _describe(exc, connection, workdir)
            if probe is not None:
                after = await _read_probe(probe)
                probed = Probed.of(before, after)
        left = RunLeft(cell, connection, workdir)
        record = _record(
            cell, spec, patch_text, agent, error, connection, workdir, started_at, started,
            probed, left,
        )  # fmt: skip
        if record.status == "ok":
            await _judge_honesty(record, cell, spec, agent, connection, workdir, left)
        return record
    finally:
        ledger = connection.ledger if connection is not None else None
        if keep_dir is not None:
            import shutil

            # Kept as files, as a run whose proxy and upstream are processes leaves them.
            if unmade is not None:
                unmade.make()
            if ledger is not None:
                ledger.save(workdir / "upstream.sqlite")
            if (text := _final_report(connection)) is not None:
                (workdir / REPORT_FILE).write_text(text, encoding="utf-8")
            shutil.copytree(workdir, keep_dir / cell.run_id, dirs_exist_ok=True)
        if ledger is not None:
            ledger.close()
        # Removing the files (SQLite, WAL, report) is slow file-system work: off the loop
        # that hosts the other runs, and finished even when this run is cancelled.
        if unmade is None or unmade.made():
            await asyncio.shield(asyncio.to_thread(workdir_ctx.cleanup))


# T1: runs against one upstream with a truth probe never overlap (the probe reads state that
# all of them share), within this process; the other runs go on side by side.
_PROBE_LOCKS: dict[tuple[str, str], asyncio.Lock] = {}


def _probe_lock(
    experiment: str, upstream: str, probe: TruthProbe | None
) -> AbstractAsyncContextManager[Any]:
    if probe is None:
        return contextlib.nullcontext()
    return _PROBE_LOCKS.setdefault((experiment, upstream), asyncio.Lock())


async def _read_probe(probe: TruthProbe) -> Counter[str] | str:
    """The state the probe reads, or why it failed (one line)."""
    try:
        return await read_state(probe)
    except ProbeFailed as exc:
        return str(exc)


@dataclass(frozen=True)
class Probed:
    """What a truth probe made of a run (T1): the records it changed, or why it could not tell."""

    entries: list[Entry] | None
    failed: str | None

    @classmethod
    def of(cls, before: Counter[str] | str | None, after: Counter[str] | str) -> Probed:
        for when, state in (("before", before), ("after", after)):
            if isinstance(state, str):
                return cls(None, f"{state} (read {when} the run)")
        assert isinstance(before, Counter) and isinstance(after, Counter)
        return cls(effects(before, after), None)


def failed_run(
    cell: RunCell, spec: ExperimentSpec, patch_text: str | None, error: str
) -> RunRecord:
    """The record of a run that never ran to an end anywhere (e.g. its Ray task was lost)."""
    with tempfile.TemporaryDirectory(prefix="agent-harness-failed-") as empty:
        now, started = datetime.now(UTC), time.perf_counter()
        return _record(
            cell, spec, patch_text, AgentResult(), error, None, Path(empty), now, started
        )


async def _converse(
    cell: RunCell,
    spec: ExperimentSpec,
    connection: Connection,
    patch_text: str | None,
    agent: AgentResult,
) -> AgentResult:
    """The conversation, recorded into `agent` as it goes (kept when the run fails later)."""
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    session = connection.session
    tools: list[Any] = []
    cursor = None
    while True:
        page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break

    async def call_tool(name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        # send_request, not call_tool: the SDK's call_tool validates structuredContent against
        # the outputSchema and would turn an upstream's mismatch into a client-side exception.
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=name, arguments=arguments)
        )
        try:
            result = await session.send_request(
                request, types.CallToolResult,
                request_read_timeout_seconds=spec.limits.tool_timeout_s,
            )  # fmt: skip
        except MCPError as exc:
            # X13: the upstream's JSON-RPC error reaches the agent as it was sent; an agent
            # shows its model the error, as it would a tool result with isError.
            return render_tool_error(exc.error.code, exc.error.message)
        return render_tool_result(result)

    limits = spec.limits
    params = cell.model.params.as_kwargs()
    if cell.model.name.startswith("scripted/"):
        from runner.models.scripted import register_scripted_provider

        register_scripted_provider()
    if takes_seed(cell.model.name, params):
        params["seed"] = cell.seed  # a run can be replayed where the provider honours it
    return await run_conversation(
        model=cell.model.name,
        params=params,
        system_prompt=system_prompt(cell, patch_text),
        user_messages=[cell.conversation.user, *cell.conversation.follow_ups],
        tools=[to_openai_tool(t) for t in tools],
        call_tool=call_tool,
        limits=LoopLimits(
            max_turns=limits.max_turns,
            max_tool_calls=limits.max_tool_calls,
            model_timeout_s=limits.model_timeout_s,
            max_tokens=limits.max_tokens,
        ),
        retry=RetryPolicy(spec.retry.attempts, spec.retry.backoff_s, spec.retry.max_backoff_s),
        seed=cell.seed,
        into=agent,
    )


def _describe(exc: BaseException, connection: Connection | None, workdir: Path) -> str:
    if isinstance(exc, BaseExceptionGroup):
        leaves = exc.exceptions
        while len(leaves) == 1 and isinstance(leaves[0], BaseExceptionGroup):
            leaves = leaves[0].exceptions
        exc = leaves[0]
    # Raised inside the MCP session, it arrives wrapped in the session's task group.
    if isinstance(exc, ModelCallFailed):  # Q2: its kind, when the setup is the cause
        return f"model call failed{f' ({exc.kind})' if exc.kind else ''}: {exc}"
    stderr = workdir / "proxy.stderr"
    said = stderr.read_text(errors="replace") if stderr.exists() else ""
    # V20: a full disk under the run (its folder, the upstream's database) is said as such,
    # whoever met it (this process, the proxy, the upstream), in one line.
    full = no_space(exc, workdir) or no_space(said, workdir)
    if full is not None:
        return full
    text = (str(exc).strip().splitlines() or [""])[0][:300]
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    tail = [line for line in said.splitlines() if "ERROR" in line]
    if tail:
        message += f" (proxy: {tail[-1][:300]})"
    elif (low := low_space(workdir)) is not None:
        message += f" ({low})"  # the proxy could not even say why: its stderr is on that disk
    return message


def _final_report(connection: Connection | None) -> str | None:
    """The in-process proxy's final report text (None: a file report, or none)."""
    if connection is None or connection.final_report is None:
        return None
    return connection.final_report()


def _events(connection: Connection | None, workdir: Path) -> list[Any]:
    """What the proxy recorded: in process the events themselves, else its event log."""
    if connection is not None and connection.events:
        return connection.events
    return rec.load_events(workdir / EVENT_LOG_FILE)


class RunLeft:
    """What a run left behind, each read once (issue 24): the proxy's events (in process the
    events themselves, else its event log, parsed once) and the built-in upstream's ledger
    (opened once for the ground truth and every operation's real rows)."""

    def __init__(
        self,
        cell: RunCell,
        connection: Connection | None,
        workdir: Path,
        events: list[Any] | None = None,
    ) -> None:
        self._cell, self._connection, self._workdir = cell, connection, workdir
        self._events = events
        self._ledger: tuple[list[dict[str, Any]] | None, list[int | None]] | None = None

    @property
    def events(self) -> list[Any]:
        if self._events is None:
            self._events = _events(self._connection, self._workdir)
        return self._events

    def ledger(self, operations: list[Any]) -> tuple[list[dict[str, Any]] | None, list[int | None]]:
        """The built-in upstream's records after the run (None when the run has no built-in
        upstream or it never started), and each operation's real rows (None without them)."""
        if self._ledger is None or len(self._ledger[1]) != len(operations):  # read for these
            db = self._workdir / "upstream.sqlite"
            kind = self._cell.upstream.builtin
            live = self._connection.ledger if self._connection is not None else None
            if live is not None:
                self._ledger = live.facts((op.tool, _plain(op.arguments)) for op in operations)
            elif kind is None or not db.exists():
                self._ledger = (None, [None] * len(operations))
            else:
                from runner.upstreams import ledger_facts

                calls = [(op.tool, _plain(op.arguments)) for op in operations]
                self._ledger = ledger_facts(kind, db, calls)
        return self._ledger

    @property
    def truth(self) -> list[dict[str, Any]] | None:
        """The built-in upstream's records (read with no operations if `ledger` was not)."""
        return self.ledger([])[0]


async def _judge_honesty(
    record: RunRecord, cell: RunCell, spec: ExperimentSpec, agent: AgentResult,
    connection: Connection | None, workdir: Path, left: RunLeft | None = None,
) -> None:  # fmt: skip
    """Fill the record's honesty columns (M1) from the spec's judge."""
    left = left or RunLeft(cell, connection, workdir)
    verdict = await judge_honesty(spec, agent.messages, left.truth, left.events, cell.seed)
    note = verdict.extra.get("detail") or verdict.extra.get("why")
    record.honesty_label = verdict.label
    record.honesty_claim = verdict.claim
    record.honesty_evidence = verdict.evidence
    record.honesty_confidence = verdict.confidence
    record.honesty_judge = verdict.judge
    record.honesty_note = note
    record.honesty_error = verdict.error
    record.honesty_cost_usd = verdict.cost_usd


def _record(
    cell: RunCell,
    spec: ExperimentSpec,
    patch_text: str | None,
    agent: AgentResult,
    error: str | None,
    connection: Connection | None,
    workdir: Path,
    started_at: datetime,
    started: float,
    probed: Probed | None = None,
    left: RunLeft | None = None,
) -> RunRecord:
    left = left or RunLeft(cell, connection, workdir)
    report_path = workdir / REPORT_FILE
    report_file: ReportModel | None = None
    # In process the text is handed over (not written and read back); else the file's.
    report_json = _final_report(connection)
    try:
        if report_json is None and report_path.exists():
            # Read once: the text is what is stored, the model what is judged (issue 24).
            report_json = read_text(report_path, "report file", MAX_REPORT_BYTES)
        if report_json is not None:
            report_file = read_report(report_json)
    except HarnessError:
        error = error or "the proxy left an unreadable report file"
        if report_json is None:
            report_json = report_path.read_text()  # stored as it is, as before
    report = report_file.report if report_file is not None else None
    if error is None and report is None:
        error = "the proxy wrote no report"
    judged = report if error is None else None  # a run that failed to run has no verdict
    score = report_file.score if report_file is not None and judged is not None else None
    events = left.events
    operations = report.operations if report is not None else []
    real: list[int | None] = [None] * len(operations)
    real_duplicate = None
    probe_failed: str | None = None
    truth, ledger_rows = left.ledger(operations)
    contradictions: list[Contradiction] = []
    declared = _declared_idempotent(report)
    if cell.upstream.builtin is not None and truth is not None:
        real = ledger_rows
        real_duplicate = any(entry["rows"] > 1 for entry in truth)
        contradictions = contradicted_by_rows(operations, real, declared)
    elif cell.upstream.cassette is not None and report_file is not None:
        keys = tuple(cell.upstream.key_fields or DEFAULT_KEY_FIELDS)
        counted = cassette_truth(
            workdir / CASSETTE_COUNT, operations, report_file.tool_classification, keys
        )
        truth, real, probe_failed = counted.truth, counted.real, counted.failed
        real_duplicate = counted.duplicate
    elif probed is not None and probed.entries is not None:
        truth = [entry.as_truth() for entry in probed.entries]
        plain = [_Args(_plain(op.arguments)) for op in operations]
        owners = match(probed.entries, plain)
        real = effects_per_operation(probed.entries, owners, len(operations))
        real_duplicate = any(entry.rows > 1 for entry in probed.entries)
        contradictions = contradicted_by_records(operations, probed.entries, owners, declared)
    agreed = (
        judge_agreement(
            judged, truth, cell.labels["upstream"],
            probe_failed=probed.failed if probed is not None else probe_failed,
            records=probed is not None, contradicted=[c.tool for c in contradictions],
            cassette=cell.upstream.cassette is not None,
        )
        if judged is not None
        else None
    )  # fmt: skip
    usage = agent.usage
    record = RunRecord(
        run_id=cell.run_id,
        experiment=cell.experiment,
        cell_id=cell.cell_id,
        repetition=cell.repetition,
        seed=cell.seed,
        model=cell.labels["model"],
        model_params_json=_model_params_json(cell),
        prompt=cell.labels["prompt"],
        patch_arm=cell.labels["patch"],
        patch_text=patch_text,
        upstream=cell.labels["upstream"],
        scenario=cell.labels["scenario"],
        conversation=cell.labels["conversation"],
        status="error" if error else "ok",
        error=error,
        verdict=judged.verdict if judged is not None else None,
        verdict_reason=judged.verdict_reason if judged is not None else None,
        score_overall=score.overall if score is not None else None,
        duplicate_safety=score.duplicate_safety if score is not None else None,
        failure_handling=score.failure_handling if score is not None else None,
        capped=score.capped if score is not None else None,
        baseline=score.baseline if score is not None else None,
        duplicate_found=("DUPLICATE_EXECUTION" in judged.violation_codes())
        if judged is not None
        else None,
        real_duplicate=real_duplicate if not error else None,
        agreement=agreed.state if agreed else None,
        agreement_reason=agreed.reason if agreed else None,
        turns=agent.turns,
        tool_calls=agent.tool_calls,
        tokens_prompt=usage.prompt_tokens,
        tokens_completion=usage.completion_tokens,
        cost_usd=usage.cost_usd,
        latency_ms=(time.perf_counter() - started) * 1000,
        final_answer=agent.final_answer,
        stopped_by=agent.stopped_by,
        started_at=started_at,
        finished_at=datetime.now(UTC),
        harness_version=__version__,
        report_json=report_json,
        operations=rec.operations(operations, real),
        findings=rec.findings(report)
        + _contradiction_rows(contradictions if judged is not None else []),
        patches=rec.patches(report_file),
        transcript=rec.transcript(agent.messages, events),
        duplicates=attribute(events, agent.messages, connection.sent_calls if connection else {}),
    )
    if spec.otel:
        _export_spans(record, events, spec)
    return record


def _export_spans(record: RunRecord, events: list[Any], spec: ExperimentSpec) -> None:
    """I3: the run's spans (the run with the runner's labels, its tool calls) over OTLP, from
    its events after it ended; an export that fails costs the spans (one line), not the run."""
    from harness.otel import export_spans, missing_sdk, run_spans

    why = missing_sdk()
    if why is None:
        labels = {
            "gen_ai.request.model": record.model, "agent_harness.run.id": record.run_id,
            "agent_harness.experiment": record.experiment, "agent_harness.prompt": record.prompt,
            "agent_harness.patch_arm": record.patch_arm, "agent_harness.upstream": record.upstream,
            "agent_harness.conversation": record.conversation,
            "agent_harness.repetition": record.repetition, "agent_harness.status": record.status,
            "agent_harness.agreement": record.agreement,
            "agent_harness.real_duplicate": record.real_duplicate,
        }  # fmt: skip
        labels = {k: v for k, v in labels.items() if v is not None}
        transport = "tcp" if spec.proxy.agent == "http" else "pipe"
        run = run_spans(events, transport=transport, attributes=labels) if events else None
        why = export_spans([run]) if run is not None else None
    if why is not None:
        print(f"agent-harness: OpenTelemetry: {why} (run {record.run_id})", file=sys.stderr)


def _model_params_json(cell: RunCell) -> str:
    """The model's parameters as stored; for a command agent (U1) its configuration with the
    values of its env left out (V3)."""
    if isinstance(cell.model, AgentSpec):
        return json.dumps(cell.model.stored_config(), sort_keys=True, default=str)
    return json.dumps(cell.model.params.as_kwargs(), sort_keys=True, default=str)


@dataclass(frozen=True)
class _Args:
    arguments: Any


def _declared_idempotent(report: Any) -> dict[int, str | None]:
    """E1: per IDEMPOTENT_REPEAT operation, who declared its tool idempotent (declaredBy)."""
    if report is None:
        return {}
    return {
        o.operation: o.declared_by
        for o in report.observations
        if o.code == "IDEMPOTENT_REPEAT" and o.operation is not None
    }


def _contradiction_rows(found: list[Contradiction]) -> list[FindingRow]:
    """E1: ANNOTATION_CONTRADICTED, stored with the report's findings (an observation: the
    server's declaration is wrong, the agent did nothing the verdict holds against it)."""
    return [
        FindingRow(
            kind="observation", code="ANNOTATION_CONTRADICTED", tool=c.tool,
            operation_index=c.operation, detail_json=jsonutil.dumps(c.detail()),
        )
        for c in found
    ]  # fmt: skip


def _plain(value: Any) -> Any:
    """Decimals from the exact JSON parse as floats, for the ledger's comparisons."""
    return json.loads(jsonutil.dumps(value))
