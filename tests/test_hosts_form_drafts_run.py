"""A Telegram form whose answers are taken by two ``agent-gateway run`` processes (issue 19,
design point 8): b polls and takes the first answer of a card that a (the project's host)
sent; b is SIGKILLed; a takes the poll over (the receiver lease) and the next answer and the
submit, with the first answer read from the ledger. Real processes, real PostgreSQL, the
fake Telegram, the scripted Codex agent (tests/agents/codex_scripted.py "ask")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest

from tests.harness.run_hosts import (
    demo_on_a_text,
    run_host,
)
from tests.pg_cluster import PgCluster
from tests.servers.fake_telegram import TOKEN, FakeTelegram, Sent
from tests.servers.telegram_people import callback_update, message_update, private_chat
from tests.telegram_harness import ALICE

pytestmark = pytest.mark.timeout(120)

LEASE = 5.0  # as tests/test_receivers_telegram.py: a loaded machine's renewer needs room
DEADLINE = 30.0
RECEIVES = "receives telegram:"


def config_text(tmp_path: Path, dsn: str, fake: FakeTelegram) -> str:
    auth = (
        f'[projects.{{name}}.auth.telegram]\nallow_from = ["{ALICE.id}"]\n'
        f'approvers = ["{ALICE.id}"]\n'
    )
    platform = (
        f'[platforms.telegram]\ntoken = "{TOKEN}"\nbase_url = "{fake.base_url}"\n'
        + "poll_timeout_seconds = 5\n"
    )
    return demo_on_a_text(tmp_path, dsn, auth, platform, lease_seconds=LEASE)


async def press(fake: FakeTelegram, card: Sent, label: str) -> str:
    """Alice presses ``label`` on ``card``; the answer she is shown."""
    query_id, click = callback_update(fake, ALICE, card, card.button(label)["callback_data"])
    await fake.push(click)
    answer = await fake.wait_for(
        lambda: next((a for a in fake.answers if a["callback_query_id"] == query_id), None),
        DEADLINE,
    )
    return str(answer.get("text") or "")


async def test_a_forms_answers_taken_by_two_run_processes_reach_the_agent_once(
    tmp_path: Path, pg_database: PgCluster, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    text = config_text(tmp_path, pg_database.dsn, fake)
    async with run_host(tmp_path, "b", text) as b:
        await b.line_containing(RECEIVES)  # b came first: it polls
        async with run_host(tmp_path, "a", text) as a:
            await fake.push(message_update(fake, private_chat(ALICE), ALICE, "ask"))
            card = await fake.wait_for(
                lambda: next((m for m in fake.bot_messages(ALICE.id) if m.buttons), None),
                DEADLINE,
            )
            assert "Question 1 of 2" in card.text
            # the first answer taken by b, which never saw the card
            assert await press(fake, card, "Production") == "● Production"
            await fake.wait_for(lambda: "Question 2 of 2" in card.text or None, DEADLINE)
            with psycopg.connect(pg_database.dsn) as conn:
                [(drafts,)] = conn.execute("SELECT count(*) FROM form_drafts").fetchall()
            assert drafts == 1
            b.kill()
            await b.exited()
            # a polls once b's lease lapsed, and takes the rest with b's answer from the ledger
            await a.line_containing(RECEIVES)
            assert await press(fake, card, "Europe") == "● Europe"
            await fake.wait_for(lambda: "Your answers" in card.text or None, DEADLINE)
            assert "Env: Production" in card.text and "Region: Europe" in card.text
            # whether or not the agent finished with it by the time the click is answered
            assert await press(fake, card, "Submit answers") == "Answer sent to the agent."
            said = await fake.wait_for(
                lambda: next(
                    (m.text for m in fake.bot_messages(ALICE.id) if "answers:" in m.text), None
                ),
                DEADLINE,
            )
            # the draft is dropped by a once the submit was taken, beside the owner writing
            # to its agent (its answer may be shown first): the ledger is asked until it is
            # gone, while a runs (a stopped before its drop leaves it to the purge)
            with psycopg.connect(pg_database.dsn, autocommit=True) as conn:
                async with asyncio.timeout(DEADLINE):
                    while True:
                        [(drafts,)] = conn.execute("SELECT count(*) FROM form_drafts").fetchall()
                        if drafts == 0:
                            break
                        await asyncio.sleep(0.01)  # polls the ledger's rows, not a delay
    assert said == (
        'answers: {"env": {"answers": ["Production"]}, "region": {"answers": ["Europe"]}}'
    )
    assert [m.text for m in fake.bot_messages(ALICE.id) if "answers:" in m.text] == [said]
    with psycopg.connect(pg_database.dsn, autocommit=True) as conn:
        [(decided,)] = conn.execute("SELECT count(*) FROM decisions").fetchall()
    assert decided == 1
