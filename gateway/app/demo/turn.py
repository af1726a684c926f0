"""One turn of the demo agent: what a scenario may do, written as codex 0.171 writes it.

A scenario (:mod:`gateway.app.demo.scenarios`) is a coroutine over a :class:`Turn`: it streams
agent messages (:meth:`Turn.say`), announces and completes tool items, and blocks on server
requests (:meth:`Turn.ask`) until the client answers. The agent (:mod:`gateway.app.demo.agent`)
owns the turn's lifecycle: it cancels the scenario on ``turn/interrupt`` and then reports the
turn ``interrupted``, followed by ``serverRequest/resolved`` for every request still open,
in that order (transcript interrupt_pending_approval).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field

from gateway.app.demo.wire import Json, Wire, agent_message_item, now_ms

__all__ = ["Memory", "Turn", "TurnCancelled"]

_WORDS = re.compile(r"\S+\s*|\s+")


class TurnCancelled(Exception):
    """The person chose "cancel" (deny and stop): the turn ends ``interrupted``."""


@dataclass(kw_only=True, slots=True)
class Memory:
    """What the agent remembers for the life of its process (codex keeps its rules on disk;
    the demo keeps them here, so a restarted demo agent asks again)."""

    command_rules: set[tuple[str, ...]] = field(default_factory=set)  # execpolicy amendments
    session_paths: set[str] = field(default_factory=set)  # files approved "for the session"
    messages: int = 0
    calls: int = 0

    def next_message_id(self) -> str:
        self.messages += 1
        return f"msg_{self.messages}"

    def next_call_id(self) -> str:
        self.calls += 1
        return f"call_{self.calls}"


class Turn:
    def __init__(
        self,
        wire: Wire,
        memory: Memory,
        *,
        thread_id: str,
        turn_id: str,
        cwd: str,
        prompt: str,
        pace: float,
        mode: str | None = None,
    ) -> None:
        self.wire = wire
        self.memory = memory
        self.thread_id = thread_id
        self.id = turn_id
        self.cwd = cwd
        self.prompt = prompt
        self.mode = mode  # the collaboration mode turn/start asked for ("plan" in plan mode)
        self.pace = pace
        self.started_ms = now_ms()
        self.items: list[Json] = []  # completed agent messages, for turn/completed
        self.open_requests: dict[int, asyncio.Future[Json]] = {}
        self.interrupt_requested = False

    # --- thread items ---------------------------------------------------------------------

    def _where(self) -> Json:
        return {"threadId": self.thread_id, "turnId": self.id}

    def item_started(self, item: Json) -> None:
        started = item.get("startedAtMs") or now_ms()
        self.wire.notify("item/started", {"item": item, **self._where(), "startedAtMs": started})

    def item_completed(self, item: Json) -> None:
        done = item.get("completedAtMs") or now_ms()
        params = {"item": item, **self._where(), "contentTokenCount": None, "completedAtMs": done}
        self.wire.notify("item/completed", params)

    def status(self, *flags: str) -> None:
        """thread/status/changed: active, with waitingOnApproval / waitingOnUserInput."""
        status = {"type": "active", "activeFlags": list(flags)}
        self.wire.notify("thread/status/changed", {"threadId": self.thread_id, "status": status})

    async def pause(self, seconds: float) -> None:
        """Look alive: the demo's only sleeps, scaled by ``--pace``."""
        if seconds > 0 and self.pace > 0:
            await asyncio.sleep(seconds * self.pace)

    async def say(self, text: str, *, chunk: int = 48, delay: float = 0.0) -> None:
        """One agent message: item/started, deltas of about ``chunk`` characters (cut after
        whitespace), item/completed with the whole text (resume.jsonl)."""
        item_id = self.memory.next_message_id()
        started = now_ms()
        self.item_started(agent_message_item(item_id, "", started_ms=started, done=False))
        piece = ""
        for word in _WORDS.findall(text):
            piece += word
            if len(piece) >= chunk:
                await self._delta(item_id, piece, delay)
                piece = ""
        if piece:
            await self._delta(item_id, piece, delay)
        item = agent_message_item(item_id, text, started_ms=started, done=True)
        self.item_completed(item)
        self.items.append(item)

    async def _delta(self, item_id: str, text: str, delay: float) -> None:
        params = {**self._where(), "itemId": item_id, "delta": text}
        self.wire.notify("item/agentMessage/delta", params)
        await self.pause(delay)

    # --- server requests ------------------------------------------------------------------

    async def ask(self, method: str, params: Json, *, waiting: str) -> Json:
        """Send a server request and wait for the client's answer (the JSON-RPC result; an
        error answer comes back as ``{"error": ...}``). Then serverRequest/resolved, as codex
        confirms every answered request (shell_accept)."""
        self.status(waiting)
        request_id = self.wire.request(method, {**self._where(), **params})
        future: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
        self.open_requests[request_id] = future
        result = await future  # on interrupt the agent resolves what is still open
        del self.open_requests[request_id]
        self.wire.notify(
            "serverRequest/resolved", {"threadId": self.thread_id, "requestId": request_id}
        )
        self.status()
        return result

    def answer(self, request_id: int, result: Json) -> bool:
        """The client answered ``request_id``; False if it is not open in this turn."""
        future = self.open_requests.get(request_id)
        if future is None or future.done():
            return False
        future.set_result(result)
        return True
