"""An in-process agent behind the engine's launcher seam, for what no real agent asks.

The real Codex never asks a multi-select question; Claude Code does. Until a test can run
Claude here, :class:`ScriptedLauncher` stands in at the engine's injected seam
(``gateway.sessions.agents.AgentLauncher``), speaking the engine's own events: a prompt that names
one of its ``requests`` opens that request and waits for the answer; any other prompt is
answered "echo: <prompt>" (and a line per image it was given). Every decision it receives is
kept in ``received``, every prompt in ``prompts``, and the message it sends back says only
how many answers came (a secret must never reach the chat).

Its writes behave as a real runtime's (adapters/runtime.py): the codec takes the answer (a
second answer to one request is AlreadyAnswered, one to a closed request RequestClosed)
before the write is awaited. A test may hold writes at that point (``writes.hold()``: each
waiting write sets ``writes.waiting``) or make them fail (``writes.fail_with``).

A prompt that names one of its ``streams`` is answered in parts (``TextDelta``), the whole
text last; after the first part the agent waits until the test opens ``launcher.go_on``
(a text is shown, then edited as it grows); after the last part it ends the turn once
``launcher.may_end`` is open (it is, unless a test closes it: a turn still running after all
its text came); ``launcher.turn_over`` is set once the gateway has taken a turn's end (its
final text flushed) and asks for more.

``on_stop``, if given, is awaited when an agent is told to stop (the gateway stopping, or the
last resort of /stop), before it exits: what happens while a gateway shuts down.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager

from gateway.config.model import ProjectConfig
from gateway.domain import Decision, InteractionRequest, Resolution, TurnStatus
from gateway.errors import AgentError, AlreadyAnswered, RequestClosed
from gateway.events import (
    AgentCommand,
    AgentEvent,
    AgentExited,
    AgentMessage,
    Capabilities,
    InteractionClosed,
    InteractionOpened,
    NameSession,
    Prompt,
    Respond,
    SessionNamed,
    SessionStarted,
    TextDelta,
    TurnCompleted,
    TurnStarted,
)
from gateway.sessions.agents import GatewayMcpServer

__all__ = ["ScriptedAgent", "ScriptedLauncher", "Writes"]

_turns = itertools.count(1)


def _opened() -> asyncio.Event:
    event = asyncio.Event()
    event.set()
    return event


class Writes:
    """What happens to an answer between the codec and the agent."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.open.set()
        self.waiting = asyncio.Event()  # a write waits at the held gate
        self.fail_with: str | None = None  # each write fails with this error

    def hold(self) -> None:
        self.open.clear()

    def release(self) -> None:
        self.open.set()


class ScriptedAgent:
    def __init__(
        self,
        requests: Mapping[str, InteractionRequest],
        received: list[Decision],
        writes: Writes | None = None,
        on_stop: Callable[[], Awaitable[None]] | None = None,
        streams: Mapping[str, tuple[str, ...]] | None = None,
        go_on: asyncio.Event | None = None,
        turn_over: asyncio.Event | None = None,
        may_end: asyncio.Event | None = None,
        native_id: str = "scripted-thread",
        names: list[str] | None = None,
        prompts: list[Prompt] | None = None,
        pictures: bool = False,
    ):
        self._prompts = prompts if prompts is not None else []
        self._pictures = pictures
        self._native_id = native_id
        self._names = names if names is not None else []
        self._requests = requests
        self._streams = streams or {}
        self._go_on = go_on or asyncio.Event()
        self._turn_over = turn_over or asyncio.Event()
        self._may_end = may_end or _opened()
        self._received = received
        self._writes = writes or Writes()
        self._on_stop = on_stop
        self._events: asyncio.Queue[AgentEvent | asyncio.Event] = asyncio.Queue()
        self._asked: dict[str, str] = {}  # native key → turn id
        self._answered: set[str] = set()
        self._ended = False

    pid: int | None = None
    pgid: int | None = None
    start_time: int | None = None

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            interactive_questions=True,
            human_approval=True,
            interrupt=True,
            pictures=self._pictures,
            names_sessions=True,
        )

    @property
    def started(self) -> SessionStarted:
        return SessionStarted(native_id=self._native_id, agent_version="scripted 1")

    async def send(self, command: AgentCommand) -> None:
        match command:
            case Prompt(text=text, images=images):
                self._prompts.append(command)
                turn = f"turn-{next(_turns)}"
                await self._events.put(TurnStarted(turn_native_id=turn))
                parts = self._streams.get(text.strip())
                if parts is not None:
                    await self._stream(turn, parts)
                    return
                request = self._requests.get(text.strip())
                if request is None:
                    seen = "".join(f"\n[image: {i.name}, {i.media_type}]" for i in images)
                    await self._finish(turn, f"echo: {text}{seen}")
                    return
                self._asked[request.native_key] = turn
                await self._events.put(InteractionOpened(request=request))
            case Respond(native_key=key, decision=decision):
                if key in self._answered:
                    raise AlreadyAnswered(f"request {key!r} was already answered")
                if key not in self._asked:
                    raise RequestClosed(f"no open request {key!r} (closed or unknown)")
                if self._writes.fail_with is not None:
                    raise AgentError(self._writes.fail_with)
                self._answered.add(key)  # the codec took it: the bytes are queued
                if not self._writes.open.is_set():
                    self._writes.waiting.set()
                    await self._writes.open.wait()
                self._received.append(decision)
                turn = self._asked.pop(key, "turn-?")
                await self._events.put(InteractionClosed(native_key=key, how=Resolution.ANSWERED))
                await self._finish(turn, f"Thanks: {len(decision.answers)} answer(s) received.")
            case NameSession(name=name):
                self._names.append(name)
                await self._events.put(SessionNamed(name=name))
            case _:
                await self._events.put(TurnCompleted(status=TurnStatus.INTERRUPTED))

    async def _finish(self, turn: str, text: str) -> None:
        await self._events.put(AgentMessage(item_id=f"msg-{turn}", text=text))
        await self._events.put(TurnCompleted(status=TurnStatus.COMPLETED, turn_native_id=turn))

    async def _stream(self, turn: str, parts: tuple[str, ...]) -> None:
        item = f"msg-{turn}"
        await self._events.put(TextDelta(item_id=item, text=parts[0]))
        await self._events.put(self._go_on)  # the stream pauses here until the test goes on
        for part in parts[1:]:
            await self._events.put(TextDelta(item_id=item, text=part))
        await self._events.put(self._may_end)  # the turn ends once the test lets it
        await self._finish(turn, "".join(parts))

    async def events(self) -> AsyncIterator[AgentEvent]:
        while True:
            event = await self._events.get()
            if isinstance(event, asyncio.Event):
                await event.wait()
                continue
            yield event
            if isinstance(event, TurnCompleted):
                self._turn_over.set()  # asked for more: the gateway is done with the turn
            if isinstance(event, AgentExited):
                return

    async def stop(self) -> None:
        if not self._ended:
            self._ended = True
            if self._on_stop is not None:
                await self._on_stop()
            await self._events.put(AgentExited(code=0, reason="stopped"))


class ScriptedLauncher:
    def __init__(
        self,
        requests: Mapping[str, InteractionRequest],
        *,
        on_stop: Callable[[], Awaitable[None]] | None = None,
        streams: Mapping[str, tuple[str, ...]] | None = None,
        pictures: bool = False,
    ) -> None:
        self.requests = dict(requests)
        self.pictures = pictures  # its agents take pictures as images (Prompt.images)
        self.prompts: list[Prompt] = []  # every prompt its agents were given, in order
        self.streams = dict(streams or {})
        self.go_on = asyncio.Event()
        self.turn_over = asyncio.Event()  # set once the gateway is done with a turn
        self.may_end = _opened()  # closed: a streamed turn waits after its last part
        self.received: list[Decision] = []
        self.writes = Writes()
        self.on_stop = on_stop
        # the native id each start was asked to resume (None: a new session), in order
        self.resumed: list[str | None] = []
        self.named: list[str] = []  # the names its agents were given (/name), in order
        self._threads = itertools.count(1)

    @asynccontextmanager
    async def launch(
        self,
        project: ProjectConfig,
        *,
        resume_native_id: str | None,
        mcp_server: GatewayMcpServer | None = None,
    ) -> AsyncIterator[ScriptedAgent]:
        self.resumed.append(resume_native_id)
        agent = ScriptedAgent(
            self.requests,
            self.received,
            self.writes,
            self.on_stop,
            streams=self.streams,
            go_on=self.go_on,
            turn_over=self.turn_over,
            may_end=self.may_end,
            # a resumed session keeps its native id; a new one has its own
            native_id=resume_native_id or f"scripted-thread-{next(self._threads)}",
            names=self.named,
            prompts=self.prompts,
            pictures=self.pictures,
        )
        try:
            yield agent
        finally:
            await agent.stop()

    async def end_leftover(self, *, pid: int, pgid: int | None, start_time: int | None) -> str:
        return "nothing to end (scripted agent)"
