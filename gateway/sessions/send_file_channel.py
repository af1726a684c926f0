"""Where ``agent-gateway mcp`` reaches the gateway: a Unix socket in the data dir.

Each agent process the gateway starts gets a token of its own (:meth:`SendFileTokens.issue`,
handed to the MCP server in the env of its entry in the agent's MCP config); a call carries
it, and the token says which session the call comes from: an MCP server never names its
session, so one agent cannot send as another. The token of a process that ended is revoked
(:meth:`SendFileTokens.revoke`) and a call with it is refused, as is a token the gateway
never issued (a gateway restarted since: its agents are new processes with new tokens).
Tokens are kept as their SHA-256, compared by lookup of the hash.

The socket is created 0600 in the data dir (0700): only the gateway's own user can connect.
One connection carries one call (:mod:`gateway.send_file_wire`); the answer is what the
agent reads as the tool's result. The handler (the core's send_file desk) decides and acts;
this module only checks who is calling and moves the lines. A connection's work is owned by
the server for as long as the channel is open (``async with``), and ends with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import gateway
from gateway.errors import MalformedMessage, StoreError
from gateway.send_file_wire import (
    ENV_SOCKET,
    ENV_TOKEN,
    MAX_LINE_BYTES,
    SOCKET_NAME,
    SendFileAnswer,
    SendFileCall,
    decode_call,
    encode_answer,
)
from gateway.sessions.agents import GatewayMcpServer

__all__ = [
    "CALL_READ_SECONDS",
    "UNKNOWN_TOKEN_TEXT",
    "Caller",
    "SendFileChannel",
    "SendFileHandler",
    "SendFileTokens",
    "mcp_command",
]

log = logging.getLogger(__name__)

CALL_READ_SECONDS = 10.0  # a connected MCP server writes its one line at once
UNKNOWN_TOKEN_TEXT = (
    "not sent: the gateway does not know this agent process (it ended, or the gateway "
    "restarted since it started); nothing was sent"
)
# sun_path is 108 bytes on Linux, 104 on the BSDs and macOS
_SUN_PATH_MAX = 104


@dataclass(frozen=True, kw_only=True, slots=True)
class Caller:
    """Who is calling: the session whose agent process holds the token."""

    session_id: str
    token_id: str  # the token's hash, short: for logs, never the token


SendFileHandler = Callable[[Caller, SendFileCall], Awaitable[SendFileAnswer]]


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class SendFileTokens:
    """The live agent processes' tokens: token hash -> session."""

    def __init__(self) -> None:
        self._live: dict[str, str] = {}

    def issue(self, session_id: str) -> str:
        """A new token for an agent process about to start in ``session_id``."""
        token = secrets.token_urlsafe(32)
        self._live[_digest(token)] = session_id
        return token

    def revoke(self, token: str) -> None:
        """The process ended: its calls are refused from now on."""
        self._live.pop(_digest(token), None)

    def caller(self, token: str) -> Caller | None:
        digest = _digest(token)
        session_id = self._live.get(digest)
        if session_id is None:
            return None
        return Caller(session_id=session_id, token_id=digest[:12])

    def __len__(self) -> int:
        return len(self._live)


def mcp_command() -> tuple[tuple[str, ...], dict[str, str]]:
    """How an agent starts ``agent-gateway mcp``: this Python, this gateway's code (its
    import root on PYTHONPATH, so the MCP server is the same version as the gateway)."""
    root = Path(gateway.__file__).resolve().parents[1]
    return (sys.executable, "-m", "gateway", "mcp"), {"PYTHONPATH": str(root)}


def _socket_path(data_dir: Path) -> tuple[Path, Path | None]:
    """``send_file.sock`` in the data dir; where that path is too long for a Unix socket, in
    a private (0700) directory of the system's temporary dir (removed at the end)."""
    path = data_dir / SOCKET_NAME
    if len(os.fsencode(path)) < _SUN_PATH_MAX:
        return path, None
    private = Path(tempfile.mkdtemp(prefix="agent-gateway-"))
    path = private / SOCKET_NAME
    if len(os.fsencode(path)) >= _SUN_PATH_MAX:
        os.rmdir(private)
        raise StoreError(
            f"no place for the send_file socket: {data_dir} and {private.parent} are too "
            "long for a Unix socket path"
        )
    log.info("send_file: the data dir's path is too long for a socket; using %s", path)
    return path, private


async def _unless_hung_up(
    reader: asyncio.StreamReader, answering: Awaitable[SendFileAnswer]
) -> SendFileAnswer | None:
    """The handler's answer; None, the handler cancelled, if the MCP server hangs up first
    (its call was cancelled: the agent's turn stopped, or the agent ended), so that nothing
    waits on for a call nobody reads the answer of."""
    answer = asyncio.ensure_future(answering)
    hangup = asyncio.ensure_future(reader.read(1))  # a call is one line: anything more is EOF
    try:
        done, _ = await asyncio.wait((answer, hangup), return_when=asyncio.FIRST_COMPLETED)
        if answer in done:
            return answer.result()  # the handler's own error, as it raised it
        log.info("send_file: the MCP server hung up before its answer")
        return None
    finally:  # both are this call's: neither outlives it
        for task in (answer, hangup):
            task.cancel()
        await asyncio.gather(answer, hangup, return_exceptions=True)


class SendFileChannel:
    """The Unix socket server, for as long as the ``async with`` lasts."""

    def __init__(self, data_dir: Path, tokens: SendFileTokens, handler: SendFileHandler) -> None:
        self._data_dir = data_dir
        self.socket_path = data_dir / SOCKET_NAME
        self._private_dir: Path | None = None
        self.tokens = tokens
        self._handler = handler
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    def mcp_server_for(self, session_id: str) -> tuple[GatewayMcpServer, str]:
        """The MCP server entry for a new agent process of ``session_id``, and its token
        (revoke it when the process ends)."""
        token = self.tokens.issue(session_id)
        command, env = mcp_command()
        env = {**env, ENV_SOCKET: str(self.socket_path), ENV_TOKEN: token}
        server = GatewayMcpServer(
            name="agent-gateway", command=command, env=env, session_id=session_id
        )
        return server, token

    async def __aenter__(self) -> SendFileChannel:
        self.socket_path, self._private_dir = _socket_path(self._data_dir)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()  # left by a gateway that crashed; the data dir lock is ours
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._serve, path=os.fspath(self.socket_path), limit=MAX_LINE_BYTES + 1
            )
        except OSError as exc:
            raise StoreError(f"cannot listen on {self.socket_path}: {exc}") from exc
        finally:
            os.umask(old_umask)
        os.chmod(self.socket_path, 0o600)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if server is not None:
            await server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        if self._private_dir is not None:
            with contextlib.suppress(OSError):
                self._private_dir.rmdir()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            answer = await self._answer(reader)
            if answer is not None:
                writer.write(encode_answer(answer))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.info("send_file: the MCP server went away before its answer: %s", exc)
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader) -> SendFileAnswer | None:
        try:
            async with asyncio.timeout(CALL_READ_SECONDS):
                line = await reader.readline()
        except (TimeoutError, ValueError) as exc:  # ValueError: past the reader's limit
            log.warning("send_file: an unreadable call on the socket: %s", exc)
            return None
        try:
            call = decode_call(line)
        except MalformedMessage as exc:
            log.warning("send_file: a malformed call on the socket: %s", exc.reason)
            return None
        caller = self.tokens.caller(call.token)
        if caller is None:
            log.warning("send_file: a call with a token no live agent process holds")
            return SendFileAnswer(call=call.call, sent=False, text=UNKNOWN_TOKEN_TEXT)
        return await _unless_hung_up(reader, self._handler(caller, call))
