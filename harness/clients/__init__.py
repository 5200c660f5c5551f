"""MCP clients' own configurations (Claude Desktop, Cursor, Claude Code, VS Code, Codex): their
servers put behind the proxy and back (`agent-harness wrap`), editing only the entries wrapped.
"""

from harness.clients.entries import WrapPlan, is_proxy, proxy_head
from harness.clients.wrap import (
    BACKUP_SUFFIX,
    RECORD_SUFFIX,
    default_report_dir,
    unwrap_config,
    wrap_config,
)

__all__ = [
    "BACKUP_SUFFIX",
    "RECORD_SUFFIX",
    "WrapPlan",
    "default_report_dir",
    "is_proxy",
    "proxy_head",
    "unwrap_config",
    "wrap_config",
]
