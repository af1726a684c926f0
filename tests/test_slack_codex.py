"""Slack end to end with the real Codex app-server: a thread approves, denies, and is refused
what it may not do; a click is acked at once and every card says how it ended."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from gateway.config.model import Config
from gateway.store.store import DATABASE_FILE
from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_slack import FakeSlack, Posted
from tests.slack_harness import (
    ALICE,
    BOB,
    CAROL,
    GENERAL,
    MALLORY,
    OnSlack,
    on_slack,
    read,
    slack_config,
)

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


def config_for(fake: FakeSlack, home: CodexHome, codex_bin: str, tmp_path: Path) -> Config:
    return slack_config(
        fake, tmp_path / "data", work_dir=home.workspace, codex_bin=codex_bin, home=home
    )


async def decided(slack: OnSlack, card: Posted, word: str) -> str:
    await slack.fake.wait_for(lambda: not card.labels and word in card.seen)
    return read(card.seen)


async def bot_says(slack: OnSlack, thread: str, ending: str) -> Posted:
    def find() -> Posted | None:
        return next(
            (
                m
                for m in slack.fake.replies(GENERAL, thread)
                if m.from_bot and not m.labels and read(m.seen).endswith(ending)
            ),
            None,
        )

    return await slack.fake.wait_for(find)


async def test_a_command_is_allowed_once_in_a_thread(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Done.")))
    config = config_for(fake_slack, codex_home, codex_bin, tmp_path)
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(ALICE, "please create hello.txt")
        card = await slack.card(GENERAL, said.ts)
        assert "touch hello.txt" in card.seen
        assert card.labels[0] == "Allow once"
        delivery = await fake_slack.click(ALICE, card, "Allow once")
        answer = await slack.fake.wait_for(lambda: fake_slack.ephemerals(ALICE, GENERAL))
        assert read(answer[0].text).startswith("Approved")
        await delivery.settled()
        assert delivery.state == "acked"  # within Slack's 3 s
        text = await decided(slack, card, "done")
        assert "by @alice" in text and "sent to the agent" in text
        await bot_says(slack, said.ts, "Done.")
    assert (codex_home.workspace / "hello.txt").exists()


async def test_a_denied_command_does_not_run(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch denied.txt", escalated=True), message("Understood.")))
    config = config_for(fake_slack, codex_home, codex_bin, tmp_path)
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(ALICE, "please create denied.txt")
        card = await slack.card(GENERAL, said.ts)
        answer = await slack.click(ALICE, card, "Deny")
        assert read(answer.text).startswith("Denied. ")
        await bot_says(slack, said.ts, "Understood.")
        text = await decided(slack, card, "Denied")
        assert 'Denied ("Deny") by @alice' in text
    assert not (codex_home.workspace / "denied.txt").exists()


async def test_only_approvers_decide_and_forged_buttons_do_nothing(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch team.txt", escalated=True), message("Made it.")))
    config = config_for(fake_slack, codex_home, codex_bin, tmp_path)
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(ALICE, "please create team.txt")
        card = await slack.card(GENERAL, said.ts)
        genuine = card.button("Allow once")[1]["value"]
        forged = genuine[:-12] + ("A" * 12 if not genuine.endswith("A" * 12) else "B" * 12)
        for value in (forged, "hello", "a1:nosuchthing:0:1:AAAAAAAAAAAA"):
            refused = await slack.click(BOB, card, "Allow once", value=value)
            assert read(refused.text) == "This button is not valid."
        refused = await slack.click(CAROL, card, "Allow once")
        assert read(refused.text) == "You may not decide this request."
        stranger = await slack.click(MALLORY, card, "Allow once")
        assert read(stranger.text) == "You may not use this project here."
        assert card.labels, "nothing was decided"
        assert fake_slack.ephemerals(ALICE) == []  # each refusal went to its clicker only

        answer = await slack.click(BOB, card, "Allow once")
        assert read(answer.text).startswith("Approved")
        assert "by @bob" in await decided(slack, card, "done")
        await bot_says(slack, said.ts, "Made it.")  # the command ran before the turn went on
    assert (codex_home.workspace / "team.txt").exists()


async def test_a_message_slack_delivers_twice_is_one_prompt(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch once.txt", escalated=True), message("Once.")))
    config = config_for(fake_slack, codex_home, codex_bin, tmp_path)
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(ALICE, "please create once.txt")
        first = await fake_slack.wait_for(
            lambda: [
                d for d in fake_slack.delivered("message") if d.payload["event"]["ts"] == said.ts
            ]
        )
        card = await slack.card(GENERAL, said.ts)
        again = await fake_slack.deliver_again(first[0])
        await again.settled()
        assert again.state == "acked"
        await slack.click(ALICE, card, "Allow once")
        await bot_says(slack, said.ts, "Once.")
    with closing(sqlite3.connect(tmp_path / "data" / DATABASE_FILE)) as ledger:
        prompts = ledger.execute("SELECT text, platform_message_id FROM prompts").fetchall()
    assert prompts == [("please create once.txt", said.ts)]
    cards = [
        m
        for m in fake_slack.replies(GENERAL, said.ts)
        if m.blocks and m.blocks[0]["type"] == "header"
    ]
    assert len(cards) == 1


async def test_a_disconnect_with_a_card_pending_then_a_click_that_works(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch after.txt", escalated=True), message("After.")))
    config = config_for(fake_slack, codex_home, codex_bin, tmp_path)
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(ALICE, "please create after.txt")
        card = await slack.card(GENERAL, said.ts)
        await fake_slack.disconnect()
        await fake_slack.wait_for(
            lambda: fake_slack.connections_opened == 2 and fake_slack.connected == 1
        )
        answer = await slack.click(ALICE, card, "Allow once")
        assert read(answer.text).startswith("Approved")
        await decided(slack, card, "done")
        await bot_says(slack, said.ts, "After.")
    assert (codex_home.workspace / "after.txt").exists()


async def test_a_new_card_mentions_its_approvers_once_and_the_agents_text_pings_nobody(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_model.enqueue(
        (
            shell("echo '<!here>' > ping.txt", escalated=True),
            message(f"Wrote it, <!channel> and <@{CAROL.id}>."),
        )
    )
    config = config_for(fake_slack, codex_home, codex_bin, tmp_path)
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(ALICE, "please write ping.txt")
        card = await slack.card(GENERAL, said.ts)
        # the approvers (alice and bob), once, on the new card: their phones are told
        assert fake_slack.pings == [(card.ts, ALICE.id), (card.ts, BOB.id)]
        assert "<!here>" in read(card.seen)  # the command is shown as typed, pinging no one
        await slack.click(ALICE, card, "Allow once")
        await decided(slack, card, "done")
        answer = await bot_says(slack, said.ts, f"<!channel> and <@{CAROL.id}>.")
        assert f"&lt;@{CAROL.id}&gt;" in answer.seen  # escaped: Slack shows it as text
        assert f"<@{ALICE.id}>" not in card.seen  # the decided card no longer mentions
    assert fake_slack.pings == [(card.ts, ALICE.id), (card.ts, BOB.id)]
