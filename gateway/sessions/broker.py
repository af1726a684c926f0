"""The interaction broker: agent requests in, cards out, decisions back exactly once.

Every move goes through the ledger first (gateway/store): an interaction is recorded before
its card is shown, a decision is committed (compare-and-set) before it is written to the
agent, and the write is recorded after. Cards are rendered from the ledger's record, so
every copy on every platform says the same thing: who decided what, whether it was
delivered, and how the agent closed the request.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol, TypeVar

from gateway.action_tokens import token_factory
from gateway.cards import Card
from gateway.domain import (
    Actor,
    Answer,
    ConversationRef,
    Decision,
    InteractionOrigin,
    InteractionRequest,
    InteractionState,
)
from gateway.errors import (
    AlreadyAnswered,
    GatewayError,
    PlatformError,
    RequestClosed,
    SealBroken,
    StoreError,
)
from gateway.interactions.expiry import ExpiryPlan
from gateway.interactions.machine import Interaction, InteractionEvent
from gateway.interactions.policy import Requirement
from gateway.interactions.setting_change import change_of
from gateway.interactions.votes import PolicyBook
from gateway.platform import MessageRef, Platform, RateLimited, RefusedForGood
from gateway.render.commands import spell_commands
from gateway.render.interaction_card import render_interaction
from gateway.session_record import SessionRecord
from gateway.sessions.card_lanes import CardLanes, Seen
from gateway.sessions.faults import crashpoint
from gateway.sessions.outbound import with_rate_limit
from gateway.store.codec import redact_secret_answers
from gateway.store.records import CardCopy, CopyState, InteractionUpdate
from gateway.store.sealing import Sealer
from gateway.store.store import Store
from gateway.store.votes import VoteOutcome

__all__ = ["Broker", "Deliverer", "DeliveryRefused", "DeliveryWork", "Written"]

log = logging.getLogger(__name__)
T = TypeVar("T")

# a decision's write not made by then: the card shows the decision meanwhile (_deliver_committed)
WRITE_DRAWN_AFTER_SECONDS = 0.1
REFUSED_KEPT = 4096  # copies refused for good remembered (the oldest are tried again)
_SEAL_BROKEN = (
    "its secret answer, sealed by the host that took it, does not open here: is"
    " hmac_key_file the same on every host?"
)
_SECRET_NOT_KEPT = (
    "its secret answer is never kept by the gateway, and the attempt that held it was cut off"
)


class DeliveryRefused(GatewayError):
    """The decision could not be written: the agent that asked is gone."""


@dataclass(frozen=True, slots=True)
class Written:
    """What became of a decision's write: the request after it (and after its record), and
    the read of its card the record made (``seen``; None: the card lanes read it)."""

    interaction: Interaction
    seen: Seen | None = None


DeliveryWork = Callable[[], Coroutine[Any, Any, Written]]


class Deliverer(Protocol):
    """How the broker reaches the session runner whose agent asked (the engine)."""

    async def deliver(self, interaction: Interaction, decision: Decision) -> str | None:
        """Write ``decision`` to the agent of ``interaction``'s epoch, or raise
        DeliveryRefused (that runtime is gone) / another GatewayError (the write failed).
        Returns what the delivery became where the gateway carried it out itself (a
        send_file call's upload: "sent …" or "not sent: why", as the agent reads it), kept
        with the delivery for the card; None for a write to the agent."""
        ...

    def own_delivery(self, interaction: Interaction, work: DeliveryWork) -> asyncio.Future[Written]:
        """Run ``work`` (the write and its record) as a task of the session runner whose
        epoch asked, so that no caller's cancellation reaches it; DeliveryRefused when that
        runtime is gone."""
        ...

    def sweep_soon(self, session_id: str) -> None:
        """Ask the session's runner to deliver its stranded decisions now (Broker.sweep)."""
        ...


@dataclass(frozen=True, slots=True)
class _Unconfirmed:
    """A decision whose commit was under way when its caller was cancelled: it may be in
    the ledger. Kept (in memory only) so that the sweep can write it whole, secret answers
    included, if the ledger's decision is this one."""

    session_id: str
    actor: Actor
    decision: Decision


async def _once(call: Callable[[], Awaitable[T]]) -> T:
    return await call()


class Broker:
    def __init__(
        self,
        store: Store,
        platforms: Mapping[str, Platform],
        hmac_key: bytes,
        deliverer: Deliverer,
        *,
        host: str | None = None,
        policy: PolicyBook | None = None,
    ) -> None:
        self._store = store
        # how many people a request's rule asks to approve it: a card several people vote on
        # shows the content hash on its face (gateway/render/tally_line.py)
        self._policy = policy
        self._projects: OrderedDict[str, str] = OrderedDict()  # session id: its project
        self._names: OrderedDict[str, str | None] = OrderedDict()  # session id: its /name
        # the host whose cards this broker sends again (the owner edits its sessions' cards:
        # issue 19); None: every card of a ledger no other host shares
        self._host = host
        self._platforms = platforms
        self._key = hmac_key
        self._sealer = Sealer(hmac_key)
        self._deliverer = deliverer
        self._in_flight: set[str] = set()  # interactions whose write is under way
        # written to the agent, but the record of the write failed (the ledger's connection
        # cut): interaction -> session; its next sweep records it, whatever its state by then
        self._written: dict[str, str] = {}
        self._unconfirmed: dict[str, _Unconfirmed] = {}
        self._closed_by_agent: dict[str, Interaction] = {}  # a write found it closed
        # copies a platform refused for good (an archived channel, a message it will not
        # edit): not asked again while this process runs (a restart tries each once more:
        # the config, a token, may have changed)
        self._refused_for_good: OrderedDict[int, None] = OrderedDict()
        # copies sent whose record the ledger did not take (copy id: the message id sent)
        self._sent_unrecorded: OrderedDict[int, str] = OrderedDict()
        # card refreshes, a lane per conversation: a paced chat holds up only itself
        self._cards = CardLanes(
            list(platforms),
            read=self._read_for_cards,
            behind=self._behind,
            draw=self._show,
        )

    # --- the agent asked ------------------------------------------------------------------

    async def open(
        self, session_id: str, epoch: int, request: InteractionRequest, *, turn_id: int | None
    ) -> Interaction:
        """Record the request (idempotent on its native key) and show its card everywhere."""
        # the record and a pending copy for every bound conversation: one transaction
        opened = await self._store.interactions.create_with_copies(
            session_id, epoch, request, turn_id=turn_id
        )
        if opened.created:
            # new copies of the record just made: shown without reading either back (the
            # runner handles the agent's next event only after this: nothing changed them)
            for copy in opened.copies:
                await self._show(
                    opened.interaction, copy, wait_out_429=False, session=opened.session
                )
        return opened.interaction

    # --- a person decided -----------------------------------------------------------------

    async def decide(
        self,
        interaction: Interaction,
        actor: Actor,
        decision: Decision,
        *,
        owner: str | None = None,
    ) -> Interaction:
        """Commit the decision (CAS), then have the session write it to the agent and record
        the write.

        Raises AlreadyDecided / InvalidDecision from the ledger; nothing is written then.
        Returns the interaction as it stands after the delivery attempt. From the commit on,
        the write and its record belong to the session's runner: a caller cancelled (a
        platform's ack deadline, a shutdown) strands nothing, and one cancelled while the
        commit was under way has the session's sweep look for it.

        ``owner``: the host that runs the session, where that is another host (issue 19).
        Only the commit is made here: the ledger wakes the owner, which writes the decision
        (its sweep) and edits the cards; this host writes to no agent and edits no card.
        """
        # a secret answer for another host's agent goes to it sealed (the ledger keeps it
        # redacted): design point 4 of issue 19, gateway/store/sealing.py
        secret = _secret_answers(interaction, decision) if owner is not None else {}
        sealed = self._sealer.seal(interaction.id, secret) if secret else None
        try:
            decided = await self._store.interactions.decide(
                interaction.id,
                expected_version=interaction.version,
                actor=actor,
                decision=decision,
                sealed=sealed,
            )
        except asyncio.CancelledError:
            # the commit runs on the ledger's thread and may land all the same (on another
            # host's session: that host's sweep finds it, as it finds any)
            if owner is None:
                self._unconfirmed[interaction.id] = _Unconfirmed(
                    interaction.session_id, actor, decision
                )
                self._deliverer.sweep_soon(interaction.session_id)
            raise
        if owner is not None:
            log.info("decision on %s committed for host %s", decided.id, owner)
            return decided
        return await self._deliver_committed(decided, decision)

    async def vote(
        self,
        interaction: Interaction,
        actor: Actor,
        *,
        person: str,
        action_id: str,
        requirement: Requirement,
        surface: str,
        owner: str | None = None,
    ) -> VoteOutcome:
        """Record a person's vote (issue 17). Every copy of the card is drawn again with the
        tally; the vote that reaches N committed the decision in its own transaction, and it
        is written to the agent here, once, exactly as :meth:`decide` writes one.

        Raises AlreadyDecided / InvalidDecision from the ledger.
        """
        outcome = await self._store.votes.cast(
            interaction.id,
            person=person,
            actor=actor,
            action_id=action_id,
            requirement=requirement,
            surface=surface,
        )
        if owner is not None:  # the owner draws the tally and writes the decision (decide)
            return outcome
        if outcome.decision is None:
            if outcome.counted:
                self.mark_dirty(interaction.id)
            return outcome
        after = await self._deliver_committed(outcome.interaction, outcome.decision)
        return replace(outcome, interaction=after)

    async def withdraw_vote(
        self, interaction: Interaction, actor: Actor, person: str
    ) -> Interaction:
        after = await self._store.votes.withdraw(interaction.id, person=person, actor=actor)
        self.mark_dirty(interaction.id)
        return after

    async def _deliver_committed(self, decided: Interaction, decision: Decision) -> Interaction:
        crashpoint("decision_committed")
        if decided.origin is InteractionOrigin.SETTING:
            self.mark_dirty(decided.id)
            return await self._apply_setting(decided, decision)
        try:
            task = self._deliverer.own_delivery(
                decided, partial(self._write_and_record, decided, decision)
            )
        except DeliveryRefused as exc:
            # the runtime that asked is gone: the ledger's epoch handling orphans it
            log.info("decision on %s not delivered: %s", decided.id, exc)
            self.mark_dirty(decided.id)
            return await self._require(decided.id)
        # the card is drawn once the write is made and recorded, with what became of it: a
        # draw of "decided" a moment before "sent to the agent" is one more edit, paced on
        # the platforms that pace edits; a write not made by WRITE_DRAWN_AFTER_SECONDS has
        # the decision drawn then, and the write's outcome when it ends (whoever awaits)
        later = asyncio.get_running_loop().call_later(
            WRITE_DRAWN_AFTER_SECONDS, self.mark_dirty, decided.id
        )

        def written(done: asyncio.Future[Written]) -> None:
            later.cancel()
            ended = done.result() if not done.cancelled() and done.exception() is None else None
            self._cards.mark(decided.id, None if ended is None else ended.seen)

        task.add_done_callback(written)
        await asyncio.wait((task,))  # a cancelled caller leaves the task running
        if task.cancelled():  # the epoch ended under the write: its end orphans the request
            return await self._require(decided.id)
        return task.result().interaction

    async def sweep(self, session_id: str, epoch: int) -> int:
        """Deliver every decision of the epoch that was committed but has no delivery fact
        and no write under way (its caller was cancelled as the commit landed, or its write's
        record failed); returns how many were handled. Run by the session's runner.

        It never writes twice: an answer the codec already queued comes back as
        AlreadyAnswered, which records the earlier write as the delivery. A decision with a
        secret answer whose clear text this process no longer holds cannot be sent (the
        ledger keeps it redacted): that failure is recorded, and the card says so.
        """
        for interaction_id in [k for k, v in self._written.items() if v == session_id]:
            current = await self._require(interaction_id)
            if current.delivery is None:  # a record cut after its COMMIT is not made again
                await self._store.interactions.record_delivery(interaction_id, ok=True)
            del self._written[interaction_id]
            self.mark_dirty(interaction_id)
        stranded = [
            i
            for i in await self._store.interactions.list_open(session_id)
            if (i.runtime_epoch == epoch or i.origin is InteractionOrigin.SETTING)
            and i.state is InteractionState.DECIDED
            and i.delivery is None
            and i.id not in self._in_flight
        ]
        # what this process remembers of the session's strandings, for those still stranded
        still = {i.id for i in stranded}
        for memory in (self._unconfirmed, self._closed_by_agent):
            for interaction_id in [
                key for key, value in memory.items() if value.session_id == session_id
            ]:
                if interaction_id not in still:
                    del memory[interaction_id]
        handled = 0
        for interaction in stranded:
            if interaction.id in self._closed_by_agent:
                continue
            decision = self._committed_decision(interaction)
            handled += 1
            if interaction.origin is InteractionOrigin.SETTING and decision is not None:
                await self._apply_setting(interaction, decision)
                continue
            failure = _SECRET_NOT_KEPT
            if decision is None:
                try:
                    decision = await self._unsealed(interaction)
                except SealBroken as exc:
                    log.warning("the secret answer of %s was not written: %s", interaction.id, exc)
                    failure = _SEAL_BROKEN
            if decision is None:
                await self._store.interactions.record_delivery(
                    interaction.id, ok=False, error=failure
                )
                self.mark_dirty(interaction.id)
                continue
            log.info("delivering the stranded decision on %s", interaction.id)
            seen = None
            try:
                seen = (await self._write_and_record(interaction, decision)).seen
            finally:
                self._cards.mark(interaction.id, seen)
        return handled

    def _committed_decision(self, interaction: Interaction) -> Decision | None:
        fact = interaction.decision
        assert fact is not None
        unconfirmed = self._unconfirmed.pop(interaction.id, None)
        if (
            unconfirmed is not None
            and unconfirmed.actor.key() == fact.actor.key()
            and redact_secret_answers(unconfirmed.decision, interaction.questions) == fact.decision
        ):
            return unconfirmed.decision
        secret = {q.id for q in interaction.questions if q.secret}
        if secret & fact.decision.answers.keys():
            return None
        return fact.decision

    async def _unsealed(self, interaction: Interaction) -> Decision | None:
        """The committed decision with the secret answers another host sealed for this one
        put back; None where none were sealed. SealBroken: they do not open, or do not fit."""
        fact = interaction.decision
        assert fact is not None
        sealed = await self._store.interactions.sealed_answers(interaction.id)
        if sealed is None:
            return None
        secret = self._sealer.open(interaction.id, sealed)
        if secret.keys() != _secret_answers(interaction, fact.decision).keys():
            raise SealBroken("the sealed answers are not those of the decision")
        return replace(fact.decision, answers={**fact.decision.answers, **secret})

    async def _apply_setting(self, interaction: Interaction, decision: Decision) -> Interaction:
        """A decision on a setting change (a looser /mode) is delivered by applying it, once:
        the ledger's choice for the session, which its next turn carries to the agent (and
        whose acceptance there is the policy in force). Nothing waits for the agent, which may
        not be running: the request is resolved here. A refusal applies nothing."""
        change = change_of(interaction)
        applies = change is not None and decision.action_id == f"{change.setting}={change.value}"
        if change is not None and applies:
            await self._store.settings.choose(interaction.session_id, change.setting, change.value)
        await self._store.interactions.record_delivery(interaction.id, ok=True)
        note = "applies from the next turn" if applies else "nothing changed"
        update = await self._store.interactions.resolve(
            interaction.id, InteractionEvent.CONFIRM, by="gateway", note=note
        )
        self.mark_dirty(interaction.id)
        return update.interaction

    async def _write_and_record(self, interaction: Interaction, decision: Decision) -> Written:
        """Write the decision to the agent, then record the write (in the session's task).
        The card is its caller's to mark for a redraw, once this ends (with the record's
        read of it, ``Written.seen``)."""
        self._in_flight.add(interaction.id)
        since = self._cards.draws()
        try:
            became: str | None = None
            try:
                became = await self._deliverer.deliver(interaction, decision)
            except AlreadyAnswered:
                pass  # an earlier attempt queued these bytes: that write is the delivery
            except RequestClosed as exc:
                # the agent closed the request first: its close (already read, or queued
                # for the session's consumer) is the fact that ends it; nothing was written
                log.info("decision on %s not written: %s", interaction.id, exc)
                self._closed_by_agent[interaction.id] = interaction
                return Written(await self._require(interaction.id))
            except DeliveryRefused as exc:
                log.info("decision on %s not delivered: %s", interaction.id, exc)
                return Written(await self._require(interaction.id))
            except GatewayError as exc:
                update = await self._store.interactions.record_delivery(
                    interaction.id, ok=False, error=str(exc)
                )
                return Written(update.interaction, self._seen(update, since))
            crashpoint("response_written")
            try:
                update = await self._store.interactions.record_delivery(
                    interaction.id, ok=True, error=became
                )
            except StoreError:
                # written: the agent's answer (its close) may come before the ledger is back,
                # so the session's next sweep records this write whatever the state by then
                self._written[interaction.id] = interaction.session_id
                raise
            crashpoint("delivery_recorded")
            return Written(update.interaction, self._seen(update, since))
        finally:
            self._in_flight.discard(interaction.id)

    # --- nobody decided in time -----------------------------------------------------------

    async def expire(
        self,
        interaction: Interaction,
        plan: ExpiryPlan,
        *,
        committed: Callable[[Interaction], Awaitable[None]] | None = None,
    ) -> Interaction | None:
        """The expiry policy fired: commit EXPIRE (CAS on version, like a decision), then
        write the plan's refusal to the agent through the request's own key, then record
        the write. None, with nothing written, when a decision (or the agent) came first.
        ``committed`` runs between the commit and the write: the people are told before
        the agent, so their notice comes before the agent's reply to the refusal.
        """
        update = await self._store.interactions.expire(
            interaction.id,
            expected_version=interaction.version,
            outcome=plan.outcome,
            not_written=plan.not_written,
        )
        if update is None:
            return None
        crashpoint("expiry_committed")
        expired = update.interaction
        self.mark_dirty(expired.id)
        if committed is not None:
            await committed(expired)
        decision = plan.decision
        if decision is None:
            return expired
        since = self._cards.draws()
        try:
            await self._deliverer.deliver(expired, decision)
        except GatewayError as exc:  # DeliveryRefused included: the write was not made
            update = await self._store.interactions.record_delivery(
                expired.id, ok=False, error=str(exc)
            )
        else:
            update = await self._store.interactions.record_delivery(expired.id, ok=True)
        self.redraw(update, since)
        return update.interaction

    async def _require(self, interaction_id: str) -> Interaction:
        found = await self._store.interactions.get(interaction_id)
        if found is None:  # pragma: no cover - interactions are never deleted
            raise GatewayError(f"interaction {interaction_id} vanished")
        return found

    # --- cards ----------------------------------------------------------------------------

    def mark_dirty(self, interaction_id: str) -> None:
        """Ask the refresher to bring every copy of this card up to date."""
        self._cards.mark(interaction_id)

    def draws(self) -> int:
        """The card draws finished so far: counted before a ledger write whose update
        :meth:`redraw` is handed (CardLanes.draws)."""
        return self._cards.draws()

    def redraw(self, update: InteractionUpdate, since: int) -> None:
        """:meth:`mark_dirty` from what ``update``'s write read of the card (its copies and
        session: ``InteractionUpdate.cards``), counted at ``since`` (:meth:`draws`, taken
        before the write began); the lanes read nothing more. An update that read nothing of
        the card is marked as :meth:`mark_dirty` marks."""
        self._cards.mark(update.interaction.id, self._seen(update, since))

    def _seen(self, update: InteractionUpdate, since: int) -> Seen | None:
        cards = update.cards
        if cards is None:
            return None
        if cards.session is not None:
            interaction = update.interaction
            self._remember(interaction.session_id, cards.session.project, cards.session.name)
        return Seen(update.interaction, cards.copies, since)

    async def run_refresher(self) -> None:
        """The tasks that edit cards after decisions and closes (owned by the engine): a
        lane per conversation, so that one chat's pacing (a 429 waited out in its lane, a
        slow edit) never holds back another chat's card (gateway/sessions/card_lanes.py)."""
        await self._cards.run()

    def refreshing(self) -> list[ConversationRef]:
        """The conversations whose card lanes are running (none once every card is drawn)."""
        return self._cards.lanes()

    async def refreshed(self) -> None:
        """Until every card marked so far is drawn (no card lane left running), while the
        refresher runs."""
        await self._cards.idle()

    def _behind(self, interaction: Interaction, copy: CardCopy) -> bool:
        """Whether ``copy`` must be drawn again to show ``interaction`` (a copy its platform
        refused for good is not asked again; one on a platform not running waits for it)."""
        if copy.conversation.platform not in self._platforms:
            return False
        if copy.id in self._refused_for_good:
            return False
        # a copy showing a newer version than this read is not drawn back (a stale read)
        shown = copy.rendered_version
        if shown is None or shown < interaction.version:
            return True
        return copy.state is CopyState.FAILED and shown == interaction.version

    async def _read_for_cards(
        self, interaction_id: str
    ) -> tuple[Interaction | None, list[CardCopy]]:
        """The card lanes' read: the card, its copies, and its session's name and project
        read with them (one ledger call), remembered for the draws that follow."""
        interaction, copies, session = await self._store.interactions.get_for_cards(interaction_id)
        if interaction is not None and session is not None:
            self._remember(interaction.session_id, session.project, session.name)
        return interaction, copies

    async def resend_failed(self) -> int:
        """Send again every copy that failed (the platform was down), but those its platform
        refused for good (they would be refused again); returns how many were tried."""
        failed = [
            c
            for c in await self._store.cards.list_failed(host=self._host)
            if c.id not in self._refused_for_good
        ]
        for copy in failed:
            await self._show(await self._require(copy.interaction_id), copy)
        return len(failed)

    def _approvals(self, interaction: Interaction) -> int:
        """How many people the request's rule asks to approve it (1 where no rule asks for
        votes, or the session's project is not known yet: :meth:`_learn_project`)."""
        project = self._projects.get(interaction.session_id)
        if self._policy is None or project is None:
            return 1
        return self._policy.requirement(project, interaction).approvals

    async def _learn_project(self, session_id: str) -> None:
        """Remember the session's project (it never changes), for :meth:`_approvals`, and
        its name as it is now (``/name`` may change it), for the card's title."""
        session = await self._store.sessions.get(session_id)
        if session is not None:
            self._remember(session.id, session.project, session.name)

    def _remember(self, session_id: str, project: str, name: str | None) -> None:
        """:meth:`_learn_project` with the session already read (with the request)."""
        self._projects[session_id] = project
        self._names[session_id] = name
        self._projects.move_to_end(session_id)
        self._names.move_to_end(session_id)
        while len(self._projects) > REFUSED_KEPT:
            self._projects.popitem(last=False)
        while len(self._names) > REFUSED_KEPT:
            self._names.popitem(last=False)

    def render(self, interaction: Interaction, platform: Platform) -> Card:
        """The card as ``platform`` shows it: its tokens, its card body limit, no field for
        a secret where it has no private surface (the card says where to answer), and the
        commands spelled its way."""
        limits = platform.limits
        card = render_interaction(
            interaction,
            token_for=token_factory(
                self._key,
                interaction.id,
                interaction.runtime_epoch,
                max_bytes=limits.callback_max_bytes,
            ),
            text_max_chars=limits.card_max_chars,
            private_surface=limits.has_private_surface,
            private_places=tuple(
                name for name, p in self._platforms.items() if p.limits.has_private_surface
            ),
            approvals=self._approvals(interaction),
            session_name=self._names.get(interaction.session_id),
        )
        spelled = tuple(
            spell_commands(part, platform.spell_command) if isinstance(part, str) else part
            for part in card.status
        )
        return card if spelled == card.status else replace(card, status=spelled)

    async def _show(
        self,
        interaction: Interaction,
        copy: CardCopy,
        *,
        wait_out_429: bool = True,
        session: SessionRecord | None = None,
    ) -> None:
        """Send or edit one copy. ``wait_out_429=False`` (a new card, shown inline while the
        agent's next event waits): a 429 leaves the copy to its conversation's lane, which
        waits it out, so that one chat's rate limit holds back neither the session nor the
        copies elsewhere. One draw of a copy at a time: one that waited for another draws
        from what that one left (never a copy sent twice, nor an older state drawn last)."""
        async with self._cards.drawing(copy.id) as drawing:
            if drawing.waited:
                found, copies = await self._store.interactions.get_with_copies(interaction.id)
                now = next((c for c in copies if c.id == copy.id), None)
                if found is None or now is None or not self._behind(found, now):
                    drawing.left = now
                    return
                interaction, copy = found, now
            drawing.left = await self._draw(
                interaction, copy, wait_out_429=wait_out_429, session=session
            )

    async def _draw(
        self,
        interaction: Interaction,
        copy: CardCopy,
        *,
        wait_out_429: bool,
        session: SessionRecord | None = None,
    ) -> CardCopy | None:
        """Send or edit the copy: the copy as recorded (None: left to its lane)."""
        platform = self._platforms.get(copy.conversation.platform)
        if platform is None:
            return await self._store.cards.mark_failed(copy.id, error="platform not running")
        if session is not None:  # read in the same ledger call as the request
            self._remember(session.id, session.project, session.name)
        elif interaction.session_id not in self._projects:
            # a lane's draw: the router's read remembered the session as it read the card
            await self._learn_project(interaction.session_id)
        card = self.render(interaction, platform)
        retry = with_rate_limit if wait_out_429 else _once
        # a copy sent whose record the ledger failed to take: edited, never sent twice
        message_ref = copy.message_ref or self._sent_unrecorded.get(copy.id)
        try:
            if message_ref is None:
                ref = await retry(partial(platform.send_card, copy.conversation, card))
                self._sent_unrecorded[copy.id] = ref.message_id
                while len(self._sent_unrecorded) > REFUSED_KEPT:
                    self._sent_unrecorded.popitem(last=False)
                left = await self._store.cards.mark_sent(
                    copy.id, message_ref=ref.message_id, version=interaction.version
                )
            else:
                ref = MessageRef(conversation=copy.conversation, message_id=message_ref)
                await retry(partial(platform.edit_card, ref, card))
                if copy.message_ref is None:
                    left = await self._store.cards.mark_sent(
                        copy.id, message_ref=message_ref, version=interaction.version
                    )
                else:
                    left = await self._store.cards.mark_edited(copy.id, version=interaction.version)
            self._sent_unrecorded.pop(copy.id, None)
            return left
        except PlatformError as exc:
            if isinstance(exc, RateLimited) and not wait_out_429:
                self._cards.mark_in(copy.conversation, interaction.id)
                return None
            log.warning("card %s on %s failed: %s", interaction.id, platform.name, exc)
            if isinstance(exc, RefusedForGood):
                self._refused_for_good[copy.id] = None
                while len(self._refused_for_good) > REFUSED_KEPT:
                    self._refused_for_good.popitem(last=False)
            return await self._store.cards.mark_failed(copy.id, error=str(exc))

    # --- what people can see --------------------------------------------------------------

    async def drawn(self, copy_id: int) -> None:
        """Until the draw of this copy under way, if any, has ended and is recorded (a card a
        platform shows is recorded as shown a moment later, in the ledger)."""
        async with self._cards.drawing(copy_id):
            pass

    async def unseen(self, session_id: str) -> list[Interaction]:
        """Open interactions of the session that no person can see (no copy sent)."""
        result = []
        for interaction in await self._store.interactions.list_open(session_id):
            copies = await self._store.cards.list_for(interaction.id)
            if not any(c.state in (CopyState.SENT, CopyState.EDITED) for c in copies):
                result.append(interaction)
        return result

    async def show_again(self, interaction: Interaction, conversation: ConversationRef) -> None:
        """Draw the card once more in ``conversation``, below what was said there last (a
        reply to the card): a copy of its own, sent now, whose buttons decide the same
        interaction (one decision: the compare-and-set) and which every later edit reaches."""
        copy = await self._store.cards.add_again(interaction.id, conversation)
        await self._show(await self._require(interaction.id), copy)

    async def show_in(self, interaction: Interaction, conversation: ConversationRef) -> None:
        """Show an existing interaction in one more conversation (a new binding)."""
        copies = await self._store.cards.list_for(interaction.id)
        if any(c.conversation == conversation for c in copies):
            return
        await self._store.cards.add(interaction.id, conversation)
        self.mark_dirty(interaction.id)


def _secret_answers(interaction: Interaction, decision: Decision) -> dict[str, Answer]:
    """The answers of ``decision`` to ``interaction``'s secret questions."""
    secret = {q.id for q in interaction.questions if q.secret}
    return {qid: answer for qid, answer in decision.answers.items() if qid in secret}
