"""A line-level MCP upstream that answers as a test scripts it, hostile answers included.

    python scripted_upstream.py SCRIPT.json TRUTH.jsonl

SCRIPT.json: {"tools": [...], "list": "plain" | "batch", "calls": {tool: [action, ...]}}.
Each `tools/call` of a tool takes the next action of its list (the last one repeats):

    {"result": {...}}          a normal answer
    {"error": {...}}           a JSON-RPC error answer
    {"raw": "BASE64"}          these bytes as the answer line; `__ID__` becomes the id's JSON
    {"hang": true}             no answer at all
    {"delay": S, ...}          answer after S seconds (a long call; other lines wait too)
    {"notify": [...], ...}     these messages first (e.g. notifications/tools/list_changed)
    {"before": ["BASE64"], ...} these raw lines first (garbage the proxy must survive)

"list": "batch" answers the proxy's own `tools/list` wrapped in a JSON array, as a 2025-03-26
server answering a batch would. Every `tools/call` that reaches this upstream is appended to
TRUTH.jsonl before it is answered (ground truth: what really executed); its first line names
this process and its process group.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time


def main() -> None:
    script = json.loads(open(sys.argv[1], encoding="utf-8").read())
    truth = open(sys.argv[2], "a", encoding="utf-8")
    used: dict[str, int] = {}
    out = sys.stdout.buffer
    truth.write(json.dumps({"started": os.getpid(), "pgid": os.getpgid(0)}) + "\n")
    truth.flush()

    def send(body: object) -> None:
        out.write(json.dumps(body).encode() + b"\n")
        out.flush()

    for raw in sys.stdin.buffer:
        try:
            message = json.loads(raw.decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError):
            continue
        if not isinstance(message, dict) or "method" not in message or "id" not in message:
            continue
        rpc_id, method = message["id"], message["method"]
        params = message.get("params") or {}
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "scripted-upstream", "version": "0"},
            }
        elif method == "tools/list":
            body = {"jsonrpc": "2.0", "id": rpc_id, "result": {"tools": script["tools"]}}
            send([body] if script.get("list") == "batch" else body)
            continue
        elif method == "tools/call":
            name = params.get("name")
            line = json.dumps(
                {
                    "pid": os.getpid(),
                    "tool": name,
                    "id": rpc_id,
                    "arguments": params.get("arguments"),
                }
            )
            truth.write(line.encode("utf-8", "backslashreplace").decode() + "\n")
            truth.flush()
            actions = script.get("calls", {}).get(name) or [{"result": {"content": []}}]
            action = actions[min(used.get(name, 0), len(actions) - 1)]
            used[name] = used.get(name, 0) + 1
            for note in action.get("notify", []):
                send(note)
            for raw_line in action.get("before", []):
                out.write(base64.b64decode(raw_line) + b"\n")
                out.flush()
            if action.get("hang"):
                continue
            time.sleep(action.get("delay", 0))
            if "raw" in action:
                line_bytes = base64.b64decode(action["raw"]).replace(
                    b"__ID__", json.dumps(rpc_id).encode()
                )
                out.write(line_bytes + b"\n")
                out.flush()
                continue
            if "error" in action:
                send({"jsonrpc": "2.0", "id": rpc_id, "error": action["error"]})
                continue
            result = action.get("result")
        else:
            result = {}
        send({"jsonrpc": "2.0", "id": rpc_id, "result": result})


if __name__ == "__main__":
    main()
