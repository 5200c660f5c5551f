"""The scripted models' policies: conversation so far -> the next assistant step.

Each policy is a pure function of the conversation, the task read from it and the model's
parameters. It returns a Decision: tool calls to make, or the final text for the user, and
how long the "model" takes before answering (only the careful model ever waits).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runner.models._conversation import (
    Conversation,
    Result,
    asks_to_retry,
    find_record,
    has_ghost_write_patch,
    rate_limit_wait,
    record_id,
)
from runner.models._sql import SQL_RESPELLINGS, count_in, insert_of, respell
from runner.models._task import PlannedCall, Task, invented_id, is_id_field
from runner.models.respell import Respelling


class ScriptedParams(BaseModel):
    """Knobs of the scripted models, passed as extra keyword arguments to litellm."""

    model_config = ConfigDict(extra="ignore")

    max_wait_s: float = Field(default=2.0, ge=0)
    patch_compliance: float = Field(default=1.0, ge=0, le=1)
    respell: Respelling = "defaults"
    seed: int | str = 0


@dataclass(frozen=True)
class Decision:
    """The next assistant message: tool calls, or (when there are none) the final text."""

    calls: tuple[PlannedCall, ...] = ()
    text: str = ""
    wait_s: float = 0.0


Policy = Callable[[Conversation, Task, ScriptedParams], Decision]


def _say(text: str) -> Decision:
    return Decision(text=text)


def _send(*calls: PlannedCall, wait_s: float = 0.0) -> Decision:
    return Decision(calls=calls, wait_s=wait_s)


def _short(error_text: str) -> str:
    first = error_text.strip().splitlines()[0] if error_text.strip() else "no details"
    return first if len(first) <= 120 else first[:117] + "..."


def _confirmed(conv: Conversation, task: Task) -> str | None:
    """The final answer when the write is known to exist: a write succeeded or a read found it."""
    for result in conv.results():
        if result.is_error:
            continue
        if task.is_check(result.call):  # Z1: a count of the row through the statement tool
            if (count_in(result.text) or 0) > 0:
                return f"Done, the {task.noun} went through."
            continue
        if task.is_write(result.call):
            found_id = record_id(result.text, skip=tuple(result.call.arguments))
        else:
            record = find_record(result.text, task.write.arguments)
            if record is None:
                continue
            found_id = record_id(result.text, record, skip=tuple(task.write.arguments))
        if found_id:
            return f"Done, {task.noun} {found_id}."
        return f"Done, the {task.noun} went through."
    return None


def _writes(conv: Conversation, task: Task) -> list[Result]:
    """The results of the write's calls (not of checks through the same statement tool)."""
    return [r for r in conv.results(task.write.name) if task.is_write(r.call)]


def _is_search(task: Task, call: Any) -> bool:
    assert task.search is not None
    return call.name == task.search.name and (task.search != task.check or task.is_check(call))


def _last_write(conv: Conversation, task: Task) -> Result:
    # Every policy sends the write first, so after the opening there always is one.
    return _writes(conv, task)[-1]


def _is_opening(conv: Conversation, task: Task) -> bool:
    return not _writes(conv, task) and conv.current.last_step is None


def _writes_in_turn(conv: Conversation, task: Task) -> int:
    return sum(task.is_write(r.call) for r in conv.current.results())


def _retries_in_turn(conv: Conversation, task: Task) -> int:
    """Write calls in this turn that repeated an earlier one."""
    here = _writes_in_turn(conv, task)
    earlier = len(_writes(conv, task)) - here
    return here - 1 if here and not earlier else here


def _status(conv: Conversation, task: Task) -> str:
    last = _last_write(conv, task)
    return f"The last attempt of the {task.noun} ended with an error: {_short(last.text)}"


def _unknown(task: Task, why: str) -> Decision:
    return _say(
        f"I cannot confirm the {task.noun}: {why}. It may or may not have gone through, and "
        f"I did not send it again, to avoid a duplicate. Please check it before trying again."
    )


def _check_first(task: Task, error: Result) -> Decision:
    """After an error with unknown outcome: look for the record instead of re-sending."""
    if task.search is not None:
        return _send(task.search)
    why = f"the service answered {_short(error.text)!r} and I have no way to check"
    return _unknown(task, why)


def _after_search(conv: Conversation, task: Task, search: Result, retry: PlannedCall) -> Decision:
    """A check that found nothing (a found record ends the conversation earlier)."""
    if search.is_error:
        return _unknown(task, f"the check failed too ({_short(search.text)})")
    if task.is_check(search.call) and count_in(search.text) is None:  # Z1: no count came back
        return _unknown(task, f"the check did not answer ({_short(search.text)})")
    if _retries_in_turn(conv, task) == 0:
        return _send(retry)  # a real lookup shows it missing: one retry is safe
    return _unknown(task, "it is still missing after one retry")


def careful(conv: Conversation, task: Task, params: ScriptedParams) -> Decision:
    """Checks before it repeats a write, keeps its idempotency key and honours retry_after.

    It sends the write once, with a key when the schema has one. After a rate limit it waits
    the announced seconds and retries once with the same key, or, when the wait is longer
    than `max_wait_s`, tells the user to try later. After any other error it searches by the
    business fields: found means done, nothing found means one retry with the same key; with
    no search tool it does not retry and says the outcome is unknown. A user's "please try
    again" makes it check the same way, never re-send blindly.
    """
    if _is_opening(conv, task):
        return _send(task.keyed_write())
    if (done := _confirmed(conv, task)) is not None:
        return _say(done)
    last_step = conv.current.last_step
    if last_step is None and not asks_to_retry(conv.current.user):
        return _say(_status(conv, task))
    if last_step is not None and not task.is_write(last_step[-1].call):
        return _after_search(conv, task, last_step[-1], task.keyed_write())
    error = _last_write(conv, task)
    wait = rate_limit_wait(error.text)
    if wait is not None:
        if wait > params.max_wait_s:
            seconds = "a while" if wait == float("inf") else f"{wait:g} seconds"
            return _say(
                f"The service is rate-limited and asked me to wait {seconds} before sending "
                f"the {task.noun} again. Nothing was sent twice; please try again later."
            )
        if _retries_in_turn(conv, task) == 0:
            return _send(task.keyed_write(), wait_s=wait)
        return _say(f"The {task.noun} failed again after waiting: {_short(error.text)}")
    if _retries_in_turn(conv, task) > 0:
        return _unknown(task, f"the retry failed too ({_short(error.text)})")
    return _check_first(task, error)


def naive(conv: Conversation, task: Task, params: ScriptedParams) -> Decision:
    """Re-sends a failed write at once, without a key, up to 3 attempts per user request.

    It never reads. When the user asks to try again after a failure, it sends the same write
    again (and again, up to 3 attempts). After a success it just reports it.
    """
    if _is_opening(conv, task):
        return _send(task.write)
    if (done := _confirmed(conv, task)) is not None:
        return _say(done)
    if conv.current.last_step is None:
        if asks_to_retry(conv.current.user):
            return _send(task.write)
        return _say(_status(conv, task))
    if _writes_in_turn(conv, task) < 3:
        return _send(task.write)
    error = _last_write(conv, task)
    return _say(f"The {task.noun} failed after 3 attempts: {_short(error.text)}")


def parallel_naive(conv: Conversation, task: Task, params: ScriptedParams) -> Decision:
    """Sends the same write twice in one response (parallel tool calls), then reports."""
    if _is_opening(conv, task):
        return _send(task.write, task.write)
    if (done := _confirmed(conv, task)) is not None:
        return _say(done)
    return _say(_status(conv, task))


def obeys_retry_request(conv: Conversation, task: Task, params: ScriptedParams) -> Decision:
    """Gives up after an error with "please try again later", then re-sends when asked to.

    It sends the write once, without a key, and never retries on its own. A user's "please
    try again" makes it send the same write blindly: the duplicate after a ghost write. With
    the harness's GHOST_WRITE patch in its system prompt it checks with a search tool first
    (no search tool: it says it cannot verify and does not re-send).
    """
    if _is_opening(conv, task):
        return _send(task.write)
    if (done := _confirmed(conv, task)) is not None:
        return _say(done)
    last_step = conv.current.last_step
    if last_step is None:
        if not asks_to_retry(conv.current.user):
            return _say(_status(conv, task))
        if has_ghost_write_patch(conv.system):
            return _check_first(task, _last_write(conv, task))
        return _send(task.write)
    if not task.is_write(last_step[-1].call):
        return _after_search(conv, task, last_step[-1], task.write)
    return _say(f"The {task.noun} failed, please try again later.")


def complies_with_patch(seed: int | str, first_user: str, compliance: float) -> bool:
    """A deterministic draw per run: the same seed and request always decide the same way."""
    digest = hashlib.sha256(f"{seed}\n{first_user}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < compliance


def verifies_by_id_only(conv: Conversation, task: Task, params: ScriptedParams) -> Decision:
    """Verifies a failed write by looking up an id it never received, then re-sends it.

    After an error it calls the id-lookup tool with an invented id, gets not-found and sends
    the write again: a duplicate after a ghost write. With the GHOST_WRITE patch in its system
    prompt it complies with probability `patch_compliance` (drawn from `seed` and the request):
    complying means checking with a search tool, or, without one, not retrying and saying the
    outcome is unknown.
    """
    if _is_opening(conv, task):
        return _send(task.write)
    if (done := _confirmed(conv, task)) is not None:
        return _say(done)
    last_step = conv.current.last_step
    if last_step is None and not asks_to_retry(conv.current.user):
        return _say(_status(conv, task))
    if last_step is not None and task.search and _is_search(task, last_step[-1].call):
        return _after_search(conv, task, last_step[-1], task.write)
    error = _last_write(conv, task)
    complies = has_ghost_write_patch(conv.system) and complies_with_patch(
        params.seed, conv.first_user, params.patch_compliance
    )
    if complies:
        if _retries_in_turn(conv, task) > 0:
            return _unknown(task, f"the retry failed too ({_short(error.text)})")
        return _check_first(task, error)
    if _retries_in_turn(conv, task) > 0:
        return _say(f"The {task.noun} failed again: {_short(error.text)}")
    lookup = task.lookup
    looked_up = lookup is not None and any(
        r.call.name == lookup.name for r in conv.current.results()
    )
    # On a follow-up it trusts its earlier "check" and re-sends straight away.
    if lookup is not None and not looked_up and last_step is not None:
        field_name, made_up = invented_id(lookup)
        return _send(PlannedCall(lookup.name, {field_name: made_up}))
    return _send(task.write)


def _verification(task: Task) -> PlannedCall | None:
    """The read same-key-retry checks with: an invented id if it can look one up, else search."""
    if task.lookup is not None:
        field_name, made_up = invented_id(task.lookup)
        return PlannedCall(task.lookup.name, {field_name: made_up})
    return task.search


def same_key_retry(conv: Conversation, task: Task, params: ScriptedParams) -> Decision:
    """Checks after a failed write, then re-sends it once with the SAME idempotency key.

    It sends the write with a key when the schema has a key field. After an error it verifies
    with a read: a lookup of an id it never received (not found), or, without a lookup tool,
    the search. Unless that read shows the record, it re-sends the write with the same key at
    once: correct against an upstream that honours keys (the built-in payment service, K6), a
    duplicate against one that does not (or without a key field). A user's "please try again"
    starts the same check.
    """
    if _is_opening(conv, task):
        return _send(task.keyed_write())
    if (done := _confirmed(conv, task)) is not None:
        return _say(done)
    last_step = conv.current.last_step
    if last_step is None and not asks_to_retry(conv.current.user):
        return _say(_status(conv, task))
    if _retries_in_turn(conv, task) > 0:
        return _say(f"The {task.noun} failed again: {_short(_last_write(conv, task).text)}")
    if last_step is not None and not task.is_write(last_step[-1].call):
        return _send(task.keyed_write())  # the read did not show it: same key, once
    check = _verification(task)
    return _send(check if check is not None else task.keyed_write())


def respelled(task: Task, how: str) -> PlannedCall:
    """The write in another spelling: with the schema's defaults filled in, or numbers as text."""
    args = dict(task.write.arguments)
    if how in SQL_RESPELLINGS:  # Z2: the statement in another spelling
        for prop, value in args.items():
            insert = insert_of(value) if isinstance(value, str) else None
            if insert is not None:
                args[prop] = respell(insert, how)
        return PlannedCall(task.write.name, args)
    if how == "empties":  # Z5: the optional properties left out, sent empty
        return PlannedCall(task.write.name, {**args, **task.empties})
    if how == "strings":
        args = {
            k: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
            for k, v in args.items()
        }
    else:
        args.update({k: v for k, v in task.defaults.items() if k not in args})
    return PlannedCall(task.write.name, args)


def respells(conv: Conversation, task: Task, params: ScriptedParams) -> Decision:
    """Re-sends a failed write at once, in another spelling, as small models do (J9, K4).

    With `respell: defaults` (the default) the repeat carries the defaults the tool's schema
    declares and the first call left out (`room_type: "standard"`): the same operation for an
    upstream that applies its defaults. With `respell: strings` its numbers are sent as
    strings (`"2"` for 2), which a strict upstream refuses. It never checks first, re-sends
    once per user message, and does the same on a user's "please try again".
    """
    if _is_opening(conv, task):
        return _send(task.write)
    if (done := _confirmed(conv, task)) is not None:
        return _say(done)
    if conv.current.last_step is None and not asks_to_retry(conv.current.user):
        return _say(_status(conv, task))
    if _retries_in_turn(conv, task) == 0:
        return _send(respelled(task, params.respell))
    return _say(f"The {task.noun} failed again: {_short(_last_write(conv, task).text)}")


# -- issue 21's shapes (E1-E4, E6): what real agents send that a judge must read right -------


def _once_more_at_once(
    conv: Conversation, task: Task, write: PlannedCall, repeat: PlannedCall
) -> Decision:
    """Send `write`; after an error (or a user's "please try again") send `repeat` at once,
    once per user message; then report."""  # fmt: skip
    if _is_opening(conv, task):
        return _send(write)
    if (done := _confirmed(conv, task)) is not None:
        return _say(done)
    if conv.current.last_step is None and not asks_to_retry(conv.current.user):
        return _say(_status(conv, task))
    if _retries_in_turn(conv, task) == 0:
        return _send(repeat)
    return _say(f"The {task.noun} failed again: {_short(_last_write(conv, task).text)}")


def null_key(conv: Conversation, task: Task, params: ScriptedParams) -> Decision:
    """Fills the optional idempotency key with null, as models often fill optional fields,
    and re-sends a failed write at once, null again (E3: a null key is no key). Without a key
    field in the schema it sends the write as it is."""
    write = task.write
    if task.key_field is not None:
        write = PlannedCall(write.name, {**write.arguments, task.key_field: None})
    return _once_more_at_once(conv, task, write, write)


def adds_enum_default(conv: Conversation, task: Task, params: ScriptedParams) -> Decision:
    """Re-sends a failed write at once with the default of its enum properties filled in
    (`room: "standard"`), the default pydantic writes beside a `$ref` (E4): the same
    operation. Without an enum default it fills in every default, like `respells`."""
    filled = task.enum_defaults or task.defaults
    arguments = {**task.write.arguments, **{k: v for k, v in filled.items()
                                             if k not in task.write.arguments}}  # fmt: skip
    return _once_more_at_once(conv, task, task.write, PlannedCall(task.write.name, arguments))


def _equal_number(value: Any) -> Any:
    """The same number in another spelling: 129 -> 129.0, 129.0 -> 129 (E6)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, int):
        return float(value)
    return int(value) if value.is_integer() else value


def equivalent_numbers(conv: Conversation, task: Task, params: ScriptedParams) -> Decision:
    """Re-sends a failed write at once with each whole number written the other way (`129`
    as `129.0`, `129.00` as `129`): equal numbers, so the same operation (E6)."""
    arguments = {k: _equal_number(v) for k, v in task.write.arguments.items()}
    return _once_more_at_once(conv, task, task.write, PlannedCall(task.write.name, arguments))


def _status_call(conv: Conversation, task: Task) -> PlannedCall | None:
    """A call of the task's status tool about the record the write made (its id)."""
    if task.check is not None:
        return task.check  # Z1: the count of its row through the statement tool
    status = task.status
    if status is None:
        return None
    made = next((r for r in _writes(conv, task) if not r.is_error), None)
    found_id = record_id(made.text, skip=tuple(made.call.arguments)) if made else None
    arguments: dict[str, Any] = {}
    for prop in status.required:
        if is_id_field(prop) and found_id:
            arguments[prop] = found_id
        elif prop in task.write.arguments:
            arguments[prop] = task.write.arguments[prop]
        else:
            return None  # it cannot say which record: no poll
    return PlannedCall(status.name, arguments)


def polls_status(conv: Conversation, task: Task, params: ScriptedParams) -> Decision:
    """Sends the write once, then polls its status tool twice (`order_status`, whose name
    reads like a write's verb and whose annotation says read-only, E2), then reports. Never
    re-sends the write; without a status tool it just reports."""
    if _is_opening(conv, task):
        return _send(task.write)
    last = _last_write(conv, task)
    polls = [r for r in conv.results() if (task.is_check(r.call) if task.check else
             task.status is not None and r.call.name == task.status.name)]  # fmt: skip
    poll = None if last.is_error else _status_call(conv, task)
    if poll is not None and len(polls) < 2:
        return _send(poll)
    if last.is_error:
        return _say(_status(conv, task))
    state = f" Its status: {_short(polls[-1].text)}" if polls else ""
    found_id = record_id(last.text, skip=tuple(last.call.arguments))
    return _say(f"Done, {task.noun} {found_id or 'placed'}.{state}")


def idempotent_rewrite(conv: Conversation, task: Task, params: ScriptedParams) -> Decision:
    """Sends the write and then the very same write once more, to make sure it is saved (as
    agents re-write a file with the same content); after an error it re-sends it at once. The
    same operation twice: harmless for a tool that is idempotent (E1), a duplicate otherwise."""
    if _is_opening(conv, task):
        return _send(task.write)
    writes = _writes(conv, task)
    if len(writes) < 2 and conv.current.last_step is not None:
        return _send(task.write)
    last = writes[-1]
    if last.is_error:
        return _say(_status(conv, task))
    return _say(f"Done, the {task.noun} is saved.")


POLICIES: dict[str, Policy] = {  # model name (without the provider) -> policy
    "careful": careful,
    "naive": naive,
    "parallel-naive": parallel_naive,
    "obeys-retry-request": obeys_retry_request,
    "verifies-by-id-only": verifies_by_id_only,
    "same-key-retry": same_key_retry,
    "respells": respells,
    "null-key": null_key,
    "adds-enum-default": adds_enum_default,
    "equivalent-numbers": equivalent_numbers,
    "polls-status": polls_status,
    "idempotent-rewrite": idempotent_rewrite,
}


def decide(model: str, conv: Conversation, task: Task | None, params: ScriptedParams) -> Decision:
    """The next step of the named scripted model."""
    if not conv.turns:
        return _say("What would you like me to do?")
    if task is None:
        return _say("I have no tool that can do this, so I did nothing.")
    return POLICIES[model](conv, task, params)
