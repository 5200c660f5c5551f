"""MCP on the wire: stdio and HTTP transports, line framing, the upstream's process group, protocol facts."""
