"""Tool classification (C1-C10, E1, E2), key fields (K1, K5, E3) and defaults (K4) per tool.

Everything per tool is decided once, when the upstream's tool list arrives (or, for a tool it
did not list, at its first call), so the work per call does not grow with the session.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from harness.base import jsonutil
from harness.base.errors import ConfigError
from harness.base.textsafe import terminal
from harness.operations.defaults import DefaultsPlan, defaults_plan
from harness.operations.keys import (
    ANYWHERE,
    DEFAULT_KEY_SPELLINGS,
    KeyPlan,
    KeySpec,
    find_key_field,
    key_plan,
    normalise_field_name,
    usable_key,
)
from harness.operations.names import (
    first_word,
    glob_match,
    last_segment,
    snake_case,
    tool_glob_match,
)

if TYPE_CHECKING:  # Z1-Z3, Z7: imported when a tool list arrives, not at start-up
    from harness.operations.effects import EffectPlan
    from harness.operations.profiles import Profile

ToolClass = Literal["write", "read", "unclassified"]

# C4 + C8: default write patterns, matched against the snake_case form of a name's last
# segment. Sources of the verbs beyond C4 are listed in docs/decisions.md ("Write verbs").
DEFAULT_WRITE_PATTERNS: tuple[str, ...] = (
    # C4
    "write*", "create_*", "send_*", "submit_*", "post_*", "update_*", "insert_*", "book_*",
    "pay_*", "charge_*", "cancel_*", "delete_*", "confirm_*", "place_*", "add_*", "register_*",
    "schedule_*", "transfer_*", "refund_*", "reserve_*", "issue_*", "remove_*", "withdraw_*",
    "deposit_*", "purchase_*", "approve_*",
    # C8: creating and changing records
    "get_or_create*", "find_or_create*", "make_*", "set_*", "edit_*", "modify_*", "patch_*",
    "put_*", "upsert_*", "replace_*", "save_*", "store_*", "rename_*", "move_*", "copy_*",
    "upload_*", "import_*", "apply_*", "assign_*", "unassign_*", "archive_*", "restore_*",
    # payments
    "process_*", "capture_*", "authorize_*", "void_*", "settle_*", "payout_*", "finalize_*",
    "order_*", "buy_*", "subscribe_*", "unsubscribe_*", "check_in_*", "check_out_*",
    "checkout_*",
    # messaging
    "reply_*", "forward_*", "notify_*", "broadcast_*", "invite_*", "share_*", "publish_*",
    "unpublish_*", "comment_*",
    # version control
    "commit*", "merge_*", "push_*", "fork_*", "rebase_*", "revert_*", "cherry_pick_*",
    "tag_*", "release_*", "deploy_*", "rollback_*",
    # SQL and data stores
    "execute_*", "exec_*", "drop_*", "truncate_*", "alter_*", "grant_*", "revoke_*",
    # approvals and workflow states
    "reject_*", "decline_*", "accept_*", "sign_*", "close_*", "reopen_*", "resolve_*",
    "complete_*", "mark_*", "lock_*", "unlock_*", "enable_*", "disable_*", "activate_*",
    "deactivate_*",
)  # fmt: skip

# C5: default read prefixes; each must be the whole first word of the name.
DEFAULT_READ_PREFIXES: frozenset[str] = frozenset(
    ("get", "list", "search", "find", "read", "fetch", "query", "lookup", "check", "describe",
     "show", "view", "count", "is", "has")
)  # fmt: skip

# E2: a write verb that is also a noun or an adjective, followed by nothing but a noun that
# names a state or a listing, is a noun phrase: `order_status` is the status of an order, not
# an order of statuses. Only these verbs read that way (`update_status`, `set_state` and
# `add_notes` stay writes); docs/decisions.md ("State and listing names") says why.
NOUN_LIKE_VERBS: frozenset[str] = frozenset(
    ("order", "deploy", "close", "release", "store", "tag", "book", "place", "issue", "charge",
     "transfer", "deposit", "payout", "schedule", "comment", "share", "commit", "merge", "push",
     "rollback", "invite", "checkout", "refund", "purchase", "register", "import", "upload",
     "patch", "pay", "reserve", "lock", "process", "archive", "grant")
)  # fmt: skip
STATE_NOUNS: frozenset[str] = frozenset(
    ("status", "statuses", "state", "states", "log", "logs", "history", "price", "prices",
     "notes", "hours", "list", "details", "info", "summary", "stats", "count", "total",
     "progress")
)  # fmt: skip
# E2: `payments.create`, `orders/cancel`, `mcp__bank__transfer`: a namespaced name whose last
# segment is a bare write verb (the verbs of the `verb_*` patterns above).
BARE_WRITE_VERBS: frozenset[str] = frozenset(
    p[:-2] for p in DEFAULT_WRITE_PATTERNS if p.endswith("_*")
)

DEFAULT_KEY_FIELDS: tuple[str, ...] = DEFAULT_KEY_SPELLINGS

REASON_EXPLICIT_WRITE = "explicit --write-tools"
REASON_EXPLICIT_READ = "explicit --read-tools"
REASON_DEFAULT_WRITE = "default write pattern"
REASON_READ_PREFIX = "read prefix"
REASON_NONE = "no annotation, no pattern match"
REASON_NOT_LISTED = "not listed by the upstream"
REASON_STATE_NAME = "names a state or a listing"
# E1: why a write may be repeated
IDEMPOTENT_BY_ANNOTATION = "annotation idempotentHint=true"
IDEMPOTENT_BY_FLAG = "explicit --idempotent-tools"
REASON_STATEMENTS = "explicit --statement-tools"


@dataclass(frozen=True)
class ClassifierConfig:
    """The classification and key flags, validated once at the edge."""

    __pydantic_config__ = {"extra": "forbid"}  # a proxy's config file names only these

    write_globs: tuple[str, ...] | None = None  # --write-tools: replaces the default patterns
    read_globs: tuple[str, ...] = ()  # --read-tools: added to the default prefixes
    key_fields: tuple[str, ...] = DEFAULT_KEY_FIELDS  # --key-fields entries (K1, K5)
    keys_honoured: tuple[str, ...] = ()  # --keys-honoured: tool globs (K6)
    idempotent_globs: tuple[str, ...] = ()  # --idempotent-tools: tool globs (E1)
    distrust_annotations: bool = False  # --distrust-annotations: idempotentHint counts not (E1)
    statement_globs: tuple[str, ...] = ()  # --statement-tools: SQL in an argument (Z1)
    strict_errors: bool = False  # --strict-errors: only isError refuses an attempt (Z4)
    use_profiles: bool = True  # --no-profiles turns the shipped server profiles off (Z7)

    @property
    def key_spec(self) -> KeySpec:
        spec = self.__dict__.get("_key_spec")
        if spec is None:
            spec = KeySpec.parse(self.key_fields)
            object.__setattr__(self, "_key_spec", spec)
        return spec

    @property
    def normalised_key_fields(self) -> frozenset[str]:
        return self.key_spec.names

    def honours_keys(self, name: str) -> bool:
        return any(tool_glob_match(g, name) for g in self.keys_honoured)

    def idempotent(self, name: str, annotations: Any) -> str | None:
        """E1: why repeating this write is harmless, or None. The flag always counts; the
        annotation `idempotentHint: true` (without `readOnlyHint: true`) unless
        --distrust-annotations."""
        if any(tool_glob_match(g, name) for g in self.idempotent_globs):
            return IDEMPOTENT_BY_FLAG
        if (
            not self.distrust_annotations
            and isinstance(annotations, Mapping)
            and annotations.get("idempotentHint") is True
            and annotations.get("readOnlyHint") is not True
        ):
            return IDEMPOTENT_BY_ANNOTATION
        return None


@dataclass(frozen=True)
class ToolInfo:
    """One tool as the harness sees it."""

    name: str
    tool_class: ToolClass
    reason: str
    key_field: str | None = None  # the input-schema property (path) that carries a key
    conflict: str | None = None  # C9: how the annotation contradicts the name
    listed: bool = True
    key_names: frozenset[str] = frozenset()  # normalised key-field names for this tool
    defaults: DefaultsPlan | None = field(default=None, compare=False)
    keys_honoured: bool = False  # K6
    key_plan: KeyPlan = field(default=ANYWHERE, compare=False)  # E3: where keys may be
    idempotent: str | None = None  # E1: why a repeat of this write is harmless (writes only)
    # Z1-Z3: the argument that names each call's effect (its class is then per call)
    effect: EffectPlan | None = None


_UNLISTED_CACHE = 4096


@dataclass
class Classification:
    """The classified tool list (C7's `toolClassification`)."""

    tools: dict[str, ToolInfo] = field(default_factory=dict)
    config: ClassifierConfig = field(default_factory=ClassifierConfig)
    complete: bool = True  # False when listing failed: unlisted names may still exist
    unlisted: dict[str, ToolInfo] = field(default_factory=dict)
    profile: Profile | None = None  # Z7: the server's profile, when one matched

    def get(self, name: str) -> ToolInfo:
        """C10: a tool the upstream did not list is classified by flags and name patterns."""
        info = self.tools.get(name)
        if info is not None:
            return info
        info = self.unlisted.get(name)
        if info is None:
            info = classify_tool({"name": name}, self.config, listed=False, profile=self.profile)
            if len(self.unlisted) < _UNLISTED_CACHE:
                self.unlisted[name] = info
        return info

    def might_exist(self, name: str) -> bool:
        """S7: the upstream has this tool, or its list is unknown (listing failed)."""
        return name in self.tools or not self.complete

    def unclassified(self) -> list[str]:
        return [t.name for t in self.tools.values() if t.tool_class == "unclassified"]


def _annotation_class(annotations: Any) -> tuple[ToolClass, str] | None:
    if not isinstance(annotations, Mapping) or not annotations:
        return None
    read_only = annotations.get("readOnlyHint")
    if read_only is True:
        return "read", "annotation readOnlyHint=true"
    if read_only is False:
        return "write", "annotation readOnlyHint=false"
    if annotations.get("destructiveHint") is True:
        return "write", "annotation destructiveHint=true"
    return None


def names_a_state(short: str) -> bool:
    """E2: `order_status`, `deploy_logs`, `close_price`: a noun-like verb and a state noun."""
    words = short.strip("_").split("_")
    return len(words) == 2 and words[0] in NOUN_LIKE_VERBS and words[1] in STATE_NOUNS


def _command(short: str) -> Any:
    """Z3: the key-value command a bare tool name is (`set`, `lpush`), if any."""
    if not short.isalpha() or len(short) > 24:
        return None
    from harness.operations.commands import command_table

    return command_table().get(short)


def _command_reason(short: str) -> str:
    """`redis 6.2.14 command table: SET`: the table and its version name the reason (Z3)."""
    from harness.operations.commands import command_table

    return f"{command_table().label} command table: {short.upper()}"


def _name_class(name: str, config: ClassifierConfig) -> tuple[ToolClass, str] | None:
    """C4, C5, C8, E2, Z3: what the name says, by its last segment."""
    segment = last_segment(name)
    short = snake_case(segment)
    if names_a_state(short):
        return "read", REASON_STATE_NAME
    command = _command(short)
    if command is not None:
        return command.tool_class, _command_reason(short)
    if config.write_globs is None:
        if any(glob_match(p, short) for p in DEFAULT_WRITE_PATTERNS):
            return "write", REASON_DEFAULT_WRITE
        if segment != name and short.strip("_") in BARE_WRITE_VERBS:
            return "write", REASON_DEFAULT_WRITE  # E2: `payments.create`
    if first_word(short) in DEFAULT_READ_PREFIXES:
        return "read", REASON_READ_PREFIX
    return None


def classify_tool(
    tool: Mapping[str, Any],
    config: ClassifierConfig,
    *,
    listed: bool = True,
    profile: Profile | None = None,
) -> ToolInfo:
    """C1-C10, E1-E3, K1/K4/K5/K6 and Z1-Z3, Z7 for one tool as listed by the upstream (a
    `tools/list` entry), with the server's profile if one matched."""
    name = str(tool.get("name", ""))
    facts = profile.tools.get(name) if profile is not None else None
    info = _classify(tool, config, listed, profile)
    if info.tool_class != "write":
        return info
    # E1, Z7: the flag first, then the profile, then the annotation, then a command table.
    if any(tool_glob_match(g, name) for g in config.idempotent_globs):
        return replace(info, idempotent=IDEMPOTENT_BY_FLAG)
    if facts is not None and facts.idempotent is not None and profile is not None:
        return replace(info, idempotent=profile.label if facts.idempotent else None)
    why = config.idempotent(name, tool.get("annotations"))
    if why is not None:
        return replace(info, idempotent=why)
    annotations = tool.get("annotations")
    said_not = isinstance(annotations, Mapping) and annotations.get("idempotentHint") is False
    short = snake_case(last_segment(name))
    command = _command(short)
    if command is not None and command.idempotent and info.effect is None and not said_not:
        return replace(info, idempotent=_command_reason(short))
    return info


def _profile_class(
    name: str, facts: Any, profile: Profile, common: dict[str, Any], suffix: str
) -> ToolInfo | None:
    """Z7: what the server's profile says of this tool (its class, or its statement)."""
    from harness.operations.effects import EffectPlan

    if facts.statement is not None or facts.command is not None:
        kind = "sql" if facts.statement is not None else "command"
        plan = EffectPlan(kind, facts.statement or facts.command, facts.dialect, profile.label)
        return ToolInfo(name, "write", _statement_reason(plan) + suffix, effect=plan, **common)
    if facts.tool_class is not None:
        return ToolInfo(name, facts.tool_class, profile.label + suffix, **common)
    return None


def _statement_reason(plan: EffectPlan) -> str:
    what = "SQL" if plan.kind == "sql" else "command" if plan.kind == "command" else "HTTP method"
    return f"{plan.declared_by}: each call is classified by the {what} in `{plan.argument}`"


def _classify(
    tool: Mapping[str, Any], config: ClassifierConfig, listed: bool, profile: Profile | None
) -> ToolInfo:
    from harness.operations.effects import effect_plan

    name = str(tool.get("name", ""))
    schema = tool.get("inputSchema")
    facts = profile.tools.get(name) if profile is not None else None
    key_names = config.key_spec.for_tool(name)
    if facts is not None and facts.key_fields:
        key_names = key_names | {normalise_field_name(f) for f in facts.key_fields}
    common = {
        "key_field": find_key_field(schema, key_names),
        "listed": listed,
        "key_names": key_names,
        "defaults": defaults_plan(schema),
        "keys_honoured": config.honours_keys(name),
        "key_plan": key_plan(schema, key_names),
    }
    suffix = "" if listed else f"; {REASON_NOT_LISTED}"
    explicit_write = config.write_globs is not None and any(
        tool_glob_match(g, name) for g in config.write_globs
    )
    explicit_read = any(tool_glob_match(g, name) for g in config.read_globs)
    if explicit_write and explicit_read:
        raise ConfigError(
            f'tool "{name}" matches both --write-tools and --read-tools; make the lists disjoint'
        )
    if explicit_write:
        return ToolInfo(name, "write", REASON_EXPLICIT_WRITE + suffix, **common)
    if explicit_read:
        return ToolInfo(name, "read", REASON_EXPLICIT_READ + suffix, **common)
    if any(tool_glob_match(g, name) for g in config.statement_globs):  # Z1
        plan = effect_plan(tool, declared=REASON_STATEMENTS)
        if plan is not None:
            return ToolInfo(name, "write", _statement_reason(plan) + suffix, effect=plan, **common)
    if facts is not None and profile is not None:  # Z7: a profile over annotations
        by_profile = _profile_class(name, facts, profile, common, suffix)
        if by_profile is not None:
            return by_profile
    plan = effect_plan(tool)  # Z1, Z3: the argument names the effect, whatever the hints say
    if plan is not None:
        return ToolInfo(name, "write", _statement_reason(plan) + suffix, effect=plan, **common)
    by_name = _name_class(name, config)
    by_annotation = _annotation_class(tool.get("annotations"))
    if by_annotation is not None:
        cls, reason = by_annotation
        if by_name is not None and by_name[0] != cls:
            # C9, E2: a name and an annotation that disagree. A read-only hint on a writing
            # name makes the tool neither: never a verification, and its repeats are no
            # violation. A writing hint on a reading name stays a write (a false read would
            # hide a double booking).
            conflict = f"the name reads as a {by_name[0]}, the {reason} says {cls}"
            judged: ToolClass = "unclassified" if cls == "read" else "write"
            return ToolInfo(name, judged, f"{reason} contradicts the name", conflict=conflict,
                            **common)  # fmt: skip
        return ToolInfo(name, cls, reason + suffix, **common)
    if by_name is not None:
        return ToolInfo(name, by_name[0], by_name[1] + suffix, **common)
    return ToolInfo(name, "unclassified", REASON_NONE + suffix, **common)


def classify_tools(
    tools: Iterable[Mapping[str, Any]],
    config: ClassifierConfig,
    *,
    complete: bool = True,
    profile: Profile | None = None,
) -> Classification:
    """Classify every listed tool (with the server's profile, Z7); raise ConfigError for a tool
    in both explicit lists (C2)."""
    profile = profile if config.use_profiles else None
    result = Classification(config=config, complete=complete, profile=profile)
    for tool in tools:
        info = _classify_listed(tool, config, profile)
        result.tools[info.name] = info
    return result


# Every run of a sweep lists the same tools to a proxy configured the same way: classifying a
# tool (its name's patterns, its schema's key plan and defaults) cost ~0.1 ms, about 0.5 ms of
# a run (issue 24). A listed tool's classification depends only on the config and the tool's
# JSON, and a ToolInfo is immutable: the last few are kept and shared.
_LISTED: dict[tuple[ClassifierConfig, str, str | None], ToolInfo] = {}
_LISTED_SIZE = 256


def _classify_listed(
    tool: Mapping[str, Any], config: ClassifierConfig, profile: Profile | None
) -> ToolInfo:
    try:
        key = (config, jsonutil.dumps(tool), profile.file if profile is not None else None)
        info = _LISTED.get(key)
    except (TypeError, ValueError):  # not JSON (a caller's own mapping) or an unhashable config
        return classify_tool(tool, config, profile=profile)
    if info is None:
        info = classify_tool(tool, config, profile=profile)  # ConfigError (C2) each time
        if len(_LISTED) >= _LISTED_SIZE:
            del _LISTED[next(iter(_LISTED))]
        _LISTED[key] = info
    return info


def key_of(
    arguments: Any, normalised_keys: frozenset[str], plan: KeyPlan = ANYWHERE
) -> tuple[str | None, Any]:
    """K1/K5/E3: (path, value) of the first key field that carries a key (not `null`, not
    `""`), where `plan` allows (any depth by default), else (None, None)."""
    from harness.operations.keys import find_keys

    return usable_key(find_keys(arguments, normalised_keys, plan))


def startup_lines(classification: Classification, key_fields: Sequence[str]) -> list[str]:
    """C7: what the proxy prints to stderr about the upstream's tools, one line each."""
    tools = list(classification.tools.values())
    names = {t.name: terminal(t.name) for t in tools}  # V6: the upstream chose these names
    width = max(map(len, names.values()), default=0)
    lines = [f"Upstream tools ({len(tools)}):"]
    profile = classification.profile
    if profile is not None:  # Z7
        lines.insert(0, f"Server profile: {profile.file} ({profile.server} {profile.verified_with}"
                        f", verified by {profile.verified_by}); --no-profiles turns it off")
    for t in tools:
        lines.append(f"  {t.tool_class:<12} {names[t.name]:<{width}}  ({t.reason})")
    for t in tools:
        if t.conflict is not None and t.tool_class == "unclassified":
            lines.append(  # E2
                f'WARNING: tool "{names[t.name]}": {t.conflict}; it is judged as neither: its '
                "calls verify nothing, its repeats are no violation and it never triggers a "
                "scenario. Use --write-tools or --read-tools if you know which it is."
            )
        elif t.tool_class == "unclassified":
            lines.append(
                f'WARNING: tool "{t.name}" could not be classified as read or write: it is '
                "passed through, never triggers a scenario and is not scored. "
                "Use --write-tools or --read-tools to classify it."
            )
        elif t.conflict is not None:
            lines.append(
                f'WARNING: tool "{names[t.name]}": {t.conflict}; it is judged as a write. '
                "Use --read-tools if it really only reads."
            )
    with_key = [f"{t.name} ({t.key_field})" for t in tools if t.key_field]
    fields = ", ".join(key_fields)
    if with_key:
        lines.append(f"Tools with a key field [{fields}]: " + ", ".join(with_key))
    else:
        lines.append(f"No tool takes a key field [{fields}] (set --key-fields if yours differ).")
    honoured = [t.name for t in tools if t.keys_honoured]
    if honoured:
        lines.append("The upstream deduplicates same-key repeats of: " + ", ".join(honoured))
    idempotent = [f"{names[t.name]} ({t.idempotent})" for t in tools if t.idempotent]
    if idempotent:
        lines.append("Repeats are harmless (idempotent, E1) for: " + ", ".join(idempotent))
    return lines


__all__ = [
    "DEFAULT_KEY_FIELDS",
    "Classification",
    "ClassifierConfig",
    "ToolInfo",
    "classify_tool",
    "classify_tools",
    "glob_match",
    "key_of",
    "last_segment",
    "normalise_field_name",
    "snake_case",
    "startup_lines",
    "tool_glob_match",
]
