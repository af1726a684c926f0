"""Steering: a message typed while the agent works, given to the running turn (issue 31).

A message typed during a turn is queued like any other (gateway/store/prompts.py). It goes
into the running turn instead when the project says ``busy_input = "steer"`` or its author
presses "Send into this turn now" under it, and only where all of this holds
(:func:`steer_refusal`, pure):

- the agent takes text into a running turn (``Capabilities.steer``: Codex ``turn/steer``;
  Claude Code, OpenCode and ACP do not, and their messages wait for the turn's end);
- a turn runs, and no message is queued ahead of this one (steering never jumps the queue);
- **no request waits for a decision**: a typed "yes, approve" must never reach the agent as
  if it answered the card, so while one waits the message stays queued with the "not a
  decision" notice (gateway/sessions/control.py).

Then :class:`Steering` acts: the prompt is taken from the queue in the ledger first
(``queued → done``, audited as ``prompt.steered``), so that it can never also run as a turn
of its own, and only then written (:class:`~gateway.events.Steer`). The agent's answer
decides the rest: taken (the person is told it went into the turn), or refused (the turn it
named had ended: Codex checks ``expectedTurnId``), in which case the prompt is queued again
at its place and runs as the next turn. An agent that ends before it answers leaves the
prompt done and unsent for all the gateway knows: it is not written again (at most once, as
a prompt in flight at a restart), and its author is told.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from gateway.domain import ConversationRef, InteractionState
from gateway.errors import GatewayError
from gateway.events import Steer, SteerRefused, SteerTaken
from gateway.interactions.machine import Interaction
from gateway.sessions.agents import RunningAgent
from gateway.sessions.outbound import Notifier
from gateway.store.records import PromptRecord
from gateway.store.store import Store

__all__ = [
    "FILES_NOT_STEERED",
    "NOT_QUEUED",
    "STEERED_WORDS",
    "Steering",
    "steer_refusal",
    "unsteered_words",
]

log = logging.getLogger(__name__)

STEERED_WORDS = "↪ Sent into the running turn."
NOT_QUEUED = "That message is no longer waiting: it already ran, went into a turn, or was cleared."
_AGENT_ENDED = (
    "⚠ The agent ended before it said whether it took your message into its turn; it is not "
    "sent again. Send it again if it is still needed."
)


def steer_refusal(
    *,
    agent_steers: bool,
    turn_running: bool,
    ahead: int,
    waiting: Sequence[Interaction],
) -> str | None:
    """Why a queued message cannot go into the running turn now, in a person's words; None
    when it can. ``ahead``: messages queued before it; ``waiting``: the session's open
    requests."""
    if not agent_steers:
        return "this agent takes no message into a running turn; it runs when the turn ends"
    if not turn_running:
        return "no turn is running; it runs next"
    if any(i.state is InteractionState.PENDING for i in waiting):
        return "a request of this turn waits for a decision; it runs when the turn ends"
    if ahead:
        return "earlier messages wait before it; it runs after them"
    return None


def unsteered_words(reason: str) -> str:
    return f"The agent did not take your message into its turn ({reason}): it runs next."


FILES_NOT_STEERED = (
    "it carries files, which go with a turn of their own; it runs when the turn ends"
)


class Steering:
    """One session's steers in flight: taken from the queue, written, not yet answered.
    Owned by the session's runner, which hands it the agent's answers."""

    def __init__(self, store: Store, notifier: Notifier) -> None:
        self._store = store
        self._notifier = notifier
        self._sent: dict[str, PromptRecord] = {}  # Steer.key: the prompt written

    async def steer(
        self,
        session_id: str,
        prompt_id: int,
        agent: RunningAgent | None,
        *,
        turn_id: int | None,
    ) -> str | None:
        """Take ``prompt_id`` from the queue and write it into the running turn ``turn_id``
        of ``agent`` (None: no agent, no turn). None when written (its answer comes as an
        event); else why not, the prompt queued as before."""
        queued = await self._store.prompts.list_queued(session_id)
        if any(p.id == prompt_id and p.attachments for p in queued):
            return FILES_NOT_STEERED  # its files are fetched when its own turn starts
        place = next((p.position for p in queued if p.id == prompt_id), None)
        why = steer_refusal(
            agent_steers=agent is not None and agent.capabilities.steer,
            turn_running=turn_id is not None,
            ahead=sum(1 for p in queued if place is not None and p.position < place and not p.held),
            waiting=await self._store.interactions.list_open(session_id),
        )
        if why is not None or agent is None or turn_id is None:
            return why
        prompt = await self._store.prompts.take_for_steering(prompt_id, turn_id=turn_id)
        if prompt is None:
            return NOT_QUEUED
        key = str(prompt.id)
        self._sent[key] = prompt
        try:
            await agent.send(Steer(key=key, text=prompt.text))
        except GatewayError as exc:  # refused by the codec (no turn to steer), or the agent ended
            del self._sent[key]
            await self._store.prompts.return_unsteered(prompt.id, reason=str(exc))
            log.info("prompt %s not steered: %s", prompt.id, exc)
            return f"it could not go into the turn ({exc}); it runs when the turn ends"
        return None

    async def on_answer(self, event: SteerTaken | SteerRefused) -> bool:
        """The agent's answer to a steer: its author is told. True when the prompt is queued
        again (the runner looks at its queue)."""
        prompt = self._sent.pop(event.key, None)
        if prompt is None:
            log.warning("an answer to an unknown steer %r", event.key)
            return False
        if isinstance(event, SteerTaken):
            await self._tell(prompt.conversation, STEERED_WORDS)
            return False
        queued = await self._store.prompts.return_unsteered(prompt.id, reason=event.reason)
        await self._tell(prompt.conversation, unsteered_words(event.reason))
        return queued

    async def agent_ended(self) -> None:
        """The agent ended with steers unanswered: whether it took them cannot be known."""
        sent, self._sent = self._sent, {}
        for prompt in sent.values():
            await self._store.audit.record(
                "prompt.steer_unanswered",
                session_id=prompt.session_id,
                details={"prompt_id": prompt.id},
            )
            await self._tell(prompt.conversation, _AGENT_ENDED)

    async def _tell(self, conversation: ConversationRef, text: str) -> None:
        await self._notifier.send([conversation], text)
