"""What a Slack event or interaction means to the gateway: pure functions on payload dicts.

- A conversation is ``ConversationRef("slack", team id, channel id, thread ts or None)``. In
  a channel, a top-level message that mentions the app starts a session in *its* thread
  (thread = its own ts) and is answered there; a direct message at the top level is the DM
  itself (thread None), a reply in a DM's thread is that thread.
- A person is ``Actor("slack", user id, name)``.
- Direct messages: every message. Channels: a message that mentions the app always counts
  (the mention is taken out of the text); a bare reply in a thread only where a session
  lives (:attr:`Heard.needs_session`: the platform asks ``Inbox.has_session``); a bare
  top-level message only with ``channel_mode = "all"``.
- A message with files comes as subtype ``file_share``: each file is an attachment (issue 32)
  whose reference is its Slack file id; its text, "" if none, is the prompt.
- Ignored: the app's own and other bots' messages, edits, deletions and every other subtype
  (joins, thread broadcasts); events of another team (a guest in a shared channel) are
  refused (:class:`Foreign`).
- ``message_id`` is the message's ts: an event Slack delivers again (``retry_attempt``,
  ``X-Slack-Retry-Num``) is queued once.
- A click: the card's conversation is its channel and ``message.thread_ts`` (None for a
  card at a DM's top level), the token is the button's ``value``, nothing else is trusted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gateway.attachments import InboundAttachment
from gateway.domain import Actor, ConversationRef
from platforms.slack.config import ChannelMode

__all__ = [
    "PLATFORM",
    "Click",
    "Foreign",
    "Heard",
    "actor_of",
    "click_of",
    "command_text",
    "conversation",
    "files_of",
    "heard",
    "link_to",
    "strip_mentions",
]

PLATFORM = "slack"
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")


@dataclass(frozen=True, kw_only=True, slots=True)
class Heard:
    """A person's message the app takes (if ``needs_session``: only where a session lives)."""

    conversation: ConversationRef
    actor: Actor
    text: str
    message_id: str
    needs_session: bool = False
    direct: bool = False  # a direct message (only its person and the app see it)
    attachments: tuple[InboundAttachment, ...] = ()  # its files, in the order sent


@dataclass(frozen=True, kw_only=True, slots=True)
class Foreign:
    """An event of another team: refused, said once in the log."""

    team: str
    user: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Click:
    conversation: ConversationRef
    actor: Actor
    token: str
    action_id: str
    trigger_id: str
    message_ts: str


def link_to(conversation: ConversationRef) -> str:
    """The address of a thread (its first message's ts without the dot) or a channel, which
    Slack opens in the person's workspace (``chat.getPermalink`` would cost a call)."""
    base = f"https://slack.com/archives/{conversation.channel}"
    return f"{base}/p{conversation.thread.replace('.', '')}" if conversation.thread else base


def conversation(team: str, channel: str, thread: str | None = None) -> ConversationRef:
    return ConversationRef(platform=PLATFORM, space=team, channel=channel, thread=thread)


def actor_of(user_id: str, name: str = "") -> Actor:
    return Actor(platform=PLATFORM, user_id=user_id, display=f"@{name}" if name else user_id)


def strip_mentions(text: str, bot_user_id: str) -> str:
    """The text without the app's mention(s), other mentions kept."""
    stripped = re.sub(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>", " ", text)
    return re.sub(r"[ \t]{2,}", " ", stripped).strip()


def _mentions(text: str, bot_user_id: str) -> bool:
    return any(match.group(1) == bot_user_id for match in _MENTION.finditer(text))


def _team_of(event: dict[str, Any], body: dict[str, Any]) -> str:
    return str(
        event.get("user_team")
        or event.get("source_team")
        or event.get("team")
        or body.get("team_id")
        or ""
    )


def heard(
    body: dict[str, Any],
    *,
    team_id: str,
    bot_user_id: str,
    mode: ChannelMode,
) -> Heard | Foreign | None:
    """What a ``message`` event (``body`` is the Events API wrapper) says to the gateway:
    a message to take, an event of another team, or None (not for the app)."""
    event = body.get("event")
    if not isinstance(event, dict) or event.get("type") != "message":
        return None
    subtype = event.get("subtype")
    if (subtype and subtype != "file_share") or event.get("bot_id") or event.get("hidden"):
        return None
    user = str(event.get("user") or "")
    text = event.get("text")
    channel = str(event.get("channel") or "")
    ts = str(event.get("ts") or "")
    if not user or user == bot_user_id or not isinstance(text, str) or not channel or not ts:
        return None
    team = _team_of(event, body)
    if team != team_id or str(body.get("team_id") or team_id) != team_id:
        return Foreign(team=team, user=user)
    thread = str(event["thread_ts"]) if event.get("thread_ts") else None
    in_thread = thread is not None and thread != ts
    mentioned = _mentions(text, bot_user_id)
    actor = actor_of(user)
    said = strip_mentions(text, bot_user_id)
    files = files_of(event)
    if not said and not files:
        return None
    if event.get("channel_type") == "im":
        where = conversation(team_id, channel, thread if in_thread else None)
        return Heard(
            conversation=where,
            actor=actor,
            text=said,
            message_id=ts,
            direct=True,
            attachments=files,
        )
    if in_thread:
        assert thread is not None
        return Heard(
            conversation=conversation(team_id, channel, thread),
            actor=actor,
            text=said,
            message_id=ts,
            needs_session=not mentioned,
            attachments=files,
        )
    if not mentioned and mode is not ChannelMode.ALL:
        return None
    # a top-level message starts a session in its own thread, answered there
    return Heard(
        conversation=conversation(team_id, channel, ts),
        actor=actor,
        text=said,
        message_id=ts,
        attachments=files,
    )


def files_of(event: dict[str, Any]) -> tuple[InboundAttachment, ...]:
    """The files of a ``file_share`` message: name, declared size and type, file id."""
    found: list[InboundAttachment] = []
    for item in event.get("files") or []:
        if not isinstance(item, dict) or not item.get("id"):
            continue
        size = item.get("size")
        declared = str(item.get("mimetype") or "")
        # an audio clip recorded in Slack (subtype slack_audio), or an audio file: a voice
        # note, transcribed (issue 34); its length in duration_ms where Slack gives it
        spoken = item.get("subtype") == "slack_audio" or declared.startswith("audio/")
        length = item.get("duration_ms")
        found.append(
            InboundAttachment(
                name=str(item.get("name") or item.get("title") or item["id"]),
                reference=str(item["id"]),
                size=size if isinstance(size, int) and size >= 0 else None,
                declared_type=declared,
                voice=spoken,
                seconds=length / 1000 if isinstance(length, int | float) else None,
            )
        )
    return tuple(found)


def click_of(payload: dict[str, Any], *, team_id: str) -> Click | Foreign | None:
    """The button a ``block_actions`` payload clicked, on a message (None: not a card's
    button, e.g. one in a modal or an ephemeral)."""
    user = payload.get("user") or {}
    user_id = str(user.get("id") or "")
    team = str(user.get("team_id") or (payload.get("team") or {}).get("id") or "")
    if team != team_id:
        return Foreign(team=team, user=user_id)
    container = payload.get("container") or {}
    message = payload.get("message") or {}
    actions = payload.get("actions") or []
    if container.get("type") != "message" or not message or len(actions) != 1:
        return None
    action = actions[0]
    token = action.get("value")
    channel = str(container.get("channel_id") or "")
    if not isinstance(token, str) or not token or not channel or not user_id:
        return None
    thread = message.get("thread_ts") or None
    return Click(
        conversation=conversation(team_id, channel, str(thread) if thread else None),
        actor=actor_of(user_id, str(user.get("username") or user.get("name") or "")),
        token=token,
        action_id=str(action.get("action_id") or ""),
        trigger_id=str(payload.get("trigger_id") or ""),
        message_ts=str(message.get("ts") or container.get("message_ts") or ""),
    )


def command_text(text: str) -> str:
    """``/agent stop now`` as the gateway's command ``/stop now``; ``/agent`` alone is
    ``/help``."""
    words = text.strip()
    if not words:
        return "/help"
    return words if words.startswith("/") else f"/{words}"
