"""Messages the proxy refuses (X10) and requests it cannot record (O4): never forwarded, each
answered with a JSON-RPC error and noted in the session and on stderr."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from harness.base import jsonutil
from harness.base.errors import ReportFileError
from harness.proxy.batch import Reply
from harness.proxy.messages import Message, Unreadable, error_body
from harness.session import Session

INVALID_REQUEST = -32600
PARSE_ERROR = -32700


def unrecordable_line(exc: ReportFileError) -> str:
    """The one stderr line when the event log cannot be written (O4)."""
    return (
        f"ERROR: {exc}; stopping: requests from now on are answered with an error and not "
        "forwarded, the calls in flight get the upstream's answers (exit code 1)"
    )


def not_recorded(rpc_id: Any, why: ReportFileError | None) -> bytes:
    """The answer to a request that arrived after the event log failed: not forwarded."""
    return error_body(
        rpc_id, -32000, f"agent-harness cannot record this session ({why}); "
        "the request was not forwarded to the upstream"
    )  # fmt: skip


class Refusals:
    """What the proxy refuses: ids in use, bad ids, unreadable lines, calls it cannot judge."""

    def __init__(self, session: Session, log: Callable[[str], None]) -> None:
        self.session = session
        self.log = log

    async def duplicate_id(self, message: Message, rpc_id: Any, reply: Reply) -> None:
        """X10: an id that a request in flight still holds."""
        method = message.get("method")
        self.refused("duplicate_id", method, message)
        await reply(
            error_body(
                rpc_id,
                INVALID_REQUEST,
                f"Invalid Request: id {jsonutil.dumps(rpc_id)} is already used by a request "
                "that has not been answered; agent-harness did not forward this one",
            )
        )

    async def bad_id(self, message: Message, reply: Reply) -> None:
        """An id that is neither a string nor an integer: refused, answered with an error.

        JSON-RPC answers an invalid id (an object, an array, true) with id null; a fractional
        number is a valid but discouraged id, so its answer carries it and the client can match
        it to its request.
        """
        rpc_id = message.get("id")
        self.refused("bad_id", message.get("method"), message)
        echo = rpc_id if isinstance(rpc_id, Decimal) else None
        await reply(
            error_body(
                echo,
                INVALID_REQUEST,
                f"Invalid Request: the id {jsonutil.dumps(rpc_id)} is not a string or an "
                "integer; agent-harness did not forward it",
            )
        )

    async def unreadable(self, unreadable: Unreadable, reply: Reply) -> None:
        """X10: a line the proxy cannot read is never forwarded; the client gets an error."""
        self.refused("unreadable", None, None, detail=unreadable.reason)
        await reply(
            error_body(
                unreadable.rpc_id,
                PARSE_ERROR,
                f"Parse error: {unreadable.reason}; agent-harness did not forward it",
            )
        )

    def refused(
        self, reason: str, method: Any, message: Message | None, detail: str | None = None
    ) -> None:
        """Note a refusal in the session and say it once on stderr."""
        tool = None
        if message is not None and method == "tools/call":
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            tool = name if isinstance(name, str) else None
        self.session.refused(reason, method if isinstance(method, str) else None, tool)
        what = f"a {method} message" if isinstance(method, str) else "a message"
        self.log(
            f"WARNING: refused {what}{f' for tool {tool!r}' if tool else ''} "
            f"({detail or reason.replace('_', ' ')}); it was not forwarded to the upstream"
        )
