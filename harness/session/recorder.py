"""The recorder: the one place where what happens in a session becomes events.

The proxy, the benchmark and the tests all go through it, so classification (C), key fields
(K1) and operation identity (K2) are decided the same way everywhere.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from harness import __version__
from harness.base import jsonutil
from harness.events import (
    AnswerSent,
    AnswerSource,
    AnswerUndelivered,
    CallReceived,
    FaultApplied,
    FaultNotApplicable,
    ListedTool,
    MessageRefused,
    SessionEnded,
    SessionStarted,
    TaskCreated,
    ToolsListed,
    UpstreamAnswered,
    UpstreamStatus,
    _Event,
)
from harness.faults import FAULTS, PARAMS, Fault, PlanConfig
from harness.operations.classify import (
    IDEMPOTENT_BY_FLAG,
    Classification,
    ClassifierConfig,
    classify_tools,
)
from harness.operations.identity import digest_of, identity_arguments, raw_operation_id
from harness.operations.keys import find_keys, usable_key

if TYPE_CHECKING:
    from harness.operations.profiles import Profile

Sink = Callable[[_Event], None]


def result_digest(result: Any) -> str:
    """A digest of a tool result, to tell whether two executions were answered identically."""
    return hashlib.blake2b(jsonutil.canonical(result).encode(), digest_size=16).hexdigest()


class Recorder:
    """Creates a session's events in order and hands each one to every sink."""

    def __init__(
        self,
        classifier: ClassifierConfig,
        sinks: Iterable[Sink] = (),
        clock: Callable[[], int] = time.monotonic_ns,
        wall_clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.classifier = classifier
        self.wall_clock = wall_clock
        self.classification = Classification(config=classifier, complete=False)
        self.sinks = list(sinks)
        self.clock = clock
        self._next_seq = 0
        self.profile: Profile | None = None  # Z7: the server's, once it named itself

    def server_named(self, name: Any, version: Any) -> Profile | None:
        """Z7: the upstream answered `initialize` with this `serverInfo`: its profile (if one
        is shipped and profiles are on) classifies the tool lists from now on."""
        from harness.operations.profiles import profile_for

        if self.classifier.use_profiles:
            self.profile = profile_for(name, version)
        return self.profile

    def _emit(self, event: _Event) -> None:
        for sink in self.sinks:
            sink(event)

    def start(self, plan: PlanConfig, kind: str = "proxy") -> None:
        """SessionStarted with the scenario, its parameters and key fields of this session."""
        taken = FAULTS[plan.scenario].params if plan.scenario else ()
        self._emit(
            SessionStarted(
                t_ns=self.clock(),
                wall_ns=self.wall_clock(),
                harness_version=__version__,
                kind=kind,
                scenario=plan.scenario,
                chaos_error_rate=plan.chaos_error_rate,
                chaos_seed=plan.seed if plan.chaos_error_rate is not None else None,
                **{p.field: getattr(plan, p.field) if p in taken else None for p in PARAMS},
                key_fields=list(self.classifier.key_fields),
                keys_honoured=list(self.classifier.keys_honoured),
                idempotent_tools=list(self.classifier.idempotent_globs),
                distrust_annotations=self.classifier.distrust_annotations,
                statement_tools=list(self.classifier.statement_globs),
                strict_errors=self.classifier.strict_errors,
                profiles=self.classifier.use_profiles,
                started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            )
        )

    def tools_listed(
        self, tools: Iterable[Mapping[str, Any]], complete: bool = True
    ) -> Classification:
        """Classify the upstream's tool list (C1-C10) and record it; `complete`: all pages."""
        self.classification = classify_tools(
            tools, self.classifier, complete=complete, profile=self.profile
        )
        self._emit(
            ToolsListed(
                t_ns=self.clock(),
                tools=[
                    ListedTool(
                        name=t.name,
                        tool_class=t.tool_class,
                        reason=t.reason,
                        key_field=t.key_field,
                        conflict=t.conflict,
                        keys_honoured=t.keys_honoured,
                        idempotent=t.idempotent,
                    )
                    for t in self.classification.tools.values()
                ],
                complete=complete,
                profile=self.profile.label if self.profile is not None else None,
            )
        )
        return self.classification

    def call(
        self,
        tool: str,
        arguments: Any,
        rpc_id: int | str | None = None,
        raw_arguments: str | None = None,
    ) -> CallReceived:
        """A tool call arrived; `raw_arguments` stands in for arguments too deep to parse."""
        self._next_seq += 1
        info = self.classification.get(tool)
        identity: Any = None
        tool_class, idempotent = info.tool_class, info.idempotent
        effect = None
        if info.effect is not None and raw_arguments is None:  # Z1-Z3: per call
            from harness.operations.effects import effect_of

            effect = effect_of(info.effect, arguments, info.key_names)
        if raw_arguments is not None:
            op, key_field, key = raw_operation_id(tool, raw_arguments), None, None
        else:
            identity = identity_arguments(arguments, info.key_names, info.defaults, info.key_plan)
            found = (
                find_keys(arguments, info.key_names, info.key_plan)
                if identity is not arguments
                else []
            )
            if effect is not None:  # Z1-Z3: the call's own class, identity and keys
                assert info.effect is not None
                tool_class = effect.tool_class
                if idempotent != IDEMPOTENT_BY_FLAG:  # the flag names every call of the tool
                    idempotent = effect.idempotent if tool_class == "write" else None
                identity = {**identity, info.effect.argument: effect.identity}
                found = [*found, *effect.keys]
            op = digest_of(tool, identity)
            key_field, key = usable_key(found)  # E3: a null or "" key is no key
        event = CallReceived(
            t_ns=self.clock(),
            seq=self._next_seq,
            rpc_id=rpc_id,
            tool=tool,
            arguments=None if raw_arguments is not None else arguments,
            arguments_too_deep=raw_arguments is not None,
            tool_class=tool_class,
            operation=op,
            key_field=key_field,
            key=key,
            schema_key_field=info.key_field,
            # Only when it differs from the arguments as received, to keep the log small.
            identity_arguments=None if identity is arguments else identity,
            tool_reason=None if info.listed else info.reason,
            key_honoured=info.keys_honoured,
            idempotent=idempotent,
            effect=effect.reason if effect is not None else None,
            effect_note=effect.note if effect is not None else None,
        )
        self._emit(event)
        return event

    def refused(self, reason: str, method: str | None, tool: str | None) -> None:
        """X10: a client message that was not forwarded."""
        self._emit(MessageRefused(t_ns=self.clock(), reason=reason, method=method, tool=tool))

    def task_created(self, seq: int, task_id: str) -> None:
        """X12: the upstream answered a task-augmented call with a task."""
        self._emit(TaskCreated(t_ns=self.clock(), seq=seq, task_id=task_id))

    def fault(self, seq: int, fault: Fault) -> None:
        self._emit(
            FaultApplied(
                t_ns=self.clock(),
                seq=seq,
                fault=fault.name,
                executes_upstream=fault.executes_upstream,
                retry_after_s=fault.values().get("retry_after_s"),
            )
        )

    def fault_not_applicable(self, seq: int, fault: Fault, reason: str) -> None:
        """The plan's fault means nothing to this call's agent: not applied (F7 sessionless)."""
        self._emit(FaultNotApplicable(t_ns=self.clock(), seq=seq, fault=fault.name, reason=reason))

    def upstream(
        self,
        seq: int,
        status: UpstreamStatus,
        *,
        is_error: bool = False,
        result: Any = None,
        error: Any = None,
        late: bool = False,
        refusal: str | None = None,
    ) -> None:
        self._emit(
            UpstreamAnswered(
                t_ns=self.clock(),
                seq=seq,
                status=status,
                is_error=is_error,
                result_digest=None if result is None else result_digest(result),
                error=error,
                late=late,
                refusal=refusal,
            )
        )

    def answer(self, seq: int, is_error: bool, source: AnswerSource = "upstream") -> None:
        self._emit(AnswerSent(t_ns=self.clock(), seq=seq, is_error=is_error, source=source))

    def undelivered(self, seq: int, reason: str) -> None:
        """E5: the answer to call `seq` did not reach the agent."""
        self._emit(AnswerUndelivered(t_ns=self.clock(), seq=seq, reason=reason))

    def end(self, reason: str) -> None:
        self._emit(SessionEnded(t_ns=self.clock(), reason=reason))
