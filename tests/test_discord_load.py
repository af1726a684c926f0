"""Discord under load and trouble, with the real Codex app-server through the gateway:
5,000 streamed deltas in three threads within Discord's edit rate and exact at the end, a
429 storm that loses nothing, clicks deferred in time while another connection locks the
ledger, and a click replayed after a RECONNECT past its 3 s: decided once, the card saying so."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from gateway.store.store import DATABASE_FILE
from tests.codex_env import CodexHome
from tests.discord_gateway import card_in, discord_gateway_config, on_discord, seen
from tests.servers.fake_discord import ALICE, BOT, FakeDiscord, Sent
from tests.servers.fake_responses import FakeResponses, ModelRequest, message, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(180)]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def long_answer(word: str, length: int = 1500) -> str:
    """An answer of ``length`` characters made of ``word``'s numbered lines (every line
    differs, so a lost or reordered delta shows in the final text)."""
    lines, n = [], 0
    while sum(len(line) + 1 for line in lines) < length:
        n += 1
        lines.append(f"{word} line {n}, the quick brown fox jumps over the lazy dog")
    return "\n".join(lines)[:length].rstrip()


def answer_for(request: ModelRequest) -> str:
    """The answer to "write <word>": the prompt decides it, whichever turn comes first."""
    return long_answer(request.user_texts()[-1].rsplit(" ", 1)[-1])


async def final_text(fake: FakeDiscord, thread_id: str, expected: str) -> Sent:
    """The bot's message in the thread once it reads exactly ``expected``."""

    def find() -> Sent | None:
        thread = fake.channels.get(thread_id)
        if thread is None:
            return None
        return next(
            (m for m in fake.bot_messages(thread) if not m.embeds and m.content == expected), None
        )

    return await fake.wait_for(find, 90)


async def mention(fake: FakeDiscord, text: str) -> Sent:
    return await fake.say(ALICE, fake.general, f"<@{BOT.id}> {text}", mentions=(BOT,))


def decisions(data_dir: Path) -> int:
    with closing(sqlite3.connect(data_dir / DATABASE_FILE)) as conn:
        return int(conn.execute("SELECT count(*) FROM decisions").fetchone()[0])


async def test_5000_deltas_in_three_threads_within_discords_rate_and_exact_at_the_end(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    deltas = 5000 // 3 + 1  # per thread: 5,001 in all
    fake_model.enqueue(*[(message(answer_for, chunks=deltas),) for _ in range(3)])
    config = discord_gateway_config(fake, codex_home, codex_bin, tmp_path / "data")
    async with on_discord(config):
        threads = {
            word: (await mention(fake, f"please write {word}")).id
            for word in ("alpha", "bravo", "charlie")
        }
        for word, thread in threads.items():
            shown = await final_text(fake, thread, long_answer(word))
            assert len(shown.edits) >= 1  # streamed: edited as it grew
        edits = len(fake.calls_to("PATCH", "/messages/"))
    assert fake.too_many == []  # no 429: the outbox kept within Discord's edit rate
    assert fake.refused == []
    assert edits < 3 * 60  # whole snapshots, the newest replacing a waiting one


async def test_a_429_storm_loses_nothing(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    answer = long_answer("storm")
    fake_model.enqueue((shell("touch storm.txt", escalated=True), message(answer, chunks=300)))
    config = discord_gateway_config(fake, codex_home, codex_bin, tmp_path / "data")
    async with on_discord(config):
        fake.storm(3.0, retry_after=1)  # every write refused 429 for 3 s
        said = await mention(fake, "please create storm.txt")
        card = await card_in(fake, said.id)  # posted once the storm let it
        assert fake.too_many, "the storm was met"
        before = len(fake.too_many)
        fake.storm(3.0, retry_after=1)  # and again while the answer streams
        click = await fake.click(ALICE, card, "Allow once")
        await final_text(fake, said.id, answer)
        await fake.wait_for(lambda: not card.labels and "done" in seen(card))
        assert len(fake.too_many) > before
        assert click.callback_type == 6  # the defer is not paced: in time despite the storm
    assert (codex_home.workspace / "storm.txt").exists()
    assert fake.refused == []  # every call got through in the end
    cards = [m for m in fake.bot_messages(fake.channels[said.id]) if m.embeds]
    assert len(cards) == 1  # none posted twice


class LedgerLock:
    """Another SQLite connection holding the ledger's write lock (``BEGIN EXCLUSIVE``) for
    ``seconds``, on a thread of its own; ``taken`` is set once it holds it."""

    def __init__(self, path: Path, seconds: float) -> None:
        self.taken = asyncio.Event()
        self.released = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._path, self._seconds = path, seconds
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _hold(self) -> None:
        with closing(sqlite3.connect(self._path, timeout=10, isolation_level=None)) as conn:
            conn.execute("BEGIN EXCLUSIVE")
            self._loop.call_soon_threadsafe(self.taken.set)
            threading.Event().wait(self._seconds)  # the other process's long transaction
            conn.execute("ROLLBACK")
        self._loop.call_soon_threadsafe(self.released.set)


async def test_clicks_are_deferred_in_time_while_another_connection_locks_the_ledger_4_s(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch locked.txt", escalated=True), message("Made it.")))
    data_dir = tmp_path / "data"
    config = discord_gateway_config(fake, codex_home, codex_bin, data_dir)
    async with on_discord(config):
        said = await mention(fake, "please create locked.txt")
        card = await card_in(fake, said.id)
        lock = LedgerLock(data_dir / DATABASE_FILE, 4.0)
        lock.start()
        await lock.taken.wait()
        clicks = [await fake.click(ALICE, card, "Allow once") for _ in range(2)]
        await fake.wait_for(lambda: all(c.callback for c in clicks))
        assert not lock.released.is_set(), "the clicks were answered while the lock held"
        for click in clicks:  # within Discord's 3 s
            assert click.callback_at is not None and click.callback_at - click.created < 3.0
        assert all(c.refused == [] for c in clicks)
        await lock.released.wait()
        await fake.wait_for(lambda: not card.labels and "done" in seen(card))
        await fake.wait_for(lambda: all(c.followups for c in clicks))
        told = sorted(c.followups[0].content for c in clicks)  # one decided, the other told so
        assert told[0].startswith("Already decided by @alice"), told
        assert told[1].startswith("Approved"), told
        await final_text(fake, said.id, "Made it.")  # the command ran, the turn went on
    assert (codex_home.workspace / "locked.txt").exists()
    assert decisions(data_dir) == 1


async def test_a_click_replayed_after_reconnect_past_its_3_s_is_decided_once(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake: FakeDiscord,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch replayed.txt", escalated=True), message("Made it.")))
    data_dir = tmp_path / "data"
    config = discord_gateway_config(fake, codex_home, codex_bin, data_dir)
    async with on_discord(config):
        said = await mention(fake, "please create replayed.txt")
        card = await card_in(fake, said.id)
        resumed = fake.resumed
        await fake.reconnect()  # the click is kept in the session meanwhile ...
        click = await fake.click(ALICE, card, "Allow once")
        fake.advance(4.0)  # ... and replayed by RESUME past its 3 s
        assert fake.resumed == resumed, "the click was not held for the RESUME"
        await fake.wait_for(lambda: fake.resumed > resumed)
        await fake.wait_for(lambda: not card.labels and "done" in seen(card))
        assert "by @alice" in seen(card)  # the card's edit tells the person
        assert click.refused == [10062] and click.followups == []  # it could not be answered
        await fake.deliver_again(click)  # given once more: still one decision
        await final_text(fake, said.id, "Made it.")
        await fake.wait_for(lambda: click.refused == [10062, 10062])
    assert (codex_home.workspace / "replayed.txt").exists()
    assert decisions(data_dir) == 1
