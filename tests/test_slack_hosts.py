"""Slack on several hosts (issue 19, design points 3 and 6): three real `agent-gateway run
--host NAME` processes on one Slack app and one PostgreSQL ledger, each host a Socket Mode
connection of its own (the fake Slack sends each envelope to one of them: here the test
says which). Project pa runs on host a, pb on host b, host c runs none; the agent is the
scripted Codex, which answers a decision with the message ``decision: "<its id>"``.

- a click received by c: decided once, answered by c, written to the agent once by a, and
  the card edited by a alone, render after render; given again to b, taken once;
- two people clicking one card on b and on c at once: one decision, the other told it was
  decided, the agent given one answer;
- c SIGKILLed after it received a message and before it acked it: Slack gives the message
  to another host, and it is taken once.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from tests.pg_cluster import PgCluster
from tests.servers.fake_slack import ALICE, BOB, BOT_USER_ID, FakeSlack, Posted
from tests.slack_harness import GENERAL, read
from tests.slack_hosts_harness import replies_saying, slack_hosts

pytestmark = pytest.mark.timeout(180)

DEADLINE = 60.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(seed=19) as fake:
        yield fake


async def card_in(fake: FakeSlack, thread: str) -> Posted:
    def find() -> Posted | None:
        return next((m for m in fake.replies(GENERAL, thread) if m.from_bot and m.labels), None)

    return await fake.wait_for(find, DEADLINE)


async def only_once(fake: FakeSlack, thread: str, pattern: str, *, then: str) -> Posted:
    """The one reply matching ``pattern``: a second would come before the answer to the
    message ``then`` sent after it (one queue per session), which is waited for."""
    await fake.wait_for(lambda: replies_saying(fake, thread, pattern), DEADLINE)
    await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> {then}", thread_ts=thread)
    await fake.wait_for(lambda: replies_saying(fake, thread, f"echo: {then}"), DEADLINE)
    [once] = replies_saying(fake, thread, pattern)
    return once


def who_edited(fake: FakeSlack, card: Posted) -> set[str | None]:
    return {
        caller
        for params, caller in fake.calls_with_callers("chat.update")
        if params.get("ts") == card.ts
    }


def assert_renders_in_order(card: Posted) -> None:
    """Once a render of the card has no buttons left (decided), none after it has any, and
    the last says it was done."""
    buttons = [any(b.get("type") == "actions" for b in v.blocks) for v in card.versions]
    decided = buttons.index(False)
    assert decided > 0 and not any(buttons[decided:]), buttons
    assert "done" in card.versions[-1].seen


def decisions_in(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM decisions").fetchone()
    assert row is not None
    return int(row[0])


async def test_a_click_received_by_c_is_decided_once_answered_by_c_and_delivered_by_a(
    fake: FakeSlack, pg_database: PgCluster, tmp_path: Path
) -> None:
    async with slack_hosts(tmp_path, fake, pg_database.dsn) as hosts:
        said = await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> approve", to=hosts["a"].connection)
        card = await card_in(fake, said.ts)
        ephemerals = len(fake.ephemerals(ALICE, GENERAL))
        click = await fake.click(ALICE, card, card.labels[0], to=hosts["c"].connection)
        await click.settled()
        assert click.state == "acked"
        assert [a.connection for a in click.attempts] == [hosts["c"].connection]
        # c answered the click: the ephemeral is c's
        [answer] = await fake.wait_for(lambda: fake.ephemerals(ALICE, GENERAL)[ephemerals:])
        assert "Host a, which runs the agent, sends it on" in read(answer.text)
        posted = [
            caller
            for params, caller in fake.calls_with_callers("chat.postEphemeral")
            if params.get("user") == ALICE.id
        ]
        assert posted[-1] == "c"
        # a wrote it to its agent, once; a edited the card, and no older render came last
        await only_once(fake, said.ts, r'decision: "accept"', then="and then")
        await fake.wait_for(lambda: not card.labels and "done" in card.seen, DEADLINE)
        assert who_edited(fake, card) == {"a"}
        assert_renders_in_order(card)
        # the same click given again, to b: taken once, Alice told it is done
        told = len(fake.ephemerals(ALICE, GENERAL))
        again = await fake.deliver_again(click, to=hosts["b"].connection)
        await again.settled()
        assert again.state == "acked"
        [repeat] = await fake.wait_for(lambda: fake.ephemerals(ALICE, GENERAL)[told:])
        assert re.match(r"Already (decided|delivered|resolved) by @alice[.:]", read(repeat.text))
        await only_once(fake, said.ts, r'decision: "accept"', then="and again")
    assert decisions_in(pg_database.dsn) == 1


async def test_two_people_clicking_on_two_hosts_at_once_make_one_decision(
    fake: FakeSlack, pg_database: PgCluster, tmp_path: Path
) -> None:
    async with slack_hosts(tmp_path, fake, pg_database.dsn) as hosts:
        said = await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> approve")
        card = await card_in(fake, said.ts)
        label = card.labels[0]
        before = {p.id: len(fake.ephemerals(p, GENERAL)) for p in (ALICE, BOB)}
        clicks = await asyncio.gather(
            fake.click(ALICE, card, label, to=hosts["b"].connection),
            fake.click(BOB, card, label, to=hosts["c"].connection),
        )
        for click in clicks:
            await click.settled()
            assert click.state == "acked"

        def told() -> list[str] | None:
            new = [
                read(e.text)
                for p in (ALICE, BOB)
                for e in fake.ephemerals(p, GENERAL)[before[p.id] :]
            ]
            return sorted(new) if len(new) == 2 else None

        answers = await fake.wait_for(told, DEADLINE)
        # the loser is told who won, in the words of when its click came
        assert re.match(r"Already (decided|delivered|resolved) by @(alice|bob)[.:]", answers[0]), (
            answers
        )
        assert "Host a, which runs the agent, sends it on" in answers[1], answers
        await only_once(fake, said.ts, r'decision: "accept"', then="and then")
        await fake.wait_for(lambda: not card.labels and "done" in card.seen, DEADLINE)
        assert who_edited(fake, card) == {"a"}
        assert_renders_in_order(card)
    assert decisions_in(pg_database.dsn) == 1


async def test_a_host_killed_before_it_acked_a_message_lets_slack_give_it_to_another_once(
    pg_database: PgCluster, tmp_path: Path
) -> None:
    async with FakeSlack(seed=19) as fake, slack_hosts(tmp_path, fake, pg_database.dsn) as hosts:
        said = await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> hello", to=hosts["a"].connection)
        await fake.wait_for(lambda: replies_saying(fake, said.ts, "echo: hello"), DEADLINE)

        held = fake.hold_next("users.info")  # c's look-up of the sender: c has not acked
        before = len(fake.delivered("message"))
        await fake.say(
            ALICE, GENERAL, f"<@{BOT_USER_ID}> once", thread_ts=said.ts, to=hosts["c"].connection
        )
        [message] = [
            d for d in fake.delivered("message")[before:] if not d.payload["event"].get("bot_id")
        ]
        await asyncio.wait_for(held.reached.wait(), DEADLINE)
        assert held.caller == "c"
        hosts["c"].run.kill()
        await hosts["c"].run.exited()
        held.release()

        await message.settled()
        assert message.state == "acked"
        first, again = message.attempts
        assert first.connection == hosts["c"].connection and not first.acked
        assert again.number == 1 and again.connection in (
            hosts["a"].connection,
            hosts["b"].connection,
        )
        await only_once(fake, said.ts, "echo: once", then="and then")
        # Slack giving it once more (to a or b) changes nothing: the ledger has its ts
        repeat = await fake.deliver_again(message, to=hosts["b"].connection)
        await repeat.settled()
        assert repeat.state == "acked"
        await only_once(fake, said.ts, "echo: once", then="and again")
