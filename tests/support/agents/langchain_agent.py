"""A booking agent on LangChain with its MCP adapters (`langchain-mcp-adapters`), as their
docs show one: MultiServerMCPClient's tools given to langchain's create_agent with ChatOpenAI;
the defaults kept (the client opens an MCP session per tool call).

The runner hands it the proxy's URL (the generated mcpServers configuration) and its model
endpoint (a scripted reference model behind an OpenAI-compatible API); it never reaches OpenAI.
Runs in .venv-agents (make agents-deps). SURVEY_TOOL_RETRIES adds langchain's
ToolRetryMiddleware with that many retries (its default is 2; it retries a tool call that
raised, and the adapters raise on an `isError` result), as a user who turns it on would.
"""

import asyncio
import json
import os

from langchain.agents import create_agent
from langchain.agents.middleware import ToolRetryMiddleware
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_openai import ChatOpenAI


async def main() -> None:
    config = json.load(open(os.environ["AGENT_HARNESS_MCP_CONFIG"]))
    url = config["mcpServers"][os.environ["AGENT_HARNESS_MCP_SERVER"]]["url"]
    client = MultiServerMCPClient({"booking": {"transport": "streamable_http", "url": url}})
    tools = await client.get_tools()
    model = ChatOpenAI(
        model=os.environ["AGENT_HARNESS_MODEL"],
        base_url=os.environ["AGENT_HARNESS_MODEL_BASE_URL"],
        api_key=os.environ["AGENT_HARNESS_MODEL_API_KEY"],
    )
    retries = int(os.environ.get("SURVEY_TOOL_RETRIES", "0"))
    middleware = [ToolRetryMiddleware(max_retries=retries)] if retries else []
    agent = create_agent(
        model, tools, system_prompt=os.environ["AGENT_HARNESS_PROMPT"], middleware=middleware
    )
    result = await agent.ainvoke(
        {"messages": [{"role": "user", "content": os.environ["AGENT_HARNESS_USER_MESSAGE"]}]}
    )
    print(f"agent: {result['messages'][-1].content}")


if __name__ == "__main__":
    asyncio.run(main())
