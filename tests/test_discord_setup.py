"""Discord's setup as a new user follows docs/discord.md, on the fake Discord: the commands run
as a user runs them (the installed ``agent-gateway``, in a subprocess).

``discord-invite`` prints the URL that adds the bot with exactly the permissions it uses,
reading only ``application_id`` from the config (the token's environment variable need not
be set yet), or asking Discord for the token's application when the config does not say;
``check`` names what is missing (the privileged intent, a permission in a configured
channel) before anything runs, and says OK once it is fixed."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from platforms.discord.config import NEEDED_PERMISSIONS, Permission
from tests.codex_env import CodexHome
from tests.discord_gateway import discord_gateway_config_text
from tests.servers.fake_discord import APP_ID, TOKEN, FakeDiscord

pytestmark = [pytest.mark.timeout(120)]

DEADLINE = 60.0
# what docs/discord.md says the invite asks for, by name
README_NAMES = (
    "View Channel",
    "Send Messages",
    "Embed Links",
    "Attach Files",
    "Read Message History",
    "Create Public Threads",
    "Send Messages in Threads",
    "Add Reactions",
)


async def agent_gateway(*args: str) -> tuple[int, str, str]:
    """The installed command, as a user runs it: exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("agent-gateway")),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(DEADLINE):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def invite_of(out: str) -> dict[str, list[str]]:
    [line] = out.strip().splitlines()
    url = urlsplit(line)
    assert (url.scheme, url.netloc, url.path) == ("https", "discord.com", "/oauth2/authorize")
    return parse_qs(url.query)


def test_the_invite_asks_for_exactly_the_permissions_the_readme_names() -> None:
    assert {bit.name for bit in Permission} == {
        name.upper().replace(" ", "_") for name in README_NAMES
    }
    assert int(NEEDED_PERMISSIONS) == sum(int(bit) for bit in Permission)
    setup = (Path(__file__).parents[1] / "docs" / "discord.md").read_text(encoding="utf-8")
    for name in README_NAMES:
        assert name in " ".join(setup.split()), name


async def test_the_invite_reads_only_the_application_id(
    codex_bin: str, codex_home: CodexHome, tmp_path: Path
) -> None:
    config = tmp_path / "gateway.toml"
    async with FakeDiscord() as fake:
        text = discord_gateway_config_text(fake, codex_home, codex_bin, tmp_path / "data")
        # the token is not in the environment yet: the invite does not need it
        text = text.replace(f'token = "{TOKEN}"', 'token = "${DISCORD_TOKEN_NOT_SET_YET}"')
        config.write_text(text, encoding="utf-8")
        code, out, err = await agent_gateway("discord-invite", "--config", str(config))
        assert code == 0, err
        invite = invite_of(out)
        assert invite["client_id"] == [APP_ID]
        assert invite["scope"] == ["bot applications.commands"]
        assert invite["permissions"] == [str(int(NEEDED_PERMISSIONS))]
        assert fake.calls == []  # nothing asked of Discord


async def test_without_an_application_id_the_invite_asks_discord_for_the_tokens(
    codex_bin: str, codex_home: CodexHome, tmp_path: Path
) -> None:
    config = tmp_path / "gateway.toml"
    async with FakeDiscord() as fake:
        text = discord_gateway_config_text(fake, codex_home, codex_bin, tmp_path / "data")
        config.write_text(text.replace(f'application_id = "{APP_ID}"\n', ""), encoding="utf-8")
        code, out, err = await agent_gateway("discord-invite", "--config", str(config))
        assert code == 0, err
        assert invite_of(out)["client_id"] == [APP_ID]
        assert [(m, p) for m, p, _ in fake.calls] == [("GET", "/applications/@me")]

        wrong = text.replace(f'application_id = "{APP_ID}"\n', "")
        config.write_text(wrong.replace(TOKEN, "not.the.token"), encoding="utf-8")
        code, out, err = await agent_gateway("discord-invite", "--config", str(config))
        assert code == 2 and out == ""
        [line] = err.strip().splitlines()
        assert line.startswith("agent-gateway: platforms.discord.token: Discord does not know")
        assert "not.the.token" not in err


async def test_check_names_the_missing_intent_and_permissions_then_says_ok(
    codex_bin: str, codex_home: CodexHome, tmp_path: Path
) -> None:
    config = tmp_path / "gateway.toml"
    async with FakeDiscord() as fake:
        text = discord_gateway_config_text(fake, codex_home, codex_bin, tmp_path / "data")
        config.write_text(text + "message_content = true\n", encoding="utf-8")
        fake.general.bot_denied = int(Permission.CREATE_PUBLIC_THREADS | Permission.ADD_REACTIONS)

        code, out, err = await agent_gateway("check", "--config", str(config))
        said = out + err
        assert code != 0, said
        assert "message_content = true, but the application does not have the Message " in said
        assert (
            f"discord: channel #general ({fake.general.id}): the bot lacks Add Reactions, "
            "Create Public Threads there"
        ) in said
        assert fake.identified == 0  # nothing ran: check never connects the gateway

        fake.message_content_enabled = True  # the portal's toggle, then the channel's overwrite
        fake.general.bot_denied = 0
        code, out, err = await agent_gateway("check", "--config", str(config))
        assert code == 0, out + err
        assert "discord: OK (bot @" in out and "1 channel(s) OK; message content on)" in out
        assert fake.identified == 0
        assert json.dumps(TOKEN)[1:-1] not in out + err  # the token is never shown
