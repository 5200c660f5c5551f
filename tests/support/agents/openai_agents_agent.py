"""A booking agent on the OpenAI Agents SDK (`openai-agents`), as its docs show one: an Agent
with an MCP server over streamable HTTP, run by Runner.run; the SDK's defaults kept.

The runner hands it the proxy's URL (the generated mcpServers configuration) and its model
endpoint (a scripted reference model behind an OpenAI-compatible API); it never reaches OpenAI.
Runs in .venv-agents (make agents-deps). SURVEY_MCP_RETRIES sets the SDK's own retry of failed
MCP calls (`max_retry_attempts`, default 0), as a user who turns it on would.
"""

import asyncio
import json
import os

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI


async def main() -> None:
    set_tracing_disabled(True)  # no traces uploaded anywhere
    config = json.load(open(os.environ["AGENT_HARNESS_MCP_CONFIG"]))
    url = config["mcpServers"][os.environ["AGENT_HARNESS_MCP_SERVER"]]["url"]
    client = AsyncOpenAI(
        base_url=os.environ["AGENT_HARNESS_MODEL_BASE_URL"],
        api_key=os.environ["AGENT_HARNESS_MODEL_API_KEY"],
    )
    model = OpenAIChatCompletionsModel(
        model=os.environ["AGENT_HARNESS_MODEL"], openai_client=client
    )
    retries = int(os.environ.get("SURVEY_MCP_RETRIES", "0"))
    server = MCPServerStreamableHttp(
        params={"url": url}, name="booking", max_retry_attempts=retries
    )
    async with server:
        agent = Agent(
            name="booking assistant",
            instructions=os.environ["AGENT_HARNESS_PROMPT"],
            model=model,
            mcp_servers=[server],
        )
        result = await Runner.run(agent, os.environ["AGENT_HARNESS_USER_MESSAGE"], max_turns=8)
        print(f"agent: {result.final_output}")


if __name__ == "__main__":
    asyncio.run(main())
