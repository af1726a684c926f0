"""The engine: routes conversations to sessions, owns every task, implements the Inbox.

``async with Gateway(config, platforms=..., launcher=...) as gateway`` opens the ledger,
recovers from whatever a previous process left (leftover agents ended, their interactions
orphaned and every card copy edited, in-flight prompts interrupted, waiting ones held), and runs
the card refresher and one :class:`SessionRunner` task per active session. Leaving the block
first tells every platform to stop taking input (``stop_input``), then stops every agent and
records it (the runners still send notices and edit cards), then closes the ledger.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Coroutine, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

from gateway.agents import AgentLauncher
from gateway.auth import approver_ids, load_or_create_hmac_key, require_callback_room
from gateway.broker import Broker, DeliveryRefused, DeliveryWork
from gateway.config import Config
from gateway.control import Control
from gateway.decisions import DecisionDesk
from gateway.domain import ConversationRef, Decision
from gateway.interactions import Interaction
from gateway.platform import Ack, InboundAction, InboundForm, InboundMessage, Platform
from gateway.platform_problems import PlatformProblems
from gateway.runner import SessionRunner
from gateway.store import Clock, SessionRecord, Store, hold_data_dir, utc_now
from gateway.votes import PolicyBook

__all__ = ["Gateway"]

log = logging.getLogger(__name__)

STOPPING_NOTICE = (
    "⏹ The gateway is stopping: the agent was stopped. Once the gateway is back, your next "
    "message resumes the conversation."
)


class Gateway:
    def __init__(
        self,
        config: Config,
        *,
        platforms: Mapping[str, Platform],
        launcher: AgentLauncher,
        data_dir: Path | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.config = config
        self.platforms = dict(platforms)
        for name, platform in self.platforms.items():  # before anything starts
            require_callback_room(name, platform.limits.callback_max_bytes)
        self.launcher = launcher
        self.data_dir = data_dir or config.gateway.data_dir
        self.clock = clock  # the ledger's times and the expiry policy's: one clock
        self.policy = PolicyBook(self.config)  # each request's rule, walked once
        self.platform_problems = PlatformProblems(clock)  # what the console shows at the top
        self._stack = AsyncExitStack()
        self._runners: dict[str, SessionRunner] = {}
        self._tasks: asyncio.TaskGroup | None = None
        self._background: list[asyncio.Task[None]] = []
        self.store: Store
        self.broker: Broker
        self.control: Control
        self.desk: DecisionDesk

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> Gateway:
        try:
            return await self._enter()
        except BaseException as exc:
            # a failure half-way (recovery, a platform's attach) closes what was opened: the
            # runners and the refresher, the task group, the ledger, the data dir's lock
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise

    async def _enter(self) -> Gateway:
        work_dirs = [project.work_dir for project in self.config.projects.values()]
        # one gateway per data dir, refused before its recovery could end another's agents
        self._stack.enter_context(hold_data_dir(self.data_dir, work_dirs=work_dirs))
        self.store = await self._stack.enter_async_context(
            Store.open(
                self.data_dir,
                work_dirs=work_dirs,
                clock=self.clock,
                postgresql=self.config.gateway.ledger_target(),
            )
        )
        key = load_or_create_hmac_key(self.data_dir)
        self.broker = Broker(self.store, self.platforms, key, deliverer=self)
        self.desk = DecisionDesk(
            self.config, self.store, self.broker, key, spawn=self._spawn, policy=self.policy
        )
        self.control = Control(self)
        self._tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
        self._background.append(self._tasks.create_task(self.broker.run_refresher()))
        await self.control.recover()
        for platform in self.platforms.values():
            platform.attach(self)
        # after attach: a mirroring platform may need the gateway's config to name its page
        for session in await self.store.sessions.list_sessions():
            await self.show_everywhere(session.id)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self._stop_input()
            for runner in list(self._runners.values()):
                await runner.shutdown(notice=STOPPING_NOTICE, gateway_stopping=True)
            for task in self._background:
                task.cancel()
        finally:
            await self._stack.aclose()

    async def _stop_input(self) -> None:
        """No platform hands the gateway anything once it stops (DESIGN.md, Platforms): a
        message taken now would be queued for a runner that is stopping, or fail on a closed
        ledger after the platform had confirmed it."""
        for name, platform in self.platforms.items():
            try:
                await platform.stop_input()
            except Exception:  # one platform's failure must not keep the others taking input
                log.exception("platform %s did not stop taking input", name)

    # --- sessions -------------------------------------------------------------------------

    def runner(self, session: SessionRecord) -> SessionRunner:
        """The session's runner, started (as a task this engine owns) if need be."""
        runner = self._runners.get(session.id)
        if runner is None:
            assert self._tasks is not None
            runner = SessionRunner(
                session_id=session.id,
                project=self.config.projects[session.project],
                store=self.store,
                broker=self.broker,
                launcher=self.launcher,
                platforms=self.platforms,
                stop_grace_seconds=self.config.gateway.stop_grace_seconds,
                queue_depth=self.config.gateway.queue_depth,
                clock=self.clock,
                groups=self.config.groups,
                people=self.config.people,
                rule_of=functools.partial(self.policy.rule, session.project),
            )
            self._runners[session.id] = runner
            self._tasks.create_task(self._run(runner))
        return runner

    def existing_runner(self, session_id: str) -> SessionRunner | None:
        return self._runners.get(session_id)

    async def show_everywhere(self, session_id: str) -> None:
        """Bind the session to each platform that shows every session (the web console:
        its ``mirror_conversation`` names a page), with a copy of each open card there, so
        that the session's text, notices and cards reach it and its clicks pass the FOREIGN
        check."""
        session = await self.store.sessions.get(session_id)
        if session is None or session.is_closed:
            return
        bound = {c.platform for c in await self.store.sessions.list_bindings(session_id)}
        for name, platform in self.platforms.items():
            if name in bound:
                continue
            conversation = platform.mirror_conversation(session)
            if conversation is None:
                continue
            await self.store.sessions.bind(conversation, session_id)
            for interaction in await self.store.interactions.list_open(session_id):
                await self.broker.show_in(interaction, conversation)

    async def _run(self, runner: SessionRunner) -> None:
        try:
            await self.show_everywhere(runner.session_id)
            await runner.run()
        except Exception:
            # one session's failure must not end the others: report and forget the runner
            log.exception("session %s failed", runner.session_id)
            await runner.report_crash()
        finally:
            self._runners.pop(runner.session_id, None)

    # --- Deliverer (the broker writes decisions through the session's runner) -------------

    async def deliver(self, interaction: Interaction, decision: Decision) -> None:
        await self._runner_of(interaction).deliver(interaction, decision)

    def own_delivery(
        self, interaction: Interaction, work: DeliveryWork
    ) -> asyncio.Task[Interaction]:
        return self._runner_of(interaction).own_delivery(interaction, work)

    def sweep_soon(self, session_id: str) -> None:
        runner = self._runners.get(session_id)
        if runner is not None:
            runner.sweep_soon()

    def _runner_of(self, interaction: Interaction) -> SessionRunner:
        runner = self._runners.get(interaction.session_id)
        if runner is None:
            raise DeliveryRefused("the agent process that asked has ended")
        return runner

    # --- Inbox ----------------------------------------------------------------------------

    async def on_message(self, message: InboundMessage) -> None:
        await self.control.on_message(message)

    async def on_action(self, action: InboundAction) -> Ack:
        with self.broker.ahead_of_edits():
            return await self.desk.on_action(action)

    async def on_form(self, form: InboundForm) -> Ack:
        with self.broker.ahead_of_edits():
            return await self.desk.on_form(form)

    async def may_answer(self, action: InboundAction) -> Ack:
        # reads only, on the ledger's read-only connection: nothing for edits to wait for
        return await self.desk.may_answer(action)

    async def has_session(self, conversation: ConversationRef) -> bool:
        return await self.store.peek.has_open_session(conversation)

    def platform_problem(self, platform: str, text: str) -> None:
        """A problem ``platform`` said once in the log, for the console (``HearsProblems``)."""
        self.platform_problems.add(platform, text)

    async def approvers(self, conversation: ConversationRef) -> tuple[str, ...]:
        """Who may decide the requests of the session bound to ``conversation`` (read-only:
        nothing waits behind the ledger's writer), by their ids on its platform."""
        session = await self.store.peek.bound(conversation)
        if session is None or session.is_closed:
            return ()
        platform = self.config.platforms.auth_platforms().get(
            conversation.platform, conversation.platform
        )
        return approver_ids(self.config, session.project, platform, session.initiator)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in the engine's task group, which the ledger outlives (a refused
        pre-check's audit entry); RuntimeError once the group takes no more tasks."""
        if self._tasks is None:
            raise RuntimeError("the gateway is not running")
        self._tasks.create_task(work)

    async def on_platform_back(self, platform: str) -> None:
        for runner in list(self._runners.values()):
            runner.platform_back(platform)  # a turn's final text that failed there
        sent = await self.broker.resend_failed()
        if sent:
            log.info("%s is back: %d card(s) that had failed were sent again", platform, sent)
