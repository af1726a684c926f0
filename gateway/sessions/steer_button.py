"""The button "Send into this turn now" under a message queued during a turn (issue 31).

With ``busy_input = "queue"`` (the default) a message typed while the agent works waits for
the turn's end. Where the agent takes text into a running turn (``Capabilities.steer``) and
nothing waits for a decision, the message's author is offered, in a short notice, a button
that moves it into the running turn instead (gateway/sessions/steering.py does the move).

The button is not a decision of any interaction: its token names a queued prompt, signed
under the gateway's key like a card's (``s1:<prompt id>:<tag>``; the tag as
gateway/action_tokens.py makes it, over a message no card's token can have, since those
start ``a1:``). A click is checked purely first (:func:`click_refusal`), then acted on:

- a token that does not parse or verify: "not valid" (audited, as a forged card click);
- a click by anyone but the message's author, or from another conversation: refused;
- a message no longer queued (it ran, went into a turn by an earlier click, was cleared), or
  no turn running: said plainly, nothing moves. The move itself is a compare-and-set in the
  ledger, so of two clicks exactly one moves it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import re
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from gateway.cards import ButtonStyle, Card, CardAction
from gateway.domain import Actor, ConversationRef
from gateway.errors import PlatformError
from gateway.platform import Ack, InboundAction, Platform
from gateway.sessions.runner import SessionRunner
from gateway.sessions.steering import NOT_QUEUED, STEERED_WORDS
from gateway.store.records import PromptRecord, PromptState
from gateway.store.store import Store

__all__ = [
    "SEND_NOW_LABEL",
    "STEER_TOKEN_PREFIX",
    "SteerButtons",
    "click_refusal",
    "encode_steer_token",
    "is_steer_token",
    "queued_notice",
    "verify_steer_token",
]

log = logging.getLogger(__name__)

STEER_TOKEN_PREFIX = "s1:"
SEND_NOW_LABEL = "Send into this turn now"
QUEUED_TITLE = "✍ Queued: your message runs when this turn ends."
# how long a turn goes on after a message came before its author is offered the button
OFFER_GRACE = 2.0
NOT_VALID = "This button is not valid."
_TOKEN = re.compile(r"^s1:(?P<prompt>[0-9]{1,18}):(?P<tag>[A-Za-z0-9_-]{12})$")


def _tag(key: bytes, message: str) -> str:
    # the tag of gateway/action_tokens.py: truncated HMAC-SHA256, base64url without padding
    digest = hmac.new(key, message.encode("ascii"), hashlib.sha256).digest()[:9]
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def encode_steer_token(key: bytes, prompt_id: int) -> str:
    message = f"s1:{prompt_id}"
    return f"{message}:{_tag(key, message)}"


def is_steer_token(text: str) -> bool:
    return text.startswith(STEER_TOKEN_PREFIX)


def verify_steer_token(key: bytes, text: str) -> int | None:
    """The prompt id the token names, or None when it does not parse or verify."""
    match = _TOKEN.match(text)
    if match is None:
        return None
    expected = _tag(key, f"s1:{match['prompt']}")
    if not hmac.compare_digest(expected.encode("ascii"), match["tag"].encode("ascii")):
        return None
    return int(match["prompt"])


def queued_notice(key: bytes, prompt_id: int) -> Card:
    """The notice under a message queued during a turn: one button, for its author."""
    button = CardAction(
        label=SEND_NOW_LABEL,
        token=encode_steer_token(key, prompt_id),
        style=ButtonStyle.PRIMARY,
    )
    return Card(title=QUEUED_TITLE, actions=(button,))


def click_refusal(
    prompt: PromptRecord | None, *, clicker: Actor, where: ConversationRef
) -> str | None:
    """Why this click moves nothing (None: it may). ``clicker`` is named as the project's
    auth rules name people, as the prompt's author is."""
    if prompt is None:
        return NOT_VALID
    if where != prompt.conversation:
        return NOT_VALID
    if (clicker.platform, clicker.user_id) != (prompt.author.platform, prompt.author.user_id):
        return f"Only {prompt.author} can send their message into the turn."
    if prompt.state is not PromptState.QUEUED or prompt.held:
        return NOT_QUEUED
    return None


class SteerButtons:
    """Offers the button under a queued message and takes its clicks."""

    def __init__(
        self,
        store: Store,
        platforms: Mapping[str, Platform],
        key: bytes,
        *,
        runner_of: Callable[[str], SessionRunner | None],
        auth_platform: Callable[[str], str],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self._spawn = spawn
        self._store = store
        self._platforms = platforms
        self._key = key
        self._runner_of = runner_of
        self._auth_platform = auth_platform

    def offer(self, prompt: PromptRecord) -> None:
        """The queued notice under ``prompt``, with the button, once the turn has gone on for
        :data:`OFFER_GRACE` seconds after the message came (a message typed as the turn's
        last words show is not told it waits: it runs the next moment); run by the engine's
        task group (``spawn``)."""
        self._spawn(self._offer_later(prompt))

    async def _offer_later(self, prompt: PromptRecord) -> None:
        runner = self._runner_of(prompt.session_id)
        if runner is None:
            return
        try:
            async with asyncio.timeout(OFFER_GRACE):
                await runner.turn_over()
            return  # the turn ended within the grace: the message runs now, nothing to offer
        except TimeoutError:
            pass  # the grace, not a failure: the turn goes on, the message waits
        current = await self._store.prompts.get(prompt.id)
        if current is None or current.state is not PromptState.QUEUED or current.held:
            return
        await self._offer(prompt)

    async def _offer(self, prompt: PromptRecord) -> None:
        """Best effort: a platform that fails to show it leaves the message queued, which
        is what it is anyway."""
        platform = self._platforms.get(prompt.conversation.platform)
        if platform is None:
            return
        try:
            await platform.send_card(prompt.conversation, queued_notice(self._key, prompt.id))
        except PlatformError as exc:
            log.info("queued notice in %s not shown: %s", prompt.conversation.key(), exc)

    async def on_click(self, action: InboundAction) -> Ack:
        prompt_id = verify_steer_token(self._key, action.token)
        prompt = None if prompt_id is None else await self._store.prompts.get(prompt_id)
        clicker = Actor(
            platform=self._auth_platform(action.actor.platform),
            user_id=action.actor.user_id,
            display=action.actor.display,
        )
        why = click_refusal(prompt, clicker=clicker, where=action.conversation)
        if why is None and prompt is not None:
            runner = self._runner_of(prompt.session_id)
            if runner is None:
                why = "No turn is running here now: your message runs next."
            else:
                steered = await runner.steer(prompt.id)
                why = None if steered is None else f"Not sent into the turn: {steered}."
        if why is not None:
            await self._store.audit.record(
                "steer.click_refused",
                actor=action.actor.key(),
                session_id=prompt.session_id if prompt is not None else None,
                details={"prompt_id": prompt_id, "why": why},
            )
            return Ack(text=why, accepted=False)
        return Ack(text=STEERED_WORDS, accepted=True)
