"""``agent-gateway check`` for Discord: permissions computed as Discord does, and what is
missing (the token, the intent, a permission in a configured channel) said in words, asked
of a small Discord REST stand-in on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from pydantic import SecretStr

from platforms.discord.config import NEEDED_PERMISSIONS, DiscordConfig, Permission
from platforms.discord.probe import channel_permissions, missing_permissions, probe

GUILD, BOT, OWNER, ROLE, CHANNEL = "10", "20", "30", "40", "50"
VIEW, SEND = int(Permission.VIEW_CHANNEL), int(Permission.SEND_MESSAGES)


def perms(roles: dict[str, int], overwrites: list[dict[str, Any]], *, held=(ROLE,)) -> int:  # type: ignore[no-untyped-def]
    return channel_permissions(
        guild_id=GUILD,
        owner_id=OWNER,
        roles=roles,
        member_id=BOT,
        member_roles=held,
        overwrites=overwrites,
    )


def test_permissions_follow_roles_then_overwrites_in_discords_order() -> None:
    roles = {GUILD: VIEW, ROLE: SEND}
    assert perms(roles, []) == VIEW | SEND
    deny_everyone = [{"id": GUILD, "type": 0, "deny": str(VIEW), "allow": "0"}]
    assert perms(roles, deny_everyone) == SEND
    role_allows = [*deny_everyone, {"id": ROLE, "type": 0, "allow": str(VIEW), "deny": "0"}]
    assert perms(roles, role_allows) == VIEW | SEND
    member_denies = [*role_allows, {"id": BOT, "type": 1, "deny": str(SEND), "allow": "0"}]
    assert perms(roles, member_denies) == VIEW
    assert perms({GUILD: 0, ROLE: 1 << 3}, deny_everyone) & NEEDED_PERMISSIONS == NEEDED_PERMISSIONS
    assert missing_permissions(0) == ["View Channel"]
    assert "Create Public Threads" in missing_permissions(VIEW | SEND)
    assert missing_permissions(int(NEEDED_PERMISSIONS)) == []


class Discord:
    def __init__(self) -> None:
        self.flags = 0
        self.role_perms = int(NEEDED_PERMISSIONS)
        self.overwrites: list[dict[str, Any]] = []
        self.seen_auth: set[str] = set()

    def app(self) -> web.Application:
        routes = web.RouteTableDef()

        def authed(request: web.Request) -> None:
            self.seen_auth.add(request.headers.get("Authorization", ""))
            if request.headers.get("Authorization") != "Bot good.token.x":
                raise web.HTTPUnauthorized(
                    text='{"message": "401: Unauthorized", "code": 0}',
                    content_type="application/json",
                )

        @routes.get("/api/v10/users/@me")
        async def me(request: web.Request) -> web.Response:
            authed(request)
            return web.json_response({"id": BOT, "username": "agw"})

        @routes.get("/api/v10/applications/@me")
        async def application(request: web.Request) -> web.Response:
            authed(request)
            return web.json_response({"id": "424242", "flags": self.flags})

        @routes.get("/api/v10/channels/{id}")
        async def channel(request: web.Request) -> web.Response:
            authed(request)
            if request.match_info["id"] != CHANNEL:
                return web.json_response({"message": "Missing Access", "code": 50001}, status=403)
            return web.json_response(
                {
                    "id": CHANNEL,
                    "name": "dev",
                    "guild_id": GUILD,
                    "permission_overwrites": self.overwrites,
                }
            )

        @routes.get("/api/v10/guilds/{id}")
        async def guild(request: web.Request) -> web.Response:
            authed(request)
            roles = [
                {"id": GUILD, "permissions": "0"},
                {"id": ROLE, "permissions": str(self.role_perms)},
            ]
            return web.json_response({"id": GUILD, "owner_id": OWNER, "roles": roles})

        @routes.get("/api/v10/guilds/{id}/members/{user}")
        async def member(request: web.Request) -> web.Response:
            authed(request)
            return web.json_response({"roles": [ROLE]})

        app = web.Application()
        app.add_routes(routes)
        return app


@pytest.fixture
async def discord() -> AsyncIterator[tuple[Discord, str]]:
    fake = Discord()
    runner = web.AppRunner(fake.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield fake, f"http://127.0.0.1:{port}/api/v10"
    finally:
        await runner.cleanup()


def settings(base: str, **changes: Any) -> DiscordConfig:
    values: dict[str, Any] = {
        "token": SecretStr("good.token.x"),
        "application_id": "424242",
        "channels": (CHANNEL,),
        "api_base_url": base,
        **changes,
    }
    return DiscordConfig(**values)


async def test_a_bot_that_may_do_everything_is_ok(discord: tuple[Discord, str]) -> None:
    _, base = discord
    probed = await probe(settings(base))
    assert probed.problems == ()
    assert probed.summary == "discord: OK (bot @agw; 1 channel(s) OK)"


async def test_a_wrong_token_is_said_and_never_shown(discord: tuple[Discord, str]) -> None:
    _, base = discord
    probed = await probe(settings(base, token=SecretStr("bad.token.y")))
    assert probed.problems == (
        "discord: token: Discord does not know it (copy the bot's token again)",
    )
    assert "bad.token" not in repr(probed)


async def test_the_intent_and_each_missing_permission_are_named(
    discord: tuple[Discord, str],
) -> None:
    fake, base = discord
    fake.role_perms = int(NEEDED_PERMISSIONS & ~Permission.CREATE_PUBLIC_THREADS)
    probed = await probe(settings(base, message_content=True, channels=(CHANNEL, "51")))
    assert len(probed.problems) == 3
    intent, lacking, unseen = probed.problems
    assert "message_content = true" in intent and "Privileged Gateway Intents" in intent
    assert "cannot see channel 51" in unseen
    assert lacking.startswith("discord: channel #dev (50): the bot lacks Create Public Threads")
    fake.flags = 1 << 19
    fake.role_perms = int(NEEDED_PERMISSIONS)
    probed = await probe(settings(base, message_content=True))
    assert probed.summary.endswith("message content on)")


async def test_an_unreachable_discord_is_said() -> None:
    probed = await probe(settings("http://127.0.0.1:9/api/v10"), seconds=2)
    assert probed.problems[0].startswith("discord: http://127.0.0.1:9/api/v10 unreachable")
