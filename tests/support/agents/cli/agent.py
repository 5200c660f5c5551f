#!/usr/bin/env python3
"""The CLI coding agents of the survey (docs/cli-agents.md) as command agents: for each, the
small wrapper its own documentation prescribes for non-interactive use.

    agent.py claude-code | codex | gemini-cli | qwen-code | opencode | cline

It reads what the runner hands every command agent (AGENT_HARNESS_MCP_CONFIG, the model
endpoint's URLs and the run's API key, the prompt and the user's message), writes the agent's
own configuration into the run's fresh HOME (MCP server from the generated configuration,
stdio or HTTP; MCP tools approved; the endpoint as the provider with the run's key; telemetry,
update checks and every other call out turned off), then replaces itself with the agent in
headless mode. The agents are the pinned ones of package.json beside this file
(`make cli-agents-deps`). Standard library only: it runs under any python3.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = HERE / "node_modules" / ".bin"
ENV = os.environ
HOME = Path(ENV["HOME"])
SERVER = ENV.get("AGENT_HARNESS_MCP_SERVER", "agent-harness")
# Nothing an agent starts may reach past this machine: npm-based plugin installs fail at once
# from the (empty) cache instead of asking the registry.
OFFLINE = {"npm_config_offline": "true", "NO_UPDATE_NOTIFIER": "1", "DO_NOT_TRACK": "1"}


def server() -> dict:
    """The MCP server entry of the runner's generated configuration (stdio or http)."""
    config = json.loads(Path(ENV["AGENT_HARNESS_MCP_CONFIG"]).read_text())
    return config["mcpServers"][SERVER]


def prompt() -> str:
    """The user's message, after the system prompt where the agent has no flag for one."""
    system = ENV.get("AGENT_HARNESS_PROMPT", "").strip()
    user = ENV["AGENT_HARNESS_USER_MESSAGE"]
    return f"{system}\n\n{user}" if system else user


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def claude_code() -> tuple[list[str], dict[str, str]]:
    """Claude Code: `claude -p` with --mcp-config (the common mcpServers shape, stdio or http)."""
    argv = [
        str(BIN / "claude"), "-p", ENV["AGENT_HARNESS_USER_MESSAGE"],
        "--mcp-config", ENV["AGENT_HARNESS_MCP_CONFIG"], "--strict-mcp-config",
        "--allowedTools", f"mcp__{SERVER}", "--model", ENV["AGENT_HARNESS_MODEL"],
        "--append-system-prompt", ENV.get("AGENT_HARNESS_PROMPT", ""), "--output-format", "text",
    ]  # fmt: skip
    env = {
        "ANTHROPIC_BASE_URL": ENV["AGENT_HARNESS_MODEL_SERVER_URL"],
        "ANTHROPIC_API_KEY": ENV["AGENT_HARNESS_MODEL_API_KEY"],
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # telemetry, error reports, updates
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        # MCP tools are offered to the model directly, not behind its ToolSearch tool
        "ENABLE_TOOL_SEARCH": "false",
    }
    return argv, env


def codex() -> tuple[list[str], dict[str, str]]:
    """Codex: `codex exec` with $CODEX_HOME/config.toml (a Responses-API provider, the MCP server)."""
    entry = server()
    if "url" in entry:
        mcp = [f"url = {json.dumps(entry['url'])}"]
    else:
        mcp = [f"command = {json.dumps(entry['command'])}", f"args = {json.dumps(entry['args'])}"]
        if entry.get("env"):
            pairs = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in entry["env"].items())
            mcp.append(f"env = {{ {pairs} }}")
    config = [
        f"model = {json.dumps(ENV['AGENT_HARNESS_MODEL'])}",
        'model_provider = "agent-harness"',
        'approval_policy = "never"',
        'sandbox_mode = "read-only"',
        "check_for_update_on_startup = false",
        "[analytics]", "enabled = false",
        "[feedback]", "enabled = false",
        "[otel]", 'exporter = "none"',
        "[model_providers.agent-harness]",
        'name = "agent-harness"',
        f"base_url = {json.dumps(ENV['AGENT_HARNESS_MODEL_BASE_URL'])}",
        'env_key = "AGENT_HARNESS_MODEL_API_KEY"',
        'wire_api = "responses"',
        # required: `exec` waits for the server (and fails if it cannot start) before asking
        # the model, instead of sending the first request without the server's tools
        f"[mcp_servers.{json.dumps(SERVER)}]", *mcp, "required = true", "startup_timeout_sec = 60",
    ]  # fmt: skip
    write(HOME / ".codex" / "config.toml", "\n".join(config) + "\n")
    # incremental_tools: tools that arrive after the first request are offered from the next
    # turn on, and `exec` may end after one turn without the server's tools
    argv = [
        str(BIN / "codex"), "exec", "--skip-git-repo-check", "--disable", "incremental_tools",
        prompt(),
    ]  # fmt: skip
    return argv, {"CODEX_HOME": str(HOME / ".codex")}


def _gemini_settings(folder: str) -> None:
    """Gemini CLI's settings.json (qwen-code reads the same shape from its own folder)."""
    entry = server()
    mcp = {"httpUrl": entry["url"]} if "url" in entry else dict(entry)
    mcp.pop("type", None)
    settings = {
        "mcpServers": {SERVER: {**mcp, "trust": True}},  # trusted: no confirmation
        "telemetry": {"enabled": False},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True,
                    "enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        # MCP tools are offered to the model directly, not behind a tool_search tool
        "tools": {"toolSearch": {"enabled": False}},
    }  # fmt: skip
    write(HOME / folder / "settings.json", json.dumps(settings, indent=2))


def gemini_cli() -> tuple[list[str], dict[str, str]]:
    """Gemini CLI: `gemini -p` with ~/.gemini/settings.json, the endpoint as its Gemini API."""
    _gemini_settings(".gemini")
    argv = [
        str(BIN / "gemini"), "-p", prompt(), "--yolo", "--skip-trust",
        "-m", ENV["AGENT_HARNESS_MODEL"],
    ]  # fmt: skip
    env = {
        "GEMINI_API_KEY": ENV["AGENT_HARNESS_MODEL_API_KEY"],
        "GOOGLE_GEMINI_BASE_URL": ENV["AGENT_HARNESS_MODEL_SERVER_URL"],
    }
    return argv, env


def qwen_code() -> tuple[list[str], dict[str, str]]:
    """qwen-code: `qwen PROMPT` with ~/.qwen/settings.json, the endpoint as its OpenAI API."""
    _gemini_settings(".qwen")
    argv = [
        str(BIN / "qwen"), ENV["AGENT_HARNESS_USER_MESSAGE"], "--yolo",
        "--auth-type", "openai", "--openai-base-url", ENV["AGENT_HARNESS_MODEL_BASE_URL"],
        "--openai-api-key", ENV["AGENT_HARNESS_MODEL_API_KEY"],
        "-m", ENV["AGENT_HARNESS_MODEL"], "--output-format", "text",
        "--append-system-prompt", ENV.get("AGENT_HARNESS_PROMPT", ""),
    ]  # fmt: skip
    return argv, {"QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"}


def opencode() -> tuple[list[str], dict[str, str]]:
    """opencode: `opencode run` with ~/.config/opencode/opencode.json (an OpenAI-compatible
    provider, the MCP server as local or remote)."""
    entry = server()
    if "url" in entry:
        mcp = {"type": "remote", "url": entry["url"], "enabled": True}
    else:
        mcp = {"type": "local", "command": [entry["command"], *entry["args"]],
               "environment": entry.get("env") or {}, "enabled": True}  # fmt: skip
    model = ENV["AGENT_HARNESS_MODEL"]
    config = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            "agent-harness": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "agent-harness",
                "options": {"baseURL": ENV["AGENT_HARNESS_MODEL_BASE_URL"],
                            "apiKey": ENV["AGENT_HARNESS_MODEL_API_KEY"]},
                "models": {model: {"name": model, "tool_call": True}},
            }
        },
        "model": f"agent-harness/{model}",
        "mcp": {SERVER: mcp},
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
    }  # fmt: skip
    write(HOME / ".config" / "opencode" / "opencode.json", json.dumps(config, indent=2))
    env = {
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",  # the model catalogue from the network
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_CLAUDE_CODE": "1",
        "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    }
    return [str(BIN / "opencode"), "run", prompt()], env


def cline() -> tuple[list[str], dict[str, str]]:
    """Cline: `cline --data-dir DIR PROMPT` runs one task and exits (a data folder is its
    sandbox mode, whose backend exits with the command, not a shared hub); in DIR/settings, the
    endpoint as an OpenAI-compatible provider (what `cline auth` writes), the MCP server, and
    telemetry (its OpenTelemetry export to otel.cline.bot) and auto-update off."""
    entry = server()
    if "url" in entry:
        transport = {"type": "streamableHttp", "url": entry["url"]}
    else:
        transport = {"type": "stdio", "command": entry["command"], "args": entry["args"],
                     "env": entry.get("env") or {}}  # fmt: skip
    settings = HOME / ".cline" / "data" / "settings"
    provider = {
        "provider": "openai-compatible", "apiKey": ENV["AGENT_HARNESS_MODEL_API_KEY"],
        "model": ENV["AGENT_HARNESS_MODEL"], "baseUrl": ENV["AGENT_HARNESS_MODEL_BASE_URL"],
    }  # fmt: skip
    providers = {
        "version": 1, "lastUsedProvider": "openai-compatible", "modes": {},
        "providers": {"openai-compatible": {"settings": provider, "tokenSource": "manual",
                                            "updatedAt": "2026-01-01T00:00:00.000Z"}},
    }  # fmt: skip
    write(settings / "providers.json", json.dumps(providers, indent=2))
    write(settings / "cline_mcp_settings.json",
          json.dumps({"mcpServers": {SERVER: {"transport": transport}}}, indent=2))  # fmt: skip
    write(settings / "global-settings.json",
          json.dumps({"telemetryOptOut": True, "autoUpdateEnabled": False}))  # fmt: skip
    return [str(BIN / "cline"), "--data-dir", str(settings.parent), prompt()], {}


AGENTS = {
    "claude-code": claude_code,
    "codex": codex,
    "gemini-cli": gemini_cli,
    "qwen-code": qwen_code,
    "opencode": opencode,
    "cline": cline,
}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in AGENTS:
        print(f"usage: agent.py {{{' | '.join(AGENTS)}}}", file=sys.stderr)
        return 2
    command, extra = AGENTS[argv[0]]()
    if not Path(command[0]).exists():
        print(f"{command[0]} is missing: run `make cli-agents-deps`", file=sys.stderr)
        return 2
    sys.stdout.flush()
    os.execve(command[0], command, {**ENV, **OFFLINE, **extra})
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
