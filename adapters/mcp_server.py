"""The MCP server an agent starts (``agent-gateway mcp``), as a sans-IO codec.

It serves one tool, ``send_file(path, caption?)``, over MCP's stdio transport: JSON-RPC 2.0,
one message a line (MCP specification, "Transports: stdio"; "Lifecycle" for
``initialize``; "Server features: Tools" for ``tools/list`` and ``tools/call``). Lines go
in (:meth:`McpServerCodec.feed`), typed events come out, answers go out as lines
(:meth:`McpServerCodec.data_to_send`); all JSON-RPC bookkeeping is the project's own peer
(:mod:`adapters.jsonrpc`). No asyncio here: ``gateway.app.mcp_command`` moves the bytes and
carries each call to the gateway.

What it answers by itself:

- ``initialize``: the protocol version the client asked for when it is one of
  :data:`PROTOCOL_VERSIONS`, else the newest of them (the client then decides whether to
  go on), the ``tools`` capability, and who we are;
- ``ping``: an empty result; ``tools/list``: the one tool;
- ``tools/call`` of another tool: ``Invalid params`` ("Unknown tool", as the specification
  says); of ``send_file`` with arguments that do not fit: a tool result with ``isError``
  saying what is wrong, so that the model reads it and can call again;
- any other request: ``Method not found``; any notification: nothing.

A well-formed ``send_file`` call becomes :class:`SendFileRequested`, keyed by the MCP
request id (``native_key_for``: the key of the interaction a send_file rule opens); the
runtime answers it once with :meth:`McpServerCodec.answer`. ``notifications/cancelled`` for
an open call becomes :class:`CallCancelled`: the client no longer waits, and the answer is
not written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from adapters.jsonrpc import (
    BadMessage,
    ErrorResponse,
    InvalidParams,
    JsonObject,
    JsonRpcPeer,
    JsonValue,
    MethodNotFound,
    Notification,
    Request,
    RequestId,
    Response,
    native_key_for,
)
from gateway.errors import CodecUsageError
from gateway.send_file_wire import MAX_CAPTION_CHARS, MAX_PATH_CHARS

__all__ = [
    "PROTOCOL_VERSIONS",
    "SERVER_NAME",
    "TOOL_NAME",
    "CallCancelled",
    "McpEvent",
    "McpServerCodec",
    "SendFileRequested",
    "UnreadableLine",
]

SERVER_NAME = "agent-gateway"  # Codex shows its tools as mcp__agent_gateway__send_file
TOOL_NAME = "send_file"
# Oldest to newest; the revisions whose stdio transport and tools are what this codec speaks.
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

TOOL_DESCRIPTION = (
    "Send a file from your working directory to the people in this chat (a picture is shown "
    "as a picture, anything else as a document). The path is relative to the working "
    "directory, or absolute inside it. The gateway may ask a person to approve the file "
    "first; the result says whether it was sent, or why not."
)
SEND_FILE_TOOL: JsonObject = {
    "name": TOOL_NAME,
    "title": "Send a file to the chat",
    "description": TOOL_DESCRIPTION,
    "inputSchema": {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "the file, relative to the working directory",
            },
            "caption": {
                "type": "string",
                "description": "a short caption shown with the file (optional)",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    },
}


@dataclass(frozen=True, kw_only=True, slots=True)
class SendFileRequested:
    key: str  # native_key_for(the MCP request id)
    path: str
    caption: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class CallCancelled:
    key: str


@dataclass(frozen=True, kw_only=True, slots=True)
class UnreadableLine:
    reason: str
    excerpt: str


McpEvent: TypeAlias = SendFileRequested | CallCancelled | UnreadableLine


def _call_problem(arguments: object) -> str | None:
    """Why these ``send_file`` arguments do not fit (None: they do)."""
    if not isinstance(arguments, dict):
        return "send_file needs arguments: {'path': '...', 'caption': '...' (optional)}"
    unknown = sorted(set(arguments) - {"path", "caption"})
    if unknown:
        return f"send_file takes 'path' and 'caption' only, not {', '.join(unknown)}"
    path, caption = arguments.get("path"), arguments.get("caption")
    if not isinstance(path, str) or not path.strip():
        return "send_file needs 'path': the file to send, relative to the working directory"
    if "\x00" in path or len(path) > MAX_PATH_CHARS:
        return "that path is not a usable file name"
    if caption is not None and not isinstance(caption, str):
        return "'caption' must be a text"
    if caption is not None and len(caption) > MAX_CAPTION_CHARS:
        return f"the caption is longer than {MAX_CAPTION_CHARS} characters; shorten it"
    return None


class McpServerCodec:
    """One MCP stdio connection, server side, without IO."""

    def __init__(self, *, version: str) -> None:
        self._rpc = JsonRpcPeer()
        self._version = version
        self._calls: dict[str, RequestId] = {}  # open send_file calls: key -> request id

    @property
    def open_calls(self) -> frozenset[str]:
        return frozenset(self._calls)

    def data_to_send(self) -> list[bytes]:
        return self._rpc.data_to_send()

    def answer(self, key: str, *, text: str, is_error: bool) -> None:
        """The tool's result for the open call ``key``: what the model reads."""
        request_id = self._calls.pop(key, None)
        if request_id is None:
            raise CodecUsageError(f"no open send_file call {key!r}")
        self._rpc.send_result(request_id, _tool_result(text, is_error=is_error))

    def feed(self, line: bytes) -> list[McpEvent]:
        if not line.strip():
            return []
        message = self._rpc.receive_line(line)
        if isinstance(message, BadMessage):
            return [UnreadableLine(reason=message.reason, excerpt=message.excerpt)]
        if isinstance(message, Notification):
            return self._notification(message)
        if isinstance(message, Response | ErrorResponse):
            return []  # we send no requests: the peer reports stray answers as BadMessage
        return self._request(message)

    def _notification(self, message: Notification) -> list[McpEvent]:
        if message.method != "notifications/cancelled" or not isinstance(message.params, dict):
            return []  # notifications/initialized and the rest ask nothing of us
        request_id = message.params.get("requestId")
        if not isinstance(request_id, int | str) or isinstance(request_id, bool):
            return []
        key = native_key_for(request_id)
        if self._calls.pop(key, None) is None:
            return []
        self._rpc.forget_request(request_id)
        return [CallCancelled(key=key)]

    def _request(self, request: Request) -> list[McpEvent]:
        params = request.params if isinstance(request.params, dict) else {}
        if request.method == "initialize":
            self._rpc.send_result(request.id, self._initialize_result(params))
        elif request.method == "ping":
            self._rpc.send_result(request.id, {})
        elif request.method == "tools/list":
            self._rpc.send_result(request.id, {"tools": [SEND_FILE_TOOL]})
        elif request.method == "tools/call":
            return self._tools_call(request.id, params)
        else:
            self._rpc.send_error(request.id, MethodNotFound(data={"method": request.method}))
        return []

    def _initialize_result(self, params: JsonObject) -> JsonObject:
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": SERVER_NAME, "version": self._version},
            "instructions": "send_file hands a file of your working directory to the chat.",
        }

    def _tools_call(self, request_id: RequestId, params: JsonObject) -> list[McpEvent]:
        name = params.get("name")
        if name != TOOL_NAME:
            self._rpc.send_error(
                request_id, InvalidParams(message=f"Unknown tool: {name}", data=None)
            )
            return []
        arguments: JsonValue = params.get("arguments")
        problem = _call_problem(arguments)
        if problem is not None:
            self._rpc.send_result(request_id, _tool_result(problem, is_error=True))
            return []
        assert isinstance(arguments, dict)
        path, caption = arguments["path"], arguments.get("caption")
        assert isinstance(path, str) and (caption is None or isinstance(caption, str))
        key = native_key_for(request_id)
        self._calls[key] = request_id
        return [SendFileRequested(key=key, path=path, caption=caption or None)]


def _tool_result(text: str, *, is_error: bool) -> JsonObject:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}
