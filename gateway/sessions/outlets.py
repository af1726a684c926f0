"""Each conversation's outlet: what a session sends there, in order, at its platform's pace.

An :class:`Outlet` is one task per conversation that sends what the session says there in
the order the runner handed it over (a turn's start, its text, notices, the turn's end), at
its own platform's pace. Stream edits go at most once per the platform's
``min_edit_interval_seconds`` (coalesced: the newest text wins, identical edits are skipped),
and a 429 holds that conversation alone for the time its platform asks: another platform's
edits and notices never wait for it (docs/decisions.md, "Each conversation has its own
outlet"). The runner hands work over and goes on; it waits, briefly, only for the text before
a card (:meth:`Outbound.settle`). The final text of a turn is delivered whole, 429s waited out
for up to MAX_RATE_LIMIT_WAIT seconds; then the platform is told that the turn ended
(``Platform.turn_ended``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from gateway.domain import ConversationRef, TurnStatus
from gateway.errors import PlatformError
from gateway.platform import (
    MessageGone,
    MessageRef,
    Platform,
    PlatformUnreachable,
    RateLimited,
    RepliesToMessages,
    gateway_speaking,
)
from gateway.render.commands import spell_commands
from gateway.sessions.outbound import MAX_RATE_LIMIT_WAIT, TurnStream, platform_parts

__all__ = ["MAX_QUEUED", "OUTAGE_WAIT_SECONDS", "Outbound", "Outlet"]

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_QUEUED = 256  # notices waiting in one conversation; past it a notice is dropped (logged)
# How long a turn's end waits for its platform to be back (Inbox.on_platform_back) when its
# final text failed because the platform was unreachable (PlatformUnreachable), before it
# gives up (logged). A refusal gives up at once.
OUTAGE_WAIT_SECONDS = 300.0
ABANDON_SECONDS = 2.0  # telling a platform a turn it showed is gone (the host gave it up)


@dataclass(frozen=True, slots=True)
class _Notice:
    text: str
    after: tuple[TurnStream, int] | None  # the turn's text as it was: shown before it
    reply_to: str | None = None  # the message (a card) it is about, where replies show


@dataclass(frozen=True, slots=True)
class _Start:
    stream: TurnStream


@dataclass(frozen=True, slots=True)
class _Finish:
    stream: TurnStream
    status: TurnStatus


_Op = _Notice | _Start | _Finish


@dataclass(eq=False, slots=True)
class _View:
    """One turn as one conversation shows it: its messages per section."""

    stream: TurnStream
    shown: dict[int, list[tuple[MessageRef | None, str]]] = field(default_factory=dict)
    version: int = 0  # the stream's version shown whole
    mark: tuple[int, int] = (0, 0)  # Timeline.sections_to_show: where the last show got to


@dataclass(eq=False, slots=True)
class _Settling:
    stream: TurnStream
    version: int
    future: asyncio.Future[None]


class Outlet:
    """Everything the core sends to one conversation, in order, at its platform's pace.

    The runner's side never waits (:meth:`notice`, :meth:`start`, :meth:`finish`,
    :meth:`settled`); :meth:`run` is the outlet's task."""

    def __init__(
        self,
        platform: Platform,
        conversation: ConversationRef,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.platform = platform
        self.conversation = conversation
        self._clock = clock
        self._ops: deque[_Op] = deque()
        self._notices = 0
        self._wake = asyncio.Event()
        self._view: _View | None = None
        self._streaming: TurnStream | None = None  # the turn started last, not finished
        self._held_until = 0.0  # a 429: nothing goes out before this (monotonic)
        self._next_show = 0.0  # the platform's edit pace
        self._settling: list[_Settling] = []
        self._back = asyncio.Event()  # the platform reaches its servers again
        self._unreachable = False  # the last show failed on PlatformUnreachable
        self._closing = False

    async def abandon(self) -> None:
        """The outlet's task ended with a turn shown as started here and not finished: the
        platform is told the turn ended (failed), within ABANDON_SECONDS, never raising."""
        if self._view is None:
            return
        self._view = None
        try:
            async with asyncio.timeout(ABANDON_SECONDS):
                await self.platform.turn_ended(self.conversation, TurnStatus.FAILED)
        except (PlatformError, TimeoutError) as exc:
            log.warning("turn end to %s not told: %s", self.conversation.key(), exc)

    # --- what the runner hands over -------------------------------------------------------

    def notice(self, text: str, reply_to: str | None = None) -> None:
        if self._notices >= MAX_QUEUED:
            log.warning(
                "notice to %s dropped: %d wait already", self.conversation.key(), self._notices
            )
            return
        self._notices += 1
        stream = self._streaming
        after = None if stream is None else (stream, stream.version)
        self._queue(_Notice(text, after, reply_to))

    def start(self, stream: TurnStream) -> None:
        self._streaming = stream
        self._queue(_Start(stream))

    def finish(self, stream: TurnStream, status: TurnStatus) -> None:
        if self._streaming is stream:
            self._streaming = None
        self._queue(_Finish(stream, status))

    def settled(self, stream: TurnStream) -> asyncio.Future[None]:
        """Done once this conversation shows the stream as it is now; at once if it cannot
        (held by a 429, or failing): a card must not wait for it."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        view = self._view
        current = view is not None and view.stream is stream and view.version == stream.version
        if current or self.held:
            future.set_result(None)
        else:
            self._settling.append(_Settling(stream, stream.version, future))
            self._wake.set()
        return future

    def back(self) -> None:
        """The platform is back after an outage: a turn's end waiting for it goes on."""
        self._back.set()
        self._wake.set()

    def close(self) -> None:
        """Send what is queued, then end (a turn's end waiting out an outage gives up)."""
        self._closing = True
        self._back.set()
        self._wake.set()

    @property
    def held(self) -> bool:
        return self._held_until > self._clock()

    def _queue(self, op: _Op) -> None:
        self._ops.append(op)
        self._wake.set()

    # --- the task -------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            self._release(None)

    async def _run(self) -> None:
        while True:
            if self._ops:
                await self._do(self._ops.popleft())
                continue
            if self._closing:
                return
            due: float | None = None
            view = self._view
            if view is not None and view.version != view.stream.version:
                urgent = any(s.stream is view.stream for s in self._settling)
                due = self._held_until if urgent else max(self._next_show, self._held_until)
                if due <= self._clock():
                    await self._show(view)
                    continue
            self._wake.clear()
            timeout = None if due is None else max(due - self._clock(), 0.0)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):  # the platform's pace, or a 429's wait
                    await self._wake.wait()

    async def _do(self, op: _Op) -> None:
        match op:
            case _Notice(text=text, after=after, reply_to=reply_to):
                self._notices -= 1
                view = self._view
                if after is not None and view is not None and view.stream is after[0]:
                    # what the agent said before the notice comes before it
                    await self._catch_up(view, after[1])
                await self._send_notice(text, reply_to)
            case _Start(stream=stream):
                self._view = _View(stream, version=0)
                stream.watch(self._wake)
                await self._signal("turn_started", self.platform.turn_started(self.conversation))
            case _Finish(stream=stream, status=status):
                await self._finish(stream)
                ended = self.platform.turn_ended(self.conversation, status)
                await self._signal("turn_ended", ended)

    async def _send_notice(self, text: str, reply_to: str | None = None) -> None:
        spelled = spell_commands(text, self.platform.spell_command)
        with gateway_speaking():
            for chunk in platform_parts(spelled, self.platform.limits):
                send = partial(self.platform.send_text, self.conversation, chunk)
                if reply_to is not None and isinstance(self.platform, RepliesToMessages):
                    send = partial(self.platform.send_reply, self.conversation, chunk, reply_to)
                    reply_to = None  # the first part replies; the rest follow it
                try:
                    await self._patiently(send)
                except PlatformError as exc:
                    log.warning("notice to %s failed: %s", self.conversation.key(), exc)
                    return

    async def _finish(self, stream: TurnStream) -> None:
        """The turn's final text, waiting out 429s (bounded)."""
        view = self._view
        if view is None or view.stream is not stream:  # its start was never shown here
            view = _View(stream)
        try:
            await self._catch_up(view, stream.version, final=True)
        finally:
            stream.unwatch(self._wake)
            if self._view is view:
                self._view = None
            self._release(stream)

    async def _catch_up(self, view: _View, version: int, *, final: bool = False) -> None:
        """Show the turn at least as it was at ``version``, now: waiting out 429s for up to
        MAX_RATE_LIMIT_WAIT seconds. A turn's ``final`` text that failed in an outage
        (PlatformUnreachable) waits for the platform to be back (at most OUTAGE_WAIT_SECONDS)
        and is tried again; any other failure gives up (logged)."""
        waited = 0.0
        outage = self._clock() + OUTAGE_WAIT_SECONDS
        while view.version < version:
            wait = self._held_until - self._clock()
            if wait > 0:
                if waited + wait > MAX_RATE_LIMIT_WAIT:
                    log.warning(
                        "a turn's text was not shown in %s: rate limited for over %g s",
                        self.conversation.key(),
                        MAX_RATE_LIMIT_WAIT,
                    )
                    return
                waited += wait
                await asyncio.sleep(wait)  # the platform's own instruction
            self._back.clear()
            self._unreachable = False
            if await self._show(view) or self.held:
                continue
            # failed for another reason (logged): a refusal gives up, an outage waits
            left = outage - self._clock()
            if not (final and self._unreachable) or self._closing or left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self._back.wait()

    async def _show(self, view: _View) -> bool:
        """Bring the conversation's messages of the turn up to date; False if it failed."""
        platform, conversation = self.platform, self.conversation
        stream = view.stream
        version = stream.version
        sections, mark = stream.timeline.sections_to_show(view.mark)
        try:
            for section in sections:
                shown = view.shown.setdefault(section, [])
                for index, chunk in enumerate(stream.chunks(section, platform.limits)):
                    if index < len(shown):
                        ref, before = shown[index]
                        if before == chunk:
                            continue
                        if ref is None:
                            now = await platform.send_text(conversation, chunk)
                        else:
                            now = await self._edit_or_post(ref, chunk)
                        shown[index] = (now, chunk)
                    else:
                        ref = None
                        shown.append((None, ""))  # its place, if the send fails
                        now = await platform.send_text(conversation, chunk)
                        shown[index] = (now, chunk)
                    if now != ref:  # a message of the turn's: the ledger learns where it is
                        stream.posted(conversation, section, index, now.message_id)
        except RateLimited as exc:
            self._held_until = self._clock() + exc.retry_after
            self._release(None)  # nobody waits for a held conversation
            return False
        except PlatformError as exc:
            # keep what was shown; the next show (or the final one) tries again
            log.warning("stream to %s failed: %s", conversation.key(), exc)
            self._unreachable = isinstance(exc, PlatformUnreachable)
            self._next_show = self._clock() + platform.limits.min_edit_interval_seconds
            self._release(None)
            return False
        view.version, view.mark = version, mark
        self._next_show = self._clock() + platform.limits.min_edit_interval_seconds
        self._release(stream, version)
        return True

    async def _edit_or_post(self, ref: MessageRef, chunk: str) -> MessageRef:
        """Edit the turn's message; one that is gone (deleted by someone, or no longer
        editable) is posted anew, so the text still ends exact where people read it."""
        try:
            await self.platform.edit_text(ref, chunk)
        except MessageGone as exc:
            where = ref.conversation.key()
            log.info("stream to %s: message %s gone (%s): posted anew", where, ref.message_id, exc)
            return await self.platform.send_text(self.conversation, chunk)
        return ref

    async def _patiently(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call`` once this conversation is not held, waiting out its 429s (bounded)."""
        waited = 0.0
        while True:
            wait = self._held_until - self._clock()
            if wait > 0:
                if waited + wait > MAX_RATE_LIMIT_WAIT:
                    raise RateLimited(wait)
                waited += wait
                await asyncio.sleep(wait)  # the platform's own instruction
            try:
                return await call()
            except RateLimited as exc:
                self._held_until = self._clock() + exc.retry_after

    async def _signal(self, name: str, call: Awaitable[None]) -> None:
        try:
            await call
        except PlatformError as exc:
            log.warning("%s in %s failed: %s", name, self.conversation.key(), exc)

    def _release(self, stream: TurnStream | None, version: int | None = None) -> None:
        """Wake who waits for ``stream`` (up to ``version``), or everyone (None)."""
        keep = []
        for waiting in self._settling:
            done = stream is None or (
                waiting.stream is stream and (version is None or waiting.version <= version)
            )
            if not done:
                keep.append(waiting)
            elif not waiting.future.done():
                waiting.future.set_result(None)
        self._settling = keep


class Outbound:
    """A session's outlets, one per conversation, run as tasks of :meth:`running`."""

    def __init__(self, platforms: Mapping[str, Platform]) -> None:
        self._platforms = platforms
        self._outlets: dict[ConversationRef, Outlet] = {}
        self._turns: dict[TurnStream, list[Outlet]] = {}
        self._tasks: asyncio.TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The outlets' owner: leaving it lets every outlet send what it holds, then end
        (cancelled instead if the block raised)."""
        try:
            async with asyncio.TaskGroup() as tasks:
                self._tasks = tasks
                try:
                    yield
                finally:
                    self._tasks = None
                    for outlet in self._outlets.values():
                        outlet.close()
        finally:
            # cancelled with a turn shown as running (its host gave its sessions up): the
            # platform is told it ended, so that nothing says "typing…" for a turn gone
            for outlet in self._outlets.values():
                await outlet.abandon()
            self._outlets.clear()
            self._turns.clear()

    @property
    def is_running(self) -> bool:
        return self._tasks is not None

    def notice(
        self,
        conversations: list[ConversationRef],
        text: str,
        reply_to: Mapping[ConversationRef, str] | None = None,
    ) -> None:
        """``text`` to each conversation, after what its outlet holds; where ``reply_to``
        names a message there (a card), as a reply to it where the platform shows replies."""
        for outlet in self._outlets_of(conversations):
            outlet.notice(text, (reply_to or {}).get(outlet.conversation))

    def start_turn(self, stream: TurnStream, conversations: list[ConversationRef]) -> None:
        outlets = self._outlets_of(conversations)
        self._turns[stream] = outlets
        for outlet in outlets:
            outlet.start(stream)

    async def settle(self, stream: TurnStream, deadline: float) -> None:
        """Wait (at most ``deadline`` seconds) until the conversations show the stream as it
        is now, except those held by a 429 or failing: what the agent said before a card
        goes out before the card, without one platform holding the card up everywhere."""
        waiting = [outlet.settled(stream) for outlet in self._turns.get(stream, ())]
        pending = [future for future in waiting if not future.done()]
        if pending:
            await asyncio.wait(pending, timeout=deadline)

    def end_turn(self, stream: TurnStream, status: TurnStatus) -> None:
        for outlet in self._turns.pop(stream, ()):
            outlet.finish(stream, status)

    def platform_back(self, platform: str) -> None:
        """``platform`` reaches its servers again: what waits for it goes on."""
        for conversation, outlet in self._outlets.items():
            if conversation.platform == platform:
                outlet.back()

    def _outlets_of(self, conversations: list[ConversationRef]) -> list[Outlet]:
        tasks = self._tasks
        if tasks is None:
            raise RuntimeError("the session's outbound is not running")
        outlets = []
        for conversation in conversations:
            outlet = self._outlets.get(conversation)
            if outlet is None:
                platform = self._platforms.get(conversation.platform)
                if platform is None:
                    continue
                outlet = self._outlets[conversation] = Outlet(platform, conversation)
                tasks.create_task(outlet.run())
            outlets.append(outlet)
        return outlets
