"""A small agent on the official MCP Python SDK and the OpenAI client (U1's reference command).

It reads what the runner hands every command agent: the MCP client configuration
(AGENT_HARNESS_MCP_CONFIG, the `mcpServers` shape), the system prompt, the user's message and
follow-ups, and the model endpoint (AGENT_HARNESS_MODEL_BASE_URL, AGENT_HARNESS_MODEL). Tool
results flagged isError reach the model marked `ERROR (isError=true):` as the runner's own loop
marks them, so the scripted reference models read them the same way.
Usage: python mcp_sdk_agent.py [--max-turns N]
"""

import asyncio
import json
import os
import sys
from contextlib import AsyncExitStack

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from openai import AsyncOpenAI

MARK = "ERROR (isError=true):"


async def main(max_turns: int) -> None:
    config = json.load(open(os.environ["AGENT_HARNESS_MCP_CONFIG"]))
    server = config["mcpServers"][os.environ.get("AGENT_HARNESS_MCP_SERVER", "agent-harness")]
    model = AsyncOpenAI(
        base_url=os.environ["AGENT_HARNESS_MODEL_BASE_URL"],
        api_key=os.environ["AGENT_HARNESS_MODEL_API_KEY"],
    )
    async with AsyncExitStack() as stack:
        if "url" in server:
            read, write = await stack.enter_async_context(streamable_http_client(server["url"]))
        else:
            params = StdioServerParameters(
                command=server["command"],
                args=server["args"],
                env=server.get("env"),
                cwd=server.get("cwd"),
            )
            read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description or "",
                    "parameters": t.input_schema,
                },
            }
            for t in (await session.list_tools()).tools
        ]
        messages = [{"role": "system", "content": os.environ.get("AGENT_HARNESS_PROMPT", "")}]
        users = [
            os.environ["AGENT_HARNESS_USER_MESSAGE"],
            *json.loads(os.environ.get("AGENT_HARNESS_FOLLOW_UPS", "[]")),
        ]
        for user in users:
            messages.append({"role": "user", "content": user})
            for _ in range(max_turns):
                reply = (
                    (
                        await model.chat.completions.create(
                            model=os.environ["AGENT_HARNESS_MODEL"], messages=messages, tools=tools
                        )
                    )
                    .choices[0]
                    .message
                )
                messages.append(reply.model_dump(exclude_none=True))
                if not reply.tool_calls:
                    print(f"agent: {reply.content}")
                    break
                for call in reply.tool_calls:
                    args = json.loads(call.function.arguments or "{}")
                    try:
                        result = await session.call_tool(call.function.name, args)
                        text = "\n".join(getattr(c, "text", "") for c in result.content)
                        text = f"{MARK}\n{text}" if result.is_error else text
                    except MCPError as exc:
                        text = f"{MARK}\nError {exc.error.code}: {exc.error.message}"
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": text})


if __name__ == "__main__":
    turns = int(sys.argv[sys.argv.index("--max-turns") + 1]) if "--max-turns" in sys.argv else 8
    asyncio.run(main(turns))
