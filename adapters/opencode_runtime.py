"""``opencode serve`` as a running agent: the process, its HTTP API and its event stream.

    settings = OpenCodeSettings(command=["opencode"], cwd=work_dir, env=env)
    async with OpenCodeAgent(settings) as agent:       # listening, events subscribed,
        await agent.send(Prompt(text="..."))           #   session created (or resumed)
        async for event in agent.events():             # ... ends after AgentExited
            ...

Managed mode: one ``opencode serve --hostname 127.0.0.1 --port N`` per session epoch,
through ``adapters/stdio.py`` (its own process group; pid, group and start time
recorded, so a leftover is ended like any agent). The port is picked here (1.18.33 was seen
listening on 4096 with ``--port 0``) and checked against its "listening on" line. A fresh
``OPENCODE_SERVER_PASSWORD`` guards it (basic auth, user ``opencode``), never logged or put in
argv. ``GET /event`` is subscribed, and its first ``server.connected`` seen, before the
session is created, so that no event of ours is missed.

Attached mode (``OpenCodeSettings.attach_url``): a server someone else runs, with the password
it was given. Nothing is started and nothing is ever signalled: :meth:`OpenCodeAgent.stop`
only lets go of it (``AgentExited(reason="detached")``), and the server's requests outlive the
gateway. A resumed session is reconciled at once (``GET /permission``, ``GET /question``,
``GET /session/status``), so that the requests it still lists are known and can be answered.

If the event stream breaks while the server lives, it is opened again and what was missed is
reconciled (``GET /permission``, ``GET /question``, ``GET /session/status``;
:meth:`adapters.opencode.OpenCodeCodec.reconcile`). When the process ends, ``AgentExited``
is the last event. Ownership (STYLE.md, principle 4): the process belongs to the ``async with``
block; the stdout drain, the event stream and the exit watcher are tasks of its TaskGroup.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import aiohttp

from adapters.opencode import (
    HttpRequest,
    OpenCodeCodec,
    SseDecoder,
    basic_auth,
    listed_keys,
    matching_saved,
    models_offered,
    parse_listening_line,
    remove_saved,
    saved_permissions,
)
from adapters.stdio import DEFAULT_STOP_GRACE_SECONDS, AgentProcess, ExitStatus, ProcessSpec
from gateway.errors import AgentError, AgentExitedError, AgentStartError, HandshakeTimeout
from gateway.events import (
    DETACHED,
    AgentCommand,
    AgentEvent,
    AgentExited,
    Capabilities,
    ModelsOffered,
    SessionStarted,
    Warning,
)

__all__ = [
    "OpenCodeAgent",
    "OpenCodeSettings",
    "free_loopback_port",
    "serve_argv",
    "still_asked",
]

log = logging.getLogger(__name__)

DEFAULT_EVENT_BUFFER = 1024
RECONNECT_ATTEMPTS = 20
RECONNECT_PAUSE = 0.2  # seconds between attempts: the server is alive, the stream hiccupped
SERVE_ATTEMPTS = 3
MCP_LET_GO_SECONDS = 5.0  # an attached server's answer to letting go of a session's tool
# what opencode 1.18.33 prints when Bun cannot listen on the port it was given (in use)
BIND_FAILED = "ServeError"


def free_loopback_port() -> int:
    """A port free on 127.0.0.1 now (the kernel's pick), for the server to listen on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve_argv(command: Sequence[str], port: int) -> list[str]:
    return [*command, "serve", "--hostname", "127.0.0.1", "--port", str(port)]


@dataclass(frozen=True, kw_only=True)
class OpenCodeSettings:
    command: Sequence[str]
    cwd: str | Path
    env: Mapping[str, str]
    resume_session_id: str | None = None
    handshake_timeout: float = 60.0
    stop_grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS
    event_buffer: int = DEFAULT_EVENT_BUFFER
    # attached mode: the URL of a server the gateway neither starts nor ends (command unused)
    attach_url: str | None = None
    # tools a new session's rules allow (the gateway's own send_file): asked nothing of
    allowed_tools: tuple[str, ...] = ()
    # and deny (patterns: the send_file tools of the gateway's other sessions)
    denied_tools: tuple[str, ...] = ()
    # attached mode: the MCP server to add at runtime (``POST /mcp`` ``{name, config}``),
    # since the gateway does not start that server and cannot give it in its config
    added_mcp: Mapping[str, object] | None = None


class OpenCodeAgent:
    """One ``opencode serve`` process and one session on it, for one ``async with``."""

    def __init__(
        self,
        settings: OpenCodeSettings,
        *,
        password: str | None = None,
        tap: Callable[[str, object], None] | None = None,
    ) -> None:
        """``tap(direction, message)`` sees every request made (``">>"``), every answer and
        every event (``"<<"``): the transcript recorder's seam. Never the password."""
        self.settings = settings
        self._tap = tap
        self.codec = OpenCodeCodec(
            resume_session_id=settings.resume_session_id,
            allowed_tools=settings.allowed_tools,
            denied_tools=settings.denied_tools,
        )
        self._password = password or secrets.token_urlsafe(24)
        self._events: asyncio.Queue[AgentEvent] = asyncio.Queue(maxsize=settings.event_buffer)
        self._stack: contextlib.AsyncExitStack | None = None
        self._proc: AgentProcess | None = None
        self._http: aiohttp.ClientSession | None = None
        self._connected = asyncio.Event()
        self._base_url = ""
        self._session: SessionStarted | None = None
        self._exit_queued = False
        self._exit_delivered = False
        self._stopping = False
        self._stream_task: asyncio.Task[None] | None = None
        self._owned: list[asyncio.Task[None]] = []
        self.exit_status: ExitStatus | None = None
        self.stream_breaks = 0  # how often the event stream was opened again
        self._stream_error = ""  # why it last broke

    # --- what the core reads ---------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return self.codec.capabilities

    @property
    def started(self) -> SessionStarted:
        if self._session is None:
            raise AgentExitedError("the OpenCode session has not started")
        return self._session

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def pgid(self) -> int | None:
        return self._proc.pgid if self._proc else None

    @property
    def start_time(self) -> int | None:
        return self._proc.start_time if self._proc else None

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise RuntimeError("an OpenCodeAgent is entered once")
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            if self.settings.attach_url is not None:
                await self._attach(stack, self.settings.attach_url)
                self._stack = stack
                return self
            proc = await self._serve(stack)
            self._http = await stack.enter_async_context(self._client())
            tasks = await stack.enter_async_context(asyncio.TaskGroup())
            stack.callback(self._cancel_tasks)  # runs first: they may wait on a full queue
            self._owned = [
                tasks.create_task(self._drain_stdout(proc), name=f"opencode-{proc.pid}-stdout"),
                tasks.create_task(self._stream(), name=f"opencode-{proc.pid}-sse"),
                tasks.create_task(self._watch_exit(proc), name=f"opencode-{proc.pid}-exit"),
            ]
            self._stream_task = self._owned[1]
            await self._handshake()
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stopping = True
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()
        self._queue_exit_nowait("stopped")

    async def _attach(self, stack: contextlib.AsyncExitStack, url: str) -> None:
        """Reach a server someone else runs: its events, then the session (a resumed one
        reconciled at once: what it still asks is known before anything is sent)."""
        self._base_url = url.rstrip("/")
        self._http = await stack.enter_async_context(self._client())
        tasks = await stack.enter_async_context(asyncio.TaskGroup())
        stack.callback(self._cancel_tasks)
        self._owned = [tasks.create_task(self._stream(), name=f"opencode-{url}-sse")]
        self._stream_task = self._owned[0]
        if await self._add_mcp():
            # let go of with the session (before the client closes: the stack runs it first)
            stack.push_async_callback(self._disconnect_mcp)
        await self._handshake()
        if self.settings.resume_session_id is not None:
            try:
                self.codec.known_history(
                    await self._call(
                        HttpRequest(
                            method="GET",
                            path=f"/session/{self.settings.resume_session_id}/message",
                            purpose="read the session's messages",
                        )
                    )
                )
                await self._reconcile()
            except AgentError as exc:
                raise AgentStartError(str(exc)) from exc

    async def _add_mcp(self) -> bool:
        """Give the attached server the gateway's MCP server (on attach and on resume alike:
        the token is this epoch's); whether it took it. A server that refuses is said once,
        in the log and as the session's notice, and the session goes on without the tool."""
        added = self.settings.added_mcp
        if added is None:
            return False
        name = str(added.get("name"))
        request = HttpRequest(
            method="POST", path="/mcp", body=dict(added), purpose="add the send_file MCP server"
        )
        try:
            answer = await self._call(request)
            status = answer.get(name) if isinstance(answer, dict) else None
            state = status.get("status") if isinstance(status, dict) else None
            if state != "connected":
                why = status.get("error") if isinstance(status, dict) else None
                raise AgentError(f"opencode did not start it ({why or state or 'no status'})")
        except AgentError as exc:
            text = (
                "the attached OpenCode server was not given the send_file tool, so this "
                f"session cannot send files: {exc}"
            )
            log.warning("opencode %s: %s", self._base_url, text)
            await self._events.put(Warning(message=text, code="send_file_unavailable"))
            return False
        return True

    async def _disconnect_mcp(self) -> None:
        """The attached server lets go of this session's MCP server (``POST
        /mcp/{name}/disconnect``): an ended session's tool, whose token no longer opens
        anything, is not left connected on a server that outlives it. Best effort: a server
        that does not answer in MCP_LET_GO_SECONDS keeps it (said in the log)."""
        added = self.settings.added_mcp
        if added is None or self._http is None:
            return
        name = str(added.get("name"))
        request = HttpRequest(
            method="POST",
            path=f"/mcp/{quote(name, safe='')}/disconnect",
            purpose="let go of the send_file MCP server",
        )
        try:
            async with asyncio.timeout(MCP_LET_GO_SECONDS):
                await self._call(request)
        except (AgentError, TimeoutError) as exc:
            log.info("opencode %s: %s left connected (%s)", self._base_url, name, exc)

    @property
    def attached(self) -> bool:
        return self.settings.attach_url is not None

    def _client(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            headers={"Authorization": basic_auth(self._password)},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )

    def _cancel_tasks(self) -> None:
        for task in self._owned:
            task.cancel()

    async def _stop_process(self) -> None:
        if self._proc is not None:
            self.exit_status = await self._proc.stop()

    async def _serve(self, stack: contextlib.AsyncExitStack) -> AgentProcess:
        """``opencode serve`` listening on a free port of ours, its stop on ``stack``. The
        port is free when picked, not when opencode binds it (any process's connection may
        take it as its own port meanwhile): a server that could not bind is started again on
        another port, :data:`SERVE_ATTEMPTS` times at most."""
        for attempt in range(1, SERVE_ATTEMPTS + 1):
            port = free_loopback_port()
            spec = ProcessSpec(
                argv=serve_argv(self.settings.command, port),
                cwd=self.settings.cwd,
                env={**self.settings.env, "OPENCODE_SERVER_PASSWORD": self._password},
                stop_grace_seconds=self.settings.stop_grace_seconds,
                eof_grace_seconds=0,  # a server does not read stdin: EOF cannot end it
            )
            tried = contextlib.AsyncExitStack()
            await tried.__aenter__()
            try:
                self._proc = proc = await tried.enter_async_context(AgentProcess.spawn(spec))
                tried.push_async_callback(self._stop_process)
                self._base_url = await self._await_listening(proc, port)
            except _PortTaken as exc:
                await tried.aclose()
                if attempt == SERVE_ATTEMPTS:
                    raise AgentStartError(str(exc)) from None
                log.info("opencode serve could not bind port %d; trying another", port)
                continue
            except BaseException:
                await tried.aclose()
                raise
            stack.push_async_exit(tried)
            return proc
        raise AssertionError("unreachable")

    async def _await_listening(self, proc: AgentProcess, port: int) -> str:
        """The URL of its "listening on" line, which must name the port it was given."""
        try:
            async with asyncio.timeout(self.settings.handshake_timeout):
                while (line := await proc.read_line()) is not None:
                    url = parse_listening_line(line.decode("utf-8", "replace"))
                    if url is None:
                        continue
                    if url != f"http://127.0.0.1:{port}":
                        raise AgentStartError(f"opencode listens on {url}, not on port {port}")
                    return url
        except TimeoutError as exc:
            raise HandshakeTimeout(
                f"opencode serve was not listening within {self.settings.handshake_timeout:g} s"
                + _tail(proc)
            ) from exc
        status = await proc.stop()
        said = f"opencode serve ended before it listened: {status.describe()}" + _tail(proc)
        if BIND_FAILED in proc.stderr_tail():
            raise _PortTaken(said)
        raise AgentStartError(said)

    async def _handshake(self) -> None:
        try:
            async with asyncio.timeout(self.settings.handshake_timeout):
                await self._connected.wait()
                if self._exit_queued:
                    why = f": {self._stream_error}" if self._stream_error else ""
                    raise AgentStartError(f"opencode ended before its events could be read{why}")
                opened = await self._call(self.codec.open_session())
        except TimeoutError as exc:
            raise HandshakeTimeout("opencode did not open its event stream in time") from exc
        except AgentError as exc:
            raise AgentStartError(str(exc)) from exc
        self._session = self.codec.created(opened)
        await self._learn_models()

    async def _learn_models(self) -> None:
        """Which model is in use and whether it takes pictures (issue 32), and the models
        /model may pick (issue 31); a server that does not say gets files named in the
        prompt, pictures included, and the project's list of models trusted."""
        config_request, providers_request = self.codec.models_requests()
        try:
            async with asyncio.timeout(self.settings.handshake_timeout):
                config = await self._call(config_request)
                providers = await self._call(providers_request)
        except (AgentError, TimeoutError) as exc:
            log.info("opencode: the models were not read (%s): pictures go as files", exc)
            return
        self.codec.learn_models(config, providers)
        offered = models_offered(providers)
        if offered:
            await self._events.put(ModelsOffered(models=offered))

    # --- events ---------------------------------------------------------------------------

    async def next_event(self) -> AgentEvent:
        if self._exit_delivered:
            raise AgentExitedError("the OpenCode server has ended")
        event = await self._events.get()
        if isinstance(event, AgentExited):
            self._exit_delivered = True
        return event

    async def events(self) -> AsyncIterator[AgentEvent]:
        while not self._exit_delivered:
            yield await self.next_event()

    async def send(self, command: AgentCommand) -> None:
        """Perform the command's requests; AgentError (its delivery failed) if refused."""
        if self._exit_queued or self._http is None:
            raise AgentExitedError("the OpenCode server has ended")
        requests, events = self.codec.request_for(command)
        for event in events:
            await self._events.put(event)
        for request in requests:
            try:
                await self._call(request)
            except AgentError as exc:
                if request.path.endswith("/prompt_async") or request.waits_for_work:
                    for event in self.codec.prompt_refused(str(exc)):
                        await self._events.put(event)
                if request.waits_for_work:
                    return  # a compaction refused is its turn's failure, said as such
                raise

    async def remove_saved_permissions(
        self, permission: str | None, resources: Sequence[str]
    ) -> list[str]:
        """Delete the server's saved permissions allowing ``permission`` on one of
        ``resources`` (gateway.sessions.agents.SavesPermissions); the ids deleted."""
        if self._exit_queued or self._http is None:
            raise AgentExitedError("the OpenCode server has ended")
        listed = await self._call(saved_permissions())
        found = matching_saved(listed, permission, resources)
        for saved_id in found:
            await self._call(remove_saved(saved_id))
        return found

    async def stop(self) -> None:
        """End the server now (its group: TERM, then KILL); AgentExited follows. An attached
        server is only let go of (``reason="detached"``): it is not ours to end."""
        self._stopping = True
        if self.attached:
            if self._stream_task is not None:
                self._stream_task.cancel()
            self._queue_exit_nowait(DETACHED)
            return
        await self._stop_process()

    async def _call(self, request: HttpRequest) -> Any:
        assert self._http is not None
        url = self._base_url + request.path
        if self._tap is not None:
            self._tap(">>", {"method": request.method, "path": request.path, "body": request.body})
        try:
            async with self._http.request(
                request.method,
                url,
                json=request.body,
                timeout=aiohttp.ClientTimeout(total=None if request.waits_for_work else 30),
            ) as response:
                raw = await response.read()
                if response.status >= 400:
                    text = raw.decode("utf-8", "replace")[:300]
                    raise AgentError(
                        f"opencode refused to {request.purpose or request.path}: "
                        f"HTTP {response.status} {text}"
                    )
        except (aiohttp.ClientError, OSError) as exc:  # TimeoutError is an OSError
            raise AgentError(
                f"could not reach opencode to {request.purpose or request.path}: {exc!r}"
            ) from exc
        try:
            answer = json.loads(raw) if raw else None
        except ValueError as exc:
            raise AgentError(f"opencode answered {request.path} with no JSON") from exc
        if self._tap is not None:
            self._tap("<<", {"status": response.status, "path": request.path, "body": answer})
        return answer

    async def _stream(self) -> None:
        """Read ``GET /event`` for as long as the server lives, reopening it if it breaks."""
        attempts = 0
        first = True
        while not self._stopping and not self._exit_queued:
            try:
                await self._read_stream(first)
                attempts = 0
            except (aiohttp.ClientError, OSError, ValueError, AgentError) as exc:
                # OSError: a socket aborted under aiohttp's reader is not always translated
                log.debug("opencode event stream broke: %r", exc)
                self._stream_error = str(exc)
                attempts += 1
            if self._stopping or self._exit_queued:
                return
            if self._proc is not None and not self._proc.running:
                return  # the exit watcher says how it ended
            if self._proc is None and not self.attached:
                return
            never_opened = self.attached and attempts and not self._connected.is_set()
            if attempts > RECONNECT_ATTEMPTS or never_opened:
                # (an attached server that never opened its stream: the handshake says so)
                if self._connected.is_set():
                    await self._events.put(
                        Warning(message="the OpenCode event stream could not be reopened")
                    )
                self._connected.set()
                await self.stop()
                return
            first = False
            self.stream_breaks += 1
            await asyncio.sleep(RECONNECT_PAUSE if attempts else 0)

    async def _read_stream(self, first: bool) -> None:
        assert self._http is not None
        decoder = SseDecoder()
        async with self._http.get(
            self._base_url + "/event", headers={"Accept": "text/event-stream"}
        ) as response:
            if response.status != 200:
                raise AgentError(f"opencode refused its event stream: HTTP {response.status}")
            async for chunk in response.content.iter_any():
                for item in decoder.feed(chunk):
                    if self._tap is not None:
                        self._tap("<<", {"event": item})
                    if isinstance(item, dict) and item.get("type") == "server.connected":
                        if first:
                            self._connected.set()
                        else:
                            await self._reconcile()
                        continue
                    for event in self.codec.feed_event(item):
                        await self._events.put(event)

    async def _reconcile(self) -> None:
        permissions = await self._call(
            HttpRequest(method="GET", path="/permission", purpose="list permissions")
        )
        questions = await self._call(
            HttpRequest(method="GET", path="/question", purpose="list questions")
        )
        statuses = await self._call(
            HttpRequest(method="GET", path="/session/status", purpose="read the session status")
        )
        messages = None
        if self.codec.turn_running and self.codec.session_id is not None:
            # what the turn said and did while no events came (it may even have ended)
            messages = await self._call(
                HttpRequest(
                    method="GET",
                    path=f"/session/{self.codec.session_id}/message",
                    purpose="read the turn's messages",
                )
            )
        for event in self.codec.reconcile(permissions, questions, statuses, messages):
            await self._events.put(event)

    async def _drain_stdout(self, proc: AgentProcess) -> None:
        # The server logs to stdout now and then: read it so that it never blocks on a pipe.
        with contextlib.suppress(AgentError):
            while await proc.read_line() is not None:
                pass

    async def _watch_exit(self, proc: AgentProcess) -> None:
        status = await proc.wait()
        self.exit_status = status
        self._connected.set()  # a handshake waiting for the stream must not wait on
        reason = "stopped" if self._stopping else ("killed" if status.signal else "exited")
        if not self._exit_queued:
            self._exit_queued = True
            await self._events.put(
                AgentExited(code=status.code, stderr_tail=status.stderr_tail, reason=reason)
            )
        if self._stream_task is not None:
            self._stream_task.cancel()

    def _queue_exit_nowait(self, reason: str) -> None:
        if self._exit_queued:
            return
        self._exit_queued = True
        status = self.exit_status
        final = AgentExited(
            code=status.code if status else None,
            stderr_tail=status.stderr_tail if status else "",
            reason=reason,
        )
        with contextlib.suppress(asyncio.QueueFull):
            self._events.put_nowait(final)


async def still_asked(url: str, password: str, session_id: str) -> frozenset[str]:
    """The native keys of the requests an attached server still lists for the session
    (``GET /permission``, ``GET /question``; ``GET /session/status`` proves the session's
    server answers). AgentError if the server cannot be asked."""
    base = url.rstrip("/")
    timeout = aiohttp.ClientTimeout(total=10)
    headers = {"Authorization": basic_auth(password)}
    listed: list[object] = []
    try:
        async with aiohttp.ClientSession(headers=headers, timeout=timeout) as http:
            for path in ("/permission", "/question", "/session/status"):
                async with http.get(base + path) as response:
                    if response.status >= 400:
                        status = response.status
                        raise AgentError(f"opencode at {base} refused {path}: HTTP {status}")
                    listed.append(await response.json(content_type=None))
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        raise AgentError(f"could not reach opencode at {base}: {exc!r}") from exc
    return listed_keys(listed[0], listed[1], session_id)


class _PortTaken(AgentStartError):
    """opencode serve could not bind the port it was given (taken since it was picked)."""


def _tail(proc: AgentProcess) -> str:
    tail = proc.stderr_tail().strip()[-500:]
    return f"; stderr ends with: {tail}" if tail else ""
