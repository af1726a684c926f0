"""Who is in the fake Discord and what they see: people, channels, messages, interactions.

:class:`Person` a user (with guild roles), :class:`Channel` a guild text channel, thread or
DM, :class:`Sent` a message as it reads now with its earlier versions, :class:`Interaction`
one click, modal submit or slash command with its callback and followups, :class:`Pacing`
Discord's windows (shrinkable). Each ``json()`` is what Discord puts on the wire for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ADD_REACTIONS",
    "ALL_PERMISSIONS",
    "APP_ID",
    "BOT",
    "BOT_ID",
    "CREATE_PUBLIC_THREADS",
    "GUILD_ID",
    "SEND_MESSAGES",
    "SEND_MESSAGES_IN_THREADS",
    "TS",
    "VIEW_CHANNEL",
    "Channel",
    "Interaction",
    "Pacing",
    "Person",
    "Sent",
    "Version",
]

APP_ID = "1100000000000000001"
BOT_ID = APP_ID  # a bot user's id is its application's
GUILD_ID = "1200000000000000001"
TS = "2026-01-01T00:00:00.000000+00:00"
ADD_REACTIONS = 1 << 6
VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11
CREATE_PUBLIC_THREADS = 1 << 35
SEND_MESSAGES_IN_THREADS = 1 << 38
ALL_PERMISSIONS = (1 << 50) - 1 & ~(1 << 3)  # everything but administrator


@dataclass(frozen=True)
class Person:
    id: str
    name: str
    roles: tuple[str, ...] = ()
    bot: bool = False

    def json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "username": self.name,
            "discriminator": "0",
            "global_name": self.name.title(),
            "avatar": None,
            "public_flags": 0,
        }
        if self.bot:
            body["bot"] = True
        return body

    def member_json(self, *, with_user: bool = True) -> dict[str, Any]:
        body: dict[str, Any] = {
            "roles": list(self.roles),
            "joined_at": TS,
            "deaf": False,
            "mute": False,
            "flags": 0,
            "pending": False,
            "nick": None,
            "avatar": None,
        }
        if with_user:
            body["user"] = self.json()
        return body


BOT = Person(BOT_ID, "gateway-bot", bot=True)


@dataclass
class Pacing:
    """Discord's windows and deadlines, shrinkable so a test provokes them without waiting."""

    edit_limit: int = 5  # message edits per channel ...
    edit_window: float = 5.0  # ... in this many seconds
    route_limit: int = 50  # any other route bucket, per window
    route_window: float = 1.0
    ack_deadline: float = 3.0  # an interaction's callback within this
    followup_ttl: float = 900.0  # its token valid this long (15 minutes)
    heartbeat_interval_ms: int = 41250


@dataclass
class Channel:
    """A guild text channel (``kind`` 0), a public thread (11) or a DM (1)."""

    id: str
    name: str
    kind: Literal[0, 1, 11] = 0
    guild_id: str | None = GUILD_ID
    parent_id: str | None = None  # a thread's channel
    peer: Person | None = None  # a DM's person
    archived: bool = False
    locked: bool = False
    bot_denied: int = 0  # permissions an overwrite takes from the bot here

    @property
    def is_thread(self) -> bool:
        return self.kind == 11

    def json(self) -> dict[str, Any]:
        if self.kind == 1:
            assert self.peer is not None
            return {
                "id": self.id,
                "type": 1,
                "recipients": [self.peer.json()],
                "last_message_id": None,
            }
        body: dict[str, Any] = {
            "id": self.id,
            "type": self.kind,
            "guild_id": self.guild_id,
            "name": self.name,
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": self.parent_id,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
        }
        if self.bot_denied:
            body["permission_overwrites"] = [
                {"id": BOT_ID, "type": 1, "allow": "0", "deny": str(self.bot_denied)}
            ]
        if self.is_thread:
            body.update(
                owner_id=BOT_ID,
                message_count=0,
                member_count=1,
                thread_metadata={
                    "archived": self.archived,
                    "locked": self.locked,
                    "auto_archive_duration": 1440,
                    "archive_timestamp": TS,
                },
            )
            del body["permission_overwrites"], body["position"], body["topic"]
        return body


@dataclass(frozen=True)
class Version:
    content: str
    embeds: list[dict[str, Any]]
    components: list[dict[str, Any]]


@dataclass(eq=False)
class Sent:
    """A message as people see it now, and what its sender asked for."""

    id: str
    channel_id: str
    author: Person
    content: str
    embeds: list[dict[str, Any]] = field(default_factory=list)
    components: list[dict[str, Any]] = field(default_factory=list)
    allowed_mentions: dict[str, Any] | None = None  # as the last send or edit asked
    flags: int = 0
    attachments: list[dict[str, Any]] = field(default_factory=list)  # id, filename, size
    mentions: list[Person] = field(default_factory=list)
    guild_id: str | None = GUILD_ID
    interaction_id: str | None = None  # an interaction's response or followup
    pinged: list[str] = field(default_factory=list)  # whom its posting notified (wire.pings)
    edits: list[Version] = field(default_factory=list)  # earlier versions, oldest first
    reactions: dict[str, list[str]] = field(default_factory=dict)  # emoji -> user ids
    deleted: bool = False

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & 64)

    @property
    def versions(self) -> list[Version]:
        return [*self.edits, Version(self.content, self.embeds, self.components)]

    @property
    def labels(self) -> list[str]:
        return [
            child.get("label", "")
            for row in self.components
            for child in row.get("components") or []
            if child.get("type") == 2
        ]

    def button(self, label: str) -> dict[str, Any]:
        """The button with this label (exactly, else the one containing it)."""
        found: list[dict[str, Any]] = [
            child
            for row in self.components
            for child in row.get("components") or []
            if child.get("type") == 2
        ]
        exact = [b for b in found if b.get("label") == label]
        loose = exact or [b for b in found if label in (b.get("label") or "")]
        if len(loose) != 1:
            raise AssertionError(f"{len(loose)} buttons {label!r} on this message: {self.labels}")
        return loose[0]

    def json(self, *, content_visible: bool = True) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "channel_id": self.channel_id,
            "author": self.author.json(),
            "content": self.content if content_visible else "",
            "timestamp": TS,
            "edited_timestamp": TS if self.edits else None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [p.json() for p in self.mentions],
            "mention_roles": [],
            "attachments": self.attachments if content_visible else [],
            "embeds": self.embeds if content_visible else [],
            "components": self.components if content_visible else [],
            "pinned": False,
            "type": 0,
            "flags": self.flags,
        }
        if self.author.bot:
            body["application_id"] = APP_ID
        if self.guild_id is not None:
            body["guild_id"] = self.guild_id
            body["member"] = self.author.member_json(with_user=False)
        return body


@dataclass(eq=False)
class Interaction:
    """One interaction Discord sent the app, and how the app answered it."""

    id: str
    token: str
    type: Literal[2, 3, 4, 5]  # slash command, component, autocomplete, modal submit
    person: Person
    channel: Channel
    data: dict[str, Any]
    created: float  # the fake's clock
    message: Sent | None = None  # the message of a clicked component
    callback: dict[str, Any] | None = None  # the one response (type + data)
    callback_at: float | None = None
    original: Sent | None = None  # the response message (type 4 or 5)
    followups: list[Sent] = field(default_factory=list)
    modal: dict[str, Any] | None = None  # the modal opened in reply (callback type 9)
    refused: list[int] = field(default_factory=list)  # codes of refused callbacks
    attachment_size_limit: int = 10 * 1024 * 1024

    @property
    def callback_type(self) -> int | None:
        return None if self.callback is None else int(self.callback["type"])

    def json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "application_id": APP_ID,
            "type": self.type,
            "data": self.data,
            "token": self.token,
            "version": 1,
            "channel_id": self.channel.id,
            "channel": self.channel.json(),
            "locale": "en-US",
            "app_permissions": str(ALL_PERMISSIONS & ~self.channel.bot_denied),
            "entitlements": [],
            "attachment_size_limit": self.attachment_size_limit,  # discord.py 2.7 needs it
            "context": 1 if self.channel.kind == 1 else 0,
        }
        if self.channel.guild_id is not None:
            body["guild_id"] = self.channel.guild_id
            body["guild_locale"] = "en-US"
            body["authorizing_integration_owners"] = {"0": self.channel.guild_id}
            member = self.person.member_json()
            member["permissions"] = str(ALL_PERMISSIONS)
            body["member"] = member
        else:
            body["authorizing_integration_owners"] = {"1": self.person.id}
            body["user"] = self.person.json()
        if self.message is not None:
            body["message"] = self.message.json()
        return body
