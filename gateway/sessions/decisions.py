"""The interaction channel: clicks, forms and the /approve, /deny, /answer fallback.

Decide purely, then act: a token is verified and every check of ``gateway.action_tokens`` passes
before the ledger's compare-and-set is tried; every rejection is audited and answered with
what happened ("not an approver", "already decided by X", "no longer open").

:meth:`DecisionDesk.may_answer` is the same checks and audit without a decision, for a
platform about to open a form (Slack's ``trigger_id`` dies 3 s after the click; a Discord
modal must be the first response): it reads through the ledger's read-only connection, which
never waits behind the writer, answers within :data:`MAY_ANSWER_SECONDS` or asks the person
to try again, and writes a refusal's audit entry after answering.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from gateway.action_tokens import (
    REJECTION_TEXT,
    ActionToken,
    Rejection,
    check_token_current,
    verify_token,
)
from gateway.config.access import check_click
from gateway.config.model import Config
from gateway.domain import (
    Actor,
    Answer,
    ConversationRef,
    Decision,
    Effect,
    InteractionKind,
    InteractionOrigin,
    InteractionState,
)
from gateway.errors import (
    AlreadyDecided,
    InvalidDecision,
    StoreError,
    TokenRejected,
    VersionMoved,
)
from gateway.interactions.content_hash import short_hash
from gateway.interactions.machine import Interaction
from gateway.interactions.policy import Requirement
from gateway.interactions.votes import PolicyBook, surface_of
from gateway.platform import Ack, InboundAction, InboundForm
from gateway.render.card_status import action_label, after_decision, status_line
from gateway.render.commands import resolve_action
from gateway.render.tally_line import votes_line
from gateway.session_record import SessionRecord
from gateway.sessions.broker import Broker
from gateway.store.clicks import ClickView, ClickViews
from gateway.store.store import Store

__all__ = ["MAY_ANSWER_SECONDS", "MAY_ANSWER_TRY_AGAIN", "DecisionDesk", "Spawn"]

log = logging.getLogger(__name__)

MAY_ANSWER_SECONDS = 2.0  # within Slack's 3 s for a trigger_id, with time left to open a form
MAY_ANSWER_TRY_AGAIN = "The gateway is busy: press the button again in a moment."
MAY_ANSWER_YES = Ack(text="", accepted=True)
AUDITS_IN_FLIGHT_MAX = 256  # past this, a pre-check waits for its refusal's audit entry
VERSION_RETRIES = 5  # a decision re-read after votes moved the version, at most this often

Spawn = Callable[[Coroutine[Any, Any, None]], None]
"""Runs a coroutine as a task someone owns (the engine's task group); RuntimeError once that
owner takes no more tasks."""

OwnerElsewhere = Callable[[SessionRecord], str | None]
"""The host that runs a session where that is another host (issue 19), else None."""

_VERDICT = {Effect.ALLOW: "Approved", Effect.DENY: "Denied", Effect.CANCEL: "Denied and stopped"}
# a button's label that says no more than its verdict ("Deny": "Denied"), left out of a receipt
_SAID_BY_VERDICT = {
    Effect.ALLOW: frozenset({"allow", "approve", "yes", "accept", "ok"}),
    Effect.DENY: frozenset({"deny", "reject", "decline", "refuse", "no"}),
    Effect.CANCEL: frozenset(
        {"deny and stop", "deny and stop the turn", "reject and stop", "cancel", "stop", "abort"}
    ),
}


class DecisionDesk:
    def __init__(
        self,
        config: Config,
        store: Store,
        broker: Broker,
        key: bytes,
        *,
        spawn: Spawn | None = None,
        policy: PolicyBook | None = None,
        owner_elsewhere: OwnerElsewhere | None = None,
    ) -> None:
        self._config = config
        # the host that runs a session, where that is another host (issue 19); None: this one
        self._owner_elsewhere = owner_elsewhere or (lambda session: None)
        self._store = store
        self._broker = broker
        self._key = key
        self._spawn = spawn  # where a pre-check's refusal is audited after the answer
        self._policy = policy or PolicyBook(config)  # the engine shares it with the runners
        self._audits_in_flight = 0

    def reload(self, config: Config) -> None:
        """Who may decide, from a reloaded config (gateway/config/reload.py)."""
        self._config = config

    # --- buttons and forms ----------------------------------------------------------------

    async def may_answer(self, action: InboundAction) -> Ack:
        """May ``action.actor`` answer the interaction of ``action.token`` from
        ``action.conversation``? Accepted: open the form; refused: say ``text``.

        The checks and audit of a click, no decision. Its reads go through the read-only
        connection (``store.peek``), so a long write does not hold it up; a refusal is
        answered before its audit entry is committed (docs/decisions.md).
        """
        try:
            async with asyncio.timeout(MAY_ANSWER_SECONDS):
                checked = await self._check(
                    action.token,
                    action.actor,
                    action.conversation,
                    views=self._store.peek,
                    soon=True,
                )
        except TimeoutError:
            log.warning(
                "pre-check of %s took more than %g s: asked to try again",
                action.actor.key(),
                MAY_ANSWER_SECONDS,
            )
            return Ack(text=MAY_ANSWER_TRY_AGAIN, accepted=False)
        return checked if isinstance(checked, Ack) else MAY_ANSWER_YES

    async def on_action(self, action: InboundAction) -> Ack:
        checked = await self._check(action.token, action.actor, action.conversation)
        if isinstance(checked, Ack):
            return checked
        interaction, token, session = checked
        where = action.conversation
        if token.action_index is not None:
            if token.action_index >= len(interaction.actions):
                return await self._reject(Rejection.MALFORMED, action.actor, interaction.id)
            chosen = interaction.actions[token.action_index]
            message = (action.message or "").strip() or None
            decision = Decision(
                action_id=chosen.id, message=message if chosen.effect is Effect.DENY else None
            )
            return await self._decide(interaction, action.actor, decision, session, where)
        option = token.option
        if option is not None and len(interaction.questions) == 1:
            question_index, option_index = option
            question = interaction.questions[0]
            if question_index != 0 or option_index >= len(question.options) or question.multi:
                return Ack(text="Choose your answers in the form, then submit it.", accepted=False)
            answer = Answer(option_ids=(question.options[option_index].id,))
            return await self._decide(
                interaction, action.actor, Decision(answers={question.id: answer}), session, where
            )
        return Ack(text="Choose your answers in the form, then submit it.", accepted=False)

    async def on_form(self, form: InboundForm) -> Ack:
        checked = await self._check(form.token, form.actor, form.conversation)
        if isinstance(checked, Ack):
            return checked
        interaction, token, session = checked
        if not token.is_submit:
            return await self._reject(Rejection.MALFORMED, form.actor, interaction.id)
        secret = [q for q in interaction.questions if q.secret and q.id in form.answers]
        if secret and not form.private:
            return Ack(text="A secret answer is only taken in a private form.", accepted=False)
        decision = Decision(answers=dict(form.answers))
        return await self._decide(interaction, form.actor, decision, session, form.conversation)

    # --- the command fallback -------------------------------------------------------------

    async def by_command(
        self,
        interaction_id: str,
        actor: Actor,
        conversation: ConversationRef,
        *,
        action: str | None = None,
        deny: bool = False,
        message: str | None = None,
        answers: dict[str, Answer] | None = None,
    ) -> Ack:
        """``/approve ID [action]``, ``/deny ID [message]``, ``/answer ID ...`` (answers
        already parsed): the same checks as a click, with the interaction named by its id."""
        view = await self._store.clicks.view(interaction_id, conversation)
        if view is None:
            return Ack(text=f"No request {interaction_id}.", accepted=False)
        interaction = view.interaction
        rejection = _rejection(self._config, self._policy, view, None, actor, conversation)
        if rejection is not None:
            return await self._rejected(rejection, actor, interaction)
        try:
            if answers is not None:
                decision = Decision(answers=answers)
            else:
                chosen = resolve_action(interaction.actions, action, deny=deny)
                decision = Decision(action_id=chosen.id, message=message if deny else None)
        except InvalidDecision as exc:
            return Ack(text=str(exc), accepted=False)
        return await self._decide(interaction, actor, decision, view.session, conversation)

    async def withdraw(
        self, interaction_id: str, actor: Actor, conversation: ConversationRef
    ) -> Ack:
        """``/withdraw ID``: take back one's vote while the request is pending."""
        view = await self._store.clicks.view(interaction_id, conversation)
        if view is None:
            return Ack(text=f"No request {interaction_id}.", accepted=False)
        rejection = _rejection(self._config, self._policy, view, None, actor, conversation)
        if rejection is not None:
            return await self._rejected(rejection, actor, view.interaction)
        person = self._policy.person(actor)
        if not any(vote.person == person for vote in view.interaction.votes):
            return Ack(text="You have no vote on this request to withdraw.", accepted=False)
        try:
            after = await self._broker.withdraw_vote(view.interaction, actor, person)
        except AlreadyDecided as exc:
            return Ack(text=_already(exc), accepted=False)
        left = votes_line(after) or "no votes now"
        return Ack(text=f"Your vote is withdrawn: {left}.", accepted=True)

    # --- checks ---------------------------------------------------------------------------

    async def _check(
        self,
        text: str,
        actor: Actor,
        conversation: ConversationRef,
        *,
        views: ClickViews | None = None,
        soon: bool = False,
    ) -> tuple[Interaction, ActionToken, SessionRecord | None] | Ack:
        """Verify the token and check the click against ``views`` (default: the writer's
        ``store.clicks``); ``soon``: a refusal is answered before its audit is written."""
        try:
            token = verify_token(self._key, text)
        except TokenRejected as exc:
            return await self._reject(Rejection(exc.reason), actor, None, soon=soon)
        view = await (views or self._store.clicks).view(token.interaction_id, conversation)
        if view is None:  # our key signed it, so it existed: retention pruned it since
            return await self._reject(Rejection.TOO_OLD, actor, token.interaction_id, soon=soon)
        rejection = _rejection(self._config, self._policy, view, token, actor, conversation)
        if rejection is not None:
            return await self._rejected(rejection, actor, view.interaction, soon=soon)
        return view.interaction, token, view.session

    async def _decide(
        self,
        interaction: Interaction,
        actor: Actor,
        decision: Decision,
        session: SessionRecord | None,
        conversation: ConversationRef,
    ) -> Ack:
        project = session.project if session is not None else ""
        owner = self._owner_elsewhere(session) if session is not None else None
        needed = self._policy.requirement(project, interaction)
        if needed.counts_votes and decision.action_id is not None:
            return await self._vote(
                interaction, actor, decision, needed, conversation, owner, session
            )
        for _ in range(VERSION_RETRIES):
            try:
                after = await self._broker.decide(interaction, actor, decision, owner=owner)
            except VersionMoved:
                # still pending, moved by a vote since it was read: read it again, try again
                fresh = await self._store.interactions.get(interaction.id)
                if fresh is None:  # pruned meanwhile (retention): it was no longer open
                    break
                interaction = fresh
                continue
            except AlreadyDecided as exc:
                return Ack(text=_already(exc), accepted=False)
            except InvalidDecision as exc:
                return Ack(text=str(exc), accepted=False)
            up = await self._owner_up(session, owner, after)
            return Ack(text=_outcome(after, decision, owner, up), accepted=True)
        return Ack(text=MAY_ANSWER_TRY_AGAIN, accepted=False)

    async def _owner_up(
        self, session: SessionRecord | None, owner: str | None, after: Interaction
    ) -> bool:
        """Whether the host that runs the session holds its lease, for a decision left to it
        (True where no other host is concerned, or the ledger cannot say)."""
        if session is None or owner is None or after.state is not InteractionState.DECIDED:
            return True
        try:
            return await self._store.requests.owner_up(session.id)
        except StoreError:
            return True

    async def _vote(
        self,
        interaction: Interaction,
        actor: Actor,
        decision: Decision,
        needed: Requirement,
        conversation: ConversationRef,
        owner: str | None,
        session: SessionRecord | None,
    ) -> Ack:
        assert decision.action_id is not None
        try:
            outcome = await self._broker.vote(
                interaction,
                actor,
                person=self._policy.person(actor),
                action_id=decision.action_id,
                requirement=needed,
                surface=surface_of(conversation),
                owner=owner,
            )
        except AlreadyDecided as exc:
            return Ack(text=_already(exc), accepted=False)
        except InvalidDecision as exc:
            return Ack(text=str(exc), accepted=False)
        counted = outcome.tally.line(interaction.actions)
        if outcome.decision is not None:
            up = await self._owner_up(session, owner, outcome.interaction)
            text = _outcome(outcome.interaction, outcome.decision, owner, up)
            return Ack(text=text, accepted=True)
        # the hash of what the vote approves, as every copy's face shows it: voters on other
        # surfaces compare it (gateway/render/tally_line.py)
        if interaction.content_hash:
            counted += f" (content hash {short_hash(interaction.content_hash)})"
        if not outcome.counted:
            return Ack(text=f"Your vote was already counted: {counted}.", accepted=False)
        return Ack(text=f"Your vote is counted: {counted}.", accepted=True)

    async def _reject(
        self, rejection: Rejection, actor: Actor, interaction_id: str | None, *, soon: bool = False
    ) -> Ack:
        record = self._store.audit.record(
            "click.rejected",
            actor=actor.key(),
            interaction_id=interaction_id,
            details={"reason": rejection.value},
        )
        if soon and self._spawn is not None and self._audits_in_flight < AUDITS_IN_FLIGHT_MAX:
            # the answer does not depend on the audit's commit: written after it, through the
            # writer; logged first, so a crash before that commit still leaves a trace
            log.info("refused %s on %s: %s", actor.key(), interaction_id or "-", rejection.value)
            later = self._audit_later(record)
            try:
                self._spawn(later)
            except RuntimeError:  # the owner takes no more tasks (stopping): write it now
                later.close()
            else:
                self._audits_in_flight += 1
                return Ack(text=REJECTION_TEXT[rejection], accepted=False)
        await record
        return Ack(text=REJECTION_TEXT[rejection], accepted=False)

    async def _audit_later(self, record: Coroutine[Any, Any, None]) -> None:
        try:
            await record
        except Exception:  # the owner's other tasks must not end with it
            log.exception("a refused pre-check was answered but not audited")
        finally:
            self._audits_in_flight -= 1

    async def _rejected(
        self, rejection: Rejection, actor: Actor, interaction: Interaction, *, soon: bool = False
    ) -> Ack:
        ack = await self._reject(rejection, actor, interaction.id, soon=soon)
        if rejection is Rejection.NOT_OPEN:
            return Ack(text=_not_open(interaction), accepted=False)
        return ack


def _rejection(
    config: Config,
    policy: PolicyBook,
    view: ClickView,
    token: ActionToken | None,
    actor: Actor,
    conversation: ConversationRef,
) -> Rejection | None:
    """Why a click on ``view``'s interaction is refused, or None; pure."""
    interaction, session = view.interaction, view.session
    if session is None:  # pragma: no cover - interactions belong to sessions
        return Rejection.FOREIGN
    sessions_shown = {session.id} if view.shown_in(conversation) else set()
    if token is None:
        # /approve ID names the interaction as it stands now: no epoch of its own
        token = ActionToken(
            interaction_id=interaction.id, choice="s", epoch=interaction.runtime_epoch
        )
    rejection = check_click(
        config,
        token=token,
        actor=actor,
        project=session.project,
        session_id=session.id,
        sessions_shown=sessions_shown,
        session_initiator=session.initiator,
        interaction_epoch=interaction.runtime_epoch,
        interaction_state=interaction.state,
    )
    needed = policy.requirement(session.project, interaction)
    listed = policy.approves(needed, actor)
    if listed is not None:
        # the rule's approvers replace the project's; talking to the project is still needed
        if rejection is Rejection.NOT_APPROVER and listed:
            rejection = check_token_current(token, interaction.runtime_epoch, interaction.state)
        elif rejection is None and not listed:
            rejection = Rejection.NOT_APPROVER
    if rejection in (None, Rejection.NOT_OPEN) and interaction.decision is None:
        # a request nobody decided whose agent process has ended (orphaned, or about to
        # be): the token is stale, whatever the state says; a decided one says who decided
        # (a setting change is the gateway's, not the process's: it outlives the process)
        setting = interaction.origin is InteractionOrigin.SETTING
        if not setting and (view.epoch is None or not view.epoch.is_live):
            return Rejection.STALE
    return rejection


def _already(exc: AlreadyDecided) -> str:
    if exc.state == InteractionState.EXPIRED.value:
        return "Too late: nobody answered in time and this request has expired."
    return f"Already {exc.state} by {exc.decided_by}."


def _not_open(interaction: Interaction) -> str:
    """Why a click finds its request closed: the card's own line, who decided said once
    ("Already decided by @alice: Approved ("Allow once") at 09:17 UTC · sent to the
    agent")."""
    fact = interaction.decision
    if fact is not None and interaction.state is not InteractionState.ORPHANED:
        line = status_line(interaction).replace(f" by {fact.actor}", "", 1)
        return f"Already decided by {fact.actor}: {line}"
    return f"This request is no longer open. {status_line(interaction)}"


def _verdict(interaction: Interaction, decision: Decision) -> str:
    """What was decided, each fact once: "Approved: Always allow commands like this",
    "Denied" (for a "Deny" button: the label says nothing more), "Answered"."""
    if decision.action_id is None:
        return "Answered"
    action = interaction.action(decision.action_id)
    if action is None:
        return f"Decided: {decision.action_id}"
    verdict = _VERDICT[action.effect]
    if interaction.kind is InteractionKind.PLAN and action.effect is Effect.DENY:
        verdict = "Sent back"  # as the card says: the plan goes back to the agent
    label = action_label(action.label, action.scope)
    plain = " ".join("".join(c for c in label if c.isalnum() or c.isspace()).casefold().split())
    if label == action.label.replace("`", "") and plain in _SAID_BY_VERDICT[action.effect]:
        return verdict
    return f"{verdict}: {label}"


def _outcome(
    interaction: Interaction, decision: Decision, owner: str | None = None, owner_up: bool = True
) -> str:
    """The receipt of a decision: what was decided, then what became of it, once each
    ("Denied. Sent to the agent.", "Answer sent to the agent.")."""
    head = _verdict(interaction, decision)
    if owner is not None and interaction.state is InteractionState.DECIDED:
        # committed here; the write is the owner's, which is all that can be said of it
        if owner_up:
            return f"{head}. Host {owner}, which runs the agent, sends it on."
        return (
            f"{head}. Host {owner}, which runs the agent, is not answering the ledger: it goes "
            "to the agent only once that host answers again."
        )
    if interaction.state is InteractionState.ORPHANED:
        return f"{head}. But the agent process has ended: nothing was delivered."
    after = after_decision(interaction)
    if head == "Answered" and after.startswith("sent to the agent"):
        return f"Answer {after}."  # "Answer sent to the agent.", not "Answered. Sent to…"
    if not after:
        return f"{head}."
    end = "" if after.endswith(("…", ".")) else "."
    return f"{head}. {after[:1].upper()}{after[1:]}{end}"
