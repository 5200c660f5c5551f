"""HTTP headers of streamable HTTP: protocol revisions, request metadata, secret auth headers.

2025-06-18 and 2025-11-25 negotiate a version in `initialize` and send it as
`MCP-Protocol-Version` on later requests, inside an `Mcp-Session-Id` session. 2026-07-28 has
no handshake and no session: each request carries its version, client info and capabilities
in `params._meta`, and the POST mirrors the version, the method, the name (`Mcp-Name`) and the
tool parameters the tool's schema marks with `x-mcp-header` (`Mcp-Param-*`) into headers. The
value encoding and the schema walk come from the MCP SDK (`mcp.shared.inbound`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.wire.protocol import PROTOCOL_VERSION_KEY

# The SDK is imported where it is used: importing `mcp` costs about a second, and a proxy
# that speaks stdio on both sides must start without it.

SESSION_HEADER = "mcp-session-id"
LAST_EVENT_ID_HEADER = "last-event-id"
VERSION_HEADER = "mcp-protocol-version"
METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
PARAM_PREFIX = "mcp-param-"
# Revisions from which a stream begins with an event id the client can resume from (SEP-1699).
PRIMING_FROM = "2025-11-25"
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


def is_modern(version: Any) -> bool:
    """A revision without handshake or session (2026-07-28 and later ones the SDK knows)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return isinstance(version, str) and version in MODERN_PROTOCOL_VERSIONS


def is_known(version: str) -> bool:
    from mcp_types.version import KNOWN_PROTOCOL_VERSIONS

    return version in KNOWN_PROTOCOL_VERSIONS


def at_least(version: str | None, minimum: str) -> bool:
    """`version` is a known revision no older than `minimum`."""
    from mcp_types.version import is_version_at_least

    return version is not None and is_version_at_least(version, minimum)


def is_mcp_header(name: str) -> bool:
    """A header that carries protocol data an upstream reads (version, method, name, params)."""
    lowered = name.lower()
    return lowered in (VERSION_HEADER, METHOD_HEADER, NAME_HEADER) or lowered.startswith(
        PARAM_PREFIX
    )


def envelope_version(message: Any) -> str | None:
    """The protocol version a 2026-07-28 request names in `params._meta`, if any."""
    if not isinstance(message, dict):
        return None
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def request_metadata(message: dict[str, Any], version: str) -> dict[str, str]:
    """`MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` for one 2026-07-28 request."""
    from mcp.shared.inbound import NAME_BEARING_METHODS, encode_header_value

    headers = {VERSION_HEADER: version}
    method = message.get("method")
    if isinstance(method, str):
        headers[METHOD_HEADER] = method
        params = message.get("params")
        name_key = NAME_BEARING_METHODS.get(method)
        if name_key and isinstance(params, dict) and isinstance(params.get(name_key), str):
            headers[NAME_HEADER] = encode_header_value(params[name_key])
    return headers


class ParamHeaders:
    """Which tool parameters go into `Mcp-Param-*` headers, learnt from tools/list answers."""

    def __init__(self) -> None:
        self._maps: dict[str, dict[tuple[str, ...], str]] = {}

    def learn(self, tools: Any) -> None:
        """Remember the `x-mcp-header` annotations of a tools/list page."""
        from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map

        if not isinstance(tools, list):
            return
        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            schema = tool.get("inputSchema")
            if find_invalid_x_mcp_header(schema) is None:
                header_map = x_mcp_header_map(schema)
                if header_map:
                    self._maps[tool["name"]] = header_map
                else:
                    self._maps.pop(tool["name"], None)

    def for_call(self, message: dict[str, Any]) -> dict[str, str]:
        """The `Mcp-Param-*` headers of a tools/call, or {} when its tool has none known."""
        from mcp.shared.inbound import mcp_param_headers

        params = message.get("params")
        if not isinstance(params, dict):
            return {}
        header_map = self._maps.get(params.get("name"))  # type: ignore[arg-type]
        arguments = params.get("arguments")
        if header_map is None or not isinstance(arguments, dict):
            return {}
        return mcp_param_headers(header_map, arguments)


class SecretValue(str):
    """A header value that never shows itself in a repr, a log line or a traceback (V3)."""

    def __repr__(self) -> str:
        return "'***'"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """Text in a proxy's config file (ProxyConfig.to_json), a SecretValue again when read."""
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(cls, core_schema.str_schema())


@dataclass(frozen=True)
class HeaderSpec:
    """One header the proxy sends to an HTTP upstream: a value given, or an env variable."""

    __pydantic_config__ = {"extra": "forbid"}  # a proxy's config file names only these

    name: str
    value: SecretValue | None = None
    env: str | None = None
    prefix: str = ""  # before the variable's value: "Bearer " for --upstream-bearer-env

    def describe(self) -> str:
        """How to mention it in a message: its name and source, never its value."""
        return f"{self.name} (from ${self.env})" if self.env else f"{self.name} (given)"


def valid_header_name(name: str) -> bool:
    return bool(_TOKEN.fullmatch(name))


def valid_header_value(value: str) -> bool:
    return "\r" not in value and "\n" not in value and "\0" not in value


def resolve(specs: tuple[HeaderSpec, ...], environ: Mapping[str, str]) -> dict[str, SecretValue]:
    """The header values to send; KeyError naming the variable when one is not set."""
    out: dict[str, SecretValue] = {}
    for spec in specs:
        if spec.env is not None:
            if spec.env not in environ:
                raise KeyError(spec.env)
            out[spec.name] = SecretValue(spec.prefix + environ[spec.env])
        elif spec.value is not None:
            out[spec.name] = spec.value
    return out
