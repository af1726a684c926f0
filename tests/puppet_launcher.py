"""An agent the test moves by hand, behind the engine's launcher seam (``gateway.sessions.agents``).

Each prompt the gateway sends is handed to the test (:meth:`PuppetLauncher.prompt`), which
then makes the agent do exactly what it wants, in the engine's own events and at its own
moments: start the turn, stream text, run a tool, ask, complete. What a real agent would
not let a test time (a turn that has started and says nothing yet; text in the middle of a
429 storm) is what this is for. ``/stop`` (Interrupt) ends the turn as interrupted; an
answer to a request is kept in ``received`` and closes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from gateway.config.model import ProjectConfig
from gateway.domain import Decision, InteractionRequest, Resolution, TurnStatus
from gateway.events import (
    AgentCommand,
    AgentEvent,
    AgentExited,
    AgentMessage,
    Capabilities,
    InteractionClosed,
    InteractionOpened,
    Interrupt,
    Prompt,
    Respond,
    SessionStarted,
    Steer,
    TextDelta,
    ToolActivity,
    ToolKind,
    ToolPhase,
    TurnCompleted,
    TurnStarted,
)
from gateway.sessions.agents import GatewayMcpServer

__all__ = ["PuppetAgent", "PuppetLauncher"]


class PuppetAgent:
    pid: int | None = None
    pgid: int | None = None
    start_time: int | None = None

    def __init__(
        self,
        prompts: asyncio.Queue[tuple[PuppetAgent, str]],
        steers: asyncio.Queue[Steer] | None = None,
    ) -> None:
        self._prompts = prompts
        self._steers = steers  # None: the agent takes no text into a running turn
        self._events: asyncio.Queue[AgentEvent] = asyncio.Queue()
        self.received: list[Decision] = []
        self._ended = False

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            interactive_questions=True,
            human_approval=True,
            interrupt=True,
            steer=self._steers is not None,
        )

    @property
    def started(self) -> SessionStarted:
        return SessionStarted(native_id="puppet-thread", agent_version="puppet 1")

    # --- the gateway's side ---------------------------------------------------------------

    async def send(self, command: AgentCommand) -> None:
        match command:
            case Prompt(text=text):
                self._prompts.put_nowait((self, text))
            case Respond(native_key=key, decision=decision):
                self.received.append(decision)
                self.emit(InteractionClosed(native_key=key, how=Resolution.ANSWERED))
            case Interrupt():
                self.emit(TurnCompleted(status=TurnStatus.INTERRUPTED))
            case Steer() if self._steers is not None:
                self._steers.put_nowait(command)
            case _:
                pass

    async def events(self) -> AsyncIterator[AgentEvent]:
        while True:
            event = await self._events.get()
            yield event
            if isinstance(event, AgentExited):
                return

    async def stop(self) -> None:
        if not self._ended:
            self._ended = True
            self.emit(AgentExited(code=0, reason="stopped"))

    # --- the test's side ------------------------------------------------------------------

    def emit(self, *events: AgentEvent) -> None:
        for event in events:
            self._events.put_nowait(event)

    def start_turn(self) -> None:
        self.emit(TurnStarted(turn_native_id="puppet-turn"))

    def say(self, item_id: str, *deltas: str) -> None:
        self.emit(*(TextDelta(item_id=item_id, text=delta) for delta in deltas))

    def said(self, item_id: str, text: str) -> None:
        self.emit(AgentMessage(item_id=item_id, text=text))

    def run_tool(self, item_id: str, command: str, *, done: bool = False) -> None:
        phase = ToolPhase.COMPLETED if done else ToolPhase.STARTED
        self.emit(
            ToolActivity(
                item_id=item_id,
                tool=ToolKind.COMMAND,
                phase=phase,
                title=command,
                exit_code=0 if done else None,
                status="completed" if done else None,
            )
        )

    def ask(self, request: InteractionRequest) -> None:
        self.emit(InteractionOpened(request=request))

    def complete(self, status: TurnStatus = TurnStatus.COMPLETED) -> None:
        self.emit(TurnCompleted(status=status, turn_native_id="puppet-turn"))

    def crash(self) -> None:
        self._ended = True
        self.emit(AgentExited(code=1, reason="exited", stderr_tail="panic: puppet"))


class PuppetLauncher:
    def __init__(self, *, steers: bool = False) -> None:
        self._prompts: asyncio.Queue[tuple[PuppetAgent, str]] = asyncio.Queue()
        # steers: its agents take text into a running turn, handed to the test (steered())
        self._steers: asyncio.Queue[Steer] | None = asyncio.Queue() if steers else None
        self.starts = asyncio.Event()  # cleared: an agent being started waits (hold/release)
        self.starts.set()

    def hold(self) -> None:
        """Agents being started wait until :meth:`release` (a session with no turn yet)."""
        self.starts.clear()

    def release(self) -> None:
        self.starts.set()

    async def prompt(self, deadline: float = 30.0) -> tuple[PuppetAgent, str]:
        """The next prompt the gateway sent, and the agent it was sent to."""
        async with asyncio.timeout(deadline):
            return await self._prompts.get()

    async def steered(self, deadline: float = 30.0) -> Steer:
        """The next text the gateway gave a running turn (a launcher made with steers)."""
        assert self._steers is not None
        async with asyncio.timeout(deadline):
            return await self._steers.get()

    @asynccontextmanager
    async def launch(
        self,
        project: ProjectConfig,
        *,
        resume_native_id: str | None,
        mcp_server: GatewayMcpServer | None = None,
    ) -> AsyncIterator[PuppetAgent]:
        await self.starts.wait()
        agent = PuppetAgent(self._prompts, self._steers)
        try:
            yield agent
        finally:
            await agent.stop()

    async def end_leftover(self, *, pid: int, pgid: int | None, start_time: int | None) -> str:
        return "nothing to end (puppet agent)"
