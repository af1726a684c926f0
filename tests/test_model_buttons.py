"""``/model`` as buttons (issue 31) on the fake Telegram, Slack and Discord, with the real
Codex app-server against the fake Responses server: ``/model`` shows the project's models as
the platform's own buttons, the one in force marked; a click by someone who may talk is the
command ``/model NAME`` (said in the conversation, and the next model request names the
model); a stranger's click, a forged one and one on the list of a session no longer open
there change nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from platforms.registry import parse_config
from tests.codex_env import CodexHome
from tests.discord_gateway import bot_says as discord_says
from tests.discord_gateway import discord_gateway_config_text, on_discord
from tests.servers.fake_discord import ALICE as ALICE_D
from tests.servers.fake_discord import BOT, FakeDiscord
from tests.servers.fake_responses import FakeResponses, message
from tests.servers.fake_slack import FakeSlack, Posted
from tests.servers.fake_telegram import FakeTelegram
from tests.slack_harness import ALICE as SLACK_ALICE
from tests.slack_harness import GENERAL, OnSlack, on_slack, read, slack_config
from tests.slack_harness import MALLORY as SLACK_MALLORY
from tests.telegram_harness import ALICE, MALLORY, on_telegram, telegram_config

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

MODELS = 'model = "gpt-5.5"\nmodels = ["gpt-5.5", "gpt-5.4-mini"]'


async def test_telegram_model_buttons_pick_the_next_turns_model(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((message("One."),), (message("Two."),))
    config = telegram_config(
        fake_telegram,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
        project=MODELS,
    )
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "first")
        await tg.bot_message(ALICE.id, lambda m: "One." in m.text)
        await tg.say(ALICE, "/model")
        card = await tg.card(ALICE.id, lambda m: "Model: gpt-5.5 (the project's)" in m.text)
        assert [b["text"] for b in card.buttons] == ["✓ gpt-5.5", "gpt-5.4-mini"]

        stranger = await tg.press(MALLORY, card, "gpt-5.4-mini")
        assert stranger["text"] == "You may not use this project here."
        token = card.button("gpt-5.4-mini")["callback_data"]
        forged = await tg.click(ALICE, card, token[:-4] + "AAAA")
        assert forged["text"] == "This button is not valid."

        picked = await tg.press(ALICE, card, "gpt-5.4-mini")
        assert picked["text"] == "Model: gpt-5.4-mini, from the next turn."
        # the card now marks the model picked
        await tg.bot_message(
            ALICE.id,
            lambda m: (
                m.message_id == card.message_id
                and [b["text"] for b in m.buttons] == ["gpt-5.5", "✓ gpt-5.4-mini"]
            ),
        )
        await tg.bot_message(
            ALICE.id,
            lambda m: (
                m.text == "@alice: /model gpt-5.4-mini\nModel: gpt-5.4-mini, from the next turn."
            ),
        )
        asked = len(fake_model.model_requests())
        await tg.say(ALICE, "second")
        await tg.bot_message(ALICE.id, lambda m: "Two." in m.text)
        assert [r.body["model"] for r in fake_model.model_requests()[asked:]][-1] == "gpt-5.4-mini"

        await tg.say(ALICE, "/model")
        again = await tg.card(ALICE.id, lambda m: "Model: gpt-5.4-mini (chosen" in m.text)
        assert [b["text"] for b in again.buttons] == ["gpt-5.5", "✓ gpt-5.4-mini"]
        await tg.say(ALICE, "/new")
        await tg.bot_message(ALICE.id, lambda m: m.text.startswith("A new session starts"))
        stale = await tg.press(ALICE, again, "gpt-5.5")
        assert stale["text"].startswith("This list belongs to a session no longer open here")


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


async def test_slack_model_buttons_pick_the_next_turns_model(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((message("One."),), (message("Two."),))
    config = slack_config(
        fake_slack,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
        project=MODELS,
    )
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(SLACK_ALICE, "first")
        await bot_says(slack, said.ts, lambda text: "One." in text)
        await slack.mention(SLACK_ALICE, "/model", thread_ts=said.ts)
        card = await slack.card(GENERAL, said.ts, lambda m: "gpt-5.4-mini" in m.labels)
        assert card.labels == ["✓ gpt-5.5", "gpt-5.4-mini"]
        assert "Model: gpt-5.5 (the project's)" in read(card.text)

        stranger = await slack.click(SLACK_MALLORY, card, "gpt-5.4-mini")
        assert stranger.text == "You may not use this project here."
        picked = await slack.click(SLACK_ALICE, card, "gpt-5.4-mini")
        assert picked.text == "Model: gpt-5.4-mini, from the next turn."
        await slack.fake.wait_for(lambda: card.labels == ["gpt-5.5", "✓ gpt-5.4-mini"] or None)
        await bot_says(
            slack, said.ts, lambda text: text.endswith("Model: gpt-5.4-mini, from the next turn.")
        )
        asked = len(fake_model.model_requests())
        await slack.mention(SLACK_ALICE, "second", thread_ts=said.ts)
        await bot_says(slack, said.ts, lambda text: "Two." in text)
        assert fake_model.model_requests()[asked:][-1].body["model"] == "gpt-5.4-mini"


async def bot_says(slack: OnSlack, thread: str, probe: Callable[[str], bool]) -> Posted:
    def find() -> Posted | None:
        return next(
            (
                m
                for m in slack.fake.replies(GENERAL, thread)
                if m.from_bot and not m.labels and probe(read(m.text))
            ),
            None,
        )

    return await slack.fake.wait_for(find)


@pytest.fixture
async def fake_discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        yield fake


async def test_discord_model_buttons_pick_the_next_turns_model(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_discord: FakeDiscord,
    tmp_path: Path,
) -> None:
    fake = fake_discord
    text = discord_gateway_config_text(fake, codex_home, codex_bin, tmp_path / "data")
    config = parse_config(text.replace("[projects.demo]\n", f"[projects.demo]\n{MODELS}\n", 1), "t")
    fake_model.enqueue([message("One.")], [message("Two.")])
    async with on_discord(config):
        said = await fake.say(ALICE_D, fake.general, f"<@{BOT.id}> first", mentions=(BOT,))
        await discord_says(fake, said.id, "One.")
        thread = fake.channels[said.id]
        await fake.slash(ALICE_D, thread, "model")
        card = await fake.wait_for(
            lambda: next((m for m in fake.bot_messages(thread) if m.labels), None)
        )
        assert card.labels == ["✓ gpt-5.5", "gpt-5.4-mini"]
        clicked = await fake.click(ALICE_D, card, "gpt-5.4-mini")
        answered = await fake.wait_for(lambda: clicked.followups or None)
        assert answered[0].content == "Model: gpt-5.4-mini, from the next turn."
        await discord_says(fake, said.id, "Model: gpt-5.4-mini, from the next turn.")
        asked = len(fake_model.model_requests())
        await fake.say(ALICE_D, thread, f"<@{BOT.id}> second", mentions=(BOT,))
        await discord_says(fake, said.id, "Two.")
        assert fake_model.model_requests()[asked:][-1].body["model"] == "gpt-5.4-mini"
