"""What the platform reads of discord.py's objects: plain data for inbound.py and forms.py.

Kept apart from messages.py and clicks.py so that what is trusted of an interaction is in
one place: its ``custom_id`` (our prefix, then a token), the person (their member roles
where there is a member), the channel it happened in, and a modal's submitted values by
component.
"""

from __future__ import annotations

from typing import Any

import discord

from platforms.discord.files import attachments_of
from platforms.discord.inbound import Place, Seen

__all__ = ["modal_values", "place_of", "roles_of", "seen_of"]


def place_of(channel: Any, guild_id: int | None) -> Place:
    """Where a message or interaction happened (a thread: its parent too)."""
    channel_id = str(getattr(channel, "id", "") or "")
    if guild_id is None:
        return Place(guild_id=None, channel_id=channel_id)
    parent = getattr(channel, "parent_id", None)
    is_thread = isinstance(channel, discord.Thread) or (
        getattr(channel, "type", None)
        in (discord.ChannelType.public_thread, discord.ChannelType.private_thread)
    )
    return Place(
        guild_id=str(guild_id),
        channel_id=channel_id,
        parent_id=str(parent) if is_thread and parent else None,
    )


def roles_of(user: Any) -> tuple[str, ...]:
    """A member's role ids (not @everyone); none for a user without a member (a DM)."""
    if not isinstance(user, discord.Member):
        return ()
    return tuple(str(role.id) for role in user.roles if not role.is_default())


def seen_of(message: discord.Message) -> Seen:
    guild_id = message.guild.id if message.guild is not None else None
    return Seen(
        message_id=str(message.id),
        place=place_of(message.channel, guild_id),
        author_id=str(message.author.id),
        author_name=message.author.name,
        author_is_bot=message.author.bot,
        content=message.content or "",
        mentions=tuple(str(user.id) for user in message.mentions),
        roles=roles_of(message.author),
        attachments=attachments_of(message.attachments),
    )


def modal_values(data: Any) -> dict[str, str | list[str]]:
    """A modal submit's values by component custom_id (Labels around inputs, and the
    action rows of older text inputs)."""
    found: dict[str, str | list[str]] = {}

    def take(component: Any) -> None:
        if not isinstance(component, dict):
            return
        custom = component.get("custom_id")
        if isinstance(custom, str):
            if "values" in component:
                found[custom] = [str(v) for v in component.get("values") or []]
            elif "value" in component:
                value = component.get("value")
                found[custom] = "" if value is None else str(value)
        for child in component.get("components") or []:
            take(child)
        take(component.get("component"))

    for top in (data or {}).get("components") or []:
        take(top)
    return found
