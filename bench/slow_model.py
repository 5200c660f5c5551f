"""An OpenAI-compatible chat endpoint that answers after a fixed delay (bench/concurrency.py).

    .venv/bin/python bench/slow_model.py [--delay 1.0] [--port 0]

Prints `listening on http://127.0.0.1:PORT/v1` once it serves. Stateless, like the scripted
models: a conversation whose last message is not a tool result gets one `create_booking`
tool call (the booking the user asked for); after a tool result it answers in words. Every
answer waits `--delay` seconds first, so a run's model time is known (two calls per run).
One asyncio loop serves every connection: hundreds of requests waiting at once cost a task
each, not a thread.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

BOOKING = {"guest": "Alice Example", "date": "2026-12-01", "nights": 2}


def answer(request: dict) -> dict:
    messages = request.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        message = {"role": "assistant", "content": "Your room is booked."}
        finish = "stop"
    else:
        call = {
            "id": f"call_{len(messages)}",
            "type": "function",
            "function": {"name": "create_booking", "arguments": json.dumps(BOOKING)},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "bench"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


async def serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length") or 0))
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                request = {}
            await asyncio.sleep(delay)
            data = json.dumps(answer(request)).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main_async(delay: float, port: int) -> None:
    server = await asyncio.start_server(
        lambda r, w: serve_connection(r, w, delay), "127.0.0.1", port, backlog=1024
    )
    bound = server.sockets[0].getsockname()[1]
    print(f"listening on http://127.0.0.1:{bound}/v1", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        asyncio.run(main_async(args.delay, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
