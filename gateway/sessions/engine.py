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
import contextlib
import functools
import logging
import socket
from collections.abc import Coroutine, Mapping
from contextlib import AsyncExitStack
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from gateway.action_tokens import interaction_named, require_callback_room
from gateway.clock import clock_from_environment
from gateway.config.access import approver_ids, may_talk
from gateway.config.hmac_key import load_or_create_hmac_key, read_hmac_key
from gateway.config.model import Config
from gateway.config.reload import config_hash, reloadable_changes
from gateway.domain import Actor, ConversationRef, Decision, InteractionKind, InteractionState
from gateway.errors import ConfigError, GatewayError, StoreError
from gateway.interactions.machine import Interaction
from gateway.interactions.votes import PolicyBook
from gateway.platform import (
    Ack,
    FormLedger,
    InboundAction,
    InboundForm,
    InboundMessage,
    LeasedReceiving,
    Platform,
    ShowsTurnsElsewhere,
    WaitingRequest,
)
from gateway.render.commands import spell_commands
from gateway.send_file_wire import SendFileAnswer, SendFileCall
from gateway.session_record import SessionRecord
from gateway.sessions.agents import AgentLauncher
from gateway.sessions.broker import Broker, DeliveryRefused, DeliveryWork, Written
from gateway.sessions.control import Control
from gateway.sessions.decisions import DecisionDesk
from gateway.sessions.file_choice import FileChoices, is_files_token
from gateway.sessions.form_ledger import SharedFormLedger
from gateway.sessions.model_buttons import is_model_token
from gateway.sessions.platform_problems import PlatformProblems
from gateway.sessions.receivers import ReceiverLease
from gateway.sessions.runner import SessionRunner
from gateway.sessions.schedule_buttons import ScheduleButtons, is_schedule_token
from gateway.sessions.schedule_desk import configured_drafts
from gateway.sessions.scheduler import Scheduler
from gateway.sessions.send_file_channel import Caller, SendFileChannel, SendFileTokens
from gateway.sessions.steer_button import SteerButtons, is_steer_token
from gateway.store.audit import CONFIG_IN_FORCE
from gateway.store.database import Clock, utc_now
from gateway.store.datadir import hold_data_dir
from gateway.store.host_work import HostWork
from gateway.store.records import PromptRecord
from gateway.store.retention import PruneCounts, rules_of
from gateway.store.schedules import ScheduleRecord
from gateway.store.store import Store
from gateway.transcription import Transcriber

if TYPE_CHECKING:
    from gateway.config.ledger_url import PgTarget
    from gateway.store.leases import LeaseHolder

__all__ = ["Gateway"]

log = logging.getLogger(__name__)


# How often the safety sweep asks the ledger (one read-only query, store.host_work) what
# this host has to do that no event told it: a wake-up lost while the listener reconnected
# (which also sweeps at once), a decision whose delivery was cut. Nothing else polls.
SAFETY_SWEEP_SECONDS = 60.0
SWEEP_RETRY_SECONDS = 1.0  # a sweep the ledger did not answer: the first pause before again
# a click or form whose decision's transaction lost the ledger mid-way (a cut connection): it
# may have committed before the cut, or not; the card, edited by the session's owner, says
LEDGER_NO_ANSWER = (
    "The ledger did not answer, so this host cannot tell whether your answer was taken:"
    " the card will show it. If it still waits, try again in a moment."
)
# the payload prefix of a wake-up for a command another host passed (migration 15)
REQUEST_WAKEUP = "request:"
# what else a wake-up's payload may say (migration 25's triggers): a decision committed, a
# prompt queued; a bare session id (the triggers before it) means either
DECISION_WAKEUP = "decision:"
PROMPT_WAKEUP = "prompt:"
DRAFT_PURGE_SECONDS = 60.0  # a shared ledger: how often a host deletes drafts none can use
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
        host: str | None = None,
        transcriber: Transcriber | None = None,
        schedule_clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.transcriber = transcriber  # voice notes into text (issue 34); None: off
        # this machine, as projects' ``host`` keys name it (``run --host``); it runs only the
        # projects of this host (all of them in a single-host config)
        self.host = host if host is not None else socket.gethostname()
        self.projects = config.projects_on(self.host)
        # the host written on the sessions it makes, and whose epochs, queues and cards its
        # recovery covers: on a shared (PostgreSQL) ledger this host's name; on SQLite None,
        # "this machine" (no other host shares the ledger)
        self.ledger_host = self.host if config.gateway.store is not None else None
        self.platforms = dict(platforms)
        # the platforms told of other hosts' turns (a runtime Protocol check is slow: once)
        self._turn_watchers = [
            p for p in self.platforms.values() if isinstance(p, ShowsTurnsElsewhere)
        ]
        for name, platform in self.platforms.items():  # before anything starts
            require_callback_room(name, platform.limits.callback_max_bytes)
        self.launcher = launcher
        self.data_dir = data_dir or config.gateway.data_dir
        self.clock = clock  # the ledger's times and the expiry policy's: one clock
        # when schedules are due (issue 35): the clock file a test names, else the system's
        self.schedule_clock = schedule_clock or clock_from_environment()
        self.scheduler: Scheduler | None = None
        self.policy = PolicyBook(self.config)  # each request's rule, walked once
        self.platform_problems = PlatformProblems(clock)  # what the console shows at the top
        self._stack = AsyncExitStack()
        self._runners: dict[str, SessionRunner] = {}
        self._runner_tasks: dict[str, asyncio.Task[None]] = {}
        # a shared ledger: the lease host:<name> this host holds while it runs (design point
        # 9); without it (lost, or not yet taken again) the host takes no input
        self.host_lease: LeaseHolder | None = None
        self._starting_over = False
        self._sweep_asked = asyncio.Event()  # the safety sweep runs now (listener back)
        # a shared ledger's wake-up listener: set while its connection is lost (for tests),
        # and a gate it waits on before listening again (a test closes it to hold it down)
        self.listener_lost = asyncio.Event()
        self.listener_may_return = asyncio.Event()
        self.listener_may_return.set()
        self._sweeping = asyncio.Lock()  # one safety sweep at a time
        self.started_over = asyncio.Event()  # set each time it started over after a loss
        self.lease_lost = asyncio.Event()  # set while it has lost its lease (for tests)
        self._tasks: asyncio.TaskGroup | None = None
        self._background: list[asyncio.Task[None]] = []
        # [gateway.retention]: what the last background prune removed (None: none ran yet),
        # and an event set after each round
        self.last_prune: PruneCounts | None = None
        self.pruned = asyncio.Event()
        # a shared ledger: Telegram polling and the Discord connection, one host at a time
        # (design point 6), each a task that receives while it holds its lease
        self.receivers: dict[str, ReceiverLease] = {}
        self._receiver_target: PgTarget | None = None  # the ledger the receivers' leases are in
        self._receiver_tasks: list[asyncio.Task[None]] = []
        self.store: Store
        self.broker: Broker
        self.send_files: SendFileChannel
        self.control: Control
        self.desk: DecisionDesk
        self._form_ledger: SharedFormLedger | None = None

    # --- reload (SIGHUP) ----------------------------------------------------------------

    async def reload(self, config: Config) -> list[str]:
        """Apply a reread config's allowlists, approvers, people, groups and policy without
        touching an agent (gateway/config/reload.py); returns the keys changed. ConfigError,
        nothing applied, when it changes what needs a restart. A request already open keeps
        the requirement it opened with. Audited either way."""
        try:
            changed = reloadable_changes(self.config, config)
        except ConfigError as exc:
            await self.store.audit.record(
                "config.reload_refused", actor="gateway", details={"why": str(exc)}
            )
            raise
        self.config = config
        self.projects = config.projects_on(self.host)
        await self._record_config_in_force()
        self.policy.reload(config)
        self.desk.reload(config)
        self.control.reload(config)
        self.schedule_buttons.reload(config)
        for runner in self._runners.values():
            session = await self.store.sessions.get(runner.session_id)
            if session is not None:  # a reload keeps every project
                runner.reload(config.projects[session.project], config.groups, config.people)
        await self.store.audit.record(
            "config.reloaded",
            actor="gateway",
            details={"changed": changed, "config_hash": config_hash(config), "host": self.host},
        )
        return changed

    async def _record_config_in_force(self) -> None:
        """The hash of the config this host runs, in the ledger's audit (at start and at
        each reload): the hosts of one ledger compare theirs (:meth:`config_mismatch`)."""
        await self.store.audit.record(
            CONFIG_IN_FORCE,
            actor="gateway",
            details={"host": self.host, "config_hash": config_hash(self.config)},
        )

    async def config_mismatch(self) -> str | None:
        """With several hosts: which live hosts run a config other than this one's, said as
        /status says it; None when they agree (or this host is alone on its ledger)."""
        lease = self.host_lease
        if self.ledger_host is None or lease is None:
            return None
        from gateway.store import leases  # psycopg: only where it is used

        try:
            live = set(await leases.held(await lease.connection(), "host:"))
        except Exception as exc:  # a failed read: /status goes on without this line
            log.warning("host %s: the hosts' configs were not compared (%s)", self.host, exc)
            return None
        newest = await self.store.audit.newest_in_force(live)
        hashes = {host: str(entry.details.get("config_hash", "")) for host, entry in newest.items()}
        if len(set(hashes.values())) <= 1:
            return None
        mine = hashes.get(self.host)
        others = sorted(host for host, value in hashes.items() if value != mine)
        return (
            f"Config: host {', '.join(others)} runs another config than host {self.host}: "
            "change it on every host, then reload each (docs/operations.md)"
        )

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
        work_dirs = [project.work_dir for project in self.projects.values()]
        # one gateway per data dir, refused before its recovery could end another's agents
        self._stack.enter_context(hold_data_dir(self.data_dir, work_dirs=work_dirs))
        key = self._hmac_key()  # refused before the ledger is reached
        self.store = await self._stack.enter_async_context(
            Store.open(
                self.data_dir,
                work_dirs=work_dirs,
                clock=self.clock,
                postgresql=self.config.gateway.ledger_target(),
                # the receivers this host may hold by lease: its connection budget's share
                leased_receivers=sum(
                    isinstance(platform, LeasedReceiving) for platform in self.platforms.values()
                ),
            )
        )
        # send_file's socket (issue 33): agents started from here reach it with their token
        self.send_files = await self._stack.enter_async_context(
            SendFileChannel(self.data_dir, SendFileTokens(), self._on_send_file)
        )
        target = self.config.gateway.ledger_target()
        if self.ledger_host is not None and target is not None:
            await self._take_host_lease(target)
        if self.ledger_host is not None:
            adopted = await self.store.sessions.adopt(self.ledger_host, list(self.projects))
            if adopted:
                log.info("host %s: %d session(s) made before hosts are its own", self.host, adopted)
        elsewhere = sorted(set(self.config.projects) - set(self.projects))
        if elsewhere:
            log.info("host %s: projects run on other hosts: %s", self.host, ", ".join(elsewhere))
        self.broker = Broker(
            self.store,
            self.platforms,
            key,
            deliverer=self,
            host=self.ledger_host,
            policy=self.policy,
        )
        self.desk = DecisionDesk(
            self.config,
            self.store,
            self.broker,
            key,
            spawn=self._spawn,
            policy=self.policy,
            owner_elsewhere=self.owner_elsewhere,
        )
        # form drafts: in the ledger where several hosts share it (the next click of a form
        # may reach another host), else in each platform's memory
        self._form_ledger = (
            SharedFormLedger(
                self.store, self.platforms, key, render=self.broker.render, clock=self.clock
            )
            if self.ledger_host is not None
            else None
        )
        self.button_key = key  # the buttons that are no request's (/model's list)
        self.steer_buttons = SteerButtons(
            self.store,
            self.platforms,
            key,
            runner_of=self.existing_runner,
            auth_platform=lambda name: self.config.platforms.auth_platforms().get(name, name),
            spawn=self._spawn,
        )
        # the buttons under a message whose files did not come (issue 32)
        self.file_choices = FileChoices(
            self.store,
            self.platforms,
            key,
            auth_platform=lambda name: self.config.platforms.auth_platforms().get(name, name),
            kick=self.kick,
            may_talk=lambda project, actor: may_talk(self.config, project, actor),
            host=self.ledger_host,
        )
        self.button_key = key
        self.control = Control(self)
        await self._record_config_in_force()
        self.schedule_buttons = ScheduleButtons(
            self.config,
            self.store,
            self.control.schedules,
            key,
            auth_platform=lambda name: self.config.platforms.auth_platforms().get(name, name),
            platforms=self.platforms,
        )
        self._tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
        self._background.append(self._tasks.create_task(self.broker.run_refresher()))
        await self.control.recover()
        self._background.append(self._tasks.create_task(self._prune_now_and_then()))
        self._background.append(self._tasks.create_task(self._safety_sweeps()))
        if self.ledger_host is not None and target is not None:
            # decisions and prompts other hosts commit for this host's sessions (design
            # point 3), once recovery is done; psycopg: only where it is used
            from gateway.store.wakeups import listen_for_wakeups

            wakeups = listen_for_wakeups(
                target,
                self.ledger_host,
                self._woken,
                listening=self._listening,
                lost=self._listener_lost,
                # every host's turns notify every host: listened to only where a platform
                # shows them (a console), or each host would read every session's saves
                turn_text=self._turn_moved if self._turn_watchers else None,
                needless=self._committed_here,
            )
            self._background.append(self._tasks.create_task(wakeups))
            self._background.append(self._tasks.create_task(self._purge_form_drafts()))
            self._background.append(self._tasks.create_task(self._hold_host()))
            self._background.append(self._tasks.create_task(self._reap_stopped_hosts(target)))
        now = self.schedule_clock()
        removed: list[ScheduleRecord] = []  # said in their threads once the platforms listen
        for project in self.config.projects:  # the config file's schedules, by their names
            drafts = configured_drafts(self.config, project, now)
            before = {s.name: s for s in await self.store.schedules.of_project(project)}
            for change in await self.store.schedules.sync_configured(project, drafts):
                log.info("project %s: schedule %s (config file)", project, change)
                name, _, what = change.rpartition(": ")
                if what == "deleted" and name in before:
                    removed.append(before[name])
        gateway_settings = self.config.gateway
        self.scheduler = Scheduler(
            self.store,
            clock=self.schedule_clock,
            host=self.ledger_host,
            grace=timedelta(minutes=gateway_settings.schedule_grace_minutes),
            start=self.control.schedule_runs.start,
            said_skipped=self.control.schedule_runs.said_skipped,
            settle=self.control.schedule_runs.settle,
            poll_seconds=gateway_settings.schedule_poll_seconds,
            fenced=lambda: self.fenced,
        )
        self._background.append(self._tasks.create_task(self.scheduler.run()))
        for platform in self.platforms.values():
            platform.attach(self)
        if self.ledger_host is not None and target is not None:
            self._lease_receivers(target)  # after attach: what is received goes to the inbox
        for schedule in removed:
            await self.control.schedule_deleted(schedule, "the config file", anywhere=True)
        # after attach: a mirroring platform may need the gateway's config to name its page
        for session in await self.store.sessions.list_sessions(host=self.ledger_host):
            await self.show_everywhere(session.id)
        return self

    def _hmac_key(self) -> bytes:
        """The shared key file (several hosts), or this data dir's own, made on first start."""
        path = self.config.gateway.hmac_key_file
        if path is None:
            return load_or_create_hmac_key(self.data_dir)
        try:
            return read_hmac_key(path)
        except ConfigError as exc:
            raise ConfigError(f"[gateway] hmac_key_file: {exc}") from exc

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self._stop_receivers()
            await self._stop_input()
            for runner in list(self._runners.values()):
                await runner.shutdown(notice=STOPPING_NOTICE, gateway_stopping=True)
            for task in self._background:
                task.cancel()
            if self.host_lease is not None:
                # after the agents ended: the next start of this host takes it at once, and
                # other hosts reap nothing (this host's epochs are ended)
                await self.host_lease.release()
                await self.host_lease.close()
        finally:
            await self._stack.aclose()

    def _lease_receivers(self, target: PgTarget) -> None:
        self._receiver_target = target
        for platform in self.platforms.values():
            self._lease_receiver(platform)

    def _lease_receiver(self, platform: Platform) -> None:
        """Receive ``platform`` by its lease, if it is received so and not yet (a platform
        that connected late names its lease only once connected: Telegram's bot id)."""
        from gateway.store.leases import LeaseHolder  # psycopg: only where it is used

        target = self._receiver_target
        if target is None or self._tasks is None or self.ledger_host is None:
            return
        if not isinstance(platform, LeasedReceiving):
            return
        name = platform.receiver_lease()
        if name is None or name in self.receivers:
            return  # every host receives (a Telegram webhook), or it is received already
        holder = LeaseHolder(target, name, self.ledger_host, self.config.gateway.host_lease_seconds)
        receiver = ReceiverLease(platform, holder, fenced=lambda: self.fenced, lost=self.lease_lost)
        self.receivers[name] = receiver
        self._receiver_tasks.append(self._tasks.create_task(receiver.run()))

    async def _stop_receivers(self) -> None:
        """First of all when stopping: the leased receivers end (their batches finished)
        and let their leases go, so that another host receives at once."""
        tasks, self._receiver_tasks = self._receiver_tasks, []
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        for receiver in self.receivers.values():
            await receiver.close()

    async def _stop_input(self) -> None:
        """No platform hands the gateway anything once it stops (DESIGN.md, Platforms): a
        message taken now would be queued for a runner that is stopping, or fail on a closed
        ledger after the platform had confirmed it."""
        for name, platform in self.platforms.items():
            try:
                await platform.stop_input()
            except Exception:  # one platform's failure must not keep the others taking input
                log.exception("platform %s did not stop taking input", name)

    # --- the host's lease (several hosts, design point 9) ---------------------------------

    @property
    def fenced(self) -> bool:
        """Whether this host must take no input and write nothing to its agents: it lost its
        lease (or its deadline passed while the renewer could not run) and has not yet
        started over. Never on SQLite (one host, no lease)."""
        lease = self.host_lease
        return lease is not None and (self._starting_over or not lease.holds())

    def fenced_text(self) -> str:
        """What a person is told of what this host did not take while :attr:`fenced`."""
        if self.host_lease is not None and self.host_lease.unreachable:
            # design point 10: nothing decided, nothing guessed
            return "The ledger is unreachable; try again in a moment."
        return (
            f"Host {self.host} lost its hold on the ledger and is starting over: nothing was"
            " taken. Try again in a moment."
        )

    async def _take_host_lease(self, target: PgTarget) -> None:
        """Hold host:<name> before recovery: taken again at once if this host's previous
        process held it (the new fence shuts that one out), else once it lapsed, and never
        while another host still reaps this one."""
        from gateway.store.leases import LeaseHolder  # psycopg: only where it is used

        assert self.ledger_host is not None
        self.host_lease = LeaseHolder(
            target,
            f"host:{self.ledger_host}",
            self.ledger_host,
            self.config.gateway.host_lease_seconds,
            take_own=True,
            unless_held=f"reap:{self.ledger_host}",
        )
        await self.host_lease.acquire_until()

    async def _hold_host(self) -> None:
        """Renew the host's lease; when it is lost, end this host's agents and take no
        input, take the lease again, and start over as after a restart."""
        lease = self.host_lease
        assert lease is not None
        while True:
            await lease.keep()
            self._starting_over = True
            self.started_over.clear()
            self.lease_lost.set()
            log.warning("host %s: its lease was lost; its agents end, it starts over", self.host)
            await self._end_agents()
            while True:
                await lease.acquire_until()
                try:
                    await self.control.recover()
                    break
                except GatewayError as exc:  # the ledger went away again: probe again
                    log.warning("host %s: starting over failed (%s)", self.host, exc)
                    await asyncio.sleep(lease.timing.period)
            self._starting_over = False
            self.lease_lost.clear()
            self.started_over.set()
            log.info("host %s: started over (fence %s)", self.host, lease.fence)
            self._catch_up()

    async def _end_agents(self) -> None:
        """This host's agents end, first their process groups (as a restart's recovery ends
        a leftover), then their runners, without a word: another host may have reaped
        their sessions, and this host's recovery says what happened."""
        runners = list(self._runners.values())
        for runner in runners:
            agent = runner.agent
            if agent is not None and agent.pid is not None:
                outcome = await self.launcher.end_leftover(
                    pid=agent.pid, pgid=agent.pgid, start_time=agent.start_time
                )
                log.info("host %s: agent %d ended (%s)", self.host, agent.pid, outcome)
        tasks = [self._runner_tasks.pop(runner.session_id, None) for runner in runners]
        self._runners.clear()
        for task in tasks:
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in tasks if t is not None), return_exceptions=True)

    async def _reap_stopped_hosts(self, target: PgTarget) -> None:
        """Every third of the lease: a host whose lease lapsed is fenced out and reaped by
        one surviving host (the one that takes reap:<name>)."""
        from gateway.store import leases  # psycopg: only where it is used

        ttl = self.config.gateway.host_lease_seconds
        conn = None
        while True:
            await asyncio.sleep(ttl / 3)  # the database's clock decides: nothing to wait on
            if self.fenced:
                continue  # a host that cannot renew its own lease reaps nobody
            try:
                if conn is None or conn.closed:
                    conn = await leases.connect(target)
                for host in await leases.lapsed(conn, "host:"):
                    if host != self.host:
                        await self._reap(conn, host, ttl)
            except Exception as exc:  # a failed scan or reap is tried again
                log.warning("host %s: looking for stopped hosts failed (%s)", self.host, exc)
                if conn is not None:
                    await conn.close()
                    conn = None

    async def _reap(self, conn: Any, host: str, ttl: float) -> None:
        from gateway.store import leases

        fence = await leases.acquire(conn, f"reap:{host}", self.host, ttl)
        if fence is None:
            return  # another host reaps it
        try:
            if await leases.fence_out(conn, f"host:{host}") is None:
                return  # it renewed or came back meanwhile
            touched = await self.control.reap(host)
            log.warning(
                "host %s: host %s stopped; %d session(s) reaped", self.host, host, len(touched)
            )
        finally:
            await leases.release(conn, f"reap:{host}", self.host, fence)

    # --- sessions -------------------------------------------------------------------------

    def runner(self, session: SessionRecord) -> SessionRunner:
        """The session's runner, started (as a task this engine owns) if need be. Never for
        a session another host runs (its agents and native session are on that machine)."""
        runner = self._runners.get(session.id)
        if runner is None:
            assert self._tasks is not None
            if not self.runs_here(session):
                raise GatewayError(f"session {session.id} runs on host {session.host}")
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
                send_files=self.send_files,
                # a scheduled run that is over gives its conversation back (schedule_runs.py)
                turn_ended=self.wake_scheduler,
                files_failed=self._offer_files_choice,
            )
            self._runners[session.id] = runner
            self._runner_tasks[session.id] = self._tasks.create_task(self._run(runner))
        return runner

    async def _on_send_file(self, caller: Caller, call: SendFileCall) -> SendFileAnswer:
        """A ``send_file`` call from an agent process this gateway started (its token)."""
        runner = self._runners.get(caller.session_id)
        if runner is None:
            return SendFileAnswer(call=call.call, sent=False, text="not sent: the session ended")
        return await runner.send_file(call)

    def runs_here(self, session: SessionRecord) -> bool:
        """Whether this host runs ``session``: it is this host's, and its project is still
        one of this host's (a project moved to another host starts new sessions there)."""
        return session.host == self.ledger_host and session.project in self.projects

    def session_host(self, project: str) -> str | None:
        """The host written on a new session of ``project``: its ``host`` on a shared
        ledger (whichever host receives its first message), None on SQLite."""
        return self.config.projects[project].host if self.ledger_host is not None else None

    def owner_elsewhere(self, session: SessionRecord) -> str | None:
        """The host that runs ``session`` if that is another host: a decision on it is only
        committed here, and that host writes it to its agent (issue 19)."""
        if session.host is None or session.host == self.ledger_host:
            return None
        return session.host

    def _committed_here(self, payload: str, sender: int) -> bool:
        """A decision this host committed for its own session: the click that committed it
        writes it to the agent, and asks for the session's sweep on every way that can fail
        (a cancelled commit, a lost answer). Woken by it, the sweep ran beside that write on
        every approval: a read, and where it saw the decision first, the write made by the
        sweep instead (AlreadyAnswered for the click's), a race a crash test caught."""
        return payload.startswith(DECISION_WAKEUP) and sender in self.store.writer.connection_ids()

    def _woken(self, payload: str) -> None:
        """Another host (or this one) committed a decision (``decision:<session id>``) or
        queued a prompt (``prompt:<session id>``) for a session of this host: its runner
        looks for what to deliver, or at its queue, not both (a bare session id: both): one
        read, not two; a session with no runner yet gets one if it has a prompt to take.
        ``request:<session id>``: another host passed a command for the session
        (store.requests), which this host takes and carries out."""
        if self.fenced:
            return  # starting over: its recovery and catch-up see it
        if payload.startswith(REQUEST_WAKEUP):
            with contextlib.suppress(RuntimeError):  # stopping: its next recovery drops it
                self._spawn(self.control.take_requests(payload.removeprefix(REQUEST_WAKEUP)))
            return
        decision = prompt = True
        if payload.startswith(DECISION_WAKEUP):
            session_id, prompt = payload.removeprefix(DECISION_WAKEUP), False
        elif payload.startswith(PROMPT_WAKEUP):
            session_id, decision = payload.removeprefix(PROMPT_WAKEUP), False
        else:
            session_id = payload
        runner = self._runners.get(session_id)
        if runner is not None:
            if decision:
                runner.sweep_soon()
            if prompt:
                runner.kick()
            return
        with contextlib.suppress(RuntimeError):  # stopping: the next start holds it
            self._spawn(self._start_if_waiting([session_id]))

    def _turn_moved(self, session_id: str) -> None:
        """Some host saved a turn's timeline, or started or ended a turn, of ``session_id``:
        the platforms that show other hosts' turns read it again (this host's own turns
        reach them as they are sent)."""
        if session_id in self._runners:
            return
        for platform in self._turn_watchers:
            platform.turn_moved_elsewhere(session_id)

    def _listening(self) -> None:
        """The wake-up listener is (again) in place: what was sent meanwhile was lost, so the
        safety sweep runs now."""
        self.listener_lost.clear()
        self._catch_up()

    async def _listener_lost(self) -> None:
        """The wake-up listener's connection failed: a pause, then it listens again."""
        from gateway.store.wakeups import RETRY_SECONDS

        self.listener_lost.set()
        await asyncio.sleep(RETRY_SECONDS)
        await self.listener_may_return.wait()  # open, unless a test holds the listener down

    def _catch_up(self) -> None:
        """What a lost wake-up would have said (the listener reconnected, the host started
        over): the safety sweep runs now."""
        self._sweep_asked.set()

    async def sweep_now(self) -> HostWork | None:
        """One safety sweep, awaited (tests; the periodic one is :meth:`_safety_sweeps`)."""
        return await self._safety_sweep()

    async def _safety_sweeps(self) -> None:
        """The safety net under the events: every SAFETY_SWEEP_SECONDS, or at once when
        asked (:meth:`_catch_up`), one sweep; one the ledger did not answer is tried again
        after SWEEP_RETRY_SECONDS, doubled each time up to the period."""
        pause = SAFETY_SWEEP_SECONDS
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await self._sweep_asked.wait()
            self._sweep_asked.clear()
            if await self._safety_sweep() is not None or self.fenced:
                pause = SAFETY_SWEEP_SECONDS
            else:
                retry = SWEEP_RETRY_SECONDS if pause >= SAFETY_SWEEP_SECONDS else pause * 2
                pause = min(retry, SAFETY_SWEEP_SECONDS)

    async def _safety_sweep(self) -> HostWork | None:
        """Ask the ledger once, read-only, what this host has to do (store.host_work), and
        wake only the runners concerned: a session with a decision never delivered sweeps
        (Broker.sweep), one with a prompt to take is kicked (started if need be), one with a
        command passed takes it. An idle host writes nothing here. None: fenced, or the
        ledger did not answer (the next sweep asks again)."""
        async with self._sweeping:
            if self.fenced:
                return None
            try:
                try:
                    work = await self.store.host_work.of_host(self.ledger_host)
                except StoreError:  # a connection found cut: the next call makes it again
                    work = await self.store.host_work.of_host(self.ledger_host)
            except StoreError as exc:
                log.warning(
                    "host %s: the safety sweep did not read the ledger (%s)", self.host, exc
                )
                return None
            for session_id in work.stranded:
                runner = self._runners.get(session_id)
                if runner is not None:  # with no runner, no epoch of it is live here
                    runner.sweep_soon()
            if work.waiting:
                await self._start_if_waiting(list(work.waiting))
            for session_id in work.passed:
                try:
                    await self.control.take_requests(session_id)
                except StoreError as exc:  # the next sweep looks again
                    log.warning("host %s: commands passed to it not read (%s)", self.host, exc)
            return work

    async def _start_if_waiting(self, session_ids: list[str]) -> None:
        """A runner kicked or started for each of ``session_ids`` with a prompt queued. A
        ledger error (the ledger cut before the host lease's renew noticed) is logged, not
        raised: raised, it would end the engine's task group, i.e. the host's process; the
        next sweep, or the start over once the lease is found lost, looks again."""
        try:
            await self._start_sessions_waiting(session_ids)
        except StoreError as exc:
            log.warning("host %s: waiting sessions not started (%s)", self.host, exc)

    async def _start_sessions_waiting(self, session_ids: list[str]) -> None:
        for session_id in session_ids:
            if session_id in self._runners:
                self._runners[session_id].kick()
                continue
            session = await self.store.sessions.get(session_id)
            if session is None or session.is_closed or not self.runs_here(session):
                continue
            if any(not p.held for p in await self.store.prompts.list_queued(session_id)):
                self.runner(session).kick()

    async def _purge_form_drafts(self) -> None:
        """The form drafts of requests decided, orphaned or expired anywhere, and those
        untouched too long, deleted now and then (a runner's expiry purges at once those it
        expired); unreadable already, so this only frees their rows."""
        while True:
            await asyncio.sleep(DRAFT_PURGE_SECONDS)
            try:
                if not await self.store.form_drafts.purgeable():
                    continue  # a read: an idle host writes nothing here
                purged = await self.store.form_drafts.purge()
            except StoreError as exc:  # the next round tries again
                log.warning("form drafts not purged: %s", exc)
                continue
            if purged:
                log.info("%d form draft(s) purged", purged)

    async def _prune_now_and_then(self) -> None:
        """``[gateway.retention]``: every ``every_minutes`` (the first time one interval after
        start), the ledger pruned in small batches (gateway/store/retention.py); on a shared
        ledger by one host at a time. The section is read each time: a reload changes it."""
        while True:
            section = self.config.gateway.retention
            await asyncio.sleep(section.every_minutes * 60)
            section = self.config.gateway.retention
            if not section.enabled:
                continue
            rules = rules_of(section)
            try:
                if not await self.store.retention.due(rules):
                    continue  # a read: an idle ledger's prune takes no lease, writes nothing
                pruned = await self.store.retention.prune(rules, holder=self.host)
            except StoreError as exc:  # the next round tries again
                log.warning("the ledger was not pruned: %s", exc)
                continue
            if pruned is None:
                continue  # another host prunes the shared ledger now
            self.last_prune = pruned
            self.pruned.set()
            if pruned.total:
                said = "; ".join(" ".join(line.split()) for line in pruned.lines())
                log.info("ledger pruned: %s", said)

    def kick(self, session: SessionRecord) -> None:
        """Something was queued for ``session``: its runner here takes it; another host's
        is woken by the ledger (the prompt's NOTIFY)."""
        if self.runs_here(session):
            self.runner(session).kick()

    def wake_scheduler(self) -> None:
        """A schedule was made or changed here: the scheduler looks again now."""
        if self.scheduler is not None:
            self.scheduler.wake()

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
            try:
                await self.show_everywhere(runner.session_id)
            except StoreError as exc:  # shown there by the next runner of the session
                log.warning("session %s: not shown everywhere (%s)", runner.session_id, exc)
            await runner.run()
        except Exception:
            # one session's failure must not end the others: report and forget the runner
            log.exception("session %s failed", runner.session_id)
            try:
                await runner.report_crash()
            except StoreError as exc:  # the ledger is gone (it may be why): not the host's end
                log.warning("session %s: its failure not told (%s)", runner.session_id, exc)
        finally:
            if self._runners.get(runner.session_id) is runner:
                self._runners.pop(runner.session_id, None)
                self._runner_tasks.pop(runner.session_id, None)

    # --- Deliverer (the broker writes decisions through the session's runner) -------------

    async def deliver(self, interaction: Interaction, decision: Decision) -> str | None:
        return await self._runner_of(interaction).deliver(interaction, decision)

    def own_delivery(self, interaction: Interaction, work: DeliveryWork) -> asyncio.Future[Written]:
        return self._runner_of(interaction).own_delivery(interaction, work)

    def sweep_soon(self, session_id: str) -> None:
        runner = self._runners.get(session_id)
        if runner is not None:
            runner.sweep_soon()

    def _runner_of(self, interaction: Interaction) -> SessionRunner:
        if self.fenced:
            raise DeliveryRefused(f"host {self.host} lost its lease on its sessions")
        runner = self._runners.get(interaction.session_id)
        if runner is None:
            raise DeliveryRefused("the agent process that asked has ended")
        return runner

    # --- Inbox ----------------------------------------------------------------------------

    async def on_message(self, message: InboundMessage) -> None:
        if self.fenced:
            log.warning("host %s: a message not taken (starting over)", self.host)
            await self.control.reply(message.conversation, self.fenced_text())
            return
        await self.control.on_message(message)

    async def on_action(self, action: InboundAction) -> Ack:
        answer = await self._answer_action(action)
        return self._spelled(answer, action.conversation)

    def _spelled(self, answer: Ack, conversation: ConversationRef) -> Ack:
        """A press's answer with the commands it names spelled as the platform where it was
        pressed takes them ("@gateway /model" on Slack), as a reply to a typed one is."""
        platform = self.platforms.get(conversation.platform)
        if platform is None or not answer.text:
            return answer
        spelled = spell_commands(answer.text, platform.spell_command)
        return answer if spelled == answer.text else replace(answer, text=spelled)

    async def _answer_action(self, action: InboundAction) -> Ack:
        if self.fenced:
            return Ack(text=self.fenced_text(), accepted=False)
        if is_steer_token(action.token):  # "Send into this turn now": not a decision
            return await self.steer_buttons.on_click(action)
        if is_model_token(action.token):  # /model's list: the command, not a decision
            return await self.control.model_buttons.on_click(action)
        if is_schedule_token(action.token):  # /schedules' pause, resume, delete
            return await self.schedule_buttons.on_click(action)
        if is_files_token(action.token):  # a message whose files did not come: not a decision
            return await self.file_choices.on_click(action)
        try:
            return await self.desk.on_action(action)
        except StoreError as exc:
            # the connection cut mid-transaction: committed or not, this host cannot know
            log.warning("host %s: a click met a ledger error (%s)", self.host, exc)
            self._after_unknown_decision(action.token)
            return Ack(text=LEDGER_NO_ANSWER, accepted=False)

    async def on_form(self, form: InboundForm) -> Ack:
        return self._spelled(await self._answer_form(form), form.conversation)

    async def _answer_form(self, form: InboundForm) -> Ack:
        if self.fenced:
            return Ack(text=self.fenced_text(), accepted=False)
        try:
            return await self.desk.on_form(form)
        except StoreError as exc:
            # the connection cut mid-transaction: committed or not, this host cannot know
            log.warning("host %s: a form met a ledger error (%s)", self.host, exc)
            self._after_unknown_decision(form.token)
            return Ack(text=LEDGER_NO_ANSWER, accepted=False)

    def _after_unknown_decision(self, token: str) -> None:
        """A click or form whose decision may have committed without this host hearing it:
        its card is drawn again from the ledger, and the sessions here look for a decision
        left unwritten now rather than at their next period (the sweep writes it once)."""
        interaction_id = interaction_named(token)
        if interaction_id is not None:
            self.broker.mark_dirty(interaction_id)
        for runner in self._runners.values():
            runner.sweep_soon()

    async def may_answer(self, action: InboundAction) -> Ack:
        """Whether a form may open for ``action``'s person: the click's checks, no decision.
        A host that lost its lease answers as a click there is answered, nothing opened."""
        if self.fenced:
            return Ack(text=self.fenced_text(), accepted=False)
        try:
            # reads only, on the ledger's read-only connection: nothing for edits to wait for
            return await self.desk.may_answer(action)
        except StoreError as exc:
            log.warning("host %s: a form's pre-check met a ledger error (%s)", self.host, exc)
            return Ack(text=LEDGER_NO_ANSWER, accepted=False)

    async def has_session(self, conversation: ConversationRef) -> bool:
        return await self.store.peek.has_open_session(conversation)

    def form_ledger(self) -> FormLedger | None:
        """Where the platforms keep form drafts (``SharesForms``): the shared ledger, or
        None on one host (each platform's memory)."""
        return self._form_ledger

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

    async def waiting(
        self, conversation: ConversationRef, actor: Actor
    ) -> tuple[WaitingRequest, ...]:
        """The requests waiting for a decision in the session bound to ``conversation``
        (``KnowsWaiting``: a command's request id completed as it is typed); none for a
        person who may not talk to its project, who learns nothing of them."""
        session = await self.store.peek.bound(conversation)
        if session is None or session.is_closed:
            return ()
        platform = self.config.platforms.auth_platforms().get(
            conversation.platform, conversation.platform
        )
        checked = Actor(platform=platform, user_id=actor.user_id, roles=actor.roles)
        if not may_talk(self.config, session.project, checked):
            return ()
        return tuple(
            WaitingRequest(id=i.id, title=i.title, question=i.kind is InteractionKind.QUESTION)
            for i in await self.store.interactions.list_open(session.id)
            if i.state is InteractionState.PENDING
        )

    async def _offer_files_choice(self, prompt: PromptRecord) -> None:
        """A runner's prompt whose files did not come: its card shown apart, in the engine's
        task group, so that a platform slow to take it (a 429 waited out) holds up no turn."""

        async def offer() -> None:
            try:
                await self.file_choices.offer(prompt)
            except Exception:  # the message waits in the ledger all the same: /status says so
                log.exception("the files' card of prompt %s was not shown", prompt.id)

        with contextlib.suppress(RuntimeError):  # stopping: the message waits in the ledger
            self._spawn(offer())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in the engine's task group, which the ledger outlives (a refused
        pre-check's audit entry); RuntimeError once the group takes no more tasks."""
        if self._tasks is None:
            raise RuntimeError("the gateway is not running")
        self._tasks.create_task(work)

    async def on_platform_back(self, platform: str) -> None:
        back = self.platforms.get(platform)
        if back is not None:
            self._lease_receiver(back)  # connected only now: its receiving by lease starts
        for runner in list(self._runners.values()):
            runner.platform_back(platform)  # a turn's final text that failed there
        await self.file_choices.offer_unshown(platform)  # a files' choice it failed to show
        sent = await self.broker.resend_failed()
        if sent:
            log.info("%s is back: %d card(s) that had failed were sent again", platform, sent)
