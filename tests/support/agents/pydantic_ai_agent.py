"""A booking agent on pydantic-ai, as its docs show one: an Agent with an MCPToolset (V2's MCP
client, built on FastMCP's) for the proxy's URL, run by agent.run; the defaults kept.

The runner hands it the proxy's URL (the generated mcpServers configuration) and its model
endpoint (a scripted reference model behind an OpenAI-compatible API); it never reaches OpenAI.
Runs in .venv-agents (make agents-deps).
"""

import asyncio
import json
import os

from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


async def main() -> None:
    config = json.load(open(os.environ["AGENT_HARNESS_MCP_CONFIG"]))
    url = config["mcpServers"][os.environ["AGENT_HARNESS_MCP_SERVER"]]["url"]
    provider = OpenAIProvider(
        base_url=os.environ["AGENT_HARNESS_MODEL_BASE_URL"],
        api_key=os.environ["AGENT_HARNESS_MODEL_API_KEY"],
    )
    model = OpenAIChatModel(os.environ["AGENT_HARNESS_MODEL"], provider=provider)
    agent = Agent(
        model, instructions=os.environ["AGENT_HARNESS_PROMPT"], toolsets=[MCPToolset(url)]
    )
    async with agent:
        result = await agent.run(os.environ["AGENT_HARNESS_USER_MESSAGE"])
    print(f"agent: {result.output}")


if __name__ == "__main__":
    asyncio.run(main())
