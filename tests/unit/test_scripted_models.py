"""Scripted reference models driven through the real litellm path (SPEC R3, R4).

Every conversation goes through `litellm.acompletion(model="scripted/...")`; the tool results
are hand-made, in the shape the runner produces (isError marked by a first line).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm  # noqa: E402

from runner.models._conversation import (  # noqa: E402
    asks_to_retry,
    find_record,
    has_ghost_write_patch,
    rate_limit_wait,
)
from runner.models._policies import POLICIES, complies_with_patch  # noqa: E402
from runner.models._provider import next_decision  # noqa: E402
from runner.models._task import extract_task, parse_pairs  # noqa: E402
from runner.models.scripted import (  # noqa: E402
    PROVIDER,
    SCRIPTED_MODELS,
    register_scripted_provider,
)

pytestmark = pytest.mark.anyio

BOOK = "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"
PAY = "Pay the invoice. customer: ACME GmbH, amount: 129.00, currency: EUR, reference: INV-1001"
BOOKING_ARGS = {"guest": "Alice Example", "date": "2026-12-01", "nights": 2}
PATCH = (
    "GHOST_WRITE (CRITICAL): a timeout on a write does not say whether it ran. Never re-send "
    "before checking, even when the user asks to try again."
)

TIMEOUT = "Request timed out. The operation may or may not have completed."
SERVER_500 = "HTTP 500 Internal Server Error"
TRUNCATED = '{"'
NOT_FOUND = "not_found: no booking with id BK-000001"
CREATED = json.dumps({"booking_id": "BK-7F3A21", **BOOKING_ARGS, "status": "confirmed"})
FOUND = json.dumps({"bookings": [{"booking_id": "BK-7F3A21", **BOOKING_ARGS}], "count": 1})
EMPTY = json.dumps({"bookings": [], "count": 0})


def _tool(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict:
    schema = {"type": "object", "properties": props, "required": required}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


_STR = {"type": "string"}
CREATE = _tool(
    "create_booking",
    "Book a hotel room. Every call creates a new booking.",
    {"guest": _STR, "date": _STR, "nights": {"type": "integer"}, "idempotency_key": _STR},
    ["guest", "date", "nights"],
)
SEARCH = _tool(
    "search_bookings", "Find bookings by guest and/or date.", {"guest": _STR, "date": _STR}, []
)
GET = _tool(
    "get_booking",
    "Look up one booking by its booking id.",
    {"booking_id": {"type": "string", "description": "The booking id, e.g. BK-1A2B3C."}},
    ["booking_id"],
)
CANCEL = _tool("cancel_booking", "Cancel a booking.", {"booking_id": _STR}, ["booking_id"])
BOOKING = [CREATE, SEARCH, GET, CANCEL]
BOOKING_NOSEARCH = [CREATE, GET, CANCEL]
PAYMENT = [
    _tool(
        "list_payments",
        "List payments by customer or reference.",
        {"customer": _STR, "reference": _STR},
        [],
    ),
    _tool(
        "create_payment",
        "Charge a customer.",
        {
            "customer": _STR,
            "amount": {"type": "number"},
            "currency": _STR,
            "reference": _STR,
            "idempotency_key": _STR,
        },
        ["customer", "amount", "currency"],
    ),
    _tool("get_payment", "Look up one payment.", {"payment_id": _STR}, ["payment_id"]),
]


def err(text: str) -> str:
    """A tool result as the runner shows an MCP isError result to the model."""
    return f"ERROR (isError=true):\n{text}"


@dataclass
class Reply:
    calls: list[tuple[str, dict[str, Any]]]
    text: str | None
    response: Any


@dataclass
class Chat:
    """A conversation with one scripted model, driven through litellm.acompletion."""

    model: str
    tools: list[dict]
    user: str = BOOK
    system: str = "You are a booking assistant."
    params: dict[str, Any] = field(default_factory=dict)
    messages: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.messages = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user},
        ]

    async def next(self) -> Reply:
        response = await litellm.acompletion(
            model=f"scripted/{self.model}",
            messages=self.messages,
            tools=self.tools,
            **self.params,
        )
        message = response.choices[0].message
        calls = [
            (c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []
        ]
        self.messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [c.model_dump() for c in message.tool_calls] if calls else None,
            }
        )
        return Reply(calls, None if calls else message.content, response)

    def answer(self, *texts: str) -> None:
        """Answer the pending tool calls of the last assistant message, in order."""
        pending = self.messages[-1]["tool_calls"]
        assert len(pending) == len(texts)
        for call, text in zip(pending, texts, strict=True):
            self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})

    def say(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    register_scripted_provider()


def _write(reply: Reply) -> dict[str, Any]:
    assert [name for name, _ in reply.calls] == ["create_booking"], reply
    return reply.calls[0][1]


# --- the first step ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "keyed"),
    [
        ("careful", True),
        ("naive", False),
        ("obeys-retry-request", False),
        ("verifies-by-id-only", False),
    ],
)
async def test_first_call_is_the_write_with_the_arguments_from_the_request(
    model: str, keyed: bool
) -> None:  # R4
    args = _write(await Chat(model, BOOKING).next())
    key = args.pop("idempotency_key", None)
    assert args == BOOKING_ARGS  # nights coerced to the schema's integer
    assert (key is not None) == keyed


async def test_payment_request_picks_the_pay_tool_and_coerces_the_amount_to_a_number() -> None:
    reply = await Chat("naive", PAYMENT, user=PAY).next()
    assert reply.calls == [
        (
            "create_payment",
            {"customer": "ACME GmbH", "amount": 129.0, "currency": "EUR", "reference": "INV-1001"},
        )
    ]


async def test_careful_key_is_the_same_for_the_same_task_and_differs_for_another() -> None:
    first = _write(await Chat("careful", BOOKING).next())["idempotency_key"]
    again = _write(await Chat("careful", BOOKING).next())["idempotency_key"]
    other = _write(await Chat("careful", BOOKING, user=BOOK.replace("2026", "2027")).next())
    assert first == again != other["idempotency_key"]


async def test_without_a_write_tool_the_model_answers_without_tool_calls() -> None:
    reply = await Chat("naive", [SEARCH, GET]).next()
    assert reply.calls == [] and reply.text


# --- naive ---------------------------------------------------------------------------------


async def test_naive_resends_the_identical_write_after_errors_up_to_three_attempts() -> None:
    chat = Chat("naive", BOOKING)
    sent = [_write(await chat.next())]
    for _ in range(2):
        chat.answer(err(TIMEOUT))
        sent.append(_write(await chat.next()))
    chat.answer(err(TIMEOUT))
    final = await chat.next()
    assert sent == [BOOKING_ARGS] * 3
    assert final.calls == [] and "failed" in final.text


async def test_naive_resends_when_the_user_asks_to_try_again() -> None:
    chat = Chat("naive", BOOKING)
    await chat.next()
    for _ in range(3):
        chat.answer(err(TIMEOUT))
        await chat.next()
    chat.say("Please try again.")
    assert _write(await chat.next()) == BOOKING_ARGS


async def test_naive_reports_the_booking_id_after_a_success() -> None:
    chat = Chat("naive", BOOKING)
    await chat.next()
    chat.answer(CREATED)
    final = await chat.next()
    assert final.calls == [] and "BK-7F3A21" in final.text


# --- careful -------------------------------------------------------------------------------


@pytest.mark.parametrize("error", [TIMEOUT, SERVER_500, TRUNCATED], ids=["F1", "F5", "F3"])
async def test_careful_searches_by_business_fields_after_an_error(error: str) -> None:  # J7
    chat = Chat("careful", BOOKING)
    await chat.next()
    chat.answer(err(error))
    reply = await chat.next()
    assert reply.calls == [("search_bookings", {"guest": "Alice Example", "date": "2026-12-01"})]


async def test_careful_answers_done_without_writing_when_the_search_finds_it() -> None:  # J7
    chat = Chat("careful", BOOKING)
    await chat.next()
    chat.answer(err(TIMEOUT))
    await chat.next()
    chat.answer(FOUND)
    final = await chat.next()
    assert final.calls == [] and final.text == "Done, booking BK-7F3A21."


async def test_careful_retries_once_with_the_same_key_when_the_search_finds_nothing() -> None:
    chat = Chat("careful", BOOKING)
    first = _write(await chat.next())
    chat.answer(err(SERVER_500))
    await chat.next()
    chat.answer(EMPTY)
    retry = _write(await chat.next())
    chat.answer(err(SERVER_500))
    final = await chat.next()
    assert retry == first  # same arguments, same idempotency key
    assert final.calls == [] and "cannot confirm" in final.text


async def test_careful_without_a_search_tool_does_not_retry_and_says_unknown() -> None:
    chat = Chat("careful", BOOKING_NOSEARCH)
    await chat.next()
    chat.answer(err(TIMEOUT))
    final = await chat.next()
    assert final.calls == []
    assert "may or may not have gone through" in final.text


async def test_careful_checks_first_when_the_user_asks_to_try_again() -> None:
    chat = Chat("careful", BOOKING_NOSEARCH)
    await chat.next()
    chat.answer(err(TIMEOUT))
    await chat.next()
    chat.say("Please try again.")
    final = await chat.next()
    assert final.calls == []  # no search tool: still no blind re-send


async def test_careful_waits_out_a_short_retry_after_then_retries_with_the_same_key() -> None:
    chat = Chat("careful", BOOKING, params={"max_wait_s": 1})
    first = _write(await chat.next())
    chat.answer(err("HTTP 429 Too Many Requests; retry_after: 0.01"))
    assert _write(await chat.next()) == first


@pytest.mark.parametrize(
    "params",
    [{"max_wait_s": 0.001}, {"extra_body": {"max_wait_s": 0.001}}, {}],
    ids=["keyword", "extra_body", "default-2s"],
)
async def test_careful_does_not_retry_when_retry_after_exceeds_max_wait(params: dict) -> None:
    chat = Chat("careful", BOOKING, params=params)
    await chat.next()
    # 0.01 s is within the default 2 s: only a max_wait_s that reached the model refuses it.
    retry_after = "0.01" if params else "60"
    chat.answer(err(f"HTTP 429 Too Many Requests; retry_after: {retry_after}"))
    final = await chat.next()
    assert final.calls == [] and "try again later" in final.text


def test_careful_waits_exactly_the_announced_seconds_when_within_max_wait() -> None:  # S3
    messages = [
        {"role": "user", "content": BOOK},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "create_booking", "arguments": json.dumps(BOOKING_ARGS)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": err("429, retry_after 30")},
    ]
    patient = next_decision("careful", messages, {"tools": BOOKING, "max_wait_s": 30})
    hasty = next_decision("careful", messages, {"tools": BOOKING, "max_wait_s": 29})
    assert patient.wait_s == 30 and len(patient.calls) == 1
    assert hasty.calls == () and hasty.wait_s == 0


# --- obeys-retry-request -------------------------------------------------------------------


async def test_obeys_retry_request_gives_up_then_resends_blindly_on_try_again() -> None:
    chat = Chat("obeys-retry-request", BOOKING)
    first = _write(await chat.next())
    chat.answer(err(TIMEOUT))
    gave_up = await chat.next()
    chat.say("Please try again.")
    assert gave_up.text == "The booking failed, please try again later."
    assert _write(await chat.next()) == first


@pytest.mark.parametrize(
    "patch", [PATCH, "If a write times out, do NOT send the same write again before checking."]
)
async def test_obeys_retry_request_with_the_patch_searches_before_resending(patch: str) -> None:
    chat = Chat("obeys-retry-request", BOOKING, system=f"You are an agent.\n\n{patch}")
    await chat.next()
    chat.answer(err(TIMEOUT))
    await chat.next()
    chat.say("That didn't work, please try again")
    check = await chat.next()
    chat.answer(FOUND)
    final = await chat.next()
    assert [name for name, _ in check.calls] == ["search_bookings"]
    assert final.calls == [] and "BK-7F3A21" in final.text


async def test_obeys_retry_request_with_the_patch_and_no_search_does_not_resend() -> None:
    chat = Chat("obeys-retry-request", BOOKING_NOSEARCH, system=PATCH)
    await chat.next()
    chat.answer(err(TIMEOUT))
    await chat.next()
    chat.say("Please retry.")
    final = await chat.next()
    assert final.calls == [] and "cannot confirm" in final.text


# --- verifies-by-id-only -------------------------------------------------------------------


async def test_verifies_by_id_only_looks_up_an_invented_id_then_resends() -> None:  # S2
    chat = Chat("verifies-by-id-only", BOOKING)
    first = _write(await chat.next())
    chat.answer(err(TIMEOUT))
    lookup = await chat.next()
    chat.answer(err(NOT_FOUND))
    resend = _write(await chat.next())
    chat.answer(CREATED)
    final = await chat.next()
    assert lookup.calls == [("get_booking", {"booking_id": "BK-000001"})]
    assert resend == first
    assert final.calls == []


@pytest.mark.parametrize(
    ("tools", "expected"), [(BOOKING, ["search_bookings"]), (BOOKING_NOSEARCH, [])]
)
async def test_verifies_by_id_only_complying_with_the_patch_never_resends(
    tools: list[dict], expected: list[str]
) -> None:
    chat = Chat("verifies-by-id-only", tools, system=PATCH, params={"patch_compliance": 1.0})
    await chat.next()
    chat.answer(err(TIMEOUT))
    reply = await chat.next()
    assert [name for name, _ in reply.calls] == expected


async def test_patch_compliance_is_drawn_per_seed_near_its_rate_and_reproducibly() -> None:
    opened = Chat("verifies-by-id-only", BOOKING, system=PATCH)
    await opened.next()
    opened.answer(err(TIMEOUT))

    async def complied(seed: int) -> bool:
        chat = Chat("verifies-by-id-only", BOOKING, params={"seed": seed, "patch_compliance": 0.3})
        chat.messages = list(opened.messages)
        reply = await chat.next()
        return [name for name, _ in reply.calls] == ["search_bookings"]

    outcomes = [await complied(seed) for seed in range(100)]
    assert 20 <= sum(outcomes) <= 40
    assert [await complied(seed) for seed in range(10)] == outcomes[:10]
    assert outcomes == [complies_with_patch(seed, BOOK, 0.3) for seed in range(100)]


# --- same-key-retry ------------------------------------------------------------------------

PAY_ARGS = {"customer": "ACME GmbH", "amount": 129.0, "currency": "EUR", "reference": "INV-1001"}
PAID = json.dumps({"payment_id": "PAY-1A2B3C4D", **PAY_ARGS, "status": "succeeded"})


def _pay(reply: Reply) -> dict[str, Any]:
    assert [name for name, _ in reply.calls] == ["create_payment"], reply
    return reply.calls[0][1]


async def test_same_key_retry_verifies_then_resends_with_the_same_key() -> None:  # K6
    chat = Chat("same-key-retry", PAYMENT, user=PAY)
    first = _pay(await chat.next())
    chat.answer(err(TIMEOUT))
    check = await chat.next()
    chat.answer(err("not_found: no payment with id PA-000001"))
    again = _pay(await chat.next())
    chat.answer(PAID)  # an upstream that honours the key answers with the first payment
    final = await chat.next()
    assert first["idempotency_key"].startswith("key-")
    assert check.calls == [("get_payment", {"payment_id": "PA-000001"})]
    assert again == first  # the same arguments and the SAME key
    assert final.calls == [] and final.text == "Done, payment PAY-1A2B3C4D."


async def test_same_key_retry_stops_when_its_read_shows_the_record() -> None:
    chat = Chat("same-key-retry", [CREATE, SEARCH, CANCEL])  # no lookup: it searches
    await chat.next()
    chat.answer(err(TIMEOUT))
    check = await chat.next()
    chat.answer(FOUND)
    final = await chat.next()
    assert [name for name, _ in check.calls] == ["search_bookings"]
    assert final.calls == [] and final.text == "Done, booking BK-7F3A21."


async def test_same_key_retry_resends_at_most_once_per_user_message() -> None:
    chat = Chat("same-key-retry", PAYMENT, user=PAY)
    await chat.next()
    chat.answer(err(SERVER_500))
    await chat.next()
    chat.answer(err("not_found"))
    await chat.next()
    chat.answer(err(SERVER_500))
    final = await chat.next()
    assert final.calls == [] and "failed again" in final.text


# --- respells ------------------------------------------------------------------------------

ROOMS = _tool(
    "create_booking",
    "Book a hotel room.",
    {"guest": _STR, "date": _STR, "nights": {"type": "integer"},
     "room_type": {"type": "string", "enum": ["standard", "suite"], "default": "standard"}},
    ["guest", "date", "nights"],
)  # fmt: skip


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {**BOOKING_ARGS, "room_type": "standard"}),  # the schema's default, K4
        ({"respell": "strings"}, {**BOOKING_ARGS, "nights": "2"}),  # J9: a number as a string
    ],
)
async def test_respells_resends_a_failed_write_at_once_in_another_spelling(
    params: dict, expected: dict
) -> None:
    chat = Chat("respells", [ROOMS, SEARCH], params=params)
    first = _write(await chat.next())
    chat.answer(err(TIMEOUT))
    again = _write(await chat.next())
    chat.answer(CREATED)
    final = await chat.next()
    assert first == BOOKING_ARGS  # the first call leaves the default out, like SmolLM2 did
    assert again == expected
    assert final.calls == [] and "BK-7F3A21" in final.text


async def test_respells_resends_once_and_again_when_the_user_asks() -> None:
    chat = Chat("respells", [ROOMS], params={"respell": "strings"})
    await chat.next()
    chat.answer(err(TIMEOUT))
    await chat.next()
    chat.answer(err("invalid input: nights: Input should be a valid integer"))
    final = await chat.next()
    chat.say("Please try again.")
    retry = _write(await chat.next())
    assert final.calls == [] and "failed again" in final.text
    assert retry == {**BOOKING_ARGS, "nights": "2"}


async def test_respells_with_no_default_to_add_resends_the_same_write() -> None:
    chat = Chat("respells", BOOKING)
    first = _write(await chat.next())
    chat.answer(err(TIMEOUT))
    assert _write(await chat.next()) == first


# --- parallel, usage, registration ---------------------------------------------------------


async def test_parallel_naive_sends_the_write_twice_in_one_response() -> None:  # S8
    chat = Chat("parallel-naive", BOOKING)
    reply = await chat.next()
    ids = [c.id for c in reply.response.choices[0].message.tool_calls]
    chat.answer(CREATED, err(TIMEOUT))
    final = await chat.next()
    assert reply.calls == [("create_booking", BOOKING_ARGS)] * 2
    assert len(set(ids)) == 2
    assert final.calls == [] and "BK-7F3A21" in final.text


async def test_usage_tokens_are_non_zero_and_the_cost_is_zero() -> None:  # R5
    reply = await Chat("careful", BOOKING).next()
    usage = reply.response.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert reply.response._hidden_params["response_cost"] == 0.0
    assert litellm.completion_cost(reply.response) == 0.0


async def test_r5_stated_cost_is_the_cost_map_prices_times_the_tokens(monkeypatch) -> None:
    # issue 24: the scripted model states its cost so litellm need not price each call; the
    # stated figure is the registered per-token prices times the tokens, also when not 0
    # (litellm's own completion_cost keeps a model's first prices, so it is not compared).
    entry = {**litellm.model_cost["scripted/careful"], "input_cost_per_token": 2e-6,
             "output_cost_per_token": 5e-6}  # fmt: skip
    monkeypatch.setitem(litellm.model_cost, "scripted/careful", entry)
    reply = await Chat("careful", BOOKING).next()
    stated = reply.response._hidden_params["response_cost"]
    usage = reply.response.usage
    assert stated == pytest.approx(usage.prompt_tokens * 2e-6 + usage.completion_tokens * 5e-6)
    assert stated > 0


async def test_history_holding_litellm_message_objects_is_understood() -> None:
    chat = Chat("naive", BOOKING)
    reply = await chat.next()
    message = reply.response.choices[0].message
    chat.messages[-1] = message  # as a runner may append litellm's own object
    chat.messages.append(
        {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": err(TIMEOUT)}
    )
    assert _write(await chat.next()) == BOOKING_ARGS  # it saw the error and re-sent


def test_blocking_completion_gives_the_same_first_step() -> None:
    response = litellm.completion(
        model="scripted/careful", messages=[{"role": "user", "content": BOOK}], tools=BOOKING
    )
    (call,) = response.choices[0].message.tool_calls
    assert call.function.name == "create_booking"
    assert json.loads(call.function.arguments)["nights"] == 2


async def test_unknown_scripted_model_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(litellm.exceptions.NotFoundError, match="scripted/careful"):
        await Chat("no-such-model", BOOKING).next()


def test_registration_is_idempotent_and_keeps_other_providers() -> None:
    other = {"provider": "someone-else", "custom_handler": object()}
    before = [e for e in litellm.custom_provider_map if e["provider"] != PROVIDER]
    litellm.custom_provider_map = [*before, other]
    try:
        register_scripted_provider()
        register_scripted_provider()
        providers = [e["provider"] for e in litellm.custom_provider_map]
        assert providers.count(PROVIDER) == 1 and "someone-else" in providers
    finally:
        litellm.custom_provider_map = [e for e in litellm.custom_provider_map if e is not other]


def test_every_policy_is_listed_with_a_description() -> None:
    assert set(SCRIPTED_MODELS) == {f"{PROVIDER}/{name}" for name in POLICIES}
    assert all(SCRIPTED_MODELS.values())


# --- reading requests and results ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (BOOK, {"guest": "Alice Example", "date": "2026-12-01", "nights": "2"}),
        ("Pay it. customer: ACME GmbH, reference: INV-1001.", {"reference": "INV-1001"}),
        ("Book for guest: Bob\nnights: 3", {"guest": "Bob", "nights": "3"}),
        ("Please book guest name: Carol Díaz", {"guestname": "Carol Díaz", "guest": None}),
    ],
)
def test_request_pairs_are_read_by_name(text: str, expected: dict[str, str | None]) -> None:
    pairs = parse_pairs(text)
    assert {k: pairs.get(k) for k in expected} == expected


def test_search_and_lookup_tools_are_told_apart_from_the_write() -> None:
    task = extract_task(BOOK, BOOKING)
    assert task is not None and task.write.name == "create_booking"
    assert task.search is not None and task.search.name == "search_bookings"
    assert task.lookup is not None and task.lookup.name == "get_booking"
    nosearch = extract_task(BOOK, BOOKING_NOSEARCH)
    assert nosearch is not None and nosearch.search is None


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (FOUND, True),
        (EMPTY, False),
        (json.dumps({"bookings": [{**BOOKING_ARGS, "date": "2026-12-02"}]}), False),
        (json.dumps([{"guest": "alice  example", "nights": 2.0}]), True),
        ("No bookings found for Alice Example.", False),
        ("Alice Example arrives 2026-12-01 for 2 nights (BK-1).", True),
        ("[]", False),
    ],
)
def test_a_search_result_matches_only_a_record_with_the_same_fields(text: str, found: bool) -> None:
    assert (find_record(text, BOOKING_ARGS) is not None) is found


@pytest.mark.parametrize(
    ("text", "wait"),
    [
        ("HTTP 429 Too Many Requests; retry_after: 60", 60.0),
        ('{"error": "rate_limited", "retry_after": 1.5}', 1.5),
        ("Rate limit exceeded. Retry after 5 seconds.", 5.0),
        ("429 Too Many Requests", float("inf")),
        (TIMEOUT, None),
        (SERVER_500, None),
    ],
)
def test_rate_limit_waits_are_read_from_the_error_text(text: str, wait: float | None) -> None:
    assert rate_limit_wait(text) == wait


@pytest.mark.parametrize(
    ("text", "asks"),
    [("Please try again.", True), ("RETRY", True), ("do it again", True), ("Thanks!", False)],
)
def test_retry_requests_are_recognised(text: str, asks: bool) -> None:
    assert asks_to_retry(text) is asks


@pytest.mark.parametrize(
    ("system", "patched"),
    [
        (PATCH, True),
        ("a ghost write is ...", True),
        ("Do not send the same write again.", True),
        ("You are helpful.", False),
    ],
)
def test_the_ghost_write_patch_is_detected_in_the_system_prompt(system: str, patched: bool) -> None:
    assert has_ghost_write_patch(system) is patched


def test_a_kept_task_and_the_given_json_answer_as_reading_everything_again() -> None:
    # issue 24: the provider keeps the task per (first user message, tools) and counts the
    # prompt's tokens from the tools' JSON it made once; the answer must not move by a byte.
    from runner.models._conversation import parse_messages
    from runner.models._policies import decide
    from runner.models._provider import _next, params_from, to_response

    user = "Book a room for Alice Example on 2026-12-01 for 2 nights."
    for messages in (
        [{"role": "user", "content": user}],
        [
            {"role": "user", "content": user},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "create_booking", "arguments": json.dumps(BOOKING_ARGS)}},
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "ü" * 7},
        ],
    ):  # fmt: skip
        for model in ("careful", "naive"):
            for _ in range(2):  # the second time from the kept task
                decision, conv, tools_text = _next(model, messages, {"tools": BOOKING})
                fresh_task = extract_task(user, BOOKING)  # read again, not kept
                params = params_from({"tools": BOOKING})
                assert decision == decide(model, parse_messages(messages), fresh_task, params)
                given = to_response(model, messages, BOOKING, decision, conv=conv,
                                    tools_text=tools_text)  # fmt: skip
                fresh = to_response(model, messages, BOOKING, decision)
                assert given.usage == fresh.usage
                assert given.choices[0].message == fresh.choices[0].message
