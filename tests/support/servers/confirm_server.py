"""A stdio MCP server on the official SDK (MCPServer) whose write asks the client to confirm
first: on 2026-07-28 the SDK answers the first `tools/call` with an `InputRequiredResult` and
runs the tool when the client re-issues the call with the confirmation (multi round-trip
requests, issue 21 item 5).

Run: python tests/support/servers/confirm_server.py --ledger PATH

`charge_card` appends one JSON line to PATH per charge it really made (flushed before it
answers): the ground truth. Standalone: it imports only the SDK and the standard library.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel


class Confirmation(BaseModel):
    confirmed: bool


def ask(customer: str, amount: float) -> Elicit[Confirmation]:
    return Elicit(f"Charge {customer} {amount}?", Confirmation)


def build(ledger: str) -> MCPServer:
    app = MCPServer("confirm")

    @app.tool(description="Charge a customer's card, after the user confirms.")
    def charge_card(
        customer: str, amount: float, confirmation: Annotated[Confirmation, Resolve(ask)]
    ) -> str:
        if not confirmation.confirmed:
            return "not charged"
        with open(ledger, "a", encoding="utf-8") as out:
            out.write(json.dumps({"customer": customer, "amount": amount}) + "\n")
            out.flush()
            os.fsync(out.fileno())
        return f"charged {customer} {amount}"

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ledger", required=True)
    build(parser.parse_args().ledger).run("stdio")


if __name__ == "__main__":
    main()
