"""The Discord gateway connection on several hosts (issue 19, design point 6): real
``agent-gateway run`` processes on one PostgreSQL ledger and one fake Discord, which (like
Discord) sends every event to every open connection of the bot. Only the host holding the
lease ``discord:<application id>`` connects, so each event is answered once: a message
mentioning the bot gets one thread and one answer, a click one callback; every host sends
(here host a, which runs the agent, posts the card and the answer). When the connected host
is SIGKILLed, another connects once the lease lapsed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.discord_gateway import card_in
from tests.harness.run_hosts import (
    demo_on_a_text,
    run_host,
)
from tests.pg_cluster import PgCluster
from tests.servers.fake_discord import ALICE, APP_ID, BOT, TOKEN, Channel, FakeDiscord, Sent

pytestmark = pytest.mark.timeout(120)

LEASE = 5.0  # seconds: three processes and their agents share 2 cores with other tests; a
# renewer stalled past its deadline (two thirds of the lease) would lose a lease by itself
DEADLINE = 30.0
RECEIVES = "receives discord:"


def config_text(tmp_path: Path, dsn: str, fake: FakeDiscord) -> str:
    auth = f'[projects.{{name}}.auth.discord]\nallow_from = ["{ALICE.id}"]\n'
    platform = (
        "[platforms.discord]\n"
        + f'token = "{TOKEN}"\napplication_id = "{APP_ID}"\n'
        + f'channels = ["{fake.general.id}"]\n'
        + f'api_base_url = "{fake.api_base}"\ngateway_url = "{fake.gateway_url}"\n'
    )
    return demo_on_a_text(tmp_path, dsn, auth, platform, lease_seconds=LEASE)


def said_in(fake: FakeDiscord, thread_id: str, words: str) -> list[Sent] | None:
    thread = fake.channels.get(thread_id)
    if thread is None:
        return None
    return [m for m in fake.bot_messages(thread) if not m.embeds and words in m.content] or None


def prompts_logged(tmp_path: Path) -> list[str]:
    log = tmp_path / "prompts.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [json.loads(line)["text"] for line in lines]


def threads_made(fake: FakeDiscord, message: Sent) -> int:
    return len(fake.calls_to("POST", f"/messages/{message.id}/threads"))


async def test_one_host_holds_the_connection_and_each_event_is_answered_once(
    tmp_path: Path, pg_database: PgCluster
) -> None:
    async with FakeDiscord() as fake:
        general: Channel = fake.general
        text = config_text(tmp_path, pg_database.dsn, fake)
        async with run_host(tmp_path, "b", text) as b:
            await b.line_containing(RECEIVES)  # b came first: it holds the connection
            async with run_host(tmp_path, "a", text) as a:
                assert fake.live_connections == 1 and a.count(RECEIVES) == 0
                said = await fake.say(ALICE, general, f"<@{BOT.id}> approve this", mentions=(BOT,))
                card = await card_in(fake, said.id)
                click = await fake.click(ALICE, card, "Allow once")
                await fake.wait_for(lambda: said_in(fake, said.id, "decision:"), DEADLINE)
                await fake.wait_for(lambda: click.callback is not None, DEADLINE)
                assert click.refused == []  # answered once: a second callback is refused
                assert threads_made(fake, said) == 1
                assert len([m for m in fake.bot_messages(fake.channels[said.id]) if m.embeds]) == 1

                b.kill()  # the connected host dies: a connects once the lease lapsed
                await b.exited()
                await a.line_containing(RECEIVES)
                await fake.wait_for(lambda: fake.live_connections == 1, DEADLINE)
                again = await fake.say(ALICE, general, f"<@{BOT.id}> hello there", mentions=(BOT,))
                await fake.wait_for(lambda: said_in(fake, again.id, "echo:"), DEADLINE)
                assert threads_made(fake, again) == 1
        assert len(said_in(fake, said.id, "decision:") or []) == 1
        assert len(said_in(fake, again.id, "echo:") or []) == 1
        assert prompts_logged(tmp_path) == ["approve this", "hello there"]
