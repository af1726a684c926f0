"""Discord's slash commands, on the fake Discord with the scripted agent: every option says
what to type (discord.py would write "…"); /approve, /deny and /answer are registered, their
request completed from the requests waiting in the thread; the "not a decision" notice names
/approve with the request's id, and that command, run in the thread, decides the card."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.platform import connected
from gateway.render.commands import COMMANDS as HELP_COMMANDS
from gateway.render.commands import CommandName
from gateway.sessions.engine import Gateway
from platforms.discord.commands import COMMANDS, spec_of
from platforms.discord.config import DiscordConfig
from platforms.discord.platform import DISCORD_LIMITS, DiscordPlatform
from platforms.registry import parse_config
from tests.platform_contract.contract import requests_for
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_discord import ALICE, APP_ID, BOB, BOT, TOKEN, FakeDiscord

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def _config_text(fake: FakeDiscord, tmp_path: Path) -> str:
    (tmp_path / "work").mkdir()
    return f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}

[projects.demo]
work_dir = {json.dumps(str(tmp_path / "work"))}
agent = "codex-app-server"
argv = ["codex"]

[projects.demo.auth.discord]
allow_from = [{json.dumps(ALICE.id)}]

[platforms.discord]
token = "{TOKEN}"
application_id = "{APP_ID}"
channels = ["{fake.general.id}"]
api_base_url = "{fake.api_base}"
gateway_url = "{fake.gateway_url}"
"""


def test_every_command_the_gateway_names_is_a_slash_command_on_discord() -> None:
    """The help and the notices name commands as "/name" on Discord: each one is
    registered, so each works as typed there (in a thread too)."""
    assert sorted(spec.name for spec in COMMANDS) == sorted(name.value for name in CommandName)


def test_a_command_the_help_gives_arguments_takes_them_on_discord() -> None:
    """``/help`` says ``/new [name]``: Discord's ``/new`` has a box for the name (it had
    none, so a name could not be given there), and a command that takes nothing has none."""
    for info in HELP_COMMANDS:
        options = spec_of(info.name.value).options
        words = info.args.split()  # "ID [action]": one word an option, "[...]" optional
        assert [not o.required for o in options] == [w.startswith("[") for w in words], info


async def test_the_notice_names_approve_which_is_registered_completed_and_decides(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    config = parse_config(_config_text(fake, tmp_path), "discord-commands.toml")
    settings = config.platforms.get("discord", DiscordConfig)
    assert settings is not None
    platforms = {"discord": DiscordPlatform(settings)}
    launcher = ScriptedLauncher(requests_for(DISCORD_LIMITS))
    async with (
        connected(platforms),  # type: ignore[arg-type]
        Gateway(config, platforms=platforms, launcher=launcher),  # type: ignore[arg-type]
    ):
        # what Discord's client shows under each box: what to type, never "…"
        synced = fake.commands[None]
        assert {"approve", "deny", "answer"} <= {c["name"] for c in synced}
        for command in synced:
            for option in command.get("options") or []:
                assert option["description"] not in ("…", "..."), (command["name"], option)
            spec = spec_of(command["name"])  # as platforms/discord/commands.py says
            assert [
                (o["name"], o["description"], bool(o.get("required")), bool(o.get("autocomplete")))
                for o in command.get("options") or []
            ] == [(o.name, o.description, o.required, o.requests) for o in spec.options]
        [request, action] = fake.command("approve")["options"]
        assert request["name"] == "request" and request["required"] and request["autocomplete"]
        assert "id" in request["description"]
        assert action["name"] == "action" and not action.get("required")
        answer = fake.command("answer")["options"]
        assert [(o["name"], bool(o.get("required"))) for o in answer] == [
            ("request", True),
            ("answer", True),
        ]

        said = await fake.say(ALICE, fake.general, f"<@{BOT.id}> approve", mentions=(BOT,))
        thread = await fake.wait_for(lambda: fake.channels.get(said.id))
        card = await fake.wait_for(
            lambda: next((m for m in fake.bot_messages(thread) if m.labels), None)
        )
        await fake.say(ALICE, thread, f"<@{BOT.id}> also check the tests", mentions=(BOT,))
        notice = await fake.wait_for(
            lambda: next(
                (
                    m.content.replace("\\", "")
                    for m in fake.bot_messages(thread)
                    if m.content.startswith("Queued as a message")
                ),
                None,
            )
        )
        found = re.search(r"or /approve (\S+), /deny \1\.$", notice)
        assert found is not None, notice
        iid = found[1]

        # typing /approve's request in the thread offers the waiting request by its title
        asked = await fake.autocomplete(ALICE, thread, "approve", "request")
        [choice] = await fake.choices(asked)
        assert choice["value"] == iid and iid in choice["name"] and "Run" in choice["name"]
        typed = await fake.autocomplete(ALICE, thread, "approve", "request", typed="nothing-like")
        assert await fake.choices(typed) == []
        question = await fake.autocomplete(ALICE, thread, "answer", "request")
        assert await fake.choices(question) == []  # an approval is not answered
        stranger = await fake.autocomplete(BOB, thread, "approve", "request")
        assert await fake.choices(stranger) == []  # not in allow_from: told nothing

        approve = await fake.slash(ALICE, thread, "approve", {"request": iid})
        await fake.wait_for(lambda: approve.callback is not None)
        await fake.wait_for(lambda: not card.labels)
        assert "by @alice" in json.dumps(card.embeds)
    assert fake.refused == []
