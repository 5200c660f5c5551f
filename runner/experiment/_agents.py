"""U1: an agent under test that is a command (any program that speaks MCP), beside `models`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from harness.base.redact import secret_arguments
from runner.experiment._base import Frozen, FrozenDict, SafeName, Text, list_field, thaw
from runner.experiment._contents import command_files
from runner.experiment._environment import EnvMap
from runner.experiment._models import ModelParams, ModelSpec

# What the runner writes into an agent's command and env before it starts it (docs/runner.md).
PLACEHOLDERS = {
    "model_base_url": "the runner's model endpoint for `model`, for OpenAI clients (http://127.0.0.1:PORT/v1)",
    "model_server_url": "the same endpoint for Anthropic and Gemini clients (http://127.0.0.1:PORT)",
    "model_api_key": "the run's API key for that endpoint (U5: fresh per run)",
    "model": "the model name to ask that endpoint for",
    "mcp_config": "the generated MCP client configuration file (mcpServers)",
    "mcp_url": "the proxy's URL (transport: http)",
    "workdir": "the agent's own folder for the run (empty; U3)",
}
MODEL_PLACEHOLDERS = ("model_base_url", "model_server_url", "model_api_key", "model")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")

AGENT_TIMEOUT_S, AGENT_MAX_TIMEOUT_S = 120.0, 3600.0
AGENT_OUTPUT_BYTES, AGENT_MAX_OUTPUT_BYTES = 200_000, 16_000_000


def placeholders_in(text: str) -> list[str]:
    """The `{name}` placeholders a text names (known or not)."""
    return _PLACEHOLDER.findall(text)


class AgentSpec(Frozen):
    """A command run as the agent under test: it reaches the proxy through the MCP client
    configuration the runner generates, and its model (if `model` is given) through the
    runner's OpenAI-compatible endpoint."""

    name: SafeName
    command: tuple[Text, ...] = list_field(min_length=1)  # argv, no shell
    cwd: Text | None = None  # relative to where the runner is started; default: its own folder
    env: EnvMap = Field(default_factory=FrozenDict)  # values: text or os.environ/NAME
    transport: Literal["stdio", "http"] = "stdio"  # how the agent's MCP client reaches the proxy
    timeout_s: float = Field(default=AGENT_TIMEOUT_S, gt=0, le=AGENT_MAX_TIMEOUT_S)
    max_output_bytes: int = Field(default=AGENT_OUTPUT_BYTES, ge=1, le=AGENT_MAX_OUTPUT_BYTES)
    # The model the runner serves at {model_base_url}: scripted/* or any litellm model.
    model: ModelSpec | None = None

    @model_validator(mode="after")
    def _placeholders(self) -> AgentSpec:
        texts = [*self.command, *self.env.values()]
        for text in texts:
            for found in placeholders_in(text):
                if found not in PLACEHOLDERS:
                    known = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
                    raise ValueError(f"unknown placeholder {{{found}}} in {text!r}; known: {known}")
                if found in MODEL_PLACEHOLDERS and self.model is None:
                    raise ValueError(
                        f"{{{found}}} needs `model`: the model the runner serves to the agent "
                        "(e.g. scripted/careful)"
                    )
                if found == "mcp_url" and self.transport != "http":
                    raise ValueError("{mcp_url} needs `transport: http`")
        return self

    @property
    def display_name(self) -> str:
        """The agent's name (it stands where a model's label does)."""
        return self.name

    @property
    def params(self) -> ModelParams:
        """No litellm parameters of its own (its model's are `model.params`)."""
        return self.model.params if self.model is not None else ModelParams()

    def identity(self) -> Any:
        """The configuration without the name (defaults left out, so new fields keep ids), and
        what its program and scripts hold (V18)."""
        data = thaw(self.model_dump(exclude={"name"}, exclude_defaults=True))
        if contents := command_files(self.command, self.cwd):
            data["contents"] = contents
        return {"agent": data}

    def stored_config(self) -> dict[str, Any]:
        """What the store keeps of the agent: env values stay out unless they are references
        (V3), and so do the secrets its argv holds by place (`--api-key VALUE`, V15; the
        store's redactor takes the rest, such as credential shapes, out of every string)."""
        data = thaw(self.model_dump(exclude={"name"}, exclude_defaults=True))
        found = secret_arguments(data["command"])
        data["command"] = [found.get(i, arg) for i, arg in enumerate(data["command"])]
        if "env" in data:
            data["env"] = {
                k: v if v.startswith("os.environ/") else "[REDACTED]"
                for k, v in data["env"].items()
            }
        return {"agent": data}


def resolved_command(
    command: Sequence[str], spec_folder: Path | None, cwd: Path | None = None
) -> list[str]:
    """The agent's argv with the files it names beside the spec made absolute (Q1).

    An agent starts in a folder of the run's own, so `[python, my_agent.py]` written beside
    the spec would name a file that is not there. An element is resolved when it is a relative
    path (no placeholder, not an option starting with `-`) that names an existing regular file
    in the spec's folder; with `cwd` given, only when it names no file there (the agent finds
    that one itself). The program itself (`argv[0]`) only when it holds a `/`: a bare name
    (`python`, `node`) is looked up on PATH, as a shell would."""
    if spec_folder is None:
        return list(command)
    argv = []
    for i, part in enumerate(command):
        if _names_a_file_beside_the_spec(part, i == 0, spec_folder, cwd):
            part = str(spec_folder / part)
        argv.append(part)
    return argv


def _names_a_file_beside_the_spec(part: str, program: bool, folder: Path, cwd: Path | None) -> bool:
    if not part or part.startswith("-") or placeholders_in(part) or Path(part).is_absolute():
        return False
    if program and "/" not in part:
        return False
    if cwd is not None and (cwd / part).is_file():
        return False
    return (folder / part).is_file()
