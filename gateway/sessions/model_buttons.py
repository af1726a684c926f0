"""``/model`` as buttons: the project's ``models`` on a card, the current one marked (issue 31).

A click is the command ``/model NAME`` typed by the person who clicked: authorized as typing
it is (``may_talk`` on the session's project), carried out by the same desk
(:class:`gateway.sessions.session_settings.SettingsDesk`), audited as ``session.model``.
It is no decision of any request: nothing of an interaction is touched, and a looser
``/mode`` is never a button here.

A button's token names the session and the model's place in the project's list, signed under
the gateway's key like a card's (``m1:<session id>:<index>:<tag>``; the tag as
gateway/action_tokens.py makes it, over a message that also holds the model's name, which
the token does not carry: Telegram's 64 bytes hold any session id, and a list changed in the
config since leaves the tag unverified, "not valid", rather than picking another model). A
click is checked purely first (:func:`click_refusal`), in the click desk's order: the token
(forged or from an older list: "not valid", audited), who may (the project's
``allow_from``), then whether the list is current (its session is still the one the clicker's
own ``/model`` would reach in the conversation it was clicked in: a list of a session switched
away from or closed by ``/new``, or another person's own session in a channel of ``user``
scope, changes nothing).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from gateway.cards import ButtonStyle, Card, CardAction, TextBlock
from gateway.config.access import may_talk
from gateway.config.model import Config
from gateway.domain import Actor, ConversationRef
from gateway.errors import PlatformError
from gateway.platform import Ack, InboundAction, MessageRef, Platform
from gateway.session_record import SessionRecord
from gateway.sessions.card_redraws import redraw_all
from gateway.sessions.session_settings import SettingsDesk, model_line, offers
from gateway.store.store import Store

__all__ = [
    "MODEL_BUTTONS_MAX",
    "MODEL_TOKEN_PREFIX",
    "ModelButtons",
    "ModelClick",
    "click_refusal",
    "encode_model_token",
    "is_model_token",
    "model_card",
    "verify_model_token",
]

log = logging.getLogger(__name__)

MODEL_TOKEN_PREFIX = "m1:"
# buttons on one card at most (Slack takes 25 elements in an actions block, Discord 25
# components in a message); a longer list is named in the card's text to be typed
MODEL_BUTTONS_MAX = 20
_CARDS_KEPT = 4  # a session's /model cards this process redraws after a click
_SESSIONS_KEPT = 256
NOT_VALID = "This button is not valid."
NOT_ALLOWED = "You may not use this project here."
STALE = "This list belongs to a session no longer open here: type /model to see it again."
CURRENT_MARK = "✓ "
_TOKEN = re.compile(
    r"^m1:(?P<session>[A-Za-z0-9_-]{1,32}):(?P<index>[0-9]{1,3}):(?P<tag>[A-Za-z0-9_-]{12})$"
)


def _tag(key: bytes, session_id: str, index: int, model: str) -> str:
    # the tag of gateway/action_tokens.py: truncated HMAC-SHA256, base64url without padding
    message = f"m1:{session_id}:{index}:{model}".encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()[:9]
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def encode_model_token(key: bytes, session_id: str, index: int, model: str) -> str:
    return f"m1:{session_id}:{index}:{_tag(key, session_id, index, model)}"


def is_model_token(text: str) -> bool:
    return text.startswith(MODEL_TOKEN_PREFIX)


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelClick:
    """What a model button names, before it is verified: the session and the index."""

    session_id: str
    index: int
    tag: str


def parse_model_token(text: str) -> ModelClick | None:
    match = _TOKEN.match(text)
    if match is None:
        return None
    return ModelClick(session_id=match["session"], index=int(match["index"]), tag=match["tag"])


def verify_model_token(key: bytes, click: ModelClick, models: Sequence[str]) -> str | None:
    """The model the button names in ``models`` (the project's list now), or None when its
    tag does not verify over it (forged, or the list changed since it was shown)."""
    if click.index >= len(models):
        return None
    model = models[click.index]
    expected = _tag(key, click.session_id, click.index, model)
    if not hmac.compare_digest(expected.encode("ascii"), click.tag.encode("ascii")):
        return None
    return model


def model_card(
    key: bytes,
    session_id: str,
    models: Sequence[str],
    *,
    title: str,
    now: str | None,
    offered: Sequence[str] | None,
    agent: str,
) -> Card:
    """``/model``'s card: one button per model of the project the agent offers (the one
    the next turn asks for marked), the others named in its text."""
    buttons: list[CardAction] = []
    typed: list[str] = []
    refused: list[str] = []
    for index, name in enumerate(models):
        if not offers(offered, name):
            refused.append(name)
        elif len(buttons) >= MODEL_BUTTONS_MAX:
            typed.append(name)
        else:
            current = now is not None and name.casefold() == now.casefold()
            buttons.append(
                CardAction(
                    label=f"{CURRENT_MARK}{name}" if current else name,
                    token=encode_model_token(key, session_id, index, name),
                    style=ButtonStyle.PRIMARY if current else ButtonStyle.DEFAULT,
                    explanation="the model of this session now" if current else "",
                )
            )
    lines = ["Pick the model of this session's next turns (or type /model NAME)."]
    if typed:
        lines.append("Also: " + ", ".join(f"/model {name}" for name in typed))
    if refused:
        lines.append(f"Not offered by {agent}: " + ", ".join(refused))
    return Card(
        title=title,
        blocks=(TextBlock(text="\n".join(lines)),),
        actions=tuple(buttons),
    )


def click_refusal(
    *,
    model: str | None,
    session: SessionRecord | None,
    here: SessionRecord | None,
    may: bool,
) -> str | None:
    """Why a model button's click changes nothing (None: it is ``/model MODEL`` by the
    person who clicked). ``model``: what the verified token names; ``here``: the session
    open in the conversation clicked in now for the person who clicked (what their typed
    ``/model`` would reach); ``may``: whether they may talk to the session's project."""
    if model is None or session is None:
        return NOT_VALID
    if not may:
        return NOT_ALLOWED
    if here is None or here.id != session.id or here.is_closed:
        return STALE
    return None


class ModelButtons:
    """Shows ``/model``'s card and takes its clicks."""

    def __init__(
        self,
        config: Config,
        store: Store,
        platforms: Mapping[str, Platform],
        settings: SettingsDesk,
        key: bytes,
        *,
        auth_platform: Callable[[str], str],
        reply: Callable[[ConversationRef, str], Awaitable[None]],
        session_here: Callable[[ConversationRef, str, Actor], Awaitable[SessionRecord | None]],
    ) -> None:
        self._config = config
        self._store = store
        self._platforms = platforms
        # the cards this process showed, by session: redrawn after a click moves the mark
        self._shown: OrderedDict[str, list[MessageRef]] = OrderedDict()
        self._settings = settings
        self._key = key
        self._auth_platform = auth_platform
        self._reply = reply
        # the session the clicker's own /model would reach in that conversation (its route:
        # in user scope, each person's own)
        self._session_here = session_here

    def reload(self, config: Config) -> None:
        """Who may click, from a reloaded config (gateway/config/reload.py)."""
        self._config = config

    async def card(self, session: SessionRecord) -> Card | None:
        """The card of ``/model`` in ``session`` (None where its project lists no models:
        the typed answer says so)."""
        project = self._config.projects.get(session.project)
        if project is None or not project.agent_options.models:
            return None
        chosen = await self._store.settings.model(session.id)
        return model_card(
            self._key,
            session.id,
            project.agent_options.models,
            title=model_line(project, chosen),
            now=chosen or project.agent_options.model,
            offered=self._settings.offered_models(session),
            agent=project.agent.value,
        )

    async def show(
        self, session: SessionRecord, platform: Platform, conversation: ConversationRef
    ) -> bool:
        """Send ``/model``'s card; False where there is none or the platform refused it."""
        card = await self.card(session)
        if card is None:
            return False
        try:
            ref = await platform.send_card(conversation, card)
        except PlatformError as exc:
            log.info("the /model card in %s not shown: %s", conversation.key(), exc)
            return False
        shown = self._shown.setdefault(session.id, [])
        shown.append(ref)
        del shown[:-_CARDS_KEPT]
        self._shown.move_to_end(session.id)
        while len(self._shown) > _SESSIONS_KEPT:
            self._shown.popitem(last=False)
        return True

    async def redraw(self, session: SessionRecord) -> None:
        """Best effort: the session's cards this process showed mark the model now; one
        the platform refuses keeps its old mark (a later /model shows the right one)."""
        card = await self.card(session)
        if card is None:
            return
        refs = self._shown.get(session.id, [])
        await redraw_all(self._platforms, refs, card, what="a /model card")

    async def on_click(self, action: InboundAction) -> Ack:
        clicked = parse_model_token(action.token)
        session = None if clicked is None else await self._store.sessions.get(clicked.session_id)
        project = None if session is None else self._config.projects.get(session.project)
        model = (
            verify_model_token(self._key, clicked, project.agent_options.models)
            if clicked is not None and project is not None
            else None
        )
        actor = Actor(
            platform=self._auth_platform(action.actor.platform),
            user_id=action.actor.user_id,
            display=action.actor.display,
            roles=action.actor.roles,
        )
        may = session is not None and may_talk(self._config, session.project, actor)
        here = (  # only for a genuine button: a forged one learns nothing, binds nothing
            await self._session_here(action.conversation, session.project, actor)
            if may and session is not None and model is not None
            else None
        )
        why = click_refusal(model=model, session=session, here=here, may=may)
        if why is not None or session is None or model is None:
            why = why or NOT_VALID
            await self._store.audit.record(
                "model.click_refused",
                actor=action.actor.key(),
                session_id=session.id if session is not None else None,
                details={"why": why},
            )
            return Ack(text=why, accepted=False)
        choice = await self._settings.choose_model(session, model, actor)
        # said where it was clicked, as the typed command's answer is: the choice is the
        # whole conversation's
        await self._reply(action.conversation, f"{actor}: /model {model}\n{choice.text}")
        if choice.chosen is not None:
            await self.redraw(session)
        return Ack(text=choice.text, accepted=choice.chosen is not None)
