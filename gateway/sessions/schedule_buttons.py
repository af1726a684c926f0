"""The buttons under ``/schedules`` (issue 35): pause, resume and delete a schedule.

Not a decision of any interaction: a token names a schedule and what to do with it, signed
under the gateway's key like a card's (``k1:<p|r|d>:<schedule id>:<tag>``, over a message no
card's token can have, since those start ``a1:``). A click is checked as the command is
(gateway/sessions/schedule_desk.py): the conversation's project must be the schedule's, and
the clicker a project approver (or, where none are named, the schedule's creator); a
schedule of the config file has no buttons. Every change is audited by the ledger.

A press that changes the schedule redraws every card of it this process showed: paused, it
offers Resume; deleted, it says so and offers nothing. The cards are remembered in memory
(the newest :data:`_SCHEDULES_KEPT` schedules' cards): after a restart an older card keeps
its buttons, whose press is answered from the ledger ("paused already", "no schedule").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping

from gateway.cards import ButtonStyle, Card, CardAction
from gateway.config.model import Config
from gateway.domain import Actor
from gateway.platform import Ack, InboundAction, MessageRef, Platform
from gateway.sessions.card_redraws import redraw_all
from gateway.sessions.routing import project_for
from gateway.sessions.schedule_desk import ScheduleDesk
from gateway.store.schedules import ScheduleRecord
from gateway.store.store import Store

__all__ = [
    "SCHEDULE_TOKEN_PREFIX",
    "ScheduleButtons",
    "encode_schedule_token",
    "is_schedule_token",
    "schedule_card",
    "verify_schedule_token",
]

SCHEDULE_TOKEN_PREFIX = "k1:"
_SCHEDULES_KEPT = 256  # schedules whose cards are remembered, to be redrawn once pressed
NOT_VALID = "This button is not valid."
_WHAT = {"p": "pause", "r": "resume", "d": "delete"}
_TOKEN = re.compile(r"^k1:(?P<what>[prd]):(?P<schedule>[0-9]{1,18}):(?P<tag>[A-Za-z0-9_-]{12})$")


def _tag(key: bytes, message: str) -> str:
    # the tag of gateway/action_tokens.py: truncated HMAC-SHA256, base64url without padding
    digest = hmac.new(key, message.encode("ascii"), hashlib.sha256).digest()[:9]
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def encode_schedule_token(key: bytes, what: str, schedule_id: int) -> str:
    message = f"k1:{what}:{schedule_id}"
    return f"{message}:{_tag(key, message)}"


def is_schedule_token(text: str) -> bool:
    return text.startswith(SCHEDULE_TOKEN_PREFIX)


def verify_schedule_token(key: bytes, text: str) -> tuple[str, int] | None:
    """(what to do: pause, resume or delete; the schedule's id), or None when the token does
    not parse or verify."""
    match = _TOKEN.match(text)
    if match is None:
        return None
    expected = _tag(key, f"k1:{match['what']}:{match['schedule']}")
    if not hmac.compare_digest(expected.encode("ascii"), match["tag"].encode("ascii")):
        return None
    return _WHAT[match["what"]], int(match["schedule"])


def schedule_card(key: bytes, schedule: ScheduleRecord, line: str) -> Card:
    """One schedule of ``/schedules`` with its buttons (none for a config entry)."""
    title = f"⏰ Schedule {schedule.label}"
    if schedule.name is not None:
        return Card(title=title, summary=f"{line}\nFrom the config file: changed there.")
    toggle = (
        CardAction(label="Resume", token=encode_schedule_token(key, "r", schedule.id))
        if schedule.paused
        else CardAction(label="Pause", token=encode_schedule_token(key, "p", schedule.id))
    )
    delete = CardAction(
        label="Delete", token=encode_schedule_token(key, "d", schedule.id), style=ButtonStyle.DANGER
    )
    return Card(title=title, summary=line, actions=(toggle, delete))


def deleted_card(schedule_id: int, by: Actor) -> Card:
    """A schedule's card once deleted by a press: no buttons left."""
    return Card(title=f"⏰ Schedule S{schedule_id}", summary=f"Deleted by {by.display}.")


class ScheduleButtons:
    def __init__(
        self,
        config: Config,
        store: Store,
        desk: ScheduleDesk,
        key: bytes,
        *,
        auth_platform: Callable[[str], str],
        platforms: Mapping[str, Platform],
    ) -> None:
        self._config = config
        self._store = store
        self._desk = desk
        self._key = key
        self._auth_platform = auth_platform
        self._platforms = platforms
        self._shown: OrderedDict[int, list[MessageRef]] = OrderedDict()

    def shown(self, schedule_id: int, ref: MessageRef) -> None:
        """A card of the schedule was shown as ``ref`` (``/schedules``): redrawn once pressed."""
        self._shown.setdefault(schedule_id, []).append(ref)
        self._shown.move_to_end(schedule_id)
        while len(self._shown) > _SCHEDULES_KEPT:
            self._shown.popitem(last=False)

    def reload(self, config: Config) -> None:
        """Who may press, from a reloaded config."""
        self._config = config

    async def on_click(self, action: InboundAction) -> Ack:
        verified = verify_schedule_token(self._key, action.token)
        auth = self._auth_platform(action.actor.platform)
        clicker = Actor(
            platform=auth,
            user_id=action.actor.user_id,
            display=action.actor.display,
            roles=action.actor.roles,
        )
        project = project_for(self._config, action.conversation, auth)
        if verified is None or project is None:
            await self._store.audit.record(
                "schedule.click_refused",
                actor=action.actor.key(),
                details={"why": NOT_VALID},
            )
            return Ack(text=NOT_VALID, accepted=False)
        what, schedule_id = verified
        spec = f"S{schedule_id}"
        if what == "delete":
            text, accepted = await self._desk.unschedule(project, clicker, spec)
        else:
            text, accepted = await self._desk.set_paused(
                project, clicker, spec, paused=what == "pause"
            )
        if not accepted:
            await self._store.audit.record(
                "schedule.click_refused",
                actor=action.actor.key(),
                details={"schedule": schedule_id, "why": text},
            )
        else:
            await self._redraw(project, schedule_id, clicker, deleted=what == "delete")
        return Ack(text=text, accepted=accepted)

    async def _redraw(self, project: str, schedule_id: int, by: Actor, *, deleted: bool) -> None:
        """Every card of the schedule this process showed, as it is now (best effort: the
        ledger holds the change, and a press on a card left as it was is answered from it)."""
        refs = self._shown.pop(schedule_id, []) if deleted else self._shown.get(schedule_id, [])
        if not refs:
            return
        card = deleted_card(schedule_id, by)
        if not deleted:
            listed = await self._desk.listing(project)
            found = next(((s, line) for s, line in listed if s.id == schedule_id), None)
            if found is None:
                return
            card = schedule_card(self._key, *found)
        await redraw_all(self._platforms, refs, card, what=f"schedule S{schedule_id}'s card")
