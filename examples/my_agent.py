"""A small agent to test with `agents:` in a spec (README, quick start 3): any program that
speaks MCP can stand here. This one uses the official MCP Python SDK and the OpenAI client.

    command: [python, my_agent.py, "{mcp_config}"]

It reads the MCP client configuration the runner wrote (its path is the first argument; also
in $AGENT_HARNESS_MCP_CONFIG), connects to the server in it (over HTTP or by starting it over
stdio), lists its tools, and lets the model the runner serves ($AGENT_HARNESS_MODEL at
$AGENT_HARNESS_MODEL_BASE_URL, with the run's own key $AGENT_HARNESS_MODEL_API_KEY) answer the
user's message and each follow-up, calling tools as the model asks. Replace the loop with your own agent; keep what it reads.
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


async def connect(stack: AsyncExitStack, server: dict) -> ClientSession:
    """An initialised MCP session with the configuration's server."""
    if "url" in server:
        streams = streamable_http_client(server["url"])
    else:
        command = StdioServerParameters(
            command=server["command"], args=server["args"], env=server.get("env"),
            cwd=server.get("cwd"),
        )  # fmt: skip
        streams = stdio_client(command)
    read, write = await stack.enter_async_context(streams)
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def tool_answer(session: ClientSession, name: str, arguments: dict) -> str:
    """What the model sees of one tool call; a failed call is marked as such."""
    try:
        result = await session.call_tool(name, arguments)
    except MCPError as exc:
        return f"ERROR (isError=true):\nError {exc.error.code}: {exc.error.message}"
    text = "\n".join(getattr(part, "text", "") for part in result.content)
    return f"ERROR (isError=true):\n{text}" if result.is_error else text


async def main(config_path: str) -> None:
    (server,) = json.load(open(config_path))["mcpServers"].values()
    model = AsyncOpenAI(
        base_url=os.environ["AGENT_HARNESS_MODEL_BASE_URL"],
        api_key=os.environ["AGENT_HARNESS_MODEL_API_KEY"],  # the endpoint takes only the run's key
    )
    async with AsyncExitStack() as stack:
        session = await connect(stack, server)
        listed = (await session.list_tools()).tools
        tools = [{"type": "function", "function": {"name": t.name, "parameters": t.input_schema,
                                                   "description": t.description or ""}}
                 for t in listed]  # fmt: skip
        messages = [{"role": "system", "content": os.environ["AGENT_HARNESS_PROMPT"]}]
        follow_ups = json.loads(os.environ["AGENT_HARNESS_FOLLOW_UPS"])
        for user in [os.environ["AGENT_HARNESS_USER_MESSAGE"], *follow_ups]:
            messages.append({"role": "user", "content": user})
            for _ in range(8):  # model turns per user message
                answer = await model.chat.completions.create(
                    model=os.environ["AGENT_HARNESS_MODEL"], messages=messages, tools=tools
                )
                reply = answer.choices[0].message
                messages.append(reply.model_dump(exclude_none=True))
                if not reply.tool_calls:
                    print(f"agent: {reply.content}")
                    break
                for call in reply.tool_calls:
                    arguments = json.loads(call.function.arguments or "{}")
                    content = await tool_answer(session, call.function.name, arguments)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": content})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else os.environ["AGENT_HARNESS_MCP_CONFIG"]))
