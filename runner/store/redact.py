"""One redaction step before anything is stored (SPEC V3, V15).

The text rules (names that say secret, known values, credential patterns) live in
harness/base/redact.py, which the cassette recorder (U2) shares; this module adds what only the
runner's store knows: model parameters, a spec's secrets by place, run records.

What the runner stores (run rows, the spec text) is read later by people, reports, CI logs
and pull-request comments, so secrets are taken out on the way in, in `Store`, once:

- by place: model parameters whose name says secret (`api_key`, `extra_headers.Authorization`,
  `aws_secret_access_key`, ...), every value of an upstream's `env` and of its truth probe's
  `env` (T1), in an argv (an upstream's args, a command agent's or a truth probe's command)
  the value after a flag such as `--token` and of `--password=...` or `API_TOKEN=...`, and the
  user and password of every URL (`https://user:pass@host`); in the spec text, the YAML source
  of such a value is replaced.
  A litellm reference `os.environ/NAME` is no secret and is kept as it is;
- by value: every secret found so, every value of an environment variable that such a
  reference names, and every value of this process's environment variables whose name says
  secret (at least 8 characters each), wherever it appears in any stored text: transcripts,
  error messages, reports;
- by pattern: `Authorization: ...` and `Bearer ...` credentials, URL user info and the
  shapes of well-known credentials (`sk-...`, `ghp_...`, `AKIA...`) in any stored text.

Shorter values (an env value "1") are redacted where they stand, not searched for elsewhere.

Cost (N2): a store of 100,000 runs passes about two million strings through here. Most hold
none of the patterns' keywords, which a substring test rules out before any regex runs, and run
rows repeat the same values (names, cell ids, parameters), which are redacted once per distinct
value. The store redacts a batch column by column (`column`): one screen over a column's
distinct values joined rules out the usual column, which holds no secret, before any value
is looked at. No shortcut changes a result (tests/unit/test_redact_fast.py compares them with
the plain form).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import Any

import yaml
from pydantic import BaseModel
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from harness.base.redact import (
    REDACTED,
    TextRedactor,
    has_shape_hint,
    secret_arguments,
    secret_name,
)
from harness.base.redact import URL_USERINFO as _URL_USERINFO
from harness.base.redact import url_secrets as _url_secrets
from runner.experiment.records import RunRecord

# Distinct values remembered per redactor: strings up to this length, this many at most (then
# forgotten all at once; a run's long texts, transcripts and reports, are mostly unique).
CACHED_LENGTH = 2048
CACHE_SIZE = 100_000
ENV_REFERENCE = re.compile(r"os\.environ/[A-Za-z_][A-Za-z0-9_]*")


class Redactor(TextRedactor):
    """Scrubs secrets out of what is about to be stored; `for_spec_text` knows a spec's."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__(secrets)
        self._texts: dict[str, str] = {}  # value -> text(value), see CACHED_LENGTH
        self._params_json: dict[str, str] = {}  # model_params_json -> its redacted JSON

    @classmethod
    def for_spec_text(cls, text: str) -> Redactor:
        """A redactor that also knows every secret the spec holds or refers to."""
        found = _SpecWalk(text).secrets
        for ref in ENV_REFERENCE.findall(text):
            value = os.environ.get(ref.removeprefix("os.environ/"))
            if value:
                found.add(value)
        return cls(found)

    def _text_once(self, value: str) -> str:
        """`text(value)`, remembered for values that are not long (run rows repeat them)."""
        clean = self._texts.get(value)
        if clean is None:
            clean = self.text(value)
            if len(value) <= CACHED_LENGTH:
                if len(self._texts) >= CACHE_SIZE:
                    self._texts.clear()
                self._texts[value] = clean
        return clean

    def params(self, value: Any, secret: bool = False) -> Any:
        """Model parameters with secret-named entries redacted (references kept)."""
        if isinstance(value, dict):
            return {k: self.params(v, secret or secret_name(k)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.params(v, secret) for v in value]
        if isinstance(value, str):
            if ENV_REFERENCE.fullmatch(value):
                return value
            return REDACTED if secret else self.text(value)
        return REDACTED if secret and value is not None else value

    def spec_text(self, text: str) -> str:
        """The spec's YAML with every secret's source replaced, comments and layout kept."""
        return self.text(_SpecWalk(text).redacted())

    def params_json(self, text: str) -> str:
        """A run's model parameters as stored: the JSON of `params`, keys sorted."""
        clean = self._params_json.get(text)
        if clean is None:
            clean = json.dumps(self.params(json.loads(text or "{}")), sort_keys=True, default=str)
            if len(self._params_json) >= CACHE_SIZE:
                self._params_json.clear()
            self._params_json[text] = clean
        return clean

    def record(self, record: RunRecord) -> RunRecord:
        """The run record as it may be stored (what the store's columns hold, `column`)."""
        updated = _scrubbed(record, self._text_once)
        clean = self.params_json(record.model_params_json)
        if clean != record.model_params_json:
            updated = updated.model_copy(update={"model_params_json": clean})
        return updated

    def column(self, values: list[str | None]) -> list[str | None]:
        """`text` of every value of a column (None stays None): the same list when no value
        changes. Each distinct value counts once (run rows repeat theirs), and one screen over
        them all (`_may_change` of the distinct values joined) rules out the usual column,
        which holds no secret, before any value is looked at alone."""
        distinct = set(values)
        distinct.discard(None)
        distinct.discard("")
        if not distinct or not self._may_change("\x00".join(distinct)):
            return values
        changed = {}
        for value in distinct:
            if self._may_change(value):
                clean = self._text_once(value)
                if clean != value:
                    changed[value] = clean
        if not changed:
            return values
        return [changed.get(v, v) for v in values]

    def _may_change(self, value: str) -> bool:
        """False only when `text(value)` is `value`: no known secret, no "://", and ASCII
        text without the patterns' keywords (see TextRedactor.text). True for values joined
        whenever True for one of them: each condition is a substring or a non-ASCII
        character, and the join keeps both."""
        if "://" in value or not value.isascii():
            return True
        lower = value.lower()
        if "bearer" in lower or "authorization" in lower or has_shape_hint(value):
            return True
        return any(secret in value for secret in self.secrets)


def _scrubbed(model: BaseModel, scrub: Any) -> Any:
    """A copy of a pydantic model with `scrub` applied to every string inside (only when
    something changes, so the usual record is not copied)."""
    changes: dict[str, Any] = {}
    # The fields as stored, without pydantic's __iter__ (which filters private attributes and
    # cost more than the scrubbing itself here).
    for name, value in model.__dict__.items():
        if isinstance(value, str):
            clean = scrub(value)
            if clean != value:
                changes[name] = clean
        elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
            items = [_scrubbed(item, scrub) for item in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[name] = items
    return model.model_copy(update=changes) if changes else model


class _SpecWalk:
    """The spec's YAML nodes: which scalars are secrets (by place), and their spans."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.spans: dict[int, tuple[int, int, str]] = {}  # node id -> (start, end, replacement)
        self.secrets: set[str] = set()
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError:
            root = None  # not a spec that loads; the text scrub still applies
        if root is not None:
            self._walk(root, (), False, set())

    def _walk(self, node: Node, path: tuple[str | int, ...], secret: bool, seen: set[int]) -> None:
        if id(node) in seen:  # an alias inside itself
            return
        if isinstance(node, ScalarNode):
            if secret:
                self._redact(node)
            elif _url_secrets(node.value):
                self.secrets.update(_url_secrets(node.value))
                self._replace(
                    node, _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", node.value)
                )
            return
        seen = seen | {id(node)}
        if isinstance(node, MappingNode):
            for key, value in node.value:
                name = key.value if isinstance(key, ScalarNode) else "?"
                inner = (*path, name)
                hides = secret or _secret_place(inner)
                self._walk(value, inner, hides, seen)
        elif isinstance(node, SequenceNode):
            # An argv (an upstream's args, a command agent's or a truth probe's command): the
            # arguments that hold a secret by place (V15: `--api-key VALUE`, `--password=...`).
            found: dict[int, str] = {}
            if _is_argv(path):
                words = [i.value if isinstance(i, ScalarNode) else "" for i in node.value]
                found = secret_arguments(words)
            for i, item in enumerate(node.value):
                if i in found and isinstance(item, ScalarNode):
                    if found[i] == REDACTED:  # the value after a flag
                        self._redact(item)
                    else:  # NAME=VALUE
                        self.secrets.add(item.value.partition("=")[2])
                        self._replace(item, found[i])
                    continue
                self._walk(item, (*path, i), secret, seen)

    def _redact(self, node: ScalarNode) -> None:
        if node.tag == "tag:yaml.org,2002:null" or ENV_REFERENCE.fullmatch(node.value):
            return
        self.secrets.add(node.value)
        self._replace(node, REDACTED)

    def _replace(self, node: ScalarNode, value: str) -> None:
        start, end = node.start_mark.index, node.end_mark.index
        source = self.text[start:end]
        # The node starts at its anchor or tag (`&key`, `!!str`): they stay, so do the line
        # ends of a block scalar.
        head = _PROPERTIES.match(source)
        kept = source[len(source.rstrip("\n")) :]
        self.spans[id(node)] = (start, end, head.group() + json.dumps(value) + kept)

    def redacted(self) -> str:
        out = self.text
        for start, end, replacement in sorted(self.spans.values(), reverse=True):
            out = out[:start] + replacement + out[end:]
        return out


_PROPERTIES = re.compile(r"(?:[&!]\S*\s+)*")


def _is_argv(path: tuple[str | int, ...]) -> bool:
    """upstreams[i].args, upstreams[i].truth_probe.command, agents[i].command."""
    if len(path) == 3 and path[0] == "upstreams" and path[2] == "args":
        return True
    if len(path) == 4 and path[0] == "upstreams" and path[2:] == ("truth_probe", "command"):
        return True
    return len(path) == 3 and path[0] == "agents" and path[2] == "command"


def _secret_place(path: tuple[str | int, ...]) -> bool:
    """models[i].params.<secret name>..., upstreams[i].env.<any>,
    upstreams[i].truth_probe.env.<any> (T1), agents[i].env.<any> and
    agents[i].model.params.<secret name>... (U1)."""
    if len(path) >= 4 and path[0] == "models" and path[2] == "params":
        return any(secret_name(p) for p in path[3:] if isinstance(p, str))
    if len(path) == 5 and path[0] == "upstreams" and path[2:4] == ("truth_probe", "env"):
        return True
    if len(path) == 4 and path[0] == "agents" and path[2] == "env":  # U1: a command agent's env
        return True
    if len(path) >= 5 and path[0] == "agents" and path[2:4] == ("model", "params"):
        return any(secret_name(p) for p in path[4:] if isinstance(p, str))
    return len(path) == 4 and path[0] == "upstreams" and path[2] == "env"
