"""One session's agent: started on demand, fed prompts in order, its events turned into
ledger moves, cards and messages.

A :class:`SessionRunner` is one task owned by the engine. Each agent process it starts is a
new runtime epoch, recorded (pid, process group, start time) before anything is sent to it.
While the agent lives, owned tasks run: the event consumer, the prompt feeder (one turn at a
time, from the durable queue), the interrupt watch, the sweep of stranded decisions, and,
where the project has an expiry policy, one that expires the epoch's requests nobody answered
in time. What the session says goes through its :class:`~gateway.sessions.outlets.Outbound`: one
outlet task per conversation, paced by that conversation's platform alone. Each turn is kept
as an ordered timeline (gateway/timeline.py), saved to the ledger as it goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime

from gateway.attachments import (
    InboundAttachment,
    SavedFile,
    files_in_prompt,
    pictures_named_notice,
    sent_without_notice,
    without_files,
)
from gateway.config.model import ProjectConfig
from gateway.config.policy_rules import PolicyRule, RuleAction
from gateway.domain import (
    Actor,
    ConversationRef,
    Decision,
    InteractionOrigin,
    InteractionState,
    Resolution,
    TurnStatus,
)
from gateway.errors import (
    AgentError,
    AlreadyDecided,
    EpochEnded,
    FileRefused,
    GatewayError,
    InvalidDecision,
    NativeSessionGone,
    StoreError,
)
from gateway.events import (
    DETACHED,
    AgentEvent,
    AgentExited,
    AgentMessage,
    Compact,
    InteractionClosed,
    InteractionOpened,
    Interrupt,
    ModelsOffered,
    ModesOffered,
    NameSession,
    PolicyChanged,
    Prompt,
    Respond,
    SessionNamed,
    SessionStarted,
    SteerRefused,
    SteerTaken,
    TextDelta,
    ToolActivity,
    TurnCompleted,
    TurnStarted,
    Usage,
    Warning,
)
from gateway.interactions.escalation import (
    Escalation,
    channel_conversation,
    escalation_notice,
    escalation_of,
)
from gateway.interactions.escalation import due_at as escalation_due_at
from gateway.interactions.expiry import due_at, is_due, plan_expiry
from gateway.interactions.machine import Interaction, InteractionEvent
from gateway.interactions.plans import next_turn, plan_prompt_key
from gateway.interactions.policy import governing_rule, send_file_rule
from gateway.interactions.votes import POLICY_ACTOR, refusal
from gateway.platform import Platform
from gateway.render.card_pointers import expiry_notice
from gateway.render.exit_notice import exit_notice
from gateway.render.queue_notes import held_note, stopped_notice
from gateway.send_file_wire import SendFileAnswer, SendFileCall
from gateway.sessions.agents import AgentLauncher, RunningAgent
from gateway.sessions.broker import Broker, DeliveryRefused, DeliveryWork, Written
from gateway.sessions.compaction import Compaction
from gateway.sessions.file_fetch import save_attachments
from gateway.sessions.file_sends import FileSends, file_request
from gateway.sessions.idle import IdleWatch, idle_words
from gateway.sessions.outbound import (
    AGENT_ENDED_WORDS,
    TOOL_ENDED_WORDS,
    Notifier,
    TurnStream,
    card_messages,
)
from gateway.sessions.outgoing_files import SendRefused, ask_reasons, open_in_work_dir
from gateway.sessions.outlets import Outbound
from gateway.sessions.send_file_channel import SendFileChannel
from gateway.sessions.steering import Steering
from gateway.sessions.upload_inbox import UploadInbox
from gateway.sessions.usage import SessionUsage
from gateway.store.database import Clock, utc_now
from gateway.store.records import FilesChoice, PromptRecord, TurnRecord
from gateway.store.store import Store

__all__ = ["FilesFailed", "SessionRunner"]

log = logging.getLogger(__name__)

# a prompt's files failed, it waits: (the prompt, why, whether fetching again may help)
FilesFailed = Callable[[PromptRecord], Awaitable[None]]


def start_failure_hint(exc: Exception) -> str:
    """The next step after an agent failed to start, from what is known of why."""
    said = str(exc)
    if "No such file or directory" in said or "not found" in said:
        return (
            "Is it installed, and on the PATH the gateway runs with (a service's PATH is not "
            "your shell's)? `agent-gateway check --config …` on this machine probes it."
        )
    if "Permission denied" in said:
        return "The file is not executable by the gateway's user: check its mode and owner."
    return (
        "`agent-gateway check --config …` on this machine probes the agent and names its "
        "version; the gateway's log has the agent's last lines."
    )


_QUIET_WARNINGS = frozenset({"config_warning"})
# a turn that ended before its end and nobody stopped it, where the agent gives no reason
INTERRUPTED_WORDS = "⏹ The turn was interrupted."
# The expiry task sleeps on the event loop's monotonic time but compares the injected wall
# clock: it looks again at least this often, so a clock that jumps (or a suspended machine)
# delays an expiry by this much at most.
EXPIRY_RECHECK_SECONDS = 60.0
# A decision on a plan card is queued even when the queue of messages is full: the person
# decided on a card the agent is waiting on, and refusing it would lose the decision. It is
# still bounded: one plan card waits per session at most (the next turn closes it), so the
# queue holds at most its depth plus this one.
PLAN_QUEUE_EXTRA = 1
# how long /name waits for the agent to acknowledge the name (Codex answers at once)
NAME_ANSWER_SECONDS = 5.0
# How long the text before a card may hold the card up (Outbound.settle): a platform slower
# than that shows its text after the card, rather than every platform getting the card late.
SETTLE_SECONDS = 1.0
# How often a running turn's timeline is saved (what came since the last save, appended); it
# is also saved when the turn ends.
TIMELINE_SAVE_SECONDS = 1.0


_EXIT_REASONS = {
    "killed": "killed by a signal",
    "line_too_long": "stopped: it wrote a line too long to read",
    "protocol_error": "stopped: it broke the protocol",
    "stopped": "stopped by the gateway",
    DETACHED: "let go of by the gateway (the server it is attached to may still run)",
}


def describe_exit(event: AgentExited) -> str:
    """Why the agent process ended, in words, with its exit code when it has one."""
    if event.reason in ("", "exited"):
        return f"exited with code {event.code}" if event.code is not None else "ended"
    text = _EXIT_REASONS.get(event.reason, event.reason)
    return f"{text}; exit code {event.code}" if event.code is not None else text


# a ledger that failed: how soon the queue is looked at again, first, and at the most
LEDGER_FIRST_RETRY_SECONDS = 0.5
LEDGER_RETRY_SECONDS = 5.0
LEDGER_EXIT = "the gateway's ledger failed"
LEDGER_ENDED_WORDS = "stopped: the gateway's ledger failed"
LEDGER_FAILED = (
    "⚠ The gateway's ledger failed, so this session's agent was ended rather than left "
    "waiting on it. Your next message starts it again."
)
LEDGER_CARDS_LATER = "Its open requests show this once the ledger answers again."
LEDGER_WAITING = (
    "⚠ The gateway's ledger is not answering: your message waits in the queue and runs once "
    "it answers again."
)


def _first(group: BaseExceptionGroup[StoreError]) -> StoreError:
    """The first StoreError in a (nested) exception group."""
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    assert isinstance(first, StoreError)
    return first


class _AgentGone(Exception):
    """The agent process ended: leave the epoch's task group."""


def _retrieved(outcome: asyncio.Future[Written]) -> None:
    if not outcome.cancelled():
        outcome.exception()


class SessionRunner:
    def __init__(
        self,
        *,
        session_id: str,
        project: ProjectConfig,
        store: Store,
        broker: Broker,
        launcher: AgentLauncher,
        platforms: Mapping[str, Platform],
        stop_grace_seconds: float,
        queue_depth: int,
        clock: Clock = utc_now,
        groups: Mapping[str, Sequence[str]] | None = None,
        people: Mapping[str, Sequence[str]] | None = None,
        rule_of: Callable[[Interaction], PolicyRule | None] | None = None,
        send_files: SendFileChannel | None = None,
        turn_ended: Callable[[], None] = lambda: None,
        files_failed: FilesFailed | None = None,
    ) -> None:
        self.session_id = session_id
        self._turn_ended = turn_ended  # told after each turn's end is recorded (the scheduler)
        # a prompt whose files failed waits for its author's choice: who offers it (issue 32;
        # None: the chat is only told why)
        self._files_failed = files_failed
        self._send_files = send_files  # None: its agents are not given send_file
        self._files = FileSends(platforms)
        self._project = project
        self._store = store
        self._broker = broker
        self._launcher = launcher
        self._platforms = platforms
        self._notifier = Notifier(platforms)  # once the runner's outbound has ended
        self._outbound = Outbound(platforms)
        self._stop_grace = stop_grace_seconds
        self._queue_depth = queue_depth
        self._clock = clock
        self._opened = asyncio.Event()  # a request was opened: the expiry task looks again
        self._opened_unanswered = asyncio.Event()  # ... and the escalation task
        # the requests the agent has open in this epoch: native key -> interaction id (a
        # close whose answer the ledger lost has its card read again: _closed)
        self._asked: dict[str, str] = {}
        self._groups = groups or {}  # [groups] and [people]: whom an escalation asks
        self._people = people or {}
        # the rule governing a request (the engine's PolicyBook: walked once per request)
        self._rule_of = rule_of or (lambda interaction: governing_rule(project.policy, interaction))
        self._wake = asyncio.Event()
        self._prompt_ready = asyncio.Event()
        self._turn_done = asyncio.Event()
        self._interrupt_requested = asyncio.Event()
        self._sweep_wanted = asyncio.Event()
        # set while the live epoch's feed waits for a prompt: no turn runs, nothing claimed
        # (tests: from then on an idle session makes no call of its own)
        self.waiting_for_work = asyncio.Event()
        self._epoch_tasks: asyncio.TaskGroup | None = None
        self._closing = False
        # NameSession's answers awaited (/name), by the name asked
        self._names_asked: dict[str, asyncio.Future[None]] = {}
        # the models the agent said it offers (ModelsOffered), kept after it ends: /model is
        # checked against them; None where it never said
        self.models_offered: tuple[str, ...] | None = None
        # the modes it said it offers (ModesOffered; None: not listed) and the one in force
        self.modes_offered: tuple[str, ...] | None = None
        self.mode_now: str | None = None
        self._exit_notice: str | None = None
        self.agent: RunningAgent | None = None
        self.epoch: int | None = None
        self.start_failure: str | None = None  # why the agent last failed to start, until it does
        self.start_failure_help = ""  # the next step after it (start_failure_hint)
        self._turn: TurnRecord | None = None
        self._stream: TurnStream | None = None
        self._stopped_by: Actor | None = None  # the person whose /stop the turn is ending on
        self._reattach: int | None = None  # a live epoch whose server outlived the gateway
        self._keep_attached = False  # the gateway stops: an attached epoch stays live
        self.usage = SessionUsage()  # since this gateway started the session's runner
        self._shown_in: list[ConversationRef] = []  # the conversations last read
        self._ledger_failing = False  # until a look at the queue (and a record) succeeds
        self._retry_in = LEDGER_FIRST_RETRY_SECONDS  # then doubled, up to LEDGER_RETRY_SECONDS
        self._unrecorded: int | None = None  # an epoch ended by a ledger failure, not recorded
        self._steering = Steering(store, self._notifier)  # messages given to the running turn
        self._compaction = Compaction(self._notifier)  # a /compact asked
        self.idle = IdleWatch()  # idle_minutes: the quiet time of the live epoch
        self._idle_end: str | None = None  # why the agent is being ended, when idle
        # taken by the feed to start a turn; by the idle end, for good, to start none
        self._feed_gate = asyncio.Lock()
        self._idled = False  # the epoch ending now was ended as idle
        # set once an idle agent's process has ended and its end is recorded (for tests)
        self.ended_idle = asyncio.Event()

    # --- what the engine asks -------------------------------------------------------------

    def reload(
        self,
        project: ProjectConfig,
        groups: Mapping[str, Sequence[str]],
        people: Mapping[str, Sequence[str]],
    ) -> None:
        """A reloaded config's policy, groups and people (whom an escalation asks); what
        the agent was started with cannot have changed (gateway/config/reload.py)."""
        self._project = project
        self._groups = groups
        self._people = people

    def reattach(self, epoch: int) -> None:
        """Reach the session's agent server again, which outlived the previous gateway
        (attached OpenCode), continuing ``epoch``: its requests the server still lists stay
        pending, their cards live, and a decision on one is written to it."""
        self._reattach = epoch
        self._wake.set()

    def kick(self) -> None:
        """Something was queued or resumed: look at the queue."""
        self.idle.touch()
        self._wake.set()
        self._prompt_ready.set()

    def request_opened(self) -> None:
        """A request was opened outside the agent's events (a setting change, issue 31): the
        expiry task looks at it now, not at its next look."""
        self.idle.touch()
        self._opened.set()

    async def shutdown(self, *, notice: str | None = None, gateway_stopping: bool = False) -> None:
        """Stop taking work and end the agent (its exit is recorded like any other);
        ``notice`` is what the session's conversations are told then, instead of the
        agent's exit (None: nothing, the caller says what happens). ``gateway_stopping``:
        the whole gateway stops, so a server it is only attached to keeps its epoch live for
        the next gateway to reattach (not so for ``/new``, which ends the session)."""
        self._closing = True
        self._keep_attached = gateway_stopping
        self._exit_notice = notice
        self.kick()
        agent = self.agent
        if agent is not None:
            await agent.stop()

    async def report_crash(self) -> None:
        """This runner failed on a bug of ours: say so where the session is shown."""
        await self._notify("⚠ The gateway lost this session's runner; send a message to restart.")

    @property
    def turn_running(self) -> bool:
        return self._turn is not None

    async def turn_over(self) -> None:
        """Wait until the turn running now ends (at once if none runs)."""
        if self._turn is not None:
            await self._turn_done.wait()

    async def interrupt(self, *, by: Actor | None = None) -> bool:
        """The native interrupt; the agent is killed if the turn does not end within the
        grace period. False when no turn runs. ``by``: a person's /stop. What the turn's end
        withdraws is then recorded as stopped by them, and the turn's end is the one notice
        of it ("⏹ Stopped by …", with what is held)."""
        agent = self.agent
        if agent is None or self._turn is None:
            return False
        if by is not None and self._stopped_by is None:
            self._stopped_by = by
        await agent.send(Interrupt())
        self._interrupt_requested.set()
        return True

    @property
    def can_steer(self) -> bool:
        """A turn runs in an agent that takes text into it (gateway/sessions/steering.py)."""
        return self._turn is not None and self.agent is not None and self.agent.capabilities.steer

    async def steer(self, prompt_id: int) -> str | None:
        """Give the queued prompt ``prompt_id`` to the running turn (gateway/sessions/
        steering.py): None when written, else why not (it stays queued)."""
        turn = self._turn
        why = await self._steering.steer(
            self.session_id, prompt_id, self.agent, turn_id=turn.id if turn else None
        )
        if why is not None:  # it stays queued: the feed may have looked at the queue meanwhile
            self.kick()
        return why

    def compact(self, conversation: ConversationRef) -> bool:
        """Ask the agent's own compaction, as a turn before the next queued message,
        reported in ``conversation``; False when no agent that compacts runs."""
        if self.agent is None or not self.agent.capabilities.compact:
            return False
        self._compaction.ask(conversation)
        self.kick()
        return True

    def own_delivery(self, interaction: Interaction, work: DeliveryWork) -> asyncio.Future[Written]:
        """Run a decision's write and its record as a task of the epoch that asked: it ends
        with that epoch, never with the caller that handed it over. Its outcome is the
        future returned; a ledger error (the record's transaction cut) is the caller's, not
        the epoch's: the session runs on, and a sweep soon records the write."""
        tasks = self._epoch_tasks
        if tasks is None or self.agent is None or self.epoch != interaction.runtime_epoch:
            raise DeliveryRefused("the agent process that asked has ended")
        outcome: asyncio.Future[Written] = asyncio.get_running_loop().create_future()
        outcome.add_done_callback(_retrieved)  # a caller cancelled meanwhile reads nothing
        owned = self._owned(work, outcome)
        try:
            tasks.create_task(owned)
        except RuntimeError as exc:  # the epoch's task group is ending: its agent with it
            owned.close()  # never started: nothing of it runs
            raise DeliveryRefused("the agent process that asked is ending") from exc
        return outcome

    async def _owned(self, work: DeliveryWork, outcome: asyncio.Future[Written]) -> None:
        try:
            outcome.set_result(await work())
        except StoreError as exc:
            log.warning("session %s: a delivery's record failed (%s)", self.session_id, exc)
            self.sweep_soon()  # the write was made: the sweep records it (AlreadyAnswered)
            outcome.set_exception(exc)
        except asyncio.CancelledError:
            outcome.cancel()
            raise
        except BaseException as exc:
            outcome.set_exception(exc)
            raise

    def platform_back(self, platform: str) -> None:
        """``platform`` reaches its servers again: a turn's final text that failed there in
        the outage is shown now."""
        self._outbound.platform_back(platform)

    def sweep_soon(self) -> None:
        """Look for stranded decisions now (Broker.sweep), not at the next period."""
        self._sweep_wanted.set()

    async def deliver(self, interaction: Interaction, decision: Decision) -> str | None:
        agent = self.agent
        if agent is None or self.epoch != interaction.runtime_epoch:
            raise DeliveryRefused("the agent process that asked has ended")
        if interaction.origin is InteractionOrigin.PLAN:
            await self._plan_decided(interaction, decision)
            return None
        if interaction.origin is InteractionOrigin.SETTING:  # the broker applies it
            raise DeliveryRefused("a setting change is not written to the agent")
        if interaction.native_key is None:  # pragma: no cover - an agent's request has one
            raise DeliveryRefused("the request has no key to answer it by")
        if self._files.is_file_key(interaction.native_key):
            # a send_file call: "written" is the file uploaded (or not) and the tool answered;
            # what it became is the card's to say
            return await self._files.deliver(interaction, decision, await self._conversations())
        await agent.send(Respond(native_key=interaction.native_key, decision=decision))
        return None

    async def _plan_decided(self, interaction: Interaction, decision: Decision) -> None:
        """A decision on the gateway's own plan card is the next turn
        (gateway/interactions/plans.py),
        queued once (keyed by the interaction) as the decider's message in the session's first
        conversation; the card is resolved when that turn starts."""
        turn = next_turn(decision)
        fact = interaction.decision
        conversations = await self._conversations()
        if not conversations or fact is None:
            raise DeliveryRefused("the plan's session is shown nowhere")
        await self._store.prompts.enqueue(
            self.session_id,
            conversation=conversations[0],
            platform_message_id=plan_prompt_key(interaction.id),
            author=fact.actor,
            text=turn.text,
            max_depth=self._queue_depth + PLAN_QUEUE_EXTRA,
            mode=turn.mode,
        )
        self._prompt_ready.set()

    async def _close_gateway_plans(self, prompt: PromptRecord) -> None:
        """A turn starts: the gateway's plan cards are done with. The one whose decision
        this turn is, is answered (its card says "sent" now, no longer "queued"); one still
        waiting is replaced by the message that runs now (a message is never a decision on
        it). A decision queued behind this message waits for its own turn."""
        for waiting in await self._store.interactions.list_open(self.session_id):
            if waiting.origin is not InteractionOrigin.PLAN:
                continue
            if waiting.state is InteractionState.DELIVERED:
                if prompt.platform_message_id != plan_prompt_key(waiting.id):
                    continue
                event = InteractionEvent.CONFIRM
            else:
                event = InteractionEvent.SUPERSEDE
            update = await self._store.interactions.resolve(waiting.id, event, by="gateway")
            self._broker.mark_dirty(update.interaction.id)

    # --- the task -------------------------------------------------------------------------

    async def run(self) -> None:
        async with self._outbound.running():  # what is queued to each conversation is sent
            while not self._closing:
                if not self._ledger_failing:
                    await self._wake.wait()
                else:  # look again after a while: a ledger back gives no other sign
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self._retry_in):
                            await self._wake.wait()
                    self._retry_in = min(self._retry_in * 2, LEDGER_RETRY_SECONDS)
                self._wake.clear()
                if self._closing:
                    return
                try:
                    await self._record_ended_epoch()
                    if self._reattach is not None or await self._has_work():
                        await self._run_epoch()
                except StoreError as exc:  # before an agent ran: its message waits, queued
                    await self._ledger_unavailable(exc)
                    continue
                if self._unrecorded is None:  # else looked at again until it is recorded
                    self._ledger_failing, self._retry_in = False, LEDGER_FIRST_RETRY_SECONDS

    async def _has_work(self) -> bool:
        session = await self._store.sessions.get(self.session_id)
        if session is None or session.is_closed:
            return False
        return any(not p.held for p in await self._store.prompts.list_queued(self.session_id))

    async def _conversations(self) -> list[ConversationRef]:
        """Where the session is shown (also kept for :meth:`_notify` to use should the
        ledger fail)."""
        self._shown_in = await self._store.sessions.list_bindings(self.session_id)
        return self._shown_in

    async def _run_epoch(self) -> None:
        session = await self._store.sessions.get(self.session_id)
        assert session is not None
        reattach, self._reattach = self._reattach, None
        ledger_failure: StoreError | None = None
        mcp_server, token = None, None
        if self._send_files is not None and self._project.send_file.enabled:
            mcp_server, token = self._send_files.mcp_server_for(self.session_id)
        try:
            async with self._launcher.launch(
                self._project,
                resume_native_id=session.native_session_id,
                mcp_server=mcp_server,
            ) as agent:
                if reattach is not None:
                    epoch = reattach  # the same server, the same epoch: its requests stay
                else:
                    epoch = await self._begin_epoch(agent)
                self.agent, self.epoch = agent, epoch
                self._asked.clear()
                self.start_failure = None
                self._feed_gate = asyncio.Lock()
                self.ended_idle.clear()
                try:
                    await self._on_started(agent.started, epoch)
                    await self._name_if_untold(agent)
                    async with asyncio.TaskGroup() as tasks:
                        self._epoch_tasks = tasks
                        tasks.create_task(self._consume(agent, epoch))
                        tasks.create_task(self._sweep_stranded(epoch))
                        tasks.create_task(self._feed(agent, epoch))
                        tasks.create_task(self._watch_interrupt(agent))
                        if self._project.expiry.after_seconds is not None or any(
                            rule.expiry is not None for rule in self._project.policy
                        ):
                            tasks.create_task(self._expire_overdue(epoch))
                        if any(rule.escalate_after is not None for rule in self._project.policy):
                            tasks.create_task(self._escalate_overdue(epoch))
                        minutes = self._project.idle_minutes
                        if minutes is not None and not self._project.attached:
                            tasks.create_task(self._end_when_idle(agent, epoch, minutes))
                except* _AgentGone:
                    pass
                except* StoreError as group:
                    # a ledger call of the epoch failed for good: the agent is ended (on
                    # leaving the launcher) rather than left to ask what nobody can record
                    ledger_failure = _first(group)
                finally:
                    self.agent = None
                    self._epoch_tasks = None
                    if self.epoch is not None and ledger_failure is None:
                        # left without AgentExited (a bug of ours, or cancelled): the process
                        # is stopped by the launcher; record that its epoch ended too
                        await self._end_epoch_quietly(epoch)
            if ledger_failure is not None:
                await self._ledger_failed(epoch, ledger_failure)
            if self._idled:  # its process ended and reaped (leaving the launcher)
                self._idled = False
                self.ended_idle.set()
        except AgentError as exc:
            if reattach is not None:  # the server went away after the recovery asked it
                await self._store.sessions.end_epoch(
                    self.session_id, reattach, exit_description=f"not reattached: {exc}"
                )
                for update in await self._store.interactions.orphan_epoch(
                    self.session_id, reattach, runtime_outlives_gateway=True, note=str(exc)
                ):
                    self._broker.mark_dirty(update.interaction.id)
            if isinstance(exc, NativeSessionGone) and reattach is None:
                await self._native_session_gone(exc)
                return
            self.start_failure = str(exc)
            self.start_failure_help = start_failure_hint(exc)
            log.warning("session %s: the agent could not start: %s", self.session_id, exc)
            await self._store.prompts.hold(self.session_id, reason="the agent failed to start")
            await self._notify(
                f"⚠ The agent could not start: {exc}\n{start_failure_hint(exc)}\n"
                "Your messages are held: /resume to try again, /clear to drop them; a new "
                "message tries again first."
            )
        finally:
            if token is not None and self._send_files is not None:
                self._send_files.tokens.revoke(token)  # its calls are refused from now on
            self._files.end_epoch("the agent's process ended before the file was decided")

    async def name_agent_session(self, name: str) -> bool:
        """``/name``: the agent names its own session too (Codex keeps thread names), if it
        runs and keeps names; its answer is awaited (at most :data:`NAME_ANSWER_SECONDS`).
        True when the agent acknowledged it. A name it did not take is given again at its
        next start (:meth:`_name_if_untold`), where the agent says the name it has."""
        agent = self.agent
        if agent is None or not agent.capabilities.names_sessions:
            return False
        answered = self._names_asked.setdefault(name, asyncio.get_running_loop().create_future())
        try:
            await agent.send(NameSession(name=name))
            async with asyncio.timeout(NAME_ANSWER_SECONDS):
                await asyncio.shield(answered)
            return True
        except (AgentError, TimeoutError) as exc:  # a name is a nicety: the session goes on
            log.info("session %s: the agent did not take its name: %r", self.session_id, exc)
            return False
        finally:
            if self._names_asked.get(name) is answered:
                del self._names_asked[name]

    async def _name_if_untold(self, agent: RunningAgent) -> None:
        """At the agent's start: the ledger's name, where the agent keeps names and has
        another (a /name it never acknowledged, given while no agent ran, or the agent's
        copy lost), is given to it; not awaited: the first turn need not wait for it."""
        if not agent.capabilities.names_sessions:
            return
        session = await self._store.sessions.get(self.session_id)
        name = session.name if session is not None else None
        if name is None or name == agent.started.native_name:
            return
        try:
            await agent.send(NameSession(name=name))
        except AgentError as exc:
            log.info("session %s: the agent did not take its name: %s", self.session_id, exc)

    async def _native_session_gone(self, exc: NativeSessionGone) -> None:
        """The agent no longer knows this session's native id (issue 31): the session is
        over, said plainly; what was queued for it is dropped (never sent to a session it
        was not typed for), and the next message starts a new session."""
        log.warning("session %s: the agent no longer knows it: %s", self.session_id, exc)
        dropped = await self._store.prompts.clear(self.session_id)
        await self._store.sessions.close(
            self.session_id, reason=f"the agent no longer knows it: {exc.message}"
        )
        unsent = (
            " Your message was not sent: send it again to start a new session."
            if dropped == 1
            else f" Your {dropped} messages were not sent: send them again to start a new session."
            if dropped
            else " Your next message starts a new session."
        )
        await self._notify(
            f"⚠ This session is gone: {self._project.agent.value} no longer has its"
            f" conversation ({exc.message}).{unsent}"
        )
        self._closing = True  # nothing more runs for it here

    async def _begin_epoch(self, agent: RunningAgent) -> int:
        """Record the agent's new epoch; one whose commit's answer was lost is read back
        (only this runner begins the session's epochs: a live one is the one it made)."""
        try:
            return await self._store.sessions.begin_epoch(
                self.session_id,
                pid=agent.pid,
                pgid=agent.pgid,
                process_start_time=agent.start_time,
                agent_version=agent.started.agent_version,
            )
        except StoreError as exc:
            if not exc.outcome_unknown:
                raise
            session = await self._store.sessions.get(self.session_id)
            if session is not None and session.current_epoch:
                made = await self._store.sessions.get_epoch(self.session_id, session.current_epoch)
                if made is not None and made.is_live:
                    return made.epoch
            raise

    async def _fetch_files(self, prompt: PromptRecord) -> tuple[SavedFile, ...] | None:
        """The files of ``prompt``, fetched from its platform into the project's inbox (this
        host runs the session: issue 32). None when one is refused: the person is told why,
        and the prompt waits for their choice (gateway/sessions/file_choice.py), never sent
        without its files unless they say so."""
        policy = self._project.files
        try:
            return await save_attachments(
                prompt.attachments,
                platform=self._platforms.get(prompt.conversation.platform),
                inbox=UploadInbox(self._project.work_dir, policy.inbox),
                policy=policy,
            )
        except FileRefused as exc:
            log.info("session %s: prompt %s refused: %s", self.session_id, prompt.id, exc)
            waiting = await self._store.prompts.wait_for_files_choice(
                prompt.id, why=str(exc), again=exc.again
            )
            if self._files_failed is None:
                await self._notify(f"⚠️ {exc} The message was not sent to the agent.")
            else:
                await self._files_failed(waiting)
            return None

    async def _claim_next(self) -> PromptRecord | None:
        """The next prompt, claimed; a claim whose commit's answer was lost is read back.
        None, with no write, when the queue has nothing to take (read first)."""
        try:
            if not await self._store.prompts.claimable(self.session_id):
                return None
        except StoreError as exc:  # a reader's cut: the claim (the writer reconnects) decides
            log.info("session %s: the queue not read first (%s)", self.session_id, exc)
        try:
            return await self._store.prompts.claim_next(self.session_id)
        except StoreError as exc:
            if not exc.outcome_unknown:
                raise
            return await self._store.prompts.in_flight(self.session_id)

    async def _on_started(self, started: SessionStarted, epoch: int) -> None:
        if started.native_id:
            await self._store.sessions.set_native_session_id(self.session_id, started.native_id)
        await self._store.sessions.set_policy(
            self.session_id, epoch, started.policy, agent_version=started.agent_version
        )

    async def _consume(self, agent: RunningAgent, epoch: int) -> None:
        async for event in agent.events():
            await self._on_event(event, epoch)
            if isinstance(event, AgentExited):
                break
        raise _AgentGone

    async def _feed(self, agent: RunningAgent, epoch: int) -> None:
        while True:
            self._prompt_ready.clear()
            async with self._feed_gate:  # an idle end holds it: nothing is claimed then
                compacting = self._compaction.take()  # a /compact: a turn of its own, first
                prompt = None if compacting else await self._claim_next()
                files: tuple[SavedFile, ...] = ()
                missing: tuple[InboundAttachment, ...] = ()
                if prompt is not None and prompt.files_choice is FilesChoice.WITHOUT:
                    missing = prompt.attachments  # its author chose: text alone (issue 32)
                elif prompt is not None and prompt.attachments:
                    # fetched by this host, which runs the session (issue 32)
                    fetched = await self._fetch_files(prompt)
                    if fetched is None:
                        continue  # refused and told: the prompt does not go without its files
                    files = fetched
                if prompt is not None or compacting:
                    try:
                        turn = self._turn = await self._store.turns.start(
                            self.session_id, epoch, prompt_id=prompt.id if prompt else None
                        )
                    except EpochEnded:
                        # the epoch ended between the claim and the turn (the agent exited,
                        # or the gateway is stopping): nothing was sent, so the prompt keeps
                        # its place
                        if prompt is not None:
                            await self._store.prompts.release(prompt.id)
                        await asyncio.Event().wait()  # the consumer ends this epoch
            if prompt is None and not compacting:
                self.waiting_for_work.set()
                try:
                    await self._prompt_ready.wait()
                finally:
                    self.waiting_for_work.clear()
                continue
            self._turn_done.clear()
            self._interrupt_requested.clear()
            self._stopped_by = None
            stream = self._stream = TurnStream(clock=self._clock)
            self._outbound.start_turn(stream, await self._conversations())
            try:
                async with asyncio.TaskGroup() as turn_tasks:
                    saver = turn_tasks.create_task(self._keep_saving(turn, stream))
                    if prompt is None:
                        chosen = await self._store.settings.of(self.session_id)
                        await agent.send(Compact(model=chosen.model))
                    else:
                        await self._close_gateway_plans(prompt)
                        chosen = await self._store.settings.of(self.session_id)
                        caps = agent.capabilities
                        takes, largest = caps.pictures, caps.picture_max_bytes
                        text, images, linked = files_in_prompt(
                            prompt.text,
                            files,
                            takes_pictures=takes,
                            picture_max_bytes=largest,
                            links_files=caps.file_links,
                        )
                        named = pictures_named_notice(
                            files, takes_pictures=takes, picture_max_bytes=largest
                        )
                        if missing:
                            text = without_files(text, missing)
                            named = sent_without_notice(missing)
                        if named is not None:
                            await self._notify(named)
                        await agent.send(
                            Prompt(
                                text=text,
                                images=images,
                                files=linked,
                                mode=prompt.mode,
                                model=chosen.model,
                                approval_policy=chosen.approval_policy,
                                sandbox=chosen.sandbox,
                                permission_mode=chosen.permission_mode,
                            )
                        )
                    await self._turn_done.wait()
                    saver.cancel()
            except* StoreError:
                raise  # the ledger failed: the epoch ends (_run_epoch)
            except* GatewayError as group:
                # the agent died under our write; the consumer reports AgentExited
                log.warning("prompt not sent: %s", group.exceptions[0])
                await asyncio.Event().wait()

    async def _end_when_idle(self, agent: RunningAgent, epoch: int, minutes: float) -> None:
        """End the agent's process once the session has been idle ``minutes``
        (gateway/sessions/idle.py): quietly, the queue untouched; the next message starts
        it again with the session's native id, as after a restart."""
        while True:
            await self.idle.until_idle(minutes * 60, self._idle_now)
            await self._feed_gate.acquire()  # kept: this epoch starts no more turns
            if await self._idle_now():  # nothing was claimed while the gate was awaited
                break
            self._feed_gate.release()
        self._idle_end = idle_words(minutes)
        log.info(
            "session %s: its agent (epoch %d) is ended after %g idle minutes; the next "
            "message resumes it",
            self.session_id,
            epoch,
            minutes,
        )
        await self._store.audit.record(
            "session.idle_ended", session_id=self.session_id, details={"epoch": epoch}
        )
        await agent.stop()

    async def _idle_now(self) -> bool:
        """No turn runs, no message waits to run, and no request of any origin is open."""
        if self._turn is not None or self._closing:
            return False
        if await self._store.interactions.list_open(self.session_id):
            return False
        return all(p.held for p in await self._store.prompts.list_queued(self.session_id))

    async def _watch_interrupt(self, agent: RunningAgent) -> None:
        """Kill the agent, as the last resort, when an interrupted turn does not end."""
        while True:
            await self._interrupt_requested.wait()
            self._interrupt_requested.clear()
            try:
                async with asyncio.timeout(self._stop_grace):
                    await self._turn_done.wait()
            except TimeoutError:
                await self._notify("⏹ The agent did not stop in time; ending its process.")
                await agent.stop()

    async def _sweep_stranded(self, epoch: int) -> None:
        """Deliver the epoch's stranded decisions: when it starts and when asked (a wake-up,
        a cancelled decision, the engine's safety sweep finding one); never on a period of
        its own, so an idle session costs the ledger nothing (issue 36)."""
        while True:
            self._sweep_wanted.clear()
            try:
                await self._broker.sweep(self.session_id, epoch)
            except StoreError as exc:
                # the ledger's connection cut mid-sweep: what was not recorded is stranded
                # still, and the next sweep (the listener's catch-up once it is back, or
                # the engine's safety sweep) finds it; the session runs on
                log.warning("session %s: a sweep met a ledger error (%s)", self.session_id, exc)
            await self._sweep_wanted.wait()

    async def _expire_overdue(self, epoch: int) -> None:
        """Expire every PENDING request of this epoch older than its expiry (its policy
        rule's ``expiry``, else the project's ``expiry.after_seconds``), then wait for the
        next one to fall due (or to be opened)."""
        while True:
            self._opened.clear()
            now = self._clock()
            next_due: datetime | None = None
            expired = False
            for interaction in await self._store.interactions.list_open(self.session_id):
                after_seconds = self._expires_after(interaction)
                other_epoch = interaction.runtime_epoch != epoch
                if (other_epoch and interaction.origin is not InteractionOrigin.SETTING) or (
                    after_seconds is None
                ):
                    continue  # a setting change is a person's: it outlives the epoch
                if is_due(interaction, after_seconds, now):
                    await self._expire(interaction)
                    expired = True
                elif interaction.state is InteractionState.PENDING:
                    due = due_at(interaction, after_seconds)
                    next_due = due if next_due is None else min(next_due, due)
            if expired:  # the expired requests' form drafts (shared ledger), and any stale
                await self._purge_drafts()
            if next_due is None:
                await self._opened.wait()
                continue
            delay = (next_due - self._clock()).total_seconds()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(max(delay, 0.0), EXPIRY_RECHECK_SECONDS)):
                    await self._opened.wait()

    async def _escalate_overdue(self, epoch: int) -> None:
        """Escalate every PENDING request of this epoch whose rule's ``escalate_after`` has
        passed and that was never escalated (the ledger says: a restart does not repeat
        it), then wait for the next one to fall due (or to be opened)."""
        while True:
            self._opened_unanswered.clear()
            now = self._clock()
            next_due: datetime | None = None
            for interaction in await self._store.interactions.list_open(self.session_id):
                if (
                    interaction.runtime_epoch != epoch
                    or interaction.state is not InteractionState.PENDING
                ):
                    continue
                escalation = escalation_of(
                    self._project.policy, interaction, self._groups, self._people
                )
                if escalation is None:
                    continue
                due = escalation_due_at(interaction, escalation)
                if due > now:
                    next_due = due if next_due is None else min(next_due, due)
                elif not await self._store.escalations.escalated(interaction.id):
                    await self._escalate(interaction, escalation)
            if next_due is None:
                await self._opened_unanswered.wait()
                continue
            delay = (next_due - self._clock()).total_seconds()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(max(delay, 0.0), EXPIRY_RECHECK_SECONDS)):
                    await self._opened_unanswered.wait()

    async def _escalate(self, interaction: Interaction, escalation: Escalation) -> None:
        """Post the card also in each person's direct conversation and each channel the rule
        names (copies, not bindings), and tell the conversations it was first asked in."""
        targets: list[ConversationRef] = []
        people: list[str] = []
        for account in escalation.accounts:
            name, _, user_id = account.partition(":")
            platform = self._platforms.get(name)
            if platform is None:
                log.info("escalation of %s: platform %s is not running", interaction.id, name)
                continue
            try:
                direct = await platform.direct_conversation(Actor(platform=name, user_id=user_id))
            except Exception:  # a platform's own failure: the other targets are still asked
                log.exception("escalation of %s: no direct conversation", interaction.id)
                continue
            if direct is not None:
                targets.append(direct)
                # a person as [people] names them, else the account in words
                owner = next(
                    (p for p, a in self._people.items() if account in a), f"{name} user {user_id}"
                )
                people.append(owner)
        bound = await self._conversations()
        channels: list[str] = []
        for channel in escalation.channels:
            if channel.platform in self._platforms:
                targets.append(channel_conversation(channel, bound))
                channels.append(f"#{channel.channel}")
        asked = list(dict.fromkeys(people)) + channels
        copies = await self._store.escalations.record(
            interaction.id, targets, after_seconds=escalation.after_seconds, asked=asked
        )
        if copies is None:
            return  # decided first, or escalated already
        self._broker.mark_dirty(interaction.id)
        await self._notify(escalation_notice(interaction, escalation, people, channels))

    def _expires_after(self, interaction: Interaction) -> float | None:
        """Seconds a request may wait: its policy rule's ``expiry``, else the project's."""
        rule = self._rule_of(interaction)
        if rule is not None and rule.expiry is not None:
            return rule.expiry
        return self._project.expiry.after_seconds

    async def _refuse_by_policy(self, interaction: Interaction) -> None:
        """A rule with ``action = "deny"`` refuses the request at once, with its message
        (issue 17); a rule never approves. Committed like any decision, so a person's click
        in between is told who decided first."""
        rule = self._rule_of(interaction)
        if rule is None or rule.action is not RuleAction.DENY or rule.message is None:
            return
        decision = refusal(interaction, rule.message)
        if decision is None:
            log.warning("a deny rule matches %s, which offers no refusal", interaction.id)
            return
        try:
            await self._broker.decide(interaction, POLICY_ACTOR, decision)
        except (AlreadyDecided, InvalidDecision) as exc:  # a person was quicker
            log.info("policy refusal of %s not committed: %s", interaction.id, exc)

    async def _purge_drafts(self) -> None:
        """Delete the form drafts no request can use any more (expired, decided, orphaned
        requests; untouched too long): they are unreadable already, this frees the rows."""
        try:
            purged = await self._store.form_drafts.purge()
        except StoreError as exc:  # the next expiry, or the host's own purge, tries again
            log.warning("form drafts not purged: %s", exc)
            return
        if purged:
            log.info("%d form draft(s) purged", purged)

    async def _expire(self, interaction: Interaction) -> None:
        plan = plan_expiry(interaction, self._project.expiry.outcome)
        expired = await self._broker.expire(interaction, plan, committed=self._tell_expired)
        if expired is None:
            return  # decided (or closed by the agent) first: that one wins
        if plan.interrupt:
            try:
                await self.interrupt()
            except GatewayError as exc:  # the agent died under the write: its exit follows
                log.warning("expiry: the turn could not be interrupted: %s", exc)

    async def _tell_expired(self, expired: Interaction) -> None:
        """Committed, not yet written to the agent: its tool line says it expired, and one
        short notice, which notifies (a card's edit does not), points at the card, which
        says what the agent is told. Handed to the outlets before the write, so it comes
        before anything the agent says after it."""
        if self._stream is not None:
            self._stream.interaction_expired(expired.id)  # its tool line: not "declined"
        await self._notify(expiry_notice(expired), about=expired.id)

    # --- the turn's timeline --------------------------------------------------------------

    async def _keep_saving(self, turn: TurnRecord, stream: TurnStream) -> None:
        """Save the running turn's timeline every TIMELINE_SAVE_SECONDS (an owned task)."""
        while True:
            await asyncio.sleep(TIMELINE_SAVE_SECONDS)  # a cadence, not a wait for state
            await self._save(turn, stream)

    async def _save(self, turn: TurnRecord, stream: TurnStream) -> None:
        """What the ledger lacks of the turn's timeline: new entries, text appended since."""
        async with stream.saving:
            unsaved = stream.timeline.unsaved()
            posted = stream.take_posted()
            if unsaved.writes or posted:
                try:
                    await self._store.timeline.save(turn.id, unsaved.writes, posted)
                except BaseException:
                    stream.put_back(posted)
                    raise
                stream.timeline.saved(unsaved)

    # --- events ---------------------------------------------------------------------------

    async def _closed(
        self, epoch: int, native_key: str, how: Resolution, stopped_by: Actor | None = None
    ) -> None:
        """The agent closed a request: its card drawn from what the close read of it; a
        close whose answer the ledger lost (it may have committed) has the card read again,
        once the ledger answers, and drawn as the ledger has it."""
        since = self._broker.draws()
        asked = self._asked.pop(native_key, None)
        try:
            update = await self._store.interactions.close_from_agent(
                self.session_id, epoch, native_key, how=how, stopped_by=stopped_by
            )
        except StoreError:
            if asked is not None:
                self._broker.mark_dirty(asked)
            raise
        if update is not None:
            self._broker.redraw(update, since)

    async def _on_event(self, event: AgentEvent, epoch: int) -> None:
        self.idle.touch()
        for key in self._files.delivered_keys():  # the agent goes on: it read the result
            await self._closed(epoch, key, Resolution.ANSWERED)
        stream = self._stream
        match event:
            case TextDelta(item_id=item_id, text=text):
                if stream is not None:
                    stream.delta(item_id, text)
            case AgentMessage(item_id=item_id, text=text):
                if stream is not None:
                    stream.message(item_id, text)
            case ToolActivity():
                if stream is not None:
                    stream.activity(event)
            case InteractionOpened(request=request):
                if stream is not None:
                    # what the agent said before asking comes first
                    await self._outbound.settle(stream, SETTLE_SECONDS)
                turn_id = self._turn.id if self._turn is not None else None
                opened = await self._broker.open(self.session_id, epoch, request, turn_id=turn_id)
                if request.native_key is not None:
                    self._asked[request.native_key] = opened.id
                if opened.state is InteractionState.PENDING:
                    await self._refuse_by_policy(opened)
                self._opened.set()
                self._opened_unanswered.set()
                if stream is not None:
                    stream.interaction_opened(opened.id)  # what follows comes after the card
            case InteractionClosed(native_key=native_key, how=how):
                await self._closed(epoch, native_key, how, self._stopped_by)
            case TurnStarted(turn_native_id=native_id):
                if self._turn is not None and native_id:
                    await self._store.turns.set_native_id(self._turn.id, native_id)
            case TurnCompleted(status=status, error=error):
                await self._end_turn(status, error)
            case SessionStarted():
                await self._on_started(event, epoch)
            case PolicyChanged(policy=policy, message=message):
                await self._store.sessions.set_policy(self.session_id, epoch, policy)
                await self._notify(message)
            case Warning(message=message, code=code):
                if code not in _QUIET_WARNINGS:
                    await self._notify(f"⚠ {message}")
            case ModelsOffered(models=models):
                self.models_offered = models
            case ModesOffered(modes=modes, current=current):
                self.modes_offered, self.mode_now = modes, current
            case SessionNamed(name=name):
                answered = self._names_asked.get(name)
                if answered is not None and not answered.done():
                    answered.set_result(None)
            case SteerTaken() | SteerRefused():
                if await self._steering.on_answer(event):
                    self.kick()
            case AgentExited():
                await self._steering.agent_ended()
                await self._on_exit(event, epoch)
            case Usage():
                self.usage = self.usage.add(event)

    async def send_file(self, call: SendFileCall) -> SendFileAnswer:
        """The agent's ``send_file`` call (issue 33): the file opened and checked, then sent
        at once, or after a person's decision where a rule or the defaults ask for one."""
        agent, epoch = self.agent, self.epoch
        if agent is None or epoch is None:
            return SendFileAnswer(call=call.call, sent=False, text="not sent: the agent ended")
        limits = self._project.send_file
        try:
            opened = await asyncio.to_thread(
                open_in_work_dir, self._project.work_dir, call.path, max_bytes=limits.max_bytes
            )
        except SendRefused as exc:
            return SendFileAnswer(call=call.call, sent=False, text=str(exc))
        reasons = ask_reasons(opened, ask_above=limits.ask_above_bytes)
        rule = send_file_rule(self._project.policy, opened.detail(caption=None, reason=None))
        if self._stream is not None:  # what the agent said before sending comes first
            await self._outbound.settle(self._stream, SETTLE_SECONDS)
        if rule is None and not reasons:
            outcome = await self._files.upload(await self._conversations(), opened, call.caption)
            return SendFileAnswer(call=call.call, sent=outcome.sent, text=outcome.text)
        request = file_request(call.call, opened, call.caption, reasons)
        answer = self._files.expect(request.native_key, opened, call.caption)
        try:
            await self._on_event(InteractionOpened(request=request), epoch)
            outcome = await answer
        except asyncio.CancelledError:
            # the agent withdrew its call (its MCP server hung up: a stopped turn): the card
            # says so, as for any request the agent withdraws, and a person's /stop under way
            # is said as theirs, as the turn's end says it (whichever of the two comes first)
            withdrawn = await asyncio.shield(
                self._store.interactions.close_from_agent(
                    self.session_id,
                    epoch,
                    request.native_key,
                    how=Resolution.CANCELLED_BY_AGENT,
                    stopped_by=self._stopped_by,
                )
            )
            if withdrawn is not None:
                self._broker.mark_dirty(withdrawn.interaction.id)
            raise
        finally:
            self._files.forget(request.native_key)
        return SendFileAnswer(call=call.call, sent=outcome.sent, text=outcome.text)

    async def _end_turn(self, status: TurnStatus, error: str | None) -> None:
        stopped_by, self._stopped_by = self._stopped_by, None
        turn, self._turn = self._turn, None
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.end_running_tools(TOOL_ENDED_WORDS[status])
        if turn is not None:
            if stream is not None:
                await self._save(turn, stream)
            await self._store.turns.end(turn.id, status, error=error)
        if stream is not None:
            # the final text, then the platform told (after the ledger: a page drawn then
            # shows the turn ended)
            self._outbound.end_turn(stream, status)
        if turn is not None:
            if turn.prompt_id is not None:
                if status is TurnStatus.COMPLETED:
                    await self._store.prompts.mark_done(turn.prompt_id)
                else:
                    await self._store.prompts.mark_interrupted(turn.prompt_id)
            await self._withdraw_leftovers(turn.id, stopped_by)
        # a /compact's turn: its end is said where it was asked
        compacted = await self._compaction.ended(status, error)
        if status is TurnStatus.FAILED and not compacted:
            await self._notify(f"⚠ The turn failed: {error or 'no reason given'}")
        elif stopped_by is not None:  # the one notice of a person's /stop
            held = len(await self._store.prompts.list_held(self.session_id))
            interrupted = status is TurnStatus.INTERRUPTED
            await self._notify(stopped_notice(str(stopped_by), held=held, interrupted=interrupted))
        elif status is TurnStatus.INTERRUPTED:  # the agent's reason where it gives one
            await self._notify(f"⏹ The turn ended: {error}." if error else INTERRUPTED_WORDS)
        self._turn_done.set()
        self._prompt_ready.set()
        self._turn_ended()

    async def _withdraw_leftovers(self, turn_id: int, stopped_by: Actor | None) -> None:
        """A request cannot outlive its turn: what is still open was withdrawn, by the
        person who stopped the turn if one did."""
        for interaction in await self._store.interactions.list_open(self.session_id):
            if interaction.turn_id == turn_id and interaction.state in (
                InteractionState.PENDING,
                InteractionState.DECIDED,
            ):
                if stopped_by is not None:
                    update = await self._store.interactions.resolve(
                        interaction.id,
                        InteractionEvent.STOP,
                        by=stopped_by.key(),
                        note=str(stopped_by),
                    )
                else:
                    update = await self._store.interactions.resolve(
                        interaction.id, InteractionEvent.WITHDRAW, by="agent", note="the turn ended"
                    )
                self._broker.mark_dirty(update.interaction.id)

    async def _on_exit(self, event: AgentExited, epoch: int) -> None:
        if event.reason == DETACHED and self._keep_attached:
            # the gateway stops and lets go of a server that outlives it: its epoch stays
            # live for the next gateway to reattach (Control.recover), and so do its requests
            self._stream = None
            self._turn = None
            if self._exit_notice is not None:
                await self._notify(self._exit_notice)
            self._turn_done.set()
            self.epoch = None
            return
        idle, self._idle_end = self._idle_end, None
        description = idle if idle is not None else describe_exit(event)
        turn = self._turn
        turn_cut = turn is not None
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.end_running_tools(AGENT_ENDED_WORDS)
        if turn is not None:
            if stream is not None:
                await self._save(turn, stream)
            await self._store.turns.end(turn.id, TurnStatus.FAILED, error=description)
            if turn.prompt_id is not None:
                await self._store.prompts.mark_interrupted(turn.prompt_id)
            self._turn = None
        if stream is not None:
            self._outbound.end_turn(stream, TurnStatus.FAILED)
        await self._store.sessions.end_epoch(self.session_id, epoch, exit_description=description)
        for update in await self._store.interactions.orphan_epoch(
            self.session_id,
            epoch,
            note=description,
            # let go of, not ended: whether it read an answer written last cannot be known
            runtime_outlives_gateway=event.reason == DETACHED,
        ):
            self._broker.mark_dirty(update.interaction.id)
        if idle is not None:
            pass  # quiet: nothing ran or waited, and the next message resumes it (idle.py)
        elif not self._closing:
            # what was queued behind the cut turn was written for a conversation that just
            # lost its answer: it waits for /resume instead of running into a new process
            # unseen (as after /stop or a restart); a new message runs first
            held = await self._store.prompts.hold(self.session_id, reason="the agent process ended")
            await self._notify(
                exit_notice(description, event.stderr_tail, turn_cut=turn_cut, held=held)
            )
        elif self._exit_notice is not None:
            await self._notify(self._exit_notice)
        self._turn_done.set()
        self.epoch = None
        self._idled = idle is not None

    async def _end_epoch_quietly(self, epoch: int) -> None:
        self.epoch = None
        self._turn = None
        stream, self._stream = self._stream, None
        if stream is not None and self._outbound.is_running:
            stream.end_running_tools(AGENT_ENDED_WORDS)
            self._outbound.end_turn(stream, TurnStatus.FAILED)
        with contextlib.suppress(GatewayError):
            await self._store.sessions.end_epoch(
                self.session_id, epoch, exit_description="the gateway stopped tracking it"
            )
            for update in await self._store.interactions.orphan_epoch(
                self.session_id, epoch, note="the gateway stopped tracking the agent"
            ):
                self._broker.mark_dirty(update.interaction.id)

    # --- when the ledger fails ------------------------------------------------------------

    async def _ledger_failed(self, epoch: int, exc: StoreError) -> None:
        """A ledger call of ``epoch`` failed for good (what was safe to try again was): the
        agent has been ended, so that nothing it asks waits on a ledger that cannot record
        it. What is known is recorded (now, or before the next agent starts), the session's
        conversations are told in a person's words, and the next message starts over, the
        queued ones held as after a restart. Never a feed left waiting."""
        log.error(
            "session %s: the ledger failed (%s); its agent (epoch %d) was ended. The next "
            "message starts it again; check the database if this repeats.",
            self.session_id,
            exc,
            epoch,
        )
        self._ledger_failing = True
        stream, self._stream = self._stream, None
        if stream is not None and self._outbound.is_running:
            stream.end_running_tools(LEDGER_ENDED_WORDS)
            self._outbound.end_turn(stream, TurnStatus.FAILED)
        self.epoch = None
        self._unrecorded = epoch
        try:
            held = await self._record_ended_epoch()
        except StoreError as again:
            log.warning("session %s: not recorded yet (%s)", self.session_id, again)
            await self._notify(f"{LEDGER_FAILED} {LEDGER_CARDS_LATER}")
            return
        held_text = f" {held_note(held, typed_now=False)}" if held else ""
        await self._notify(f"{LEDGER_FAILED}{held_text}")

    async def _record_ended_epoch(self) -> int:
        """Record the end of an epoch a ledger failure ended, if one is not yet: its turn
        failed, its prompt interrupted, its requests orphaned (their cards say so), the queue
        held. StoreError while the ledger still fails. The number of prompts held."""
        epoch = self._unrecorded
        if epoch is None:
            return 0
        turn = self._turn
        if turn is not None:
            await self._store.turns.end(turn.id, TurnStatus.FAILED, error=LEDGER_EXIT)
        # the prompt in flight (claimed, or a claim whose answer was lost) is cut short
        prompt = await self._store.prompts.in_flight(self.session_id)
        if prompt is not None:
            await self._store.prompts.mark_interrupted(prompt.id)
        self._turn = None
        await self._store.sessions.end_epoch(self.session_id, epoch, exit_description=LEDGER_EXIT)
        for update in await self._store.interactions.orphan_epoch(
            self.session_id, epoch, note=LEDGER_EXIT
        ):
            self._broker.mark_dirty(update.interaction.id)
        held = await self._store.prompts.hold(self.session_id, reason=LEDGER_EXIT)
        self._unrecorded = None
        return held

    async def _ledger_unavailable(self, exc: StoreError) -> None:
        """The ledger failed before an agent ran (reading the queue, starting an epoch):
        nothing was lost (the message waits in the queue); said once per outage, and looked
        at again soon, then less often (up to every LEDGER_RETRY_SECONDS)."""
        log.warning("session %s: the ledger failed (%s); trying again", self.session_id, exc)
        if not self._ledger_failing:
            self._ledger_failing = True
            await self._notify(LEDGER_WAITING)

    async def _notify(self, text: str, *, about: str | None = None) -> None:
        """``text`` to every conversation of the session; ``about`` an interaction: as a
        reply to its card there, where the platform shows replies (Telegram)."""
        try:
            conversations = await self._conversations()
            cards = await card_messages(self._store, about) if about is not None else {}
        except StoreError as exc:  # the ledger fails (perhaps what this says): as last read
            log.warning("session %s: its conversations not read (%s)", self.session_id, exc)
            conversations, cards = self._shown_in, {}
        if self._outbound.is_running:
            # sent by each conversation's outlet
            self._outbound.notice(conversations, text, cards)
        else:  # the runner has ended (report_crash)
            await self._notifier.send(conversations, text, cards)
