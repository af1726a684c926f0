"""The wire between ``agent-gateway mcp`` and the running gateway: one ``send_file`` call.

The MCP server an agent starts (``agent-gateway mcp``) reaches the gateway over a Unix
socket in the data dir (DESIGN.md, "Beyond the approval": files out). One connection
carries one call: the MCP server writes one line, the gateway answers one line, both
compact UTF-8 JSON::

    -> {"token": "...", "call": "rpc:7", "path": "out/chart.png", "caption": "the chart"}
    <- {"call": "rpc:7", "sent": true, "text": "sent chart.png (12.0 KiB) to the chat"}

``token`` names the agent process (one per epoch, handed to the MCP server in its env by
the gateway that started the agent); ``call`` is the native key of the agent's tool call
(the MCP request id, :func:`adapters.jsonrpc.native_key_for`'s form), which keys the
interaction a send_file rule opens. ``text`` is what the agent reads as the tool's result,
sent or not, so a refusal always says why.

Sans-IO: plain functions from lines to typed values and back. A line past
:data:`MAX_LINE_BYTES`, or one that is not the shape above, raises
:class:`gateway.errors.MalformedMessage`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gateway.errors import MalformedMessage

__all__ = [
    "ENV_SOCKET",
    "ENV_TOKEN",
    "MAX_CAPTION_CHARS",
    "MAX_LINE_BYTES",
    "MAX_PATH_CHARS",
    "SOCKET_NAME",
    "SendFileAnswer",
    "SendFileCall",
    "decode_answer",
    "decode_call",
    "encode_answer",
    "encode_call",
]

ENV_SOCKET = "AGENT_GATEWAY_MCP_SOCKET"  # the MCP server's env: where the gateway listens
ENV_TOKEN = "AGENT_GATEWAY_MCP_TOKEN"  # the MCP server's env: which agent process it serves
SOCKET_NAME = "send_file.sock"  # in the data dir (0700), so only the gateway's user connects
MAX_LINE_BYTES = 64 * 1024
MAX_PATH_CHARS = 4096  # PATH_MAX
MAX_CAPTION_CHARS = 1024  # Telegram's caption limit; longer captions are refused, not cut


@dataclass(frozen=True, kw_only=True, slots=True)
class SendFileCall:
    token: str
    call: str
    path: str
    caption: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SendFileAnswer:
    call: str
    sent: bool
    text: str


def _encode(message: dict[str, object]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _decode(line: bytes, what: str) -> dict[str, object]:
    if len(line) > MAX_LINE_BYTES:
        raise MalformedMessage(
            f"{what} longer than {MAX_LINE_BYTES} bytes", line[:80].decode("utf-8", "replace")
        )
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise MalformedMessage(
            f"{what} is not JSON ({exc})", line[:80].decode("utf-8", "replace")
        ) from exc
    if not isinstance(message, dict):
        raise MalformedMessage(f"{what} is not a JSON object", line[:80].decode("utf-8", "replace"))
    return message


def _text(message: dict[str, object], key: str, what: str, *, limit: int) -> str:
    value = message.get(key)
    if not isinstance(value, str) or not value:
        raise MalformedMessage(f"{what}: {key!r} is not a non-empty string", "")
    if len(value) > limit:
        raise MalformedMessage(f"{what}: {key!r} is longer than {limit} characters", "")
    return value


def encode_call(call: SendFileCall) -> bytes:
    return _encode(
        {"token": call.token, "call": call.call, "path": call.path, "caption": call.caption}
    )


def decode_call(line: bytes) -> SendFileCall:
    message = _decode(line, "send_file call")
    caption = message.get("caption")
    if caption is not None and not isinstance(caption, str):
        raise MalformedMessage("send_file call: 'caption' is not a string", "")
    if caption is not None and len(caption) > MAX_CAPTION_CHARS:
        raise MalformedMessage(
            f"send_file call: the caption is longer than {MAX_CAPTION_CHARS} characters", ""
        )
    return SendFileCall(
        token=_text(message, "token", "send_file call", limit=256),
        call=_text(message, "call", "send_file call", limit=256),
        path=_text(message, "path", "send_file call", limit=MAX_PATH_CHARS),
        caption=caption or None,
    )


def encode_answer(answer: SendFileAnswer) -> bytes:
    return _encode({"call": answer.call, "sent": answer.sent, "text": answer.text})


def decode_answer(line: bytes) -> SendFileAnswer:
    message = _decode(line, "send_file answer")
    sent = message.get("sent")
    if not isinstance(sent, bool):
        raise MalformedMessage("send_file answer: 'sent' is not a boolean", "")
    return SendFileAnswer(
        call=_text(message, "call", "send_file answer", limit=256),
        sent=sent,
        text=_text(message, "text", "send_file answer", limit=MAX_LINE_BYTES),
    )
