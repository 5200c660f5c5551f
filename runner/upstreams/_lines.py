"""A built-in upstream served straight over JSON-RPC lines, for a run that hosts it in process.

The stdio and HTTP servers (`serve`, `python -m runner.upstreams`) run the MCP SDK's lowlevel
`Server`: a dispatcher, a task per request, middleware with a tracing span, an anyio stream per
direction, pydantic models for every message in and out. For a ledger in memory, whose tools
answer in microseconds, that machinery was most of the upstream's cost: about 2 ms of CPU in a
2-call scripted run (issue 37). This server answers the same requests with the same lines, one
at a time as they arrive, without it:

- `initialize` negotiates the version as the SDK does and answers the SDK `Server`'s own
  initialization options (its capabilities, name, version, instructions);
- `tools/list` and `tools/call` are checked against the MCP schema of the negotiated version
  (`mcp_types.methods`, what the SDK checks) and answered by the same handlers the SDK
  server is built with (`build_server`), their results shaped by the SDK's own serializer;
- `ping` answers `{}`; a method the server has no handler for is -32601 (data: the method), a
  request before `initialize` or with malformed params -32602, as the SDK answers them;
- notifications, answers and lines that are not a JSON-RPC message get no answer.

tests/integration/test_line_server.py holds it to the SDK server line by line, and
test_runner_paths.py to a real upstream process run by run.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp_types import methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from harness.proxy import StreamClosed

METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32601, -32602, -32603
_OWN = ("initialize", "tools/list", "tools/call", "ping")


class LineServer:
    """One session of an SDK lowlevel `Server` built by `build_server`, answered line by line."""

    def __init__(self, server: Server[Any]) -> None:
        self._server = server
        self._version: str | None = None  # negotiated by `initialize`
        self._initialized = False  # notifications/initialized arrived

    async def serve(self, reader: Any, writer: Any) -> None:
        """Answer each line from `reader` on `writer` until the reader's EOF; then close it."""
        try:
            while (line := await reader.read_line()) is not None:
                answer = await self.answer(line)
                if answer is not None:
                    await writer.write_line(answer)
        except StreamClosed:
            pass  # the proxy is gone: nobody to answer
        finally:
            await writer.close()

    async def answer(self, line: bytes) -> bytes | None:
        """The line that answers `line`, or None (a notification, an answer, not JSON-RPC)."""
        try:
            message = json.loads(line)
        except ValueError:
            return None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return None
        method = message.get("method")
        if not isinstance(method, str):
            return None  # an answer to a request this server never sends
        if "id" not in message:
            if method == "notifications/initialized":
                self._initialized = True
            return None
        request_id = message["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return None  # not a request the SDK's reader accepts either
        params = message.get("params")
        try:
            result = await self._result(method, params if isinstance(params, dict) else params)
        except _Refused as refused:
            return _line(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=refused.error))
        return _line(types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result))

    async def _result(self, method: str, params: Any) -> dict[str, Any]:
        version = self._version or LATEST_HANDSHAKE_VERSION
        if method in methods.SPEC_CLIENT_METHODS:
            try:
                methods.validate_client_request(method, version, params)
            except KeyError:
                raise _Refused(METHOD_NOT_FOUND, "Method not found", method) from None
            except ValidationError:
                raise _Refused(INVALID_PARAMS, "Invalid request parameters", "") from None
        if method == "initialize":
            return self._initialize(params)
        entry = self._server.get_request_handler(method)
        if method not in _OWN or entry is None:
            raise _Refused(METHOD_NOT_FOUND, "Method not found", method)
        if self._version is None and not self._initialized and method != "ping":
            raise _Refused(INVALID_PARAMS, "Invalid request parameters", "")
        if method == "ping":
            return {}
        try:
            typed = entry.params_type.model_validate(
                {} if params is None else params, by_name=False
            )
            result = await entry.handler(None, typed)  # type: ignore[arg-type]
            dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
            return methods.serialize_server_result(method, version, dumped)
        except ValidationError:
            raise _Refused(INVALID_PARAMS, "Invalid request parameters", "") from None

    def _initialize(self, params: Any) -> dict[str, Any]:
        init = types.InitializeRequestParams.model_validate(params or {}, by_name=False)
        requested = init.protocol_version
        version = (
            requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        )
        opts = self._server.create_initialization_options()
        result = types.InitializeResult(
            protocol_version=version,
            capabilities=opts.capabilities,
            server_info=types.Implementation(
                name=opts.server_name, title=opts.title, description=opts.description,
                version=opts.server_version, website_url=opts.website_url, icons=opts.icons,
            ),
            instructions=opts.instructions,
        )  # fmt: skip
        self._version = version
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return methods.serialize_server_result("initialize", version, dumped)


class _Refused(Exception):
    def __init__(self, code: int, message: str, data: Any) -> None:
        super().__init__(message)
        self.error = types.ErrorData(code=code, message=message, data=data)


def _line(message: types.JSONRPCResponse | types.JSONRPCError) -> bytes:
    # As the SDK's writer over a line stream sends it (harness.wire.transport._SdkWriteStream).
    return message.model_dump_json(by_alias=True, exclude_unset=True).encode()
