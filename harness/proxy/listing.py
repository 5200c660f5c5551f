"""The proxy's own view of the upstream's tools (C1-C7): its `tools/list` requests, in the
client's protocol revision (X11), the classification table on stderr, and the audit tools
added to the client's list.

A mixin of `Proxy` (harness.proxy.router).
"""

from __future__ import annotations

import asyncio
import gc
from typing import TYPE_CHECKING, Any

from harness.base import jsonutil
from harness.base.errors import ConfigError
from harness.operations.classify import startup_lines
from harness.proxy.audit import AUDIT_TOOLS
from harness.proxy.messages import Message, UnreadableAnswer, UpstreamGone, id_key

if TYPE_CHECKING:
    from harness.proxy.router import Proxy

GC_EVERY_CALLS = 1000


class Listing:
    """The listing half of the router."""

    def _with_audit_tools(self: Proxy, message: Message) -> bytes | None:
        data = message.data
        result = data.get("result") if data else None
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return None
        result["tools"] = [*result["tools"], *AUDIT_TOOLS]
        return jsonutil.dumps(data).encode()

    def _start_listing(self: Proxy, again: bool = False) -> None:
        if self._listing is None or (again and self._listing == "failed"):
            self._listing = "running"
            self._spawn(self._list_tools())

    async def _ask_upstream(self: Proxy, method: str, params: dict[str, Any]) -> Message:
        """A request of the proxy's own, in the client's protocol revision (X11)."""
        self._own_ids += 1
        rpc_id = f"agent-harness-{self._token}-{self._own_ids}"
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[id_key(rpc_id)] = future
        body = {
            "jsonrpc": "2.0",
            "id": rpc_id,
            "method": method,
            "params": self.revision.own_params(params),
        }
        await self._to_upstream(jsonutil.dumps(body).encode())
        return await asyncio.wait_for(future, self.config.upstream_timeout_s)

    async def _list_tools(self: Proxy) -> None:
        """Every page of the upstream's tool list, classified (C1-C7) and printed."""
        tools: list[dict[str, Any]] = []
        cursor: Any = None
        complete = False
        try:
            while True:
                answer = await self._ask_upstream(
                    "tools/list", {"cursor": cursor} if cursor else {}
                )
                result = answer.get("result")
                if not isinstance(result, dict):
                    error = answer.get("error")
                    why = error if error is not None else "its answer has no result object"
                    self.log(f"WARNING: the upstream's tools/list failed: {why}")
                    break
                tools += [t for t in result.get("tools", []) if isinstance(t, dict)]
                cursor = result.get("nextCursor")
                if not cursor:
                    complete = True
                    break
        except (UpstreamGone, UnreadableAnswer) as exc:
            self.log(f"WARNING: could not list the upstream's tools: {exc}")
        except TimeoutError:
            self.log(
                "WARNING: could not list the upstream's tools: no answer within "
                f"{self.config.upstream_timeout_s:g} s"
            )
        try:
            classification = self.session.tools_listed(tools, complete=complete)
        except ConfigError as exc:
            self.fatal = exc
            self._stop.set()
            return
        lines = startup_lines(classification, self.config.classifier.key_fields)
        if lines != self._printed_table:  # a list_changed with the same tools prints nothing
            self._printed_table = lines
            for line in lines:
                self.log(line)  # escaped by the log (V6)
        self._listing = "done" if complete else "failed"
        self._tools_ready.set()
        self._report("running")

    def _after_call_received(self: Proxy, seq: int) -> None:
        if seq % GC_EVERY_CALLS == 0:
            # The judge's state only grows and is never garbage: once collected, move it out of
            # the collector's sight, so a long session does not pay for rescanning it.
            gc.collect()
            gc.freeze()
