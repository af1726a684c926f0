"""A Slack host that cannot act leaves the events to the hosts that can (issue 19): three
real `agent-gateway run --host NAME` processes on one Slack app (the fake Slack, a Socket
Mode connection each) and one PostgreSQL ledger; project pa on host a, pb on b, none on c.

- c alone cut off from the ledger (it connects as a role of its own, which the database then
  refuses, its sessions ended: the ledger unreachable from c, reachable from a and b): a
  message Slack gives c is not acked, Slack gives it again, a healthy host takes it and pa's
  agent answers it once, with no word from c; a click given to c is answered by c with why
  (Slack never gives a click again), the card keeps its buttons, and the click given to b
  decides; a slash command given to c is answered the same; c let in again starts over and
  takes the next message itself;
- the database down for every host: no host acks a message until Slack's last attempt, which
  the host it reaches answers in the thread ("try again"), so that it is not lost without a
  word; the database back, the next message is answered;
- the same in HTTP mode (one in-process host, its ledger refused): Slack's POSTs are answered
  503 and retried with ``X-Slack-Retry-Num`` until the last, answered 200 and in the thread;
- a form's buttons on a host cut off (two in-process hosts): "Answer…" given to it tells the
  person why and opens nothing (it was acked and then silent before), a submission given to
  it keeps the modal open with the sentence, and the same submission on the healthy host
  answers the card.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import socket
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import psycopg
import pytest

from gateway.config.hmac_key import HMAC_KEY_BYTES
from gateway.domain import Answer
from gateway.platform import connected
from gateway.sessions.engine import Gateway
from platforms.registry import parse_config
from platforms.slack.acking import LAST_RETRY, last_attempt, retry_attempt
from platforms.slack.config import SlackConfig
from platforms.slack.platform import SLACK_LIMITS, SlackPlatform
from tests.pg_cluster import PgCluster
from tests.platform_contract.contract import requests_for
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_slack import ALICE, BOT_USER_ID, Delivery, FakeSlack, Pacing
from tests.slack_harness import GENERAL, OnSlack, read, slack_config_text
from tests.slack_hosts_harness import HOSTS, replies_saying, slack_hosts
from tests.test_slack_hosts import card_in, decisions_in, only_once

pytestmark = pytest.mark.timeout(240)

DEADLINE = 60.0
UNREACHABLE = "The ledger is unreachable; try again in a moment."
LOST = "its lease was lost"  # the log line of a host that found itself fenced
STARTED_OVER = "started over (fence"
COMMAND = "/agent"


@pytest.fixture
def role_c(pg_database: PgCluster) -> Iterator[PgCluster]:
    """The ledger as host c reaches it: the same database, as a role of c's own (a member
    of the owner's), so that the database can refuse c alone."""
    role = f"{pg_database.dbname}_c"
    with psycopg.connect(pg_database.dsn, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN IN ROLE "{pg_database.user}"')
    try:
        yield dataclasses.replace(pg_database, user=role)
    finally:
        with psycopg.connect(pg_database.dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')


def refuse(dsn: str, *, role: str | None = None, database: str | None = None) -> None:
    """The database refuses ``role``'s (or every) connection to ``database``, and ends
    those it had: what a host sees of a ledger it cannot reach."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        if role is not None:
            admin.execute(f'ALTER ROLE "{role}" NOLOGIN')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
        if database is not None:
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (database,),
            )


def admit(dsn: str, *, role: str | None = None, database: str | None = None) -> None:
    with psycopg.connect(dsn, autocommit=True) as admin:
        if role is not None:
            admin.execute(f'ALTER ROLE "{role}" LOGIN')
        if database is not None:
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')


def test_slacks_attempt_is_read_from_the_retry_header_bolt_gives_both_modes() -> None:
    """bolt 1.30 puts Socket Mode's ``retry_attempt`` where HTTP has ``X-Slack-Retry-Num``."""
    assert retry_attempt({}) == 0
    assert retry_attempt({"x-slack-retry-num": ["0"]}) == 0
    assert retry_attempt({"x-slack-retry-num": ["2"]}) == 2
    assert retry_attempt({"x-slack-retry-num": ["soon"]}) == 0
    assert not last_attempt({"x-slack-retry-num": ["2"]})
    assert last_attempt({"x-slack-retry-num": [str(LAST_RETRY)]})


async def say_in_thread(fake: FakeSlack, thread: str, text: str, *, to: int) -> Delivery:
    """Alice's mention in ``thread``, given first to connection ``to``: its delivery."""
    before = len(fake.delivered("message"))
    await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> {text}", thread_ts=thread, to=to)
    [delivery] = [
        d for d in fake.delivered("message")[before:] if not d.payload["event"].get("bot_id")
    ]
    return delivery


async def test_a_host_cut_off_from_the_ledger_leaves_messages_to_the_others_and_comes_back(
    pg_database: PgCluster, role_c: PgCluster, tmp_path: Path
) -> None:
    async with (
        FakeSlack(seed=19) as fake,
        slack_hosts(tmp_path, fake, pg_database.dsn, stores={"c": role_c.dsn}) as hosts,
    ):
        a, b, c = (hosts[n].connection for n in HOSTS)
        said = await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> hello", to=a)
        await fake.wait_for(lambda: replies_saying(fake, said.ts, "echo: hello"), DEADLINE)

        seen = len(hosts["c"].run.lines)
        refuse(pg_database.dsn, role=role_c.user)
        await hosts["c"].run.line_containing(LOST, after=seen)

        # a message given to c: not acked by c, given again to a healthy host, answered once
        message = await say_in_thread(fake, said.ts, "while c is cut off", to=c)
        await message.settled()
        assert message.state == "acked"
        first, again = message.attempts
        assert first.connection == c and not first.acked
        assert again.number == 1 and again.connection in (a, b) and again.acked
        await only_once(fake, said.ts, "echo: while c is cut off", then="and then")
        assert not replies_saying(fake, said.ts, "unreachable")  # c said nothing

        # a click given to c: c tells Alice why; the card still waits; on b it decides
        asked = await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> approve", to=a)
        card = await card_in(fake, asked.ts)
        told = len(fake.ephemerals(ALICE, GENERAL))
        click = await fake.click(ALICE, card, card.labels[0], to=c)
        await click.settled()
        assert click.state == "acked"
        [answer] = await fake.wait_for(lambda: fake.ephemerals(ALICE, GENERAL)[told:], DEADLINE)
        assert read(answer.text) == UNREACHABLE
        assert card.labels and decisions_in(pg_database.dsn) == 0
        told = len(fake.ephemerals(ALICE, GENERAL))
        retried = await fake.click(ALICE, card, card.labels[0], to=b)
        await retried.settled()
        [decided] = await fake.wait_for(lambda: fake.ephemerals(ALICE, GENERAL)[told:], DEADLINE)
        assert "Host a, which runs the agent, sends it on" in read(decided.text)
        await only_once(fake, asked.ts, r'decision: "accept"', then="after the click")

        # a command given to c: Alice alone is told why (Slack never gives it again)
        told = len(fake.ephemerals(ALICE, GENERAL))
        command = await fake.slash(ALICE, GENERAL, COMMAND, "status", to=c)
        assert command is not None
        await command.settled()
        assert command.state == "acked"
        [why] = await fake.wait_for(lambda: fake.ephemerals(ALICE, GENERAL)[told:], DEADLINE)
        assert read(why.text) == UNREACHABLE

        # c let in again: it starts over and takes the next message itself
        seen = len(hosts["c"].run.lines)
        admit(pg_database.dsn, role=role_c.user)
        await hosts["c"].run.line_containing(STARTED_OVER, after=seen)
        back = await say_in_thread(fake, said.ts, "c is back", to=c)
        await back.settled()
        assert [(t.connection, t.acked) for t in back.attempts] == [(c, True)]
        await only_once(fake, said.ts, "echo: c is back", then="at last")
    assert decisions_in(pg_database.dsn) == 1


async def test_with_the_database_down_slacks_last_attempt_is_answered_not_lost(
    pg_cluster: PgCluster, pg_database: PgCluster, tmp_path: Path
) -> None:
    retries = Pacing(event_retry_delays=(0.0,) * LAST_RETRY)  # Slack: at once, 1 min, 5 min
    async with (
        FakeSlack(seed=19, pacing=retries) as fake,
        slack_hosts(tmp_path, fake, pg_database.dsn) as hosts,
    ):
        said = await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> hello", to=hosts["a"].connection)
        await fake.wait_for(lambda: replies_saying(fake, said.ts, "echo: hello"), DEADLINE)

        seen = {name: len(host.run.lines) for name, host in hosts.items()}
        refuse(pg_cluster.dsn, database=pg_database.dbname)
        try:
            await asyncio.gather(
                *(h.run.line_containing(LOST, after=seen[n]) for n, h in hosts.items())
            )

            message = await say_in_thread(fake, said.ts, "in the outage", to=hosts["b"].connection)
            await message.settled()
            assert message.state == "acked"
            assert [t.number for t in message.attempts] == list(range(LAST_RETRY + 1))
            assert [t.acked for t in message.attempts] == [False] * LAST_RETRY + [True]
            [answer] = await fake.wait_for(
                lambda: replies_saying(fake, said.ts, re.escape(UNREACHABLE)), DEADLINE
            )
            assert "echo: in the outage" not in read(answer.seen)

        finally:
            admit(pg_cluster.dsn, database=pg_database.dbname)
        await asyncio.gather(
            *(h.run.line_containing(STARTED_OVER, after=seen[n]) for n, h in hosts.items())
        )
        await say_in_thread(fake, said.ts, "after the outage", to=hosts["c"].connection)
        await only_once(fake, said.ts, "echo: after the outage", then="and then")
        assert not replies_saying(fake, said.ts, "echo: in the outage")


async def test_http_mode_a_fenced_host_answers_503_until_slacks_last_attempt(
    pg_cluster: PgCluster, pg_database: PgCluster, tmp_path: Path
) -> None:
    secret = "a-fake-signing-secret"
    key = tmp_path / "hmac.key"
    key.write_bytes(os.urandom(HMAC_KEY_BYTES))
    key.chmod(0o600)
    (tmp_path / "work").mkdir()
    retries = Pacing(event_retry_delays=(0.0,) * LAST_RETRY)
    async with FakeSlack(pacing=retries) as fake:
        text = slack_config_text(
            fake,
            tmp_path / "data",
            work_dir=tmp_path / "work",
            slack=f'mode = "http"\nsigning_secret = "{secret}"\n',
            project='host = "a"',
        ).replace(
            "[gateway]\n",
            f"[gateway]\nstore = {json.dumps(pg_database.dsn)}\n"
            f"hmac_key_file = {json.dumps(str(key))}\nhost_lease_seconds = 3\n",
            1,
        )
        config = parse_config(text, "slack-http-hosts.toml")
        settings = config.platforms.get("slack", SlackConfig)
        assert settings is not None
        listening = socket.socket()
        listening.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{listening.getsockname()[1]}/slack/events"
        slack = SlackPlatform(settings, http_socket=listening)
        launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
        async with (
            connected({"slack": slack}),
            Gateway(config, platforms={"slack": slack}, launcher=launcher, host="a") as gateway,
        ):
            async with asyncio.timeout(DEADLINE):
                await slack.receiving()
            assert await fake.use_request_url(url, secret)
            refuse(pg_cluster.dsn, database=pg_database.dbname)
            try:
                await gateway.lease_lost.wait()
                before = len(fake.delivered("message"))
                said = await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> approve")
                [message] = fake.delivered("message")[before:]
                await message.settled()
                assert [t.status for t in message.attempts] == [503] * LAST_RETRY + [200]
                assert [t.number for t in message.attempts] == list(range(LAST_RETRY + 1))
                [answer] = await fake.wait_for(
                    lambda: replies_saying(fake, said.ts, re.escape(UNREACHABLE)), DEADLINE
                )
            finally:
                admit(pg_cluster.dsn, database=pg_database.dbname)
            await gateway.started_over.wait()
            again = await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> approve")
            await card_in(fake, again.ts)  # taken, the agent asked
        assert "approve" not in read(answer.seen)
    with psycopg.connect(pg_database.dsn) as conn:
        taken = {r[0] for r in conn.execute("SELECT platform_message_id FROM prompts")}
    assert again.ts in taken and said.ts not in taken  # the outage's message was not queued


async def test_a_forms_buttons_on_a_host_cut_off_tell_why_and_the_modal_stays_open(
    pg_database: PgCluster, role_c: PgCluster, tmp_path: Path
) -> None:
    """Hosts a (the project's, healthy) and b (its ledger refused) in this process."""
    key = tmp_path / "hmac.key"
    key.write_bytes(os.urandom(HMAC_KEY_BYTES))
    key.chmod(0o600)
    (tmp_path / "work").mkdir()
    answers: dict[str, object] = {"Env": "Green", "Langs": ["Red", "Blue"], "Note": "hi"}
    async with FakeSlack(seed=19) as fake, AsyncExitStack() as stack:
        hosts: dict[str, tuple[OnSlack, ScriptedLauncher, int]] = {}
        for name, dsn in (("a", pg_database.dsn), ("b", role_c.dsn)):
            text = slack_config_text(fake, tmp_path / "data", work_dir=tmp_path / "work")
            shared = (
                f"[gateway]\nstore = {json.dumps(dsn)}\nhmac_key_file = {json.dumps(str(key))}\n"
            )
            text = text.replace("[gateway]\n", shared, 1)
            text = text.replace("[projects.demo]\n", '[projects.demo]\nhost = "a"\n', 1)
            config = parse_config(text, f"{name}.toml")
            settings = config.platforms.get("slack", SlackConfig)
            assert settings is not None
            slack = SlackPlatform(settings)
            await stack.enter_async_context(connected({"slack": slack}))
            launcher = ScriptedLauncher(requests_for(SLACK_LIMITS))
            gateway = await stack.enter_async_context(
                Gateway(
                    config,
                    platforms={"slack": slack},
                    launcher=launcher,
                    data_dir=tmp_path / f"data-{name}",
                    host=name,
                )
            )
            count = len(hosts) + 1
            await fake.wait_for(lambda n=count: fake.connected >= n or None, DEADLINE)  # type: ignore[misc]
            connection = max(c.n for c in fake.connections)
            hosts[name] = (OnSlack(gateway=gateway, slack=slack, fake=fake), launcher, connection)
        (a, on_a, to_a), (b, _, to_b) = hosts["a"], hosts["b"]

        said = await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> form", to=to_a)
        card = await a.card(GENERAL, said.ts)
        refuse(pg_database.dsn, role=role_c.user)
        try:
            await b.gateway.lease_lost.wait()
            told = len(fake.ephemerals(ALICE, GENERAL))
            click = await fake.click(ALICE, card, "Answer…", to=to_b)
            await click.settled()
            assert click.state == "acked"
            [why] = await fake.wait_for(lambda: fake.ephemerals(ALICE, GENERAL)[told:], DEADLINE)
            assert read(why.text) == UNREACHABLE
            assert fake.modals(ALICE) == []  # nothing opened

            await fake.click(ALICE, card, "Answer…", to=to_a)
            [modal] = await fake.wait_for(lambda: fake.modals(ALICE), DEADLINE)
            refused = await fake.submit(ALICE, answers, to=to_b)  # type: ignore[arg-type]
            assert refused is not None
            await refused.settled()
            assert refused.state == "acked"
            assert list(modal.errors.values()) == [UNREACHABLE]
            assert not modal.closed and card.labels  # still open, the card still waits

            taken = await fake.submit(ALICE, answers, to=to_a)  # type: ignore[arg-type]
            assert taken is not None
            await fake.wait_for(lambda: not card.labels and "Answered" in card.seen, DEADLINE)
            await fake.wait_for(lambda: on_a.received or None, DEADLINE)
            assert [d.answers for d in on_a.received] == [
                {
                    "env": Answer(option_ids=("green",)),
                    "langs": Answer(option_ids=("red", "blue")),
                    "note": Answer(other="hi"),
                }
            ]
        finally:
            admit(pg_database.dsn, role=role_c.user)
        await b.gateway.started_over.wait()
