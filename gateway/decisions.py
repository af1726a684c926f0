"""The interaction channel: clicks, forms and the /approve, /deny, /answer fallback.

Decide purely, then act: a token is verified and every check of ``gateway.auth`` passes
before the ledger's compare-and-set is tried; every rejection is audited and answered with
what happened ("not an approver", "already decided by X", "no longer open").
"""

from __future__ import annotations

import logging

from gateway.auth import REJECTION_TEXT, ActionToken, Rejection, check_click, verify_token
from gateway.broker import Broker
from gateway.cards import status_line
from gateway.commands import resolve_action
from gateway.config import Config
from gateway.domain import Actor, Answer, ConversationRef, Decision, Effect, InteractionState
from gateway.errors import AlreadyDecided, InvalidDecision, TokenRejected
from gateway.interactions import Interaction
from gateway.platform import Ack, InboundAction, InboundForm
from gateway.store import Store

__all__ = ["DecisionDesk"]

log = logging.getLogger(__name__)

_VERDICT = {Effect.ALLOW: "Approved", Effect.DENY: "Denied", Effect.CANCEL: "Denied and stopped"}


class DecisionDesk:
    def __init__(self, config: Config, store: Store, broker: Broker, key: bytes) -> None:
        self._config = config
        self._store = store
        self._broker = broker
        self._key = key

    # --- buttons and forms ----------------------------------------------------------------

    async def on_action(self, action: InboundAction) -> Ack:
        checked = await self._check(action.token, action.actor, action.conversation)
        if isinstance(checked, Ack):
            return checked
        interaction, token = checked
        if token.action_index is not None:
            if token.action_index >= len(interaction.actions):
                return await self._reject(Rejection.MALFORMED, action.actor, interaction.id)
            chosen = interaction.actions[token.action_index]
            return await self._decide(interaction, action.actor, Decision(action_id=chosen.id))
        option = token.option
        if option is not None and len(interaction.questions) == 1:
            question_index, option_index = option
            question = interaction.questions[0]
            if question_index != 0 or option_index >= len(question.options) or question.multi:
                return Ack(text="Choose your answers in the form, then submit it.", accepted=False)
            answer = Answer(option_ids=(question.options[option_index].id,))
            return await self._decide(
                interaction, action.actor, Decision(answers={question.id: answer})
            )
        return Ack(text="Choose your answers in the form, then submit it.", accepted=False)

    async def on_form(self, form: InboundForm) -> Ack:
        checked = await self._check(form.token, form.actor, form.conversation)
        if isinstance(checked, Ack):
            return checked
        interaction, token = checked
        if not token.is_submit:
            return await self._reject(Rejection.MALFORMED, form.actor, interaction.id)
        secret = [q for q in interaction.questions if q.secret and q.id in form.answers]
        if secret and not form.private:
            return Ack(text="A secret answer is only taken in a private form.", accepted=False)
        return await self._decide(interaction, form.actor, Decision(answers=dict(form.answers)))

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
        interaction = await self._store.interactions.get(interaction_id)
        if interaction is None:
            return Ack(text=f"No request {interaction_id}.", accepted=False)
        rejection = await self._rejection(interaction, None, actor, conversation)
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
        return await self._decide(interaction, actor, decision)

    # --- checks ---------------------------------------------------------------------------

    async def _check(
        self, text: str, actor: Actor, conversation: ConversationRef
    ) -> tuple[Interaction, ActionToken] | Ack:
        try:
            token = verify_token(self._key, text)
        except TokenRejected as exc:
            return await self._reject(Rejection(exc.reason), actor, None)
        interaction = await self._store.interactions.get(token.interaction_id)
        if interaction is None:
            return await self._reject(Rejection.FORGED, actor, token.interaction_id)
        rejection = await self._rejection(interaction, token, actor, conversation)
        if rejection is not None:
            return await self._rejected(rejection, actor, interaction)
        return interaction, token

    async def _rejection(
        self,
        interaction: Interaction,
        token: ActionToken | None,
        actor: Actor,
        conversation: ConversationRef,
    ) -> Rejection | None:
        session = await self._store.sessions.get(interaction.session_id)
        if session is None:  # pragma: no cover - interactions belong to sessions
            return Rejection.FOREIGN
        copies = await self._store.cards.list_for(interaction.id)
        shown_here = any(copy.conversation == conversation for copy in copies)
        if not shown_here:  # a conversation bound to the session may decide it too
            bound = await self._store.sessions.lookup(conversation)
            shown_here = bound is not None and bound.id == session.id
        sessions_shown = {session.id} if shown_here else set()
        if token is None:
            # /approve ID names the interaction as it stands now: no epoch of its own
            token = ActionToken(
                interaction_id=interaction.id, choice="s", epoch=interaction.runtime_epoch
            )
        rejection = check_click(
            self._config,
            token=token,
            actor=actor,
            project=session.project,
            session_id=session.id,
            sessions_shown=sessions_shown,
            session_initiator=session.initiator,
            interaction_epoch=interaction.runtime_epoch,
            interaction_state=interaction.state,
        )
        if rejection in (None, Rejection.NOT_OPEN) and interaction.decision is None:
            # a request nobody decided whose agent process has ended (orphaned, or about to
            # be): the token is stale, whatever the state says; a decided one says who decided
            epoch = await self._store.sessions.get_epoch(session.id, interaction.runtime_epoch)
            if epoch is None or not epoch.is_live:
                return Rejection.STALE
        return rejection

    async def _decide(self, interaction: Interaction, actor: Actor, decision: Decision) -> Ack:
        try:
            after = await self._broker.decide(interaction, actor, decision)
        except AlreadyDecided as exc:
            return Ack(text=_already(exc), accepted=False)
        except InvalidDecision as exc:
            return Ack(text=str(exc), accepted=False)
        return Ack(text=_outcome(after, decision), accepted=True)

    async def _reject(self, rejection: Rejection, actor: Actor, interaction_id: str | None) -> Ack:
        await self._store.audit.record(
            "click.rejected",
            actor=actor.key(),
            interaction_id=interaction_id,
            details={"reason": rejection.value},
        )
        return Ack(text=REJECTION_TEXT[rejection], accepted=False)

    async def _rejected(self, rejection: Rejection, actor: Actor, interaction: Interaction) -> Ack:
        ack = await self._reject(rejection, actor, interaction.id)
        if rejection is Rejection.NOT_OPEN:
            return Ack(text=_not_open(interaction), accepted=False)
        return ack


def _already(exc: AlreadyDecided) -> str:
    if exc.state == InteractionState.EXPIRED.value:
        return "Too late: nobody answered in time and this request has expired."
    return f"Already {exc.state} by {exc.decided_by}."


def _not_open(interaction: Interaction) -> str:
    if interaction.decision is not None and interaction.state is not InteractionState.ORPHANED:
        return f"Already decided by {interaction.decision.actor}. {status_line(interaction)}"
    return f"This request is no longer open. {status_line(interaction)}"


def _outcome(interaction: Interaction, decision: Decision) -> str:
    if decision.action_id is not None:
        action = interaction.action(decision.action_id)
        verdict = _VERDICT[action.effect] if action is not None else "Decided"
        label = action.label if action is not None else decision.action_id
        head = f"{verdict}: {label}."
    else:
        head = "Answer sent."
    if interaction.state is InteractionState.DELIVERED:
        return f"{head} Delivered to the agent."
    if interaction.state is InteractionState.ORPHANED:
        return f"{head} But the agent process has ended: nothing was delivered."
    return f"{head} {status_line(interaction)}"
