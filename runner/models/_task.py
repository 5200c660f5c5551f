"""What a scripted model reads from the user's request and the tool list: the task.

Only what a real model would see goes in: the first user message and the tools in OpenAI
function format. Nothing here knows the harness's classifier; the heuristics are the kind a
model applies when it reads tool names, descriptions and JSON schemas.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Verbs of tools that bring something new into being. Updates, cancellations and refunds are
# left out: a request to book or pay never means them.
_CREATING_VERBS = frozenset(
    "create book pay send submit post insert charge place add register schedule transfer "
    "reserve issue purchase make order write".split()
)
_SEARCH_VERBS = frozenset({"search", "list", "find"})
_LOOKUP_VERBS = frozenset({"get", "fetch", "lookup", "read", "show", "view", "describe", "find"})
_CREATES_TEXT = re.compile(r"\bcreat(?:e|es|ing)\b", re.IGNORECASE)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# "key: value" where the key is up to three words; the longest suffix naming a property wins,
# so "Pay the invoice for customer: ACME" still finds `customer`. A space (or the end) follows
# the colon, so a value may hold a URL or a data URI ("data: data:text/plain,hi").
_PAIR_KEY = re.compile(r"(?<![\w-])([A-Za-z][\w-]*(?: [A-Za-z][\w-]*){0,2})\s*:(?=\s|$)\s*")
_ID_NAME = re.compile(r"(?:^|[_\s-])[iI][dD]$|[a-z0-9]I[dD]$")
_ID_EXAMPLE = re.compile(r"\b([A-Z]{2,5})-[0-9A-Z]{2,}\b")


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the model sees it."""

    name: str
    description: str
    properties: Mapping[str, Any]
    required: tuple[str, ...]


@dataclass(frozen=True)
class PlannedCall:
    """A tool call the model decided to make."""

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Task:
    """The write the user asked for, and the reads that could confirm it."""

    noun: str  # how the model names the thing in its answers: "booking", "payment"
    write: PlannedCall
    key_field: str | None = None
    search: PlannedCall | None = None
    lookup: ToolSpec | None = None  # an id-lookup tool (its only required field is an id)
    # The defaults the write's schema declares for properties the request left out (K4).
    defaults: Mapping[str, Any] = field(default_factory=dict)
    # Those of them whose property is an enum (inline, or a `$ref` as pydantic writes it, E4).
    enum_defaults: Mapping[str, Any] = field(default_factory=dict)
    status: ToolSpec | None = None  # a tool that reads a record's status (`order_status`)
    # Z1: a read through the write's own statement tool (`SELECT count(*) AS found ...`),
    # when the write is an SQL INSERT: what a careful model checks and a poller polls
    check: PlannedCall | None = None
    # Z5: the optional properties the request left out, as empty values (`projects: []`)
    empties: Mapping[str, Any] = field(default_factory=dict)

    def is_check(self, call: Any) -> bool:
        """The call is the task's check through the write's own tool."""
        return self.check is not None and call.name == self.check.name and dict(
            call.arguments) == dict(self.check.arguments)  # fmt: skip

    def is_write(self, call: Any) -> bool:
        """The call sends the write (any spelling of it), not a check through its tool."""
        return call.name == self.write.name and not self.is_check(call)

    def keyed_write(self) -> PlannedCall:
        """The write with a deterministic idempotency key (when the schema has a key field)."""
        if self.key_field is None:
            return self.write
        canonical = json.dumps(
            [self.write.name, self.write.arguments], sort_keys=True, separators=(",", ":")
        )
        key = "key-" + hashlib.sha256(canonical.encode()).hexdigest()[:12]
        return PlannedCall(self.write.name, {**self.write.arguments, self.key_field: key})


def words(name: str) -> list[str]:
    """The lower-case words of a snake_case or camelCase tool name."""
    return [w for w in _CAMEL.sub("_", name).lower().replace("-", "_").split("_") if w]


def first_word(name: str) -> str:
    """The verb a tool name starts with ("" for an empty name)."""
    parts = words(name)
    return parts[0] if parts else ""


def normalise(name: str) -> str:
    """A property or pair name without case, spaces, `-` and `_`."""
    return re.sub(r"[\s_-]", "", name).lower()


def is_id_field(name: str) -> bool:
    """True for `booking_id`, `bookingId`, `id`."""
    return bool(_ID_NAME.search(name))


def parse_tools(tools: Sequence[Mapping[str, Any]] | None) -> list[ToolSpec]:
    """OpenAI function-format tools -> ToolSpec (other entries are ignored)."""
    specs = []
    for tool in tools or ():
        fn = tool.get("function") if tool.get("type", "function") == "function" else None
        if not isinstance(fn, Mapping) or not fn.get("name"):
            continue
        params = fn.get("parameters") or {}
        specs.append(
            ToolSpec(
                name=str(fn["name"]),
                description=str(fn.get("description") or ""),
                properties=dict(params.get("properties") or {}),
                required=tuple(params.get("required") or ()),
            )
        )
    return specs


def parse_pairs(text: str) -> dict[str, str]:
    """The `name: value` pairs of a request, keyed by every suffix of the pair name."""
    matches = list(_PAIR_KEY.finditer(text))
    pairs: dict[str, str] = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        # a value ends at a blank line: what follows is another paragraph (or another message
        # of the same turn, as agents send their context beside the request)
        value = text[m.end() : end].split("\n\n", 1)[0].strip().rstrip(",;").strip()
        if value.endswith("."):
            value = value[:-1]  # the end of the sentence, not part of the value
        value = value.strip().strip("\"'")
        if not value:
            continue
        key_words = m.group(1).split(" ")
        for start in range(len(key_words)):
            pairs.setdefault(normalise("".join(key_words[start:])), value)
    return pairs


def _schema_type(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None:
        for variant in schema.get("anyOf") or schema.get("oneOf") or ():
            if isinstance(variant, Mapping) and variant.get("type") not in (None, "null"):
                return _schema_type(variant)
    return kind


def coerce(value: str, schema: Mapping[str, Any]) -> Any:
    """The pair's text as the schema's type; the text itself when it does not parse."""
    kind = _schema_type(schema)
    try:
        if kind == "integer":
            number = float(value)
            return int(number) if number.is_integer() else value
        if kind == "number":
            number = float(value)
            return int(number) if number.is_integer() and "." not in value else number
    except ValueError:
        return value
    if kind == "boolean" and value.lower() in ("true", "yes", "false", "no"):
        return value.lower() in ("true", "yes")
    if kind in ("array", "object"):
        # JSON as a model writes it (`entities: [{"name": "Ann"}]`); a bare word for a list
        # of strings is that one item (`files: notes.txt`).
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, list if kind == "array" else dict):
            return parsed
        if kind == "array":
            return [value]
    return value


def _fill(tool: ToolSpec, pairs: Mapping[str, str]) -> dict[str, Any]:
    return {
        prop: coerce(pairs[normalise(prop)], schema if isinstance(schema, Mapping) else {})
        for prop, schema in tool.properties.items()
        if normalise(prop) in pairs
    }


def key_field_of(tool: ToolSpec) -> str | None:
    """The property that carries an idempotency key, if the schema has one."""
    return next((p for p in tool.properties if "idempotency" in normalise(p)), None)


def _named(tool: ToolSpec, request: str) -> bool:
    """The request names the tool itself ("Please run gzip-file-as-resource"), as a user who
    knows the server does: whatever its verb, that is the write asked for."""
    return re.search(rf"(?<![\w-]){re.escape(tool.name)}(?![\w-])", request) is not None


def _is_creating(tool: ToolSpec) -> bool:
    verb = first_word(tool.name)
    if verb in _CREATING_VERBS:
        return True
    # A description counts only for names that do not already say "read": "list_x: lists
    # what you created" is still a read.
    reads = _SEARCH_VERBS | _LOOKUP_VERBS
    return verb not in reads and bool(_CREATES_TEXT.search(tool.description))


def _noun(tool_name: str) -> str:
    verb = first_word(tool_name)
    if verb in ("pay", "charge", "transfer"):
        return "payment"
    if verb in ("book", "reserve"):
        return "booking"
    return " ".join(words(tool_name)[1:]) or "request"


def _pick_write(tools: Sequence[ToolSpec], pairs: Mapping[str, str], request: str) -> ToolSpec:
    def rank(tool: ToolSpec) -> tuple[bool, int, bool]:
        key = key_field_of(tool)
        needed = [r for r in tool.required if r != key]
        complete = all(normalise(r) in pairs for r in needed)
        filled = sum(normalise(p) in pairs for p in tool.properties)
        named = any(w in request.lower() for w in words(tool.name))
        return complete, filled, named

    return max(tools, key=rank)  # max keeps the first of equals: the upstream's order


def _pick_search(
    tools: Sequence[ToolSpec], business: Mapping[str, Any]
) -> tuple[ToolSpec, dict[str, Any]] | None:
    best: tuple[int, ToolSpec, dict[str, Any]] | None = None
    for tool in tools:
        if first_word(tool.name) not in _SEARCH_VERBS:
            continue
        if not tool.properties or any(is_id_field(p) for p in tool.required):
            continue
        by_name = {normalise(k): v for k, v in business.items()}
        args = {
            p: by_name[normalise(p)]
            for p in tool.properties
            if not is_id_field(p) and normalise(p) in by_name
        }
        if not args or any(r not in args for r in tool.required):
            continue
        if best is None or len(args) > best[0]:
            best = (len(args), tool, args)
    return (best[1], best[2]) if best else None


def _pick_lookup(tools: Sequence[ToolSpec], write: ToolSpec) -> ToolSpec | None:
    # Only tools that read: "verifying" through cancel_booking(id) would be another write.
    return next(
        (
            t
            for t in tools
            if t is not write
            and first_word(t.name) in _LOOKUP_VERBS
            and len(t.required) == 1
            and is_id_field(t.required[0])
        ),
        None,
    )


def extract_task(first_user_message: str, tools: Sequence[Mapping[str, Any]] | None) -> Task | None:
    """Read the write the user asks for, and the tools that could check on it (None: no write)."""
    specs = parse_tools(tools)
    pairs = parse_pairs(first_user_message)
    named = [t for t in specs if _named(t, first_user_message)]
    writes = named or [t for t in specs if _is_creating(t)]
    if not writes:
        return None
    write_tool = _pick_write(writes, pairs, first_user_message)
    key = key_field_of(write_tool)
    arguments = {k: v for k, v in _fill(write_tool, pairs).items() if k != key}
    business = {k: v for k, v in arguments.items() if not is_id_field(k)}
    reads = [t for t in specs if not _is_creating(t) and t is not write_tool]
    search = _pick_search(reads, business)
    defaults = {
        prop: schema["default"]
        for prop, schema in write_tool.properties.items()
        if isinstance(schema, Mapping) and "default" in schema
        and prop not in arguments and prop != key
    }  # fmt: skip
    enums = {
        prop: value
        for prop, value in defaults.items()
        if "enum" in write_tool.properties[prop] or "$ref" in write_tool.properties[prop]
    }
    check = _statement_check(write_tool, arguments, reads)
    return Task(
        noun=_noun(write_tool.name),
        write=PlannedCall(write_tool.name, arguments),
        key_field=key,
        search=PlannedCall(search[0].name, search[1]) if search else check,
        lookup=_pick_lookup(reads, write_tool),
        defaults=defaults,
        enum_defaults=enums,
        status=_pick_status(specs, write_tool),
        check=check,
        empties=_empties(write_tool, arguments, key),
    )


_EMPTY_BY_TYPE: dict[str, Any] = {"array": [], "object": {}, "string": ""}


def _empties(tool: ToolSpec, arguments: Mapping[str, Any], key: str | None) -> dict[str, Any]:
    """Z5: what a model fills optional properties with when it fills them with nothing."""
    out: dict[str, Any] = {}
    for prop, schema in tool.properties.items():
        if prop in arguments or prop == key or prop in tool.required:
            continue
        if not isinstance(schema, Mapping) or schema.get("default") is not None:
            continue
        kind = _schema_type(schema)
        if kind in _EMPTY_BY_TYPE:
            out[prop] = _EMPTY_BY_TYPE[kind]
    return out


def _statement_check(
    write: ToolSpec, arguments: Mapping[str, Any], reads: Sequence[ToolSpec]
) -> PlannedCall | None:
    """Z1: for a write that is an SQL INSERT, the count of its row: through a reading tool that
    takes SQL the same way (`read_query` beside `write_query`), else through the same tool."""
    from runner.models._sql import count_check, insert_of

    for prop, value in arguments.items():
        if isinstance(value, str) and value.lstrip()[:6].upper() == "INSERT":
            insert = insert_of(value)
            if insert is None:
                continue
            skip = frozenset(c for c in insert.columns
                             if "idempotency" in normalise(c) or normalise(c) == "requestid")  # fmt: skip
            reader = next((t for t in reads if prop in t.properties
                           and first_word(t.name) in _LOOKUP_VERBS | _SEARCH_VERBS), None)  # fmt: skip
            tool = reader.name if reader is not None else write.name
            rest = {} if reader is not None else arguments
            return PlannedCall(tool, {**rest, prop: count_check(insert, skip)})
    return None


_STATUS_WORDS = frozenset({"status", "state", "progress"})


def _pick_status(tools: Sequence[ToolSpec], write: ToolSpec) -> ToolSpec | None:
    """A tool named for a status (`order_status`, `getDeployState`): what a poller calls."""
    return next(
        (t for t in tools if t is not write and words(t.name)[-1:] and
         words(t.name)[-1] in _STATUS_WORDS),
        None,
    )  # fmt: skip


def invented_id(lookup: ToolSpec) -> tuple[str, str]:
    """The id field of a lookup tool and an id the model never received, shaped like the docs."""
    field_name = lookup.required[0]
    schema = lookup.properties.get(field_name) or {}
    example = _ID_EXAMPLE.search(f"{schema.get('description', '')} {lookup.description}")
    stem = words(field_name)[0] if words(field_name) else "id"
    prefix = example.group(1) if example else stem[:2].upper()
    return field_name, f"{prefix}-000001"
