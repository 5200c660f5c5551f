"""A booking agent on LangChain with its MCP adapters (`langchain-mcp-adapters`), as their
docs show one: MultiServerMCPClient's tools given to langchain's create_agent with ChatOpenAI;
the defaults kept (the client opens an MCP session per tool call).

The runner hands it the proxy's URL (the generated mcpServers configuration) and its model
endpoint (a scripted reference model behind an OpenAI-compatible API); it never reaches OpenAI.
Runs in .venv-agents (make agents-deps).
"""

import asyncio
import json
import os

from langchain.agents import create_agent
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
    agent = create_agent(model, tools, system_prompt=os.environ["AGENT_HARNESS_PROMPT"])
    result = await agent.ainvoke(
        {"messages": [{"role": "user", "content": os.environ["AGENT_HARNESS_USER_MESSAGE"]}]}
    )
    print(f"agent: {result['messages'][-1].content}")


if __name__ == "__main__":
    asyncio.run(main())
