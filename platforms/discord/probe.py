"""What ``agent-gateway check`` asks Discord before anything runs, without discord.py.

A new user creates the application, invites the bot (``agent-gateway discord-invite``) and
puts its token in the config; what can still be wrong is only seen by asking Discord, and
is said here in words, one line each:

- the token: ``GET /users/@me`` answers (else: refused; or Discord unreachable at the
  configured ``api_base_url``);
- the application: ``GET /applications/@me`` is ``application_id`` (when written); with
  ``message_content = true`` its flags have the Message Content intent (else the gateway
  would close with 4014 at start);
- each configured channel: the bot sees it, and holds every permission it uses there
  (computed as Discord does from the guild's roles, the bot's member and the channel's
  overwrites: :func:`channel_permissions`); each missing one is named.

:func:`asked_application_id` is the same question for ``agent-gateway discord-invite``
when the config does not write ``application_id``: the token's application.

Only aiohttp (already the gateway's) is imported: ``check`` loads no SDK.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from gateway.errors import ConfigError, PlatformError
from platforms.discord.config import DiscordConfig, Permission

__all__ = [
    "Probed",
    "asked_application_id",
    "channel_permissions",
    "check",
    "missing_permissions",
    "probe",
]

ADMINISTRATOR = 1 << 3
ALL = (1 << 53) - 1
# the application's flags (discord.com/developers/docs/resources/application)
MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19)

_NAMES = {
    Permission.ADD_REACTIONS: "Add Reactions",
    Permission.VIEW_CHANNEL: "View Channel",
    Permission.SEND_MESSAGES: "Send Messages",
    Permission.EMBED_LINKS: "Embed Links",
    Permission.ATTACH_FILES: "Attach Files",
    Permission.READ_MESSAGE_HISTORY: "Read Message History",
    Permission.CREATE_PUBLIC_THREADS: "Create Public Threads",
    Permission.SEND_MESSAGES_IN_THREADS: "Send Messages in Threads",
}


def channel_permissions(
    *,
    guild_id: str,
    owner_id: str,
    roles: Mapping[str, int],
    member_id: str,
    member_roles: Iterable[str],
    overwrites: Iterable[Mapping[str, Any]],
) -> int:
    """A member's permissions in a channel, as Discord computes them (pure): the guild's
    roles (``@everyone`` is the role with the guild's id), then the channel's overwrites
    for ``@everyone``, for the member's roles together, and for the member."""
    if member_id == owner_id:
        return ALL
    held = [role for role in member_roles if role in roles]
    base = roles.get(guild_id, 0)
    for role in held:
        base |= roles[role]
    if base & ADMINISTRATOR:
        return ALL
    by_id = {str(o.get("id")): o for o in overwrites}

    def bits(overwrite: Mapping[str, Any] | None, key: str) -> int:
        return int(str((overwrite or {}).get(key) or 0))

    everyone = by_id.get(guild_id)
    perms = (base & ~bits(everyone, "deny")) | bits(everyone, "allow")
    deny = allow = 0
    for role in held:
        found = by_id.get(role)
        if found is not None and int(found.get("type", 0)) == 0:
            deny |= bits(found, "deny")
            allow |= bits(found, "allow")
    perms = (perms & ~deny) | allow
    mine = by_id.get(member_id)
    if mine is not None and int(mine.get("type", 1)) == 1:
        perms = (perms & ~bits(mine, "deny")) | bits(mine, "allow")
    return perms


def missing_permissions(perms: int) -> list[str]:
    """The names of the permissions the bot uses and does not hold."""
    if not perms & Permission.VIEW_CHANNEL:
        return [_NAMES[Permission.VIEW_CHANNEL]]  # nothing else matters without it
    return [name for bit, name in _NAMES.items() if not perms & bit]


@dataclass(frozen=True, kw_only=True, slots=True)
class Probed:
    problems: tuple[str, ...]
    summary: str = ""


class _Refused(Exception):
    def __init__(self, status: int, code: int | None) -> None:
        super().__init__(status)
        self.status, self.code = status, code


async def _get(http: aiohttp.ClientSession, url: str) -> Any:
    async with http.get(url) as reply:
        try:
            body = await reply.json(content_type=None)
        except ValueError:
            body = None
        if reply.status >= 400:
            code = body.get("code") if isinstance(body, dict) else None
            raise _Refused(reply.status, code if isinstance(code, int) else None)
        return body


async def probe(settings: DiscordConfig, *, seconds: float = 10.0) -> Probed:
    """Ask Discord what the config's token may do; the problems, in the order to fix them."""
    base = settings.api_base
    headers = {"Authorization": f"Bot {settings.token.get_secret_value()}"}
    problems: list[str] = []
    timeout = aiohttp.ClientTimeout(total=seconds)
    try:
        async with aiohttp.ClientSession(timeout=timeout, headers=headers) as http:
            try:
                me = await _get(http, f"{base}/users/@me")
            except _Refused as refused:
                why = "Discord does not know it (copy the bot's token again)"
                if refused.status != 401:
                    why = f"Discord refused it (HTTP {refused.status})"
                return Probed(problems=(f"discord: token: {why}",))
            bot_id = str(me.get("id") or "")
            app = await _get(http, f"{base}/applications/@me")
            written = settings.application_id
            if written is not None and str(app.get("id") or "") != written:
                problems.append(
                    f"discord: application_id: the token is of application {app.get('id')}, "
                    f"not {settings.application_id}"
                )
            flags = int(app.get("flags") or 0)
            if settings.message_content and not flags & MESSAGE_CONTENT_FLAGS:
                problems.append(
                    "discord: message_content = true, but the application does not have the "
                    "Message Content intent: turn it on in the Developer Portal (Bot > "
                    "Privileged Gateway Intents), or set message_content = false"
                )
            problems += await _channel_problems(http, base, settings.channels, bot_id)
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Probed(problems=(f"discord: {base} unreachable ({type(exc).__name__})",))
    except _Refused as refused:
        return Probed(problems=(f"discord: {base} refused a check (HTTP {refused.status})",))
    if problems:
        return Probed(problems=tuple(problems))
    where = f"{len(settings.channels)} channel(s) OK" if settings.channels else "DMs only"
    intent = "; message content on" if settings.message_content else ""
    name = str(me.get("username") or bot_id)
    return Probed(problems=(), summary=f"discord: OK (bot @{name}; {where}{intent})")


async def asked_application_id(settings: DiscordConfig, *, seconds: float = 10.0) -> str:
    """The id of the token's application (``GET /applications/@me``): a refused token is a
    ConfigError naming the key, Discord unreachable a PlatformError."""
    base = settings.api_base
    headers = {"Authorization": f"Bot {settings.token.get_secret_value()}"}
    try:
        async with aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=seconds), headers=headers
        ) as http:
            app = await _get(http, f"{base}/applications/@me")
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise PlatformError(f"discord: {base} unreachable ({type(exc).__name__})") from exc
    except _Refused as refused:
        why = "Discord does not know it (copy the bot's token again)"
        if refused.status != 401:
            why = f"Discord refused it (HTTP {refused.status})"
        raise ConfigError(f"platforms.discord.token: {why}") from None
    found = str(app.get("id") or "") if isinstance(app, dict) else ""
    if not found.isdigit():
        raise PlatformError(f"discord: {base}/applications/@me named no application")
    return found


async def _channel_problems(
    http: aiohttp.ClientSession, base: str, channels: tuple[str, ...], bot_id: str
) -> list[str]:
    problems: list[str] = []
    guilds: dict[str, tuple[str, dict[str, int], list[str]]] = {}
    for channel_id in channels:
        try:
            channel = await _get(http, f"{base}/channels/{channel_id}")
        except _Refused:
            problems.append(
                f"discord: channels: the bot cannot see channel {channel_id} (is it invited to "
                "that server, with View Channel there?)"
            )
            continue
        guild_id = str(channel.get("guild_id") or "")
        if not guild_id:
            problems.append(f"discord: channels: {channel_id} is not a server channel")
            continue
        if guild_id not in guilds:
            guild = await _get(http, f"{base}/guilds/{guild_id}")
            member = await _get(http, f"{base}/guilds/{guild_id}/members/{bot_id}")
            roles = {str(r["id"]): int(str(r.get("permissions") or 0)) for r in guild["roles"]}
            guilds[guild_id] = (str(guild.get("owner_id") or ""), roles, list(member["roles"]))
        owner, roles, held = guilds[guild_id]
        perms = channel_permissions(
            guild_id=guild_id,
            owner_id=owner,
            roles=roles,
            member_id=bot_id,
            member_roles=[str(role) for role in held],
            overwrites=channel.get("permission_overwrites") or [],
        )
        lacking = missing_permissions(perms)
        if lacking:
            name = channel.get("name") or channel_id
            problems.append(
                f"discord: channel #{name} ({channel_id}): the bot lacks {', '.join(lacking)} "
                "there (give them to its role, or invite it again with agent-gateway "
                "discord-invite)"
            )
    return problems


async def check(settings: DiscordConfig) -> tuple[bool, list[str]]:
    """For ``agent-gateway check`` (the registry's ``probe``): OK, and the lines to print."""
    probed = await probe(settings)
    if probed.problems:
        return False, list(probed.problems)
    return True, [probed.summary]
