"""Streamable HTTP on both sides of the proxy (H1): the agent's endpoint and the upstream client.

`listen.Listener` serves the agent (`--listen`), `upstream.HttpUpstream` speaks to an upstream
URL (`--upstream-url`). Both hand the router the same line streams as stdio does (DESIGN: the
stream pair is the seam); `lines.HttpLine` carries what HTTP adds to a message across it. Import
the submodules themselves: they pull in aiohttp and the MCP SDK, which a stdio-only proxy never
needs at start-up.
"""
