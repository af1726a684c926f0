"""Telegram polling on several hosts (issue 19, design point 6): real ``agent-gateway run``
processes on one PostgreSQL ledger and one fake Telegram (which, like Telegram, ends a long
poll with 409 when another getUpdates comes). Exactly one host polls, by the lease
``telegram:<bot id>``; when it is SIGKILLed another takes over once the lease lapses, from
the offset the ledger keeps, and a message sent meanwhile is taken exactly once."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from tests.harness.run_hosts import (
    demo_on_a_text,
    run_host,
)
from tests.pg_cluster import PgCluster
from tests.servers.fake_telegram import TOKEN, FakeTelegram
from tests.servers.telegram_people import callback_update, message_update, private_chat
from tests.telegram_harness import ALICE

pytestmark = pytest.mark.timeout(120)

LEASE = 5.0  # seconds: three processes and their agents share 2 cores with other tests; a
# renewer stalled past its deadline (two thirds of the lease) would lose a lease by itself
DEADLINE = 30.0
RECEIVES = "receives telegram:"


def config_text(tmp_path: Path, dsn: str, fake: FakeTelegram) -> str:
    auth = f'[projects.{{name}}.auth.telegram]\nallow_from = ["{ALICE.id}"]\n'
    platform = (
        f'[platforms.telegram]\ntoken = "{TOKEN}"\nbase_url = "{fake.base_url}"\n'
        + "poll_timeout_seconds = 5\n"
    )
    return demo_on_a_text(tmp_path, dsn, auth, platform, lease_seconds=LEASE)


def answers(fake: FakeTelegram, words: str) -> list[str] | None:
    """Alice's chat's messages from the bot that say ``words``; None while there are none."""
    return [m.text for m in fake.bot_messages(ALICE.id) if words in m.text] or None


def refused_answers(fake: FakeTelegram, query_id: str) -> list[str] | None:
    """The second answers to the click ``query_id`` that the fake refused (as Telegram)."""
    calls = [p for p in fake.calls_to("answerCallbackQuery") if p["callback_query_id"] == query_id]
    return [p["text"] for p in calls[1:]] or None


def prompts_logged(tmp_path: Path, text: str) -> int:
    log = tmp_path / "prompts.jsonl"
    if not log.exists():
        return 0
    lines = log.read_text(encoding="utf-8").splitlines()
    return sum(json.loads(line)["text"] == text for line in lines)


async def test_one_host_polls_and_another_takes_over_when_it_is_killed(
    tmp_path: Path, pg_database: PgCluster, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    text = config_text(tmp_path, pg_database.dsn, fake)
    async with run_host(tmp_path, "b", text) as b:
        await b.line_containing(RECEIVES)  # b came first: it polls
        async with run_host(tmp_path, "c", text) as c, run_host(tmp_path, "a", text) as a:
            await fake.push(message_update(fake, private_chat(ALICE), ALICE, "first"))
            await fake.wait_for(lambda: answers(fake, "echo: first"), DEADLINE)
            # a runs the agent; b took the message; neither a nor c polled
            assert fake.conflicts == 0
            assert a.count(RECEIVES) == c.count(RECEIVES) == 0
            await fake.push(message_update(fake, private_chat(ALICE), ALICE, "approve this"))
            card = await fake.wait_for(
                lambda: next((m for m in fake.bot_messages(ALICE.id) if m.buttons), None),
                DEADLINE,
            )
            query_id, click = callback_update(
                fake, ALICE, card, card.button("Allow once")["callback_data"]
            )
            await fake.push(click)  # taken by b: decided, answered
            await fake.wait_for(lambda: answers(fake, "decision:"), DEADLINE)
            b.kill()
            await b.exited()
            # sent while nobody polls: taken once the lease lapsed, by a or c; with it the
            # click again (an update b took but never confirmed is given to the next poller)
            await fake.push(message_update(fake, private_chat(ALICE), ALICE, "second"))
            await fake.push(click)
            await fake.wait_for(lambda: answers(fake, "echo: second"), DEADLINE)
            assert a.count(RECEIVES) + c.count(RECEIVES) == 1
            # not decided again, and not answered again: Telegram takes one answer a click
            await fake.wait_for(lambda: refused_answers(fake, query_id), DEADLINE)
            await fake.push(message_update(fake, private_chat(ALICE), ALICE, "third"))
            await fake.wait_for(lambda: answers(fake, "echo: third"), DEADLINE)
            # b's long poll, if the SIGKILL left it open, ended by the next poller's
            assert fake.conflicts <= 1
    for words in ("first", "second", "third"):
        assert answers(fake, f"echo: {words}") == [f"echo: {words}"]
        assert prompts_logged(tmp_path, words) == 1
    assert answers(fake, "decision:") == ['decision: "accept"']
    assert [a["callback_query_id"] for a in fake.answers] == [query_id]
    assert [m.text for m in fake.bot_messages(ALICE.id) if "Already" in m.text] == []
    # "second" may have been handed to b's long poll, left open by the SIGKILL (nobody read
    # it, nothing confirmed it): given again, and taken, by the next poller
    handed = [update for batch in fake.handed_out for update in batch]
    assert sorted(set(handed)) == list(range(1, 7))
    assert all(handed.count(u) == 1 for u in (1, 2, 3, 6))
    with psycopg.connect(pg_database.dsn) as conn:
        rows = conn.execute("SELECT text FROM prompts ORDER BY id").fetchall()
        [(decided,)] = conn.execute("SELECT count(*) FROM decisions").fetchall()
        [(saved,)] = conn.execute("SELECT next_offset FROM receiver_offsets").fetchall()
    assert [row[0] for row in rows] == ["first", "approve this", "second", "third"]
    assert decided == 1
    assert saved == max(handed) + 1
