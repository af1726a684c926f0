"""``agent-gateway mcp``: the stdio MCP server an agent starts, serving ``send_file``.

A person never runs it: the gateway writes it into each agent's MCP config, with the socket
and the agent process's token in its env (:data:`gateway.send_file_wire.ENV_SOCKET`,
:data:`~gateway.send_file_wire.ENV_TOKEN`). The protocol is :mod:`adapters.mcp_server`
(sans-IO); this module moves its lines between stdin/stdout and carries each call over the
socket to the gateway, one connection a call (:mod:`gateway.send_file_wire`). Calls run side
by side, each a task of one task group; stdin's end ends the server, and the calls still
open with it (the agent that asked is gone).

Nothing but MCP messages goes to stdout; logs go to stderr. Without the env (started by
hand), the server still answers ``initialize`` and ``tools/list``, and a call is answered
with a tool error saying the gateway did not start it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Mapping

from adapters.mcp_server import (
    CallCancelled,
    McpServerCodec,
    SendFileRequested,
    UnreadableLine,
)
from gateway import __version__
from gateway.errors import MalformedMessage
from gateway.send_file_wire import (
    ENV_SOCKET,
    ENV_TOKEN,
    MAX_LINE_BYTES,
    SendFileCall,
    decode_answer,
    encode_call,
)

__all__ = ["CALL_SECONDS", "run_mcp_server"]

log = logging.getLogger(__name__)

# The longest a call may take: a send_file rule may wait for a person's click. Codex gives an
# MCP tool call its own timeout (tool_timeout_sec, written in the agent's config to match).
CALL_SECONDS = 24 * 3600.0
NOT_STARTED_BY_GATEWAY = (
    "not sent: this MCP server was not started by agent-gateway for a session "
    f"({ENV_SOCKET} and {ENV_TOKEN} are not set), so it has nowhere to send the file"
)


async def _ask_gateway(socket_path: str, call: SendFileCall) -> tuple[str, bool]:
    """The gateway's answer to one call: (text, is_error)."""
    try:
        reader, writer = await asyncio.open_unix_connection(socket_path, limit=MAX_LINE_BYTES + 1)
    except OSError as exc:
        return f"not sent: the gateway is not reachable ({exc.strerror or exc})", True
    try:
        writer.write(encode_call(call))
        await writer.drain()
        async with asyncio.timeout(CALL_SECONDS):
            line = await reader.readline()
        if not line:
            return "not sent: the gateway closed the call without an answer", True
        answer = decode_answer(line)
    except (OSError, ValueError, TimeoutError, MalformedMessage) as exc:
        return f"not sent: the gateway's answer did not come ({exc})", True
    finally:
        writer.close()
    return answer.text, not answer.sent


class _Server:
    def __init__(self, env: Mapping[str, str], stdout: asyncio.StreamWriter) -> None:
        self._codec = McpServerCodec(version=__version__)
        self._socket = env.get(ENV_SOCKET)
        self._token = env.get(ENV_TOKEN)
        self._stdout = stdout
        self._calls: dict[str, asyncio.Task[None]] = {}

    async def flush(self) -> None:
        for line in self._codec.data_to_send():
            self._stdout.write(line + b"\n")
        await self._stdout.drain()

    async def run(self, stdin: asyncio.StreamReader) -> None:
        async with asyncio.TaskGroup() as tasks:
            while True:
                try:
                    line = await stdin.readline()
                except ValueError:  # a line past the limit: the rest of it is lost
                    log.warning("mcp: a line longer than %d bytes from the client", MAX_LINE_BYTES)
                    continue
                if not line:
                    break
                for event in self._codec.feed(line):
                    if isinstance(event, SendFileRequested):
                        self._calls[event.key] = tasks.create_task(self._call(event))
                    elif isinstance(event, CallCancelled):
                        task = self._calls.pop(event.key, None)
                        if task is not None:
                            task.cancel()
                    elif isinstance(event, UnreadableLine):
                        log.warning("mcp: %s: %s", event.reason, event.excerpt)
                await self.flush()
            for task in self._calls.values():  # the client is gone: nobody reads the answers
                task.cancel()

    async def _call(self, event: SendFileRequested) -> None:
        try:
            if not self._socket or not self._token:
                text, is_error = NOT_STARTED_BY_GATEWAY, True
            else:
                call = SendFileCall(
                    token=self._token, call=event.key, path=event.path, caption=event.caption
                )
                text, is_error = await _ask_gateway(self._socket, call)
        finally:
            self._calls.pop(event.key, None)
        if event.key in self._codec.open_calls:
            self._codec.answer(event.key, text=text, is_error=is_error)
            await self.flush()


async def run_mcp_server(env: Mapping[str, str] | None = None) -> int:
    """Serve MCP on this process's stdin/stdout until stdin ends."""
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader(limit=MAX_LINE_BYTES + 1)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout.buffer
    )
    stdout = asyncio.StreamWriter(transport, protocol, None, loop)
    server = _Server(os.environ if env is None else env, stdout)
    await server.run(stdin)
    return 0
