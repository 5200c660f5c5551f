"""Facts of the MCP wire protocol that more than one part of the harness needs."""

from __future__ import annotations

# 2026-07-28: the per-request envelope in `_meta` (there is no initialize handshake).
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
ENVELOPE_KEYS = (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY)

# 2026-07-28 resultType values: a finished result, and a request for more input (MRTR).
COMPLETE = "complete"
INPUT_REQUIRED = "input_required"

# 2025-11-25 tasks: the key that ties a message to its task, and the terminal task states.
RELATED_TASK_KEY = "io.modelcontextprotocol/related-task"
TERMINAL_TASK_STATES = frozenset({"completed", "failed", "cancelled"})
