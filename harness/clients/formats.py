"""The configuration files of MCP clients, edited in place: only the wrapped entries change.

- JSON with an `mcpServers` object: Claude Desktop (`claude_desktop_config.json`), Cursor
  (`.cursor/mcp.json`, `~/.cursor/mcp.json`), Claude Code (`.mcp.json`);
- JSON with comments with a `servers` object (and `inputs` beside it): VS Code's
  `.vscode/mcp.json`, or `mcp.servers` in its `settings.json`;
- TOML with `[mcp_servers.NAME]` tables: Codex (`~/.codex/config.toml`, `.codex/config.toml`).

JSON is edited by spans (harness.clients.jsonc): a stdio entry's `command` and `args` values
are replaced where they stand, a URL entry is replaced whole; every other byte stays. TOML is
edited with tomlkit, which keeps comments, order and layout of everything it is not asked to
change. An edit that would lose a comment (one inside a value it replaces) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.base.errors import UsageError
from harness.clients import jsonc
from harness.clients.entries import (
    WrapPlan,
    header_variable,
    is_proxy,
    proxy_args,
    proxy_head,
    stdio_upstream,
    url_upstream,
)

_HTTP_TYPES = (None, "http", "streamable-http", "streamableHttp", "streamable_http")


@dataclass
class Wrapped:
    """What wrap did to one server, to say it."""

    name: str
    upstream: str  # `stdio: npx` or `url: https://...`
    scenario: str | None
    report_file: str


def _strings(name: str, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"server {name!r}: {key} is not a list of strings; wrap cannot read it")
    return value


def _string_map(name: str, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise UsageError(f"server {name!r}: {key} is not an object of strings; wrap cannot read it")
    return value


class JsonConfig:
    """A JSON (or JSON with comments) client configuration."""

    def __init__(self, text: str, shown: str) -> None:
        self.text = text
        self.shown = shown
        try:
            self.root = jsonc.parse(text)
        except jsonc.JsoncError as exc:
            raise UsageError(f"{shown}: not JSON: {exc}") from None
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self.container, self.where = self._container()
        self.edits: list[tuple[int, int, str]] = []

    def _container(self) -> tuple[jsonc.Node, str]:
        root = self.root
        if root.kind != "object":
            raise UsageError(f"{self.shown}: the document is not a JSON object")
        found = [
            (node, where)
            for node, where in (
                (root.get("mcpServers"), "mcpServers"),
                (root.get("servers"), "servers"),
                (root.get("mcp").get("servers") if root.get("mcp") else None, "mcp.servers"),
            )
            if node is not None
        ]
        if not found:
            raise UsageError(
                f"{self.shown}: no MCP servers in it (no mcpServers, servers or mcp.servers "
                "object); wrap reads the configurations of Claude Desktop, Cursor, Claude Code, "
                "VS Code and Codex"
            )
        if len(found) > 1:
            names = " and ".join(w for _, w in found)
            raise UsageError(f"{self.shown}: both {names} hold servers; wrap cannot tell which")
        node, where = found[0]
        if node.kind != "object":
            raise UsageError(f"{self.shown}: {where} is not an object")
        return node, where

    @property
    def vscode(self) -> bool:
        return self.where != "mcpServers"

    def names(self) -> list[str]:
        """The servers, in the file's order."""
        return [m.key for m in self.container.members]

    def entry(self, name: str) -> jsonc.Node:
        node = self.container.get(name)
        if node is None:
            raise UsageError(f"{self.shown}: no server {name!r} (it has {', '.join(self.names())})")
        if node.kind != "object":
            raise UsageError(f"server {name!r}: its entry is not an object; wrap cannot read it")
        return node

    def is_wrapped(self, name: str) -> bool:
        """Whether the server's entry starts `agent-harness proxy`."""
        entry = self.container.get(name)
        if entry is None or entry.kind != "object":
            return False
        plain = entry.plain()
        return is_proxy(plain.get("command"), plain.get("args", []))

    def wrap(self, name: str, plan: WrapPlan) -> Wrapped:
        """Put the proxy in front of one server (an edit recorded, applied by `result`)."""
        entry = self.entry(name)
        plain = entry.plain()
        kind = plain.get("type")
        if self.is_wrapped(name):
            raise UsageError(f"server {name!r} already runs behind agent-harness proxy")
        if isinstance(plain.get("command"), str) and kind in (None, "stdio"):
            return self._wrap_stdio(name, entry, plain, plan)
        if isinstance(plain.get("url"), str):
            if kind == "sse":
                raise UsageError(
                    f"server {name!r} speaks the older HTTP+SSE transport; the proxy reaches "
                    "servers over streamable HTTP only"
                )
            if kind not in _HTTP_TYPES:
                raise UsageError(f"server {name!r}: unknown type {kind!r}; wrap cannot read it")
            return self._wrap_url(name, entry, plain, plan)
        raise UsageError(
            f"server {name!r}: neither a command nor a url (type {kind!r}); wrap cannot read it"
        )

    def _wrap_stdio(
        self, name: str, entry: jsonc.Node, plain: dict[str, Any], plan: WrapPlan
    ) -> Wrapped:
        args_node = entry.get("args")
        args = _strings(name, "args", plain.get("args", []))
        head = proxy_head()
        new_args = head[1:] + proxy_args(name, stdio_upstream(name, plain["command"], args), plan)
        command_node = entry.get("command")
        assert command_node is not None
        if command_node.comments or (args_node is not None and args_node.comments):
            raise UsageError(
                f"server {name!r}: a comment inside its command or args would be lost; move it "
                "out of the value and wrap again"
            )
        self.edits.append((command_node.start, command_node.end, jsonc.render(head[0], "", "")))
        multi = "\n" in self.text[entry.start : entry.end]
        if args_node is not None:
            member = next(m for m in entry.members if m.key == "args")
            layered = "\n" in self.text[args_node.start : args_node.end] or (
                not args_node.items and multi
            )
            unit = (jsonc.indent_unit(self.text, args_node) or self._unit(entry)) if layered else ""
            rendered = jsonc.render(new_args, jsonc.line_indent(self.text, member.start), unit)
            self.edits.append((args_node.start, args_node.end, self._lines(rendered)))
        else:
            member = next(m for m in entry.members if m.key == "command")
            indent = jsonc.line_indent(self.text, member.start)
            unit = self._unit(entry) if multi else ""
            gap = self.newline + indent if multi else " "
            rendered = jsonc.render(new_args, indent, unit)
            insert = f',{gap}"args": {self._lines(rendered)}'
            self.edits.append((command_node.end, command_node.end, insert))
        return Wrapped(name, f"stdio: {plain['command']}", plan.scenario, plan.report_file)

    def _wrap_url(
        self, name: str, entry: jsonc.Node, plain: dict[str, Any], plan: WrapPlan
    ) -> Wrapped:
        if entry.comments:
            raise UsageError(
                f"server {name!r}: a comment inside its entry would be lost (wrap replaces a "
                "URL server's entry whole); move it out and wrap again"
            )
        for key in plain:
            if "auth" in key.lower():
                raise UsageError(
                    f"server {name!r} signs in with OAuth ({key}); the proxy cannot sign in for it"
                )
        headers = _string_map(name, "headers", plain.get("headers", {}))
        variables = {header: header_variable(header) for header in headers}
        head = proxy_head()
        args = head[1:] + proxy_args(name, url_upstream(name, plain["url"], variables), plan)
        new: dict[str, Any] = {}
        for key, value in plain.items():
            if key == "type":
                new["type"] = "stdio"
            elif key == "url":
                new["command"], new["args"] = head[0], args
                if headers:  # the values move into env, as written: references stay references
                    new["env"] = {variables[h]: v for h, v in headers.items()}
            elif key != "headers":
                new[key] = value
        if self.vscode and "type" not in new:
            new = {"type": "stdio", **new}
        indent = jsonc.line_indent(self.text, entry.start)
        multi = "\n" in self.text[entry.start : entry.end]
        unit = self._unit(entry) if multi else ""
        rendered = jsonc.render(new, indent, unit)
        self.edits.append((entry.start, entry.end, self._lines(rendered)))
        return Wrapped(name, f"url: {plain['url']}", plan.scenario, plan.report_file)

    def _unit(self, entry: jsonc.Node) -> str:
        """The indentation step of the entry, else of the servers' object, else two spaces."""
        return (
            jsonc.indent_unit(self.text, entry)
            or jsonc.indent_unit(self.text, self.container)
            or "  "
        )

    def _lines(self, rendered: str) -> str:
        return rendered.replace("\n", self.newline) if self.newline != "\n" else rendered

    def restore(self, name: str, original: JsonConfig) -> None:
        """Unwrap one server: the original entry's text where the wrapped entry stands."""
        entry, before = self.entry(name), original.entry(name)
        self.edits.append((entry.start, entry.end, original.text[before.start : before.end]))

    def result(self) -> str:
        """The text with every recorded edit applied."""
        text = self.text
        for start, end, new in sorted(self.edits, reverse=True):
            text = text[:start] + new + text[end:]
        return text


class TomlConfig:
    """Codex's TOML configuration: `[mcp_servers.NAME]` tables, edited with tomlkit."""

    def __init__(self, text: str, shown: str) -> None:
        import tomlkit
        from tomlkit.exceptions import TOMLKitError

        self.shown = shown
        self.text = text
        try:
            self.doc = tomlkit.parse(text)
        except TOMLKitError as exc:
            raise UsageError(f"{shown}: not TOML: {exc}") from None
        servers = self.doc.get("mcp_servers")
        if servers is None:
            raise UsageError(f"{shown}: no MCP servers in it (no [mcp_servers.NAME] table)")
        if not isinstance(servers, dict):
            raise UsageError(f"{shown}: mcp_servers is not a table")
        self.servers = servers

    def names(self) -> list[str]:
        """The servers, in the file's order."""
        return list(self.servers)

    def table(self, name: str) -> Any:
        if name not in self.servers:
            raise UsageError(f"{self.shown}: no server {name!r} (it has {', '.join(self.names())})")
        table = self.servers[name]
        if not isinstance(table, dict):
            raise UsageError(f"server {name!r}: its entry is not a table; wrap cannot read it")
        return table

    def is_wrapped(self, name: str) -> bool:
        """Whether the server's table starts `agent-harness proxy`."""
        table = self.servers.get(name)
        if not isinstance(table, dict):
            return False
        return is_proxy(table.get("command"), list(table.get("args", [])))

    def wrap(self, name: str, plan: WrapPlan) -> Wrapped:
        """Put the proxy in front of one server (the document changed in place)."""
        import tomlkit

        table = self.table(name)
        plain = table.unwrap()
        if self.is_wrapped(name):
            raise UsageError(f"server {name!r} already runs behind agent-harness proxy")
        head = proxy_head()
        if isinstance(plain.get("command"), str):
            args = _strings(name, "args", plain.get("args", []))
            upstream = stdio_upstream(name, plain["command"], args)
            layered = "args" in table and "\n" in table["args"].as_string()
            table["command"] = head[0]
            table["args"] = self._array(head[1:] + proxy_args(name, upstream, plan), layered)
            return Wrapped(name, f"stdio: {plain['command']}", plan.scenario, plan.report_file)
        if not isinstance(plain.get("url"), str):
            raise UsageError(f"server {name!r}: neither a command nor a url; wrap cannot read it")
        for key in ("bearer_token", "oauth", "oauth_resource", "scopes"):
            if key in plain:
                raise UsageError(
                    f"server {name!r} signs in with {key}; the proxy cannot sign in for it"
                    if key != "bearer_token"
                    else f"server {name!r} holds a bearer_token written in the file, which Codex "
                    "refuses; name its variable with bearer_token_env_var"
                )
        literal = _string_map(name, "http_headers", plain.get("http_headers", {}))
        from_env = _string_map(name, "env_http_headers", plain.get("env_http_headers", {}))
        variables = {**{h: header_variable(h) for h in literal}, **from_env}
        bearer = plain.get("bearer_token_env_var")
        if bearer is not None and not isinstance(bearer, str):
            raise UsageError(f"server {name!r}: bearer_token_env_var is not a string")
        upstream = url_upstream(name, plain["url"], variables, bearer)
        passed = [*from_env.values(), *([bearer] if bearer else [])]
        for key in ("url", "http_headers", "env_http_headers", "bearer_token_env_var"):
            if key in table:
                del table[key]
        table["command"] = head[0]
        table["args"] = self._array(head[1:] + proxy_args(name, upstream, plan), True)
        if literal:  # the values move into env, never onto the command line
            env = tomlkit.inline_table()
            env.update({variables[h]: v for h, v in literal.items()})
            table["env"] = env
        if passed:  # Codex gives a server only the variables it is told to
            table["env_vars"] = self._array(passed, False)
        return Wrapped(name, f"url: {plain['url']}", plan.scenario, plan.report_file)

    @staticmethod
    def _array(values: list[str], layered: bool) -> Any:
        import tomlkit

        array = tomlkit.array()
        array.extend(values)
        return array.multiline(layered)

    def restore(self, name: str, original: TomlConfig) -> None:
        """Unwrap needs the file as wrap wrote it (see wrap.py); a changed TOML is refused."""
        raise UsageError(
            f"{self.shown} changed since it was wrapped; its original is in the backup: restore "
            "it by hand (compare the two), or delete the backup and wrap again"
        )

    def result(self) -> str:
        """The document's text, changed only where wrap changed it."""
        import tomlkit

        return tomlkit.dumps(self.doc)


ClientConfig = JsonConfig | TomlConfig


def load(text: str, shown: str, toml: bool) -> ClientConfig:
    """A client configuration of the kind its file name says (`.toml`: Codex; else JSON)."""
    return TomlConfig(text, shown) if toml else JsonConfig(text, shown)
