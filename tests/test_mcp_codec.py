"""The sans-IO codec of ``agent-gateway mcp``: lines in, events and answer lines out."""

from __future__ import annotations

import json

from adapters.mcp_server import (
    PROTOCOL_VERSIONS,
    CallCancelled,
    McpServerCodec,
    SendFileRequested,
    UnreadableLine,
)


def line(message: dict[str, object]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode()


def answers(codec: McpServerCodec) -> list[dict[str, object]]:
    return [json.loads(out) for out in codec.data_to_send()]


def test_initialize_echoes_a_version_it_speaks_else_offers_its_newest() -> None:
    codec = McpServerCodec(version="1.2.3")
    codec.feed(line({"id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}}))
    codec.feed(line({"id": 2, "method": "initialize", "params": {"protocolVersion": "1999-01-01"}}))
    first, second = answers(codec)
    assert first["result"]["protocolVersion"] == "2025-03-26"  # type: ignore[index]
    assert second["result"]["protocolVersion"] == PROTOCOL_VERSIONS[-1]  # type: ignore[index]
    assert first["result"]["serverInfo"] == {"name": "agent-gateway", "version": "1.2.3"}  # type: ignore[index]


def test_a_call_is_answered_once_and_a_cancelled_call_not_at_all() -> None:
    codec = McpServerCodec(version="1")
    call = {"name": "send_file", "arguments": {"path": "a.png"}}
    [event] = codec.feed(line({"id": "x", "method": "tools/call", "params": call}))
    assert event == SendFileRequested(key="rpc:s:x", path="a.png", caption=None)
    [other] = codec.feed(line({"id": 7, "method": "tools/call", "params": call}))
    assert isinstance(other, SendFileRequested)
    cancelled = codec.feed(line({"method": "notifications/cancelled", "params": {"requestId": 7}}))
    assert cancelled == [CallCancelled(key="rpc:7")]
    codec.answer("rpc:s:x", text="sent", is_error=False)
    [answer] = answers(codec)
    assert answer["id"] == "x"
    assert answer["result"] == {"content": [{"type": "text", "text": "sent"}], "isError": False}
    assert codec.open_calls == frozenset()


def test_unknown_methods_and_unreadable_lines() -> None:
    codec = McpServerCodec(version="1")
    codec.feed(line({"id": 1, "method": "resources/list"}))
    [error] = answers(codec)
    assert error["error"]["code"] == -32601  # type: ignore[index]
    [bad] = codec.feed(b"{not json")
    assert isinstance(bad, UnreadableLine)
    assert codec.feed(line({"method": "notifications/initialized"})) == []
