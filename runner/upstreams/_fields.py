"""Input field types shared by the built-in upstreams, and how their values are normalised.

The same normalisation runs when a server stores a value and when the ground truth counts
rows for an operation, so both sides agree on what "the same booking" means:

- free text (guest, customer, reference): Unicode NFKC, runs of white space collapsed to one
  space, trimmed. Stored in that form; compared case-insensitively (casefold), so "anna
  smith " and "Anna Smith" are the same guest.
- dates: "YYYY-MM-DD", must be a real calendar date; stored as given.
- money: a JSON number > 0 with at most two decimals, stored as integer minor units (cents),
  so 129, 129.0 and 129.00 are the same amount.
- currency: three letters, stored upper-case.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

MAX_AMOUNT = 1_000_000_000


def clean_text(value: str) -> str:
    """The stored form of free text: NFKC, white space collapsed, trimmed."""
    return " ".join(unicodedata.normalize("NFKC", value).split())


def match_key(value: str) -> str:
    """The form free text is compared in: the stored form, case-folded."""
    return clean_text(value).casefold()


def to_minor_units(amount: float) -> int:
    """Amount in cents; ValueError when it has more than two decimals or is out of range."""
    try:
        # str() of a float is its shortest round-trip form, so 129.99 stays 129.99.
        exact = Decimal(str(amount))
    except InvalidOperation as exc:
        raise ValueError("amount must be a finite number") from exc
    if not exact.is_finite() or exact <= 0 or exact > MAX_AMOUNT:
        raise ValueError(f"amount must be greater than 0 and at most {MAX_AMOUNT}")
    cents = exact * 100
    if cents != cents.to_integral_value():
        raise ValueError("amount must have at most two decimals")
    return int(cents)


def _non_blank_text(value: str) -> str:
    cleaned = clean_text(value)
    if not cleaned:
        raise ValueError("must not be blank")
    return cleaned


def _optional_text(value: str | None) -> str | None:
    if value is None:
        return None
    return clean_text(value) or None


def _calendar_date(value: str) -> str:
    try:
        dt.date.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a real calendar date") from exc
    return value


def _checked_amount(value: float) -> float:
    to_minor_units(value)
    return value


def _checked_id(value: str) -> str:
    return value.strip().upper()


Text = Annotated[str, Field(max_length=200), AfterValidator(_non_blank_text)]
OptionalText = Annotated[str | None, Field(max_length=200), AfterValidator(_optional_text)]
IsoDate = Annotated[
    str,
    Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", description="A date as YYYY-MM-DD."),
    AfterValidator(_calendar_date),
]
Amount = Annotated[float, AfterValidator(_checked_amount)]
Currency = Annotated[
    str,
    Field(pattern=r"^[A-Za-z]{3}$", description="ISO 4217 code, e.g. EUR."),
    AfterValidator(str.upper),
]
RecordId = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(_checked_id)]


class ToolArgs(BaseModel):
    """Base of every tool's arguments: strict types, unknown fields refused."""

    # Strict: a JSON schema says "number", so "129" is refused rather than coerced, the way a
    # server validating its schema would answer.
    model_config = ConfigDict(strict=True, extra="forbid")


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The tool's JSON input schema, derived from its argument model and tidied for agents."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
        _collapse_optional(prop)
    return schema


def _collapse_optional(prop: dict[str, Any]) -> None:
    # pydantic renders `str | None = None` as anyOf [string, null]; agents and several model
    # APIs handle a plain typed, non-required property better, and null is still accepted.
    variants = prop.get("anyOf")
    if not variants or len(variants) != 2:
        return
    non_null = [v for v in variants if v.get("type") != "null"]
    if len(non_null) != 1:
        return
    del prop["anyOf"]
    outer = dict(prop)  # the property's own description wins over the inner type's
    prop.clear()
    prop.update(non_null[0], **outer)
    if prop.get("default", 0) is None:
        del prop["default"]
