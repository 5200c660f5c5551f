"""The protocol revision the client speaks, as the proxy learns it from the client's messages.

Revisions up to 2025-11-25 open with `initialize`. The stateless revision 2026-07-28 has no
handshake: every request carries the protocol version and the client's capabilities in its
`_meta` (`io.modelcontextprotocol/protocolVersion`, `.../clientCapabilities`, optionally
`.../clientInfo`), and every result carries `resultType`. The proxy's own requests to the
upstream (its tool listing) copy the client's envelope, and the proxy's own answers carry
`resultType` when the client expects it (X11).
"""

from __future__ import annotations

from typing import Any

from harness.base import jsonutil
from harness.wire.protocol import COMPLETE, ENVELOPE_KEYS, PROTOCOL_VERSION_KEY


class ClientRevision:
    """The envelope of the client's latest stateless request, or None for a handshake client."""

    def __init__(self) -> None:
        self.envelope: dict[str, Any] | None = None
        self.handshake = False  # the client opened with initialize: no envelope, ever

    def initialize_seen(self) -> None:
        self.handshake = True
        self.envelope = None

    @property
    def stateless(self) -> bool:
        return self.envelope is not None

    @property
    def version(self) -> str | None:
        return None if self.envelope is None else self.envelope.get(PROTOCOL_VERSION_KEY)

    def observe(self, params: Any) -> bool:
        """Take the envelope of a client request; True when it names a new protocol version."""
        meta = params.get("_meta") if isinstance(params, dict) else None
        if self.handshake or not isinstance(meta, dict) or not isinstance(meta.get(PROTOCOL_VERSION_KEY), str):
            return False
        before = self.version
        self.envelope = {k: meta[k] for k in ENVELOPE_KEYS if k in meta}
        return self.version != before

    def own_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """The params of a request the proxy itself sends upstream, in the client's envelope."""
        if self.envelope is None:
            return params
        meta = {**params.get("_meta", {}), **self.envelope}
        return {**params, "_meta": meta}

    def own_result(self, result: dict[str, Any]) -> dict[str, Any]:
        """A result the proxy answers with itself, shaped for the client's revision."""
        if self.envelope is None or "resultType" in result:
            return result
        return {**result, "resultType": COMPLETE}

    def own_answer(self, rpc_id: Any, result: dict[str, Any]) -> bytes:
        """The line that answers request `rpc_id` with a result of the proxy's own."""
        body = {"jsonrpc": "2.0", "id": rpc_id, "result": self.own_result(result)}
        return jsonutil.dumps(body).encode()
