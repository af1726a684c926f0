"""The JSON-RPC 2.0 peer: classification, id spaces, error codes, encoding, misuse."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from adapters.jsonrpc import (
    EXCERPT_LIMIT,
    BadMessage,
    ErrorResponse,
    InternalError,
    InvalidParams,
    InvalidRequest,
    JsonRpcPeer,
    MethodNotFound,
    Notification,
    ParseError,
    Problem,
    Request,
    Response,
    RpcError,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
)
from gateway.errors import CodecUsageError, MalformedMessage, RemoteError


def line(message: object) -> bytes:
    return json.dumps(message).encode()


# --- classification ------------------------------------------------------------------------

CLASSIFIED = [
    # (what, message, expected type, expected fields)
    ("server request, id 0", {"id": 0, "method": "m", "params": {}}, Request, {"id": 0}),
    ("server request, string id", {"id": "a", "method": "m"}, Request, {"id": "a"}),
    ("request with array params", {"id": 3, "method": "m", "params": [1]}, Request, {}),
    ("notification without jsonrpc", {"method": "n", "params": {"x": 1}}, Notification, {}),
    ("notification with jsonrpc", {"jsonrpc": "2.0", "method": "n"}, Notification, {}),
]


@pytest.mark.parametrize(("what", "message", "kind", "fields"), CLASSIFIED, ids=lambda v: v)
def test_incoming_messages_are_classified_by_their_fields(
    what: str, message: dict[str, object], kind: type, fields: dict[str, object]
) -> None:
    incoming = JsonRpcPeer().receive_line(line(message))
    assert isinstance(incoming, kind), what
    for name, value in fields.items():
        assert getattr(incoming, name) == value


BAD = [
    # (what, raw line, problem, peer replies Invalid Request)
    ("not JSON", b'{"id": 1,', Problem.NOT_JSON, False),
    ("not UTF-8", b'{"method": "\xff"}', Problem.NOT_JSON, False),
    ("nested beyond the parser", b"[" * 100_000, Problem.NOT_JSON, False),
    ("a JSON array (batch)", b'[{"method": "n"}]', Problem.INVALID, False),
    ("a JSON string", b'"hello"', Problem.INVALID, False),
    ("wrong jsonrpc version", b'{"jsonrpc": "1.0", "method": "n"}', Problem.INVALID, False),
    ("method not a string", b'{"id": 7, "method": 5}', Problem.INVALID, True),
    ("params a number", b'{"id": 8, "method": "m", "params": 3}', Problem.INVALID, True),
    ("method and result", b'{"id": 9, "method": "m", "result": 1}', Problem.INVALID, True),
    ("boolean id", b'{"id": true, "method": "m"}', Problem.INVALID, False),
    ("float id", b'{"id": 1.5, "method": "m"}', Problem.INVALID, False),
    ("neither method nor id", b'{"result": 1}', Problem.INVALID, False),
    ("result and error", b'{"id": 1, "result": 1, "error": {}}', Problem.INVALID, False),
    ("id without result or error", b'{"id": 1}', Problem.INVALID, False),
    ("error not an error object", b'{"id": 1, "error": "boom"}', Problem.INVALID, False),
    ("response to an unknown id", b'{"id": 41, "result": {}}', Problem.UNKNOWN_ID, False),
    ("response to a string id", b'{"id": "1", "result": {}}', Problem.UNKNOWN_ID, False),
    (
        "error without id",
        b'{"id": null, "error": {"code": -32700, "message": "Parse error"}}',
        Problem.UNKNOWN_ID,
        False,
    ),
]


@pytest.mark.parametrize(("what", "raw", "problem", "replied"), BAD, ids=lambda v: v)
def test_bad_lines_are_reported_never_raised(
    what: str, raw: bytes, problem: Problem, replied: bool
) -> None:
    peer = JsonRpcPeer()
    peer.send_request("initialize", {})  # our id 1 is in flight
    peer.data_to_send()
    incoming = peer.receive_line(raw)
    assert isinstance(incoming, BadMessage), what
    assert incoming.problem is problem
    assert incoming.replied is replied
    assert len(incoming.excerpt) <= EXCERPT_LIMIT + 40
    replies = [json.loads(sent) for sent in peer.data_to_send()]
    if replied:
        assert replies == [
            {"jsonrpc": "2.0", "id": json.loads(raw)["id"], "error": replies[0]["error"]}
        ]
        assert replies[0]["error"]["code"] == InvalidRequest().code
    else:
        assert replies == []
    # the request that was in flight is still waiting for its answer
    assert 1 in peer.in_flight


def test_bad_message_excerpt_is_bounded_and_converts_to_malformed_message() -> None:
    incoming = JsonRpcPeer().receive_line(b"x" * 10_000)
    assert isinstance(incoming, BadMessage)
    assert incoming.excerpt.startswith("x" * EXCERPT_LIMIT)
    assert "10000 characters" in incoming.excerpt
    assert len(incoming.excerpt) < EXCERPT_LIMIT + 40
    error = incoming.as_exception()
    assert isinstance(error, MalformedMessage)
    assert error.excerpt == incoming.excerpt


def test_a_line_with_its_newline_is_accepted() -> None:
    assert isinstance(JsonRpcPeer().receive_line(b'{"method": "n"}\r\n'), Notification)


# --- our requests and their responses ------------------------------------------------------


def test_a_response_is_matched_to_our_request_once() -> None:
    peer = JsonRpcPeer()
    request_id = peer.send_request("thread/start", {"cwd": "/w"}, tag="opening")
    [sent] = peer.data_to_send()
    assert json.loads(sent) == {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "thread/start",
        "params": {"cwd": "/w"},
    }
    response = peer.receive_line(line({"id": request_id, "result": {"ok": True}}))
    assert response == Response(
        id=request_id, method="thread/start", tag="opening", result={"ok": True}
    )
    again = peer.receive_line(line({"id": request_id, "result": {"ok": True}}))
    assert isinstance(again, BadMessage) and again.problem is Problem.UNKNOWN_ID


def test_our_ids_come_from_our_counter_and_id_0_is_valid() -> None:
    peer = JsonRpcPeer(first_id=0)
    assert [peer.send_request("a"), peer.send_request("b")] == [0, 1]
    response = peer.receive_line(b'{"id": 0, "result": null}')
    assert isinstance(response, Response) and response.method == "a" and response.result is None


def test_an_error_response_carries_its_error_class() -> None:
    peer = JsonRpcPeer()
    request_id = peer.send_request("turn/interrupt", {})
    incoming = peer.receive_line(
        line({"id": request_id, "error": {"code": -32602, "message": "no turn", "data": [1]}})
    )
    assert isinstance(incoming, ErrorResponse)
    assert isinstance(incoming.error, InvalidParams)
    assert (incoming.error.message, incoming.error.data) == ("no turn", [1])
    exc = incoming.error.as_exception()
    assert isinstance(exc, RemoteError) and exc.code == -32602 and exc.message == "no turn"
    assert peer.in_flight == {}


def test_the_two_id_spaces_never_meet() -> None:
    """Our request 1 and the server's request 1 are different requests (SUMMARY.md)."""
    peer = JsonRpcPeer()
    ours = peer.send_request("turn/start", {})
    theirs = peer.receive_line(b'{"id": 1, "method": "item/tool/requestUserInput"}')
    assert ours == 1 and isinstance(theirs, Request) and theirs.id == 1
    assert set(peer.in_flight) == {1} and set(peer.open_requests) == {1}
    response = peer.receive_line(b'{"id": 1, "result": {"turn": {}}}')
    assert isinstance(response, Response) and response.method == "turn/start"
    assert peer.open_requests == {1: "item/tool/requestUserInput"}
    peer.send_result(1, {"answers": {}})
    assert peer.open_requests == {} and peer.in_flight == {}


# --- their requests and our replies --------------------------------------------------------


def test_each_request_of_the_other_side_is_answered_at_most_once() -> None:
    peer = JsonRpcPeer()
    peer.receive_line(b'{"id": 0, "method": "approve"}')
    peer.send_result(0, {"decision": "accept"})
    with pytest.raises(CodecUsageError):
        peer.send_result(0, {"decision": "accept"})
    with pytest.raises(CodecUsageError):
        peer.send_error(0, InternalError())
    assert [json.loads(sent) for sent in peer.data_to_send()] == [
        {"jsonrpc": "2.0", "id": 0, "result": {"decision": "accept"}}
    ]


def test_a_request_never_received_or_withdrawn_cannot_be_answered() -> None:
    peer = JsonRpcPeer()
    with pytest.raises(CodecUsageError):
        peer.send_result(5, {})
    peer.receive_line(b'{"id": 5, "method": "approve"}')
    assert peer.forget_request(5) is True
    with pytest.raises(CodecUsageError):
        peer.send_result(5, {})
    assert peer.data_to_send() == []


def test_a_duplicate_open_request_id_is_reported_and_not_answered() -> None:
    peer = JsonRpcPeer()
    peer.receive_line(b'{"id": 3, "method": "approve"}')
    duplicate = peer.receive_line(b'{"id": 3, "method": "approve"}')
    assert isinstance(duplicate, BadMessage) and duplicate.problem is Problem.DUPLICATE_ID
    assert peer.data_to_send() == []
    assert peer.open_requests == {3: "approve"}


def test_an_invalid_request_reusing_an_open_id_is_not_answered() -> None:
    peer = JsonRpcPeer()
    peer.receive_line(b'{"id": 3, "method": "approve"}')
    bad = peer.receive_line(b'{"id": 3, "method": 7}')
    assert isinstance(bad, BadMessage) and not bad.replied
    assert peer.data_to_send() == []


# --- error codes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error_class", "code", "message"),
    [
        (ParseError, -32700, "Parse error"),
        (InvalidRequest, -32600, "Invalid Request"),
        (MethodNotFound, -32601, "Method not found"),
        (InvalidParams, -32602, "Invalid params"),
        (InternalError, -32603, "Internal error"),
    ],
)
def test_reserved_error_codes_are_classes(
    error_class: Callable[[], RpcError], code: int, message: str
) -> None:
    error = error_class()
    assert (error.code, error.message) == (code, message)
    assert error.to_wire() == {"code": code, "message": message}
    assert type(RpcError.from_wire({"code": code, "message": "x"})) is error_class


def test_other_error_codes_keep_their_code() -> None:
    error = RpcError.from_wire({"code": -32001, "message": "busy"})
    assert type(error) is RpcError and error is not None and error.code == -32001
    assert RpcError.from_wire({"code": "x", "message": "busy"}) is None
    assert RpcError.from_wire({"code": True, "message": "busy"}) is None


# --- encoding ------------------------------------------------------------------------------


def test_lines_are_compact_single_line_json() -> None:
    text = "first line\nsecond line, 允许"
    encoded = [
        encode_request(1, "turn/start", {"text": text}),
        encode_notification("initialized"),
        encode_result(0, {"text": text}),
        encode_error(0, MethodNotFound(message="unsupported: x")),
    ]
    for sent in encoded:
        assert b"\n" not in sent
        compact = json.dumps(json.loads(sent), separators=(",", ":"), ensure_ascii=False)
        assert sent == compact.encode()
    assert json.loads(encoded[0])["params"]["text"] == text
    assert "允许".encode() in encoded[0]
    assert json.loads(encoded[1]) == {"jsonrpc": "2.0", "method": "initialized"}
    assert json.loads(encoded[3])["error"] == {"code": -32601, "message": "unsupported: x"}


@pytest.mark.parametrize(
    "value", [float("nan"), object(), b"bytes"], ids=["nan", "object", "bytes"]
)
def test_encoding_something_that_is_not_json_is_local_misuse(value: object) -> None:
    peer = JsonRpcPeer()
    with pytest.raises(CodecUsageError):
        peer.send_request("m", {"v": value})  # type: ignore[dict-item]
    assert peer.in_flight == {} and peer.data_to_send() == []


def test_two_peers_talk_to_each_other() -> None:
    """h11 style: wire two real machines together instead of mocking one."""
    client, server = JsonRpcPeer(), JsonRpcPeer(first_id=0)
    client.send_request("initialize", {"clientInfo": {"name": "t"}})
    client.send_notification("initialized")
    server_got = [server.receive_line(sent) for sent in client.data_to_send()]
    assert [type(m) for m in server_got] == [Request, Notification]
    request = server_got[0]
    assert isinstance(request, Request)
    server.send_result(request.id, {"userAgent": "codex/0.171.0"})
    server.send_request("item/commandExecution/requestApproval", {"command": "ls"})
    client_got = [client.receive_line(sent) for sent in server.data_to_send()]
    assert isinstance(client_got[0], Response) and client_got[0].method == "initialize"
    assert isinstance(client_got[1], Request) and client_got[1].id == 0
    client.send_error(0, MethodNotFound())
    [reply] = [server.receive_line(sent) for sent in client.data_to_send()]
    assert isinstance(reply, ErrorResponse) and isinstance(reply.error, MethodNotFound)
    assert reply.method == "item/commandExecution/requestApproval"
