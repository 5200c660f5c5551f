"""A line-level MCP upstream that holds every tool call until the agent has shown it can still
reach the upstream past the proxy's cap on calls in flight (X16).

    python gated_upstream.py TRUTH.jsonl CAP

It holds each `tools/call` unanswered. Once CAP calls are held it sends the agent a `ping`
request. When it has the agent's answer to that ping AND a `notifications/cancelled`, and
holds at least CAP calls, it answers every held call (in the order received) and from then on
answers each call at once. TRUTH.jsonl gets one line per call it executed (`call`: the id,
`arguments`, `open`: the calls then held and not cancelled, this one included), one per
cancellation and one for the ping's answer, in the order they happened. Standalone: it
imports nothing of the project under test.
"""

from __future__ import annotations

import json
import sys

TOOLS = [
    {
        "name": "create_booking",
        "description": "Create a booking.",
        "inputSchema": {
            "type": "object",
            "properties": {"guest": {"type": "string"}, "date": {"type": "string"}},
        },
    }
]


def main() -> None:
    truth = open(sys.argv[1], "a", encoding="utf-8")
    cap = int(sys.argv[2])
    out = sys.stdout.buffer
    held: list[dict] = []
    cancelled: set = set()
    pinged = ponged = released = False

    def send(body: object) -> None:
        out.write(json.dumps(body).encode() + b"\n")
        out.flush()

    def record(entry: dict) -> None:
        truth.write(json.dumps(entry) + "\n")
        truth.flush()

    def answer(message: dict) -> None:
        guest = message["params"]["arguments"].get("guest")
        text = {"type": "text", "text": f"booked {guest}"}
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [text]}})

    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method = message.get("method")
        if method is None:
            if message.get("id") == "gate-ping":
                ponged = True
                record({"pong": True})
        elif method == "initialize":
            result = {
                "protocolVersion": message["params"].get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "gated-upstream", "version": "0"},
            }
            send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": TOOLS}})
        elif method == "notifications/cancelled":
            cancelled.add(message["params"]["requestId"])
            record({"cancelled": message["params"]["requestId"]})
        elif method == "tools/call":
            open_calls = 1 + sum(m["id"] not in cancelled for m in held)
            arguments = message["params"]["arguments"]
            record({"call": message["id"], "arguments": arguments, "open": open_calls})
            if released:
                answer(message)
            else:
                held.append(message)
        if not pinged and len(held) >= cap:
            pinged = True
            send({"jsonrpc": "2.0", "id": "gate-ping", "method": "ping"})
        if not released and ponged and cancelled and len(held) >= cap:
            released = True
            for message in held:
                answer(message)
            held.clear()


if __name__ == "__main__":
    main()
