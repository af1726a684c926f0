"""What a person sees in the fake Slack, and what Slack tells the app: the fake's records.

:class:`Posted` is a message as it reads now (its blocks, earlier versions, thread, files),
:class:`Ephemeral` one only its person sees, :class:`Modal` a view open in front of someone,
:class:`UploadedFile` a file of the 3-step upload, :class:`Delivery` one event, interaction
or command with each :class:`Attempt` to deliver it, :class:`Pacing` Slack's windows.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Literal

from tests.servers.slack_people import APP_ID, BOT_ID, BOT_USER_ID, TEAM_ID
from tests.servers.slack_wire import buttons_of, seen_text, text_of

__all__ = [
    "SLACKBOT",
    "Attempt",
    "Channel",
    "Delivery",
    "DeliveryKind",
    "Ephemeral",
    "Modal",
    "Pacing",
    "Posted",
    "UploadedFile",
    "Version",
]

SLACKBOT = "USLACKBOT"
_BOT_PROFILE = {"id": BOT_ID, "app_id": APP_ID, "name": "Gateway", "team_id": TEAM_ID}
DeliveryKind = Literal["events_api", "interactive", "slash_commands"]


@dataclass
class Pacing:
    """Slack's windows, shrinkable so a test provokes them without waiting."""

    post_limit: int = 1  # chat.postMessage per channel ...
    post_window: float = 1.0  # ... in this many seconds
    update_limit: int = 50  # chat.update for the workspace (Tier 3) ...
    update_window: float = 60.0  # ... in this many seconds
    retry_after_floor: int = 1  # Retry-After is whole seconds, at least this
    ack_timeout: float = 3.0  # an envelope (or an HTTP delivery) unanswered after this failed
    trigger_ttl: float = 3.0  # a trigger_id opens a view within this after the interaction
    event_retry_delays: tuple[float, ...] = (0.0, 60.0, 300.0)  # Events API retries


@dataclass
class Channel:
    id: str
    name: str
    kind: Literal["channel", "group", "im"] = "channel"
    members: set[str] = field(default_factory=set)
    peer: str | None = None  # the person of a DM
    archived: bool = False
    gone: bool = False  # deleted: channel_not_found
    shared: bool = False  # a Slack Connect channel with another team

    def json(self) -> dict[str, Any]:
        """As ``conversations.info`` answers."""
        body: dict[str, Any] = {
            "id": self.id,
            "created": 1_700_000_000,
            "is_archived": self.archived,
            "is_im": self.kind == "im",
            "is_channel": self.kind == "channel",
            "is_group": self.kind == "group",
            "is_private": self.kind != "channel",
            "is_member": BOT_USER_ID in self.members,
            "is_ext_shared": self.shared,
            "is_shared": self.shared,
            "context_team_id": TEAM_ID,
        }
        if self.kind == "im":
            body["user"] = self.peer
        else:
            body["name"] = self.name
        return body


@dataclass(frozen=True)
class Version:
    text: str
    blocks: list[dict[str, Any]]

    @property
    def seen(self) -> str:
        return seen_text(self.text, self.blocks)


@dataclass
class UploadedFile:
    id: str
    name: str
    length: int
    title: str = ""
    content: bytes | None = None  # None: step 2 never came
    channel: str | None = None  # shared by files.completeUploadExternal
    thread_ts: str | None = None
    comment: str = ""

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "title": self.title or self.name,
            "mimetype": "text/plain",
            "filetype": "text",
            "size": self.length,
            "user": BOT_USER_ID,
            "url_private": f"https://files.fake.slack/{self.id}/{self.name}",
        }


@dataclass(eq=False)
class Posted:
    """A message as people see it now: its text, blocks, earlier versions, thread."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    user: str
    thread_ts: str | None = None  # the parent's ts, for a reply
    edits: list[Version] = field(default_factory=list)  # earlier versions, oldest first
    deleted: bool = False
    locked: bool = False  # chat.update answers cant_update_message
    files: list[UploadedFile] = field(default_factory=list)
    reactions: dict[str, list[str]] = field(default_factory=dict)  # emoji name: user ids

    @property
    def from_bot(self) -> bool:
        return self.user == BOT_USER_ID

    @property
    def seen(self) -> str:
        """The message's blocks as read (its ``text`` without blocks)."""
        return seen_text(self.text, self.blocks)

    @property
    def versions(self) -> list[Version]:
        return [*self.edits, Version(self.text, self.blocks)]

    @property
    def labels(self) -> list[str]:
        return [text_of(button.get("text")) for _, button in buttons_of(self.blocks)]

    def button(self, label: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(block, button) with this label (exactly, else the one containing it)."""
        found = buttons_of(self.blocks)
        exact = [(b, e) for b, e in found if text_of(e.get("text")) == label]
        loose = exact or [(b, e) for b, e in found if label in text_of(e.get("text"))]
        if len(loose) != 1:
            raise AssertionError(f"{len(loose)} buttons {label!r} on this message: {self.labels}")
        return loose[0]

    def json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": "message",
            "ts": self.ts,
            "user": self.user,
            "text": self.text,
            "team": TEAM_ID,
            "blocks": self.blocks,
        }
        if self.from_bot:
            body.update(bot_id=BOT_ID, app_id=APP_ID, bot_profile=_BOT_PROFILE)
        if self.thread_ts is not None:
            body["thread_ts"] = self.thread_ts
        if self.edits:
            body["edited"] = {"user": self.user, "ts": self.ts}
        if self.files:
            body["files"] = [f.json() for f in self.files]
            body["upload"] = False
        if self.reactions:
            body["reactions"] = [
                {"name": name, "users": list(users), "count": len(users)}
                for name, users in self.reactions.items()
            ]
        return body


@dataclass(frozen=True)
class Ephemeral:
    """A message only ``user`` sees (gone on reload)."""

    channel: str
    user: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    ts: str
    sender: str = BOT_USER_ID  # USLACKBOT: Slack's own notice

    @property
    def seen(self) -> str:
        return seen_text(self.text, self.blocks)


@dataclass(eq=False)
class Modal:
    """A modal open in front of ``user`` (the top one of their stack is what they see)."""

    id: str
    user: str
    view: dict[str, Any]  # as Slack stores it: ids filled in, hash, state
    hash: str
    external_id: str | None = None
    closed: bool = False
    errors: dict[str, str] = field(default_factory=dict)  # response_action errors, by block
    failed: bool = False  # the app did not answer a submission in time
    versions: list[dict[str, Any]] = field(default_factory=list)  # earlier views

    @property
    def title(self) -> str:
        return text_of(self.view.get("title"))

    @property
    def blocks(self) -> list[dict[str, Any]]:
        return list(self.view.get("blocks") or [])

    @property
    def private_metadata(self) -> str:
        return str(self.view.get("private_metadata") or "")


@dataclass
class Attempt:
    number: int  # 0 the first delivery, then the retry_attempt
    envelope_id: str
    transport: Literal["socket", "http", "none"]
    status: int | None = None  # the HTTP answer (None: none came, or Socket Mode)
    acked: bool = False
    connection: int | None = None  # the Socket Mode connection it was sent on (its number)


@dataclass(eq=False)
class Delivery:
    """One thing Slack tells the app (an event, an interaction, a command), with its tries."""

    kind: DeliveryKind
    payload: dict[str, Any]
    attempts: list[Attempt] = field(default_factory=list)
    state: Literal["pending", "acked", "failed"] = "pending"
    response: dict[str, Any] | None = None  # what the ack carried
    to: int | None = None  # the connection its first attempt goes to (else one at random)
    _done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def type(self) -> str:
        """The event's or payload's type (``message``, ``block_actions``, ``/agent``...)."""
        if self.kind == "events_api":
            return str(self.payload["event"]["type"])
        if self.kind == "slash_commands":
            return str(self.payload["command"])
        return str(self.payload["type"])

    async def settled(self) -> Delivery:
        """Wait (under the caller's deadline) until acked or given up."""
        await self._done.wait()
        return self
