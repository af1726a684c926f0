"""Just enough HTTP/1.1 and Server-Sent Events for the fake model servers.

:class:`RecordingServer` is what ``fake_anthropic.FakeAnthropic`` and
``fake_responses.FakeResponses`` share: it listens on 127.0.0.0/8 on a port the kernel picks,
reads one request per connection (every answer says ``Connection: close``), hands it to the
subclass's ``_handle``, keeps the requests the subclass records and lets a test wait for the
n-th model request under its own deadline. A malformed request gets a 400 with the
subclass's error body. Heads and bodies have a bound (:data:`MAX_HEADER_BYTES`,
:data:`MAX_BODY_BYTES`) and a :class:`BadRequest` past it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_HEADER_BYTES",
    "BadRequest",
    "ReceivedRequest",
    "RecordingServer",
    "decode_json",
    "read_request",
    "write_json",
    "write_sse",
]

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 32 * 1024 * 1024


class BadRequest(Exception):
    """The client sent something this server does not read (answered with a 400)."""


@dataclass(frozen=True, kw_only=True)
class ReceivedRequest:
    """One request as received: ``n`` counts from 1 in the order they came."""

    n: int
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


RequestT = TypeVar("RequestT", bound=ReceivedRequest)


@dataclass(kw_only=True)
class RecordingServer(Generic[RequestT]):
    """A local one-request-per-connection server that records what it was sent.

    Subclasses answer in :meth:`_handle`, build the request record they keep (calling
    :meth:`_record`), say which records are model calls (:meth:`model_requests`) and what an
    error body looks like (:meth:`_error_body`). ``response_headers`` go into every answer.
    """

    response_headers: ClassVar[Mapping[str, str]] = {}

    host: str = "127.0.0.1"
    port: int = 0
    requests: list[RequestT] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _changed: asyncio.Condition | None = None

    def model_requests(self) -> list[RequestT]:
        """The recorded requests that were calls of the model, in order."""
        raise NotImplementedError

    async def wait_for_requests(self, count: int) -> list[RequestT]:
        """Wait (under the caller's deadline) until ``count`` model requests were received."""
        assert self._changed is not None, "server not started"
        async with self._changed:
            await self._changed.wait_for(lambda: len(self.model_requests()) >= count)
        return self.model_requests()

    async def start(self) -> None:
        if not self.host.startswith("127."):
            raise ValueError(f"the fake model listens on 127.0.0.0/8 only, not {self.host}")
        self._changed = asyncio.Condition()
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _handle(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        raw: bytes,
        writer: asyncio.StreamWriter,
    ) -> None:
        raise NotImplementedError

    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    async def _record(self, request: RequestT) -> None:
        self.requests.append(request)
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()

    async def _write_json(self, writer: asyncio.StreamWriter, status: int, obj: Any) -> None:
        await write_json(writer, status, obj, headers=self.response_headers)

    async def _write_sse(
        self, writer: asyncio.StreamWriter, events: Iterable[dict[str, Any]]
    ) -> None:
        await write_sse(writer, events, headers=self.response_headers)

    # one connection, one request (we always answer with Connection: close)
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, headers, raw = await read_request(reader)
            await self._handle(method, path, headers, raw, writer)
        except (BadRequest, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            with contextlib.suppress(ConnectionError):
                await self._write_json(writer, 400, self._error_body(400, f"bad request: {exc}"))
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes]:
    """(method, path, lower-cased headers, body) of one request; chunked bodies are joined."""
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > MAX_HEADER_BYTES:
        raise BadRequest("headers too large")
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, path, _version = lines[0].split(" ", 2)
    except ValueError:
        raise BadRequest(f"request line {lines[0]!r}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0].strip() or b"0", 16):
            if len(body) + size > MAX_BODY_BYTES:
                raise BadRequest("body too large")
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        await reader.readuntil(b"\r\n")
        return method, path, headers, bytes(body)
    length = int(headers.get("content-length") or 0)
    if length > MAX_BODY_BYTES:
        raise BadRequest("body too large")
    return method, path, headers, await reader.readexactly(length)


def decode_json(raw: bytes) -> dict[str, Any]:
    """A JSON object body; anything else is kept under ``_raw`` or ``_json`` for the test."""
    if not raw:
        return {}
    try:
        decoded = json.loads(raw)
    except ValueError:
        return {"_raw": raw[:2000].decode("utf-8", "replace")}
    return decoded if isinstance(decoded, dict) else {"_json": decoded}


def _status_line(status: int) -> str:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:  # 529 and other codes only some APIs use
        reason = "Error"
    return f"HTTP/1.1 {status} {reason}\r\n"


def _header_lines(headers: Mapping[str, str]) -> str:
    return "".join(f"{name}: {value}\r\n" for name, value in headers.items())


async def write_json(
    writer: asyncio.StreamWriter, status: int, obj: Any, *, headers: Mapping[str, str] = {}
) -> None:
    data = json.dumps(obj).encode()
    writer.write(
        f"{_status_line(status)}Content-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n{_header_lines(headers)}Connection: close\r\n\r\n".encode()
        + data
    )
    await writer.drain()


async def write_sse(
    writer: asyncio.StreamWriter,
    events: Iterable[dict[str, Any]],
    *,
    headers: Mapping[str, str] = {},
) -> None:
    """A 200 event stream, one ``event: <type>`` per event, drained after each."""
    writer.write(
        f"{_status_line(200)}Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        f"{_header_lines(headers)}Connection: close\r\n\r\n".encode()
    )
    for event in events:
        writer.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        await writer.drain()
