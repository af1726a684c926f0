"""Slack under load and trouble, with the real Codex app-server through the gateway: thousands
of streamed deltas in three threads within Slack's rates and exact at the end, a 429 storm
that loses nothing, clicks acked in time while another connection locks the ledger, and a
gateway killed with a card on screen then started again."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from gateway.config.model import Config
from gateway.store.store import DATABASE_FILE
from tests.codex_env import CodexHome
from tests.harness.driver import end_leftover_agents
from tests.servers.fake_responses import FakeResponses, ModelRequest, message, shell
from tests.servers.fake_slack import FakeSlack, Posted
from tests.servers.slack_wire import buttons_of, text_of
from tests.slack_harness import (
    ALICE,
    DEADLINE,
    GENERAL,
    LedgerLock,
    OnSlack,
    on_slack,
    read,
    slack_config,
    slack_config_text,
)

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(180)]

ENDED = "This request belongs to an agent process that has ended."


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


def config_for(fake: FakeSlack, home: CodexHome, codex_bin: str, tmp_path: Path) -> Config:
    return slack_config(
        fake, tmp_path / "data", work_dir=home.workspace, codex_bin=codex_bin, home=home
    )


def long_answer(word: str, length: int = 2000) -> str:
    """An answer of ``length`` characters made of ``word``'s numbered lines (every line
    differs, so a lost or reordered delta shows in the final text)."""
    lines, n = [], 0
    while sum(len(line) + 1 for line in lines) < length:
        n += 1
        lines.append(f"{word} line {n}: the quick brown fox jumps over the lazy dog")
    return "\n".join(lines)[:length].rstrip()


def answer_for(request: ModelRequest) -> str:
    """The answer to "write <word>": the prompt decides it, whichever turn comes first."""
    prompt = request.user_texts()[-1]
    return long_answer(prompt.rsplit(" ", 1)[-1])


async def final_text(slack: OnSlack, thread: str, expected: str) -> Posted:
    """The app's message in ``thread`` once it reads exactly ``expected``."""

    def find() -> Posted | None:
        return next(
            (
                m
                for m in slack.fake.replies(GENERAL, thread)
                if m.from_bot and not m.labels and read(m.seen) == expected
            ),
            None,
        )

    return await slack.fake.wait_for(find, 90)


async def test_5000_deltas_in_three_threads_within_slacks_rates_and_exact_at_the_end(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    deltas = 5000 // 3 + 1  # per thread: 5,001 in all
    fake_model.enqueue(*[(message(answer_for, chunks=deltas),) for _ in range(3)])
    config = config_for(fake_slack, codex_home, codex_bin, tmp_path)
    async with on_slack(config, fake_slack) as slack:
        threads = {
            word: (await slack.mention(ALICE, f"please write {word}")).ts
            for word in ("alpha", "bravo", "charlie")
        }
        for word, thread in threads.items():
            shown = await final_text(slack, thread, long_answer(word))
            assert len(shown.versions) >= 2  # streamed: edited as it grew
        updates = len(fake_slack.calls_to("chat.update"))
    assert fake_slack.too_many == []  # no 429: the outbox kept within Slack's rates
    assert fake_slack.refused == []
    assert updates < 3 * 60  # whole snapshots, the newest replacing a waiting one


async def test_a_429_storm_loses_nothing(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    answer = long_answer("storm", 1500)
    fake_model.enqueue(
        (shell("touch storm.txt", escalated=True), message(answer, chunks=300)),
    )
    config = config_for(fake_slack, codex_home, codex_bin, tmp_path)
    async with on_slack(config, fake_slack) as slack:
        fake_slack.storm(3.0, retry_after=1)  # every write refused 429 for 3 s
        said = await slack.mention(ALICE, "please create storm.txt")
        card = await slack.card(GENERAL, said.ts)  # posted once the storm let it
        assert fake_slack.too_many, "the storm was met"
        before = len(fake_slack.too_many)
        fake_slack.storm(3.0, retry_after=1)  # and again while the answer streams
        await slack.click(ALICE, card, "Allow once")
        await final_text(slack, said.ts, answer)
        await slack.fake.wait_for(lambda: not card.labels and "done" in card.seen)
        assert len(fake_slack.too_many) > before
    assert (codex_home.workspace / "storm.txt").exists()
    assert fake_slack.refused == []  # every call got through in the end
    cards = [m for m in fake_slack.replies(GENERAL, said.ts) if m.blocks]
    assert len(cards) == 1  # none posted twice


async def test_clicks_are_acked_in_time_while_another_connection_locks_the_ledger_4_s(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_slack: FakeSlack,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch locked.txt", escalated=True), message("Made it.")))
    config = config_for(fake_slack, codex_home, codex_bin, tmp_path)
    async with on_slack(config, fake_slack) as slack:
        said = await slack.mention(ALICE, "please create locked.txt")
        card = await slack.card(GENERAL, said.ts)
        lock = LedgerLock(tmp_path / "data" / DATABASE_FILE, 4.0)
        lock.start()
        await lock.taken.wait()
        clicks = [await fake_slack.click(ALICE, card, "Allow once") for _ in range(2)]
        for click in clicks:
            await click.settled()
        assert not lock.released.is_set(), "the clicks were answered while the lock held"
        assert [c.state for c in clicks] == ["acked", "acked"]  # within Slack's 3 s
        assert fake_slack.late_acks == []
        await lock.released.wait()
        await slack.fake.wait_for(lambda: not card.labels and "done" in card.seen)
        shown = await fake_slack.wait_for(
            lambda: (
                len(fake_slack.ephemerals(ALICE, GENERAL)) == 2
                and fake_slack.ephemerals(ALICE, GENERAL)
            )
        )
        told = sorted(read(e.text) for e in shown)  # one decided, the other told so
        assert told[0].startswith("Already decided by @alice") and told[1].startswith("Approved"), (
            told
        )
        await final_text(slack, said.ts, "Made it.")  # the command ran, the turn went on
    assert (codex_home.workspace / "locked.txt").exists()


@asynccontextmanager
async def gateway_process(config: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python -m gateway run`` on ``config``; interrupted (if still alive) on the way out."""
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "gateway", "run", "--config", str(config)),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            assert process.stderr is not None
            await process.stderr.read()
            await process.wait()


async def until_shown(fake: FakeSlack, thread: str) -> None:
    """Ask "@app /pending" in the thread until the gateway says the card is shown: its
    ledger then knows which message shows it (what the next gateway's edit needs)."""
    from tests.servers.fake_slack import BOT_USER_ID

    while True:
        seen = len(fake.replies(GENERAL, thread))
        await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> /pending", thread_ts=thread)

        def reply(seen: int = seen) -> Posted | None:
            return next(
                (
                    m
                    for m in fake.replies(GENERAL, thread)[seen:]
                    if m.from_bot and "Open requests" in read(m.seen)
                ),
                None,
            )

        if "shown]" in read((await fake.wait_for(reply, DEADLINE)).seen):
            return


async def test_a_gateway_killed_with_a_card_on_screen_and_started_again(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((shell("touch never.txt", escalated=True), message("Done.")))
    data_dir = tmp_path / "data"
    async with FakeSlack() as fake:
        config = tmp_path / "gateway.toml"
        text = slack_config_text(
            fake, data_dir, work_dir=codex_home.workspace, codex_bin=codex_bin, home=codex_home
        )
        config.write_text(text, encoding="utf-8")
        try:
            async with gateway_process(config) as first:
                await fake.wait_for(lambda: fake.connected, DEADLINE)
                said = await fake.say(ALICE, GENERAL, "<@U0BOT> please create never.txt")
                card = await fake.wait_for(
                    lambda: next(
                        (m for m in fake.replies(GENERAL, said.ts) if m.from_bot and m.labels),
                        None,
                    ),
                    DEADLINE,
                )
                await until_shown(fake, said.ts)
                first.kill()  # a crash: nothing is cleaned up, the agent is left running
                await first.wait()
                await fake.wait_for(lambda: not fake.connected, DEADLINE)
            assert card.labels, "a killed gateway edits nothing"

            async with gateway_process(config):
                await fake.wait_for(
                    lambda: not card.labels and "no answer can reach it now" in card.seen
                )
                await fake.wait_for(lambda: fake.connected, DEADLINE)
                before = len(fake.ephemerals(ALICE, GENERAL))
                # a person whose screen still shows the old buttons clicks one
                old = next(
                    button
                    for _, button in buttons_of(card.versions[0].blocks)
                    if text_of(button.get("text")) == "Allow once"
                )
                click = await fake.click(ALICE, card, "Allow once", shown=old)
                answer = await fake.wait_for(lambda: fake.ephemerals(ALICE, GENERAL)[before:])
                await click.settled()
                assert click.state == "acked"
                assert read(answer[0].text) == ENDED
        finally:
            await end_leftover_agents(data_dir)
    assert not (codex_home.workspace / "never.txt").exists()
