"""A sans-IO JSON-RPC 2.0 peer for line-delimited transports (JSONL over stdio).

Lines go in (:meth:`JsonRpcPeer.receive_line`), typed messages come out; requests,
notifications, results and error replies go out as lines through
:meth:`JsonRpcPeer.data_to_send`. No asyncio, no subprocess: the runtime moves the bytes.

What the peer keeps (the only JSON-RPC bookkeeping in the project, STYLE.md):

- one table of OUR in-flight requests, ``id -> (method, tag)``, with ids from our own counter;
- the set of the OTHER side's requests that are still open (received, not yet answered).
  Its ids live in their own id space (Codex app-server starts its own at 0, SUMMARY.md), so
  our id 1 and the server's id 1 never meet: each table is looked up only by the kind of
  message that can refer to it (a response refers to ours, a reply of ours to theirs).

Classification of an incoming message (JSON-RPC 2.0 §4, §5; the peer may omit
``"jsonrpc"``, as codex app-server does):

=====================  =====================================================
``method`` + ``id``    :class:`Request` (the other side asks, wants a reply)
``method``, no ``id``  :class:`Notification`
``id`` + ``result``    :class:`Response` to one of ours (no ``method``)
``id`` + ``error``     :class:`ErrorResponse` to one of ours (no ``method``)
anything else          :class:`BadMessage` (never an exception)
=====================  =====================================================

An id of ``0`` is a valid id. A line that is not JSON, a message that fits none of the
shapes above, a duplicate open request id, or a response to an id we never sent (or already
got an answer for) comes back as a :class:`BadMessage` carrying a bounded excerpt
(:data:`EXCERPT_LIMIT` characters): the caller decides whether it is worth a warning. A
request whose shape is wrong but whose id is usable is answered ``Invalid Request`` by the
peer itself, so that the other side is not left waiting.

Local misuse (answering a request that is not open, twice, or encoding something that is
not JSON) raises :class:`gateway.errors.CodecUsageError`.

Lines handed out by :meth:`JsonRpcPeer.data_to_send` are compact UTF-8 JSON texts WITHOUT a
line terminator; :func:`encode_message` never produces a raw newline inside a line.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeAlias

from gateway.errors import CodecUsageError, MalformedMessage, RemoteError

__all__ = [
    "EXCERPT_LIMIT",
    "BadMessage",
    "ErrorResponse",
    "Incoming",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "JsonObject",
    "JsonRpcPeer",
    "JsonValue",
    "MethodNotFound",
    "Notification",
    "OutgoingRequest",
    "Params",
    "ParseError",
    "Problem",
    "Request",
    "RequestId",
    "Response",
    "RpcError",
    "encode_error",
    "encode_message",
    "encode_notification",
    "encode_request",
    "encode_result",
    "excerpt",
    "native_key_for",
]

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
JsonObject: TypeAlias = dict[str, JsonValue]
Params: TypeAlias = JsonObject | list[JsonValue]
RequestId: TypeAlias = int | str

EXCERPT_LIMIT = 200


def native_key_for(request_id: RequestId) -> str:
    """The opaque key of a peer's request: ``rpc:<id>`` (``rpc:s:<id>`` for a string id, so
    that ``"7"`` and ``7`` stay two requests)."""
    if isinstance(request_id, str):
        return f"rpc:s:{request_id}"
    return f"rpc:{request_id}"


def excerpt(data: bytes | str, limit: int = EXCERPT_LIMIT) -> str:
    """A bounded, printable excerpt of a line for warnings and logs."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    text = text.rstrip("\r\n")
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


# --- error objects (JSON-RPC 2.0 §5.1) -------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class RpcError:
    """A JSON-RPC error object. The subclasses below are the codes the spec reserves."""

    code: int
    message: str
    data: JsonValue = None

    def to_wire(self) -> JsonObject:
        wire: JsonObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            wire["data"] = self.data
        return wire

    @staticmethod
    def from_wire(obj: JsonObject) -> RpcError | None:
        """The error object of an error response, as its class; None if it is malformed."""
        code, message = obj.get("code"), obj.get("message")
        if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
            return None
        data = obj.get("data")
        known = _ERRORS_BY_CODE.get(code)
        if known is not None:
            return known(message, data)
        return RpcError(code=code, message=message, data=data)

    def as_exception(self) -> RemoteError:
        return RemoteError(self.code, self.message, self.data)


@dataclass(frozen=True, kw_only=True, slots=True)
class ParseError(RpcError):
    code: int = field(default=-32700, init=False)
    message: str = "Parse error"


@dataclass(frozen=True, kw_only=True, slots=True)
class InvalidRequest(RpcError):
    code: int = field(default=-32600, init=False)
    message: str = "Invalid Request"


@dataclass(frozen=True, kw_only=True, slots=True)
class MethodNotFound(RpcError):
    code: int = field(default=-32601, init=False)
    message: str = "Method not found"


@dataclass(frozen=True, kw_only=True, slots=True)
class InvalidParams(RpcError):
    code: int = field(default=-32602, init=False)
    message: str = "Invalid params"


@dataclass(frozen=True, kw_only=True, slots=True)
class InternalError(RpcError):
    code: int = field(default=-32603, init=False)
    message: str = "Internal error"


_ERRORS_BY_CODE: dict[int, Callable[[str, JsonValue], RpcError]] = {
    -32700: lambda message, data: ParseError(message=message, data=data),
    -32600: lambda message, data: InvalidRequest(message=message, data=data),
    -32601: lambda message, data: MethodNotFound(message=message, data=data),
    -32602: lambda message, data: InvalidParams(message=message, data=data),
    -32603: lambda message, data: InternalError(message=message, data=data),
}


# --- what comes in -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Request:
    """The other side asks something and waits for our reply (``id`` is in ITS id space)."""

    id: RequestId
    method: str
    params: JsonObject | list[JsonValue] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Notification:
    method: str
    params: JsonObject | list[JsonValue] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Response:
    """The successful answer to one of OUR requests."""

    id: int
    method: str
    tag: str | None
    result: JsonValue


@dataclass(frozen=True, kw_only=True, slots=True)
class ErrorResponse:
    """The error answer to one of OUR requests."""

    id: int
    method: str
    tag: str | None
    error: RpcError


class Problem(StrEnum):
    NOT_JSON = "not_json"
    INVALID = "invalid_message"
    UNKNOWN_ID = "unknown_response_id"
    DUPLICATE_ID = "duplicate_request_id"


@dataclass(frozen=True, kw_only=True, slots=True)
class BadMessage:
    """A line the peer could not accept. Reported, never raised."""

    problem: Problem
    reason: str
    excerpt: str
    replied: bool = False  # the peer queued an Invalid Request reply to the message's id

    def as_exception(self) -> MalformedMessage:
        return MalformedMessage(self.reason, self.excerpt)


Incoming: TypeAlias = Request | Notification | Response | ErrorResponse | BadMessage


@dataclass(frozen=True, kw_only=True, slots=True)
class OutgoingRequest:
    """One of our requests still waiting for its answer."""

    id: int
    method: str
    tag: str | None = None


# --- encoding ------------------------------------------------------------------------------


def encode_message(message: JsonObject) -> bytes:
    """One compact JSON text (no line terminator). Raises CodecUsageError if not JSON."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise CodecUsageError(f"cannot encode message as JSON: {exc}") from exc
    return text.encode("utf-8")


def encode_request(request_id: RequestId, method: str, params: Params | None = None) -> bytes:
    message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return encode_message(message)


def encode_notification(method: str, params: Params | None = None) -> bytes:
    message: JsonObject = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return encode_message(message)


def encode_result(request_id: RequestId, result: JsonValue) -> bytes:
    return encode_message({"jsonrpc": "2.0", "id": request_id, "result": result})


def encode_error(request_id: RequestId | None, error: RpcError) -> bytes:
    return encode_message({"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()})


# --- the peer ------------------------------------------------------------------------------


def _is_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class JsonRpcPeer:
    """Both halves of one JSON-RPC connection, without IO."""

    def __init__(self, *, first_id: int = 1) -> None:
        self._ids = itertools.count(first_id)
        self._in_flight: dict[int, OutgoingRequest] = {}
        self._open_incoming: dict[RequestId, str] = {}  # their request id -> method
        self._outbox: list[bytes] = []

    # -- state, for callers and tests

    @property
    def in_flight(self) -> Mapping[int, OutgoingRequest]:
        return dict(self._in_flight)

    @property
    def open_requests(self) -> Mapping[RequestId, str]:
        """The other side's requests we have not answered yet (id -> method)."""
        return dict(self._open_incoming)

    # -- outgoing

    def send_request(
        self, method: str, params: Params | None = None, *, tag: str | None = None
    ) -> int:
        request_id = next(self._ids)
        self._outbox.append(encode_request(request_id, method, params))
        self._in_flight[request_id] = OutgoingRequest(id=request_id, method=method, tag=tag)
        return request_id

    def send_notification(self, method: str, params: Params | None = None) -> None:
        self._outbox.append(encode_notification(method, params))

    def send_result(self, request_id: RequestId, result: JsonValue) -> None:
        """Answer an open request of the other side; each is answered at most once."""
        line = encode_result(request_id, result)
        self._close_incoming(request_id)
        self._outbox.append(line)

    def send_error(self, request_id: RequestId, error: RpcError) -> None:
        line = encode_error(request_id, error)
        self._close_incoming(request_id)
        self._outbox.append(line)

    def forget_request(self, request_id: RequestId) -> bool:
        """The other side withdrew (or resolved) its request: it must not be answered now."""
        return self._open_incoming.pop(request_id, None) is not None

    def data_to_send(self) -> list[bytes]:
        lines, self._outbox = self._outbox, []
        return lines

    def _close_incoming(self, request_id: RequestId) -> None:
        if self._open_incoming.pop(request_id, None) is None:
            raise CodecUsageError(f"no open request with id {request_id!r} to answer")

    # -- incoming

    def receive_line(self, line: bytes) -> Incoming:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            return BadMessage(
                problem=Problem.NOT_JSON, reason=f"not JSON ({exc})", excerpt=excerpt(line)
            )
        if not isinstance(message, dict):
            return self._bad(Problem.INVALID, "not a JSON object", line)
        if "jsonrpc" in message and message["jsonrpc"] != "2.0":
            return self._bad(Problem.INVALID, "jsonrpc is not '2.0'", line)
        if "method" in message:
            return self._receive_call(message, line)
        return self._receive_response(message, line)

    def _receive_call(self, message: JsonObject, line: bytes) -> Incoming:
        method = message["method"]
        params = message.get("params")
        has_id = "id" in message
        request_id = message.get("id")
        problem = None
        if not isinstance(method, str):
            problem = "method is not a string"
        elif params is not None and not isinstance(params, dict | list):
            problem = "params is neither an object nor an array"
        elif "result" in message or "error" in message:
            problem = "a message cannot carry both a method and a result or error"
        elif has_id and not _is_id(request_id):
            problem = "request id is neither an integer nor a string"
        if problem is not None:
            if has_id and _is_id(request_id) and request_id not in self._open_incoming:
                assert isinstance(request_id, int | str)
                self._outbox.append(encode_error(request_id, InvalidRequest(message=problem)))
                return self._bad(Problem.INVALID, problem, line, replied=True)
            return self._bad(Problem.INVALID, problem, line)
        assert isinstance(method, str)
        assert params is None or isinstance(params, dict | list)
        if not has_id:
            return Notification(method=method, params=params)
        assert isinstance(request_id, int | str)
        if request_id in self._open_incoming:
            return self._bad(
                Problem.DUPLICATE_ID, f"request id {request_id!r} is already open", line
            )
        self._open_incoming[request_id] = method
        return Request(id=request_id, method=method, params=params)

    def _receive_response(self, message: JsonObject, line: bytes) -> Incoming:
        if "id" not in message:
            return self._bad(Problem.INVALID, "neither a method nor an id", line)
        response_id = message["id"]
        has_result, has_error = "result" in message, "error" in message
        if has_result == has_error:
            return self._bad(
                Problem.INVALID, "a response needs exactly one of result or error", line
            )
        error: RpcError | None = None
        if has_error:
            raw_error = message["error"]
            error = RpcError.from_wire(raw_error) if isinstance(raw_error, dict) else None
            if error is None:
                return self._bad(Problem.INVALID, "error is not a JSON-RPC error object", line)
        if response_id is None:
            return self._bad(Problem.UNKNOWN_ID, "error response without an id", line)
        if not isinstance(response_id, int) or isinstance(response_id, bool):
            # Our ids are integers: anything else answers a request we never sent.
            return self._bad(Problem.UNKNOWN_ID, f"response to unknown id {response_id!r}", line)
        pending = self._in_flight.pop(response_id, None)
        if pending is None:
            return self._bad(Problem.UNKNOWN_ID, f"response to unknown id {response_id!r}", line)
        if error is not None:
            return ErrorResponse(
                id=response_id, method=pending.method, tag=pending.tag, error=error
            )
        return Response(
            id=response_id, method=pending.method, tag=pending.tag, result=message["result"]
        )

    @staticmethod
    def _bad(problem: Problem, reason: str, line: bytes, *, replied: bool = False) -> BadMessage:
        return BadMessage(problem=problem, reason=reason, excerpt=excerpt(line), replied=replied)
