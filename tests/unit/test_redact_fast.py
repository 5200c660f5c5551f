"""V3 at N2's speed: runner.store.redact's shortcuts (a keyword test before each regex, one redaction
per distinct value) redact exactly what the plain form does: every pattern on every string."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import runner.store.redact as redact
from harness.base.redact import AUTH_HEADER as _AUTH_HEADER
from harness.base.redact import BEARER as _BEARER
from harness.base.redact import URL_USERINFO as _URL_USERINFO
from harness.base.redact import VALUE_SHAPES as _VALUE_SHAPES
from runner.experiment.records import FindingRow, RunRecord, TranscriptEntry
from runner.store.redact import REDACTED, Redactor

SECRETS = ("sk-live-0123456789abcdef", "hunter2-secret", "tok3n-of-ci", "short")


def plain_text(redactor: Redactor, value: str) -> str:
    """The straightforward form: every known secret, then every pattern, on every string."""
    for secret in redactor.secrets:
        if secret in value:
            value = value.replace(secret, REDACTED)
    value = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", value)
    value = _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", value)
    value = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{REDACTED}", value)
    return _VALUE_SHAPES.sub(REDACTED, value)


def plain_scrubbed(model: BaseModel, redactor: Redactor) -> BaseModel:
    changes: dict[str, Any] = {}
    for name, value in model:  # pydantic's own iteration: every field
        if isinstance(value, str):
            changes[name] = plain_text(redactor, value)
        elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
            changes[name] = [plain_scrubbed(item, redactor) for item in value]
    return model.model_copy(update=changes)


def plain_record(redactor: Redactor, record: RunRecord) -> RunRecord:
    updated = plain_scrubbed(record, redactor)
    params = redactor.params(json.loads(record.model_params_json or "{}"))
    clean = json.dumps(params, sort_keys=True, default=str)
    if clean != record.model_params_json:
        updated = updated.model_copy(update={"model_params_json": clean})
    return updated


# Pieces that make the patterns match, almost match, or match only through (?i)'s Unicode
# rules ("ı" and "İ" stand for "i", the Kelvin sign for "k"), glued to arbitrary text.
PIECES = st.sampled_from([
    "Bearer ", "bearer\t", "BEARER  ", "bEaReR ", "Bearer", "Authorization: ", "authorization=",
    "AUTHORIZATION:", "Proxy-Authorization: Basic ", '"authorization": "', "authorızation: ",
    "authorİzation=", "Authorization", "https://", "://", "pg://u:pw@", "http://alice@",
    "abcdefghijklmnopqrstuvwxyz0123", "dXNlcjpwYXNz", "@", ":", " ", "\n", "'", '"',
    "\u212aey", "ı", "İ", "ſ", *SECRETS, REDACTED, "sk-", "ghp_", "AKIA", "0123456789ABCDEF",
    "sk-proj-", "xoxb-", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----",
])
TEXT = st.lists(st.one_of(PIECES, st.text(max_size=12)), max_size=12).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=TEXT, known=st.lists(st.sampled_from(SECRETS), max_size=3))
def test_v3_fast_text_redacts_what_the_plain_form_does(value, known):
    redactor = Redactor(known)
    assert redactor.text(value) == plain_text(redactor, value)


def test_v3_unicode_spellings_of_the_keywords_still_take_the_regexes():
    redactor = Redactor()
    for value in ("x authorızation: abcdefgh1234 y", "x authorİzation=abcdefgh1234 y",
                  "\u212aey: Bearer abcdefghijklmnopqrstuvwxyz"):
        assert REDACTED in redactor.text(value), value
        assert redactor.text(value) == plain_text(redactor, value)


T0 = datetime(2026, 11, 1, tzinfo=UTC)
NAMES = st.sampled_from(["gpt-4o-mini", "F1", "none", "auto", "https://u:p@h/x", "Bearer " + "a" * 20])


@st.composite
def records(draw) -> RunRecord:
    text = st.one_of(TEXT, NAMES)
    params = draw(st.dictionaries(
        st.sampled_from(["api_key", "api_base", "temperature", "extra_headers", "stop"]),
        st.one_of(text, st.integers(), st.dictionaries(st.sampled_from(["Authorization", "x"]),
                                                       text, max_size=2)),
        max_size=3,
    ))
    return RunRecord(
        run_id=draw(text), experiment="x", cell_id=draw(NAMES), repetition=0, model=draw(NAMES),
        model_params_json=json.dumps(params), prompt="p", patch_arm=draw(NAMES),
        patch_text=draw(st.none() | text), upstream="u", scenario=draw(NAMES), conversation="c",
        status="error", error=draw(st.none() | text), final_answer=draw(st.none() | text),
        report_json=draw(st.none() | text), started_at=T0, finished_at=T0,
        harness_version="0",
        transcript=[TranscriptEntry(idx=i, role="tool", content=c, tool_calls_json=j)
                    for i, (c, j) in enumerate(draw(st.lists(st.tuples(text, st.none() | text),
                                                             max_size=3)))],
        findings=[FindingRow(kind="violation", code="X", detail_json=draw(text))],
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(records(), min_size=1, max_size=4), known=st.lists(st.sampled_from(SECRETS),
                                                                           max_size=2))
def test_v3_fast_record_redacts_what_the_plain_form_does_also_when_values_repeat(batch, known):
    redactor = Redactor(known)
    # Twice over: the second pass reads every value from what the first remembered.
    for record in [*batch, *batch]:
        assert redactor.record(record).model_dump() == plain_record(redactor, record).model_dump()


def test_v3_remembered_values_are_bounded_and_forgetting_changes_nothing(monkeypatch):
    monkeypatch.setattr(redact, "CACHE_SIZE", 3)
    monkeypatch.setattr(redact, "CACHED_LENGTH", 40)
    redactor = Redactor(["hunter2-secret"])
    values = [f"v{i} Bearer {'b' * 20} hunter2-secret" for i in range(10)] + ["x" * 41]
    for value in values * 2:
        assert redactor._text_once(value) == plain_text(redactor, value)
        assert len(redactor._texts) <= 3
    assert "x" * 41 not in redactor._texts  # long (mostly unique) text is not remembered


COLUMN = st.lists(st.one_of(st.none(), TEXT, NAMES), max_size=30)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=COLUMN, known=st.lists(st.sampled_from(SECRETS), max_size=3))
def test_v3_a_column_screened_as_a_whole_redacts_what_the_plain_form_does(values, known):
    redactor = Redactor(known)
    assert redactor.column(values) == [None if v is None else plain_text(redactor, v)
                                       for v in values]


def test_v3_the_column_screen_finds_a_secret_in_one_value_of_many():
    redactor = Redactor(["hunter2-secret"])
    for odd in ("x hunter2-secret", "pg://u:pw@h", "bEaReR abcdefghijklmnopqrstu",
                "authorİzation=abcdefgh1234", "\u212aey: Bearer abcdefghijklmnopqrstuvwxyz"):
        values = ["plain"] * 500 + [odd] + [None, ""] * 10
        clean = redactor.column(values)
        assert clean[:500] == values[:500] and clean[501:] == values[501:]
        assert clean[500] == plain_text(redactor, odd) != odd
    quiet = ["plain", None, "", "ascii only"] * 100
    assert redactor.column(quiet) is quiet  # nothing to change: the same list, not a copy
