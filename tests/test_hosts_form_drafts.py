"""Form drafts in the shared ledger (issue 19, design point 8): the next click of a form may
reach another host, so each person's answers in progress are in the ledger, their secret
answers sealed; a host that did not send the card draws its form from the ledger's copy.

Two gateway hosts on the real PostgreSQL cluster, each with the real Telegram platform in
webhook mode on its own socket (any host behind a load balancer takes an update): the test
is the load balancer, pointing the fake Bot API's webhook at the host that takes the next
update. The project runs on host "a"; host "b" runs no agent."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest

from gateway.domain import (
    Answer,
    Decision,
    InteractionKind,
    InteractionRequest,
    InteractionState,
    Option,
    Question,
)
from gateway.sessions import engine
from tests.pg_cluster import PgCluster
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.telegram_harness import (
    ALICE,
    BOB,
    GROUP,
    GROUP_ID,
)
from tests.telegram_hosts_harness import Host, through, two_telegram_hosts

pytestmark = pytest.mark.timeout(120)

SECRET = "hunter2-" + os.urandom(8).hex()  # planted: it must be found only where it belongs
ENVS = (Option(id="prod", label="Production"), Option(id="dev", label="Dev"))
REGIONS = (Option(id="eu", label="Europe"), Option(id="us", label="America"))
REQUESTS = {
    "ask-deploy": InteractionRequest(
        native_key="deploy",
        kind=InteractionKind.QUESTION,
        title="Deploy settings",
        questions=(
            Question(id="env", header="Env", text="Which environment?", options=ENVS),
            Question(
                id="token", header="Token", text="Paste the token", allow_other=True, secret=True
            ),
            Question(id="region", header="Region", text="Which region?", options=REGIONS),
        ),
    ),
    "ask-note": InteractionRequest(
        native_key="note",
        kind=InteractionKind.QUESTION,
        title="A setting and a secret note",
        questions=(
            Question(id="env", header="Env", text="Which environment?", options=ENVS),
            Question(
                id="note",
                header="Note",
                text="A secret note?",
                allow_other=True,
                secret=True,
                required=False,
            ),
        ),
    ),
    "ask-pair": InteractionRequest(
        native_key="pair",
        kind=InteractionKind.QUESTION,
        title="Two settings",
        questions=(
            Question(id="env", header="Env", text="Which environment?", options=ENVS),
            Question(id="region", header="Region", text="Which region?", options=REGIONS),
        ),
    ),
}


def received(host: Host) -> list[Decision]:
    assert isinstance(host.telegram.launcher, ScriptedLauncher)
    return host.telegram.launcher.received


def labels(card: Sent) -> list[str]:
    return [b["text"] for b in card.buttons]


def draft_rows(dsn: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT interaction_id, person, payload FROM form_drafts").fetchall()
    return [(str(i), str(p), str(d)) for i, p, d in rows]


async def test_a_form_answered_through_two_hosts_reaches_the_owners_agent_whole_and_once(
    fake_telegram: FakeTelegram, tmp_path: Path, pg_cluster: PgCluster, pg_database: PgCluster
) -> None:
    async with two_telegram_hosts(fake_telegram, tmp_path, pg_database.dsn, requests=REQUESTS) as (
        a,
        b,
    ):
        await through(a).say(ALICE, "ask-deploy")
        card = await a.telegram.card(ALICE.id)
        assert "Question 1 of 3" in card.text

        # the first answer through a, the host that sent the card
        answer = await through(a).press(ALICE, card, "Production")
        assert answer["text"] == "● Production"
        await fake_telegram.wait_for(lambda: "Question 2 of 3" in card.text)

        # the secret asked through b (b never saw the card: it finds the form and Alice's
        # draft in the ledger, at question 2 with Production chosen) ...
        answer = await through(b).press(ALICE, card, "Type the answer")
        assert answer["text"] == "Reply to my message with your answer."
        prompt = await b.telegram.bot_message(ALICE.id, lambda m: m.force_reply)
        # ... and her reply taken by a, which did not send the prompt: her draft notes it
        typed = await through(a).say(ALICE, SECRET, reply_to=prompt)
        await fake_telegram.wait_for(lambda: "Question 3 of 3" in card.text)
        assert fake_telegram.message(ALICE.id, typed["message"]["message_id"]).deleted
        [(interaction_id, person, payload)] = draft_rows(pg_database.dsn)
        assert person == "telegram:111" and SECRET not in payload  # sealed in the ledger
        assert '"chosen":{"0":[0]}' in payload and '"prompt":null' in payload

        # the third answer through b, whose memory never held the secret
        await through(b).press(ALICE, card, "Europe")
        await fake_telegram.wait_for(lambda: "Your answers" in card.text)
        assert "Env: Production" in card.text and "Region: Europe" in card.text
        assert "Token: 🔒 given, not shown" in card.text  # b opened the sealed draft

        # submitted through b: b decides, a (the owner) writes to its agent
        answer = await through(b).press(ALICE, card, "Submit answers")
        assert answer["text"].startswith("Answered. Host a")
        await fake_telegram.wait_for(lambda: card.markup is None and "Answered" in card.text)
        await a.telegram.fake.wait_for(lambda: received(a) or None)
        assert received(a) == [
            Decision(
                answers={
                    "env": Answer(option_ids=("prod",)),
                    "token": Answer(other=SECRET),
                    "region": Answer(option_ids=("eu",)),
                }
            )
        ]
        assert received(b) == []
        assert draft_rows(pg_database.dsn) == []  # the submit dropped her draft
        decided = await a.gateway.store.interactions.get(interaction_id)
        assert decided is not None and decided.delivery is not None
        shown = [m.text for m in fake_telegram.bot_messages(ALICE.id)]
        assert not any(SECRET in text for text in shown)
    with psycopg.connect(pg_database.dsn, autocommit=True) as admin:
        admin.execute("CHECKPOINT")  # the tables' pages on disk, beside the WAL
    # the whole cluster (tables, WAL, the server's log) and both hosts' data dirs; the
    # question's text is there, so the search does read what the ledger wrote
    assert _files_holding(Path(pg_cluster.host), b"Paste the token")
    assert _files_holding(Path(pg_cluster.host), SECRET.encode()) == []
    assert _files_holding(tmp_path, SECRET.encode()) == []


async def test_the_drafts_of_an_expired_request_are_purged_by_the_expiry_loop(
    fake_telegram: FakeTelegram, tmp_path: Path, pg_database: PgCluster
) -> None:
    # long enough for the click below on a loaded machine; the test waits for it to pass
    expiry = "\n[projects.demo.expiry]\nafter_seconds = 10\n"
    async with two_telegram_hosts(
        fake_telegram, tmp_path, pg_database.dsn, expiry, requests=REQUESTS
    ) as (a, b):
        await through(a).say(ALICE, "ask-pair")
        card = await a.telegram.card(ALICE.id)
        # a draft is kept before the click is answered
        assert (await through(b).press(ALICE, card, "Production"))["text"] == "● Production"
        [(interaction_id, _, _)] = draft_rows(pg_database.dsn)
        await fake_telegram.wait_for(lambda: card.markup is None and "Timed out" in card.text)
        expired = await a.gateway.store.interactions.get(interaction_id)
        assert expired is not None and expired.state is InteractionState.EXPIRED
        # the host's own purge runs once a minute: this one is the expiry loop's
        await fake_telegram.wait_for(lambda: draft_rows(pg_database.dsn) == [] or None)


async def test_the_drafts_of_a_decided_request_are_purged_by_a_host(
    fake_telegram: FakeTelegram,
    tmp_path: Path,
    pg_database: PgCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine, "DRAFT_PURGE_SECONDS", 0.1)
    group = f'groups = {{ "{GROUP_ID}" = "all" }}'
    async with two_telegram_hosts(
        fake_telegram, tmp_path, pg_database.dsn, telegram=group, requests=REQUESTS
    ) as (
        a,
        b,
    ):
        await through(a).say(ALICE, "ask-pair", chat=GROUP)
        card = await a.telegram.card(GROUP_ID)
        dev = card.button("Dev")["callback_data"]
        await through(b).press(BOB, card, "Dev")  # Bob starts, and never submits
        await fake_telegram.wait_for(lambda: "Answering: @bob" in card.text)
        await through(a).press(ALICE, card, "Back")  # the card shows her own first question
        await fake_telegram.wait_for(lambda: "Answering: @alice" in card.text)
        await through(a).press(ALICE, card, "Production")
        await fake_telegram.wait_for(lambda: "Question 2 of 2" in card.text)
        await through(a).press(ALICE, card, "Europe")
        await fake_telegram.wait_for(lambda: "Your answers" in card.text)
        rows = draft_rows(pg_database.dsn)
        assert sorted(person for _, person, _ in rows) == ["telegram:111", "telegram:222"]
        interaction_id = rows[0][0]
        answer = await through(b).press(ALICE, card, "Submit answers")
        assert answer["text"].startswith("Answered. Host a")
        # settled: answered, sent to the agent, done (each state may be drawn)
        await fake_telegram.wait_for(
            lambda: card.markup is None and "sent to the agent · done" in card.text
        )
        decided = card.text
        # Bob's screen still shows the buttons: his press reaches b, which held the form,
        # and neither takes it nor draws the pending form over the decided card
        late = await through(b).click(BOB, card, dev)
        assert late["text"] != "● Dev" and late["show_alert"] in (True, "true")
        await fake_telegram.wait_for(lambda: not fake_telegram.unconfirmed or None)
        assert card.markup is None and card.text == decided
        # b redraws the form it held after the decision (its edit landing after the owner's,
        # as when the two cross): it finds the request decided and draws the card again
        await b.telegram.telegram.redraw((GROUP_ID, card.message_id))
        assert card.markup is None and card.text == decided
        # Alice's draft went with her submit; Bob's (nobody drops it) is unreadable at once,
        # and gone at a host's next purge
        assert await a.gateway.store.form_drafts.load(interaction_id, "telegram:222") is None
        await fake_telegram.wait_for(lambda: draft_rows(pg_database.dsn) == [] or None)
        assert received(a) == [
            Decision(
                answers={"env": Answer(option_ids=("prod",)), "region": Answer(option_ids=("eu",))}
            )
        ]


async def test_a_secret_typed_after_another_host_decided_is_deleted_and_never_the_agents(
    fake_telegram: FakeTelegram, tmp_path: Path, pg_database: PgCluster
) -> None:
    group = f'groups = {{ "{GROUP_ID}" = "all" }}'
    async with two_telegram_hosts(
        fake_telegram, tmp_path, pg_database.dsn, telegram=group, requests=REQUESTS
    ) as (
        a,
        b,
    ):
        await through(a).say(ALICE, "/start")  # her private chat, where a secret is asked
        await a.telegram.bot_message(ALICE.id, lambda m: m.text.startswith("Commands:"))
        await through(a).say(ALICE, "ask-note", chat=GROUP)
        card = await a.telegram.card(GROUP_ID)
        await through(b).press(ALICE, card, "Production")
        await fake_telegram.wait_for(lambda: "Question 2 of 2" in card.text)
        await through(b).press(ALICE, card, "private chat")  # b asks her, privately
        prompt = await b.telegram.bot_message(ALICE.id, lambda m: m.force_reply)
        # meanwhile Bob answers through a, and the request is decided
        await through(a).press(BOB, card, "Back")
        await fake_telegram.wait_for(lambda: "Answering: @bob" in card.text)
        await through(a).press(BOB, card, "Dev")
        await fake_telegram.wait_for(lambda: "Question 2 of 2" in card.text)
        await through(a).press(BOB, card, "Skip")
        await fake_telegram.wait_for(lambda: "Your answers" in card.text)
        await through(a).press(BOB, card, "Submit answers")
        # settled: answered, sent to the agent, done (each state may be drawn)
        await fake_telegram.wait_for(
            lambda: card.markup is None and "sent to the agent · done" in card.text
        )
        decided = card.text
        # her secret reaches b, which still holds the form and the prompt, then a, which
        # finds no open draft noting it: neither takes it, both delete it, and tell her
        for host in (b, a):
            typed = await through(host).say(ALICE, SECRET, reply_to=prompt)
            await fake_telegram.wait_for(
                lambda t=typed: (
                    fake_telegram.message(ALICE.id, t["message"]["message_id"]).deleted or None
                )
            )
        await fake_telegram.wait_for(lambda: not fake_telegram.unconfirmed or None)
        told = [m.text for m in fake_telegram.bot_messages(ALICE.id) if "Not taken" in m.text]
        assert len(told) == 2
        assert card.markup is None and card.text == decided
        assert received(a) == [Decision(answers={"env": Answer(option_ids=("dev",))})]
        shown = [m.text for chat in (GROUP_ID, ALICE.id) for m in fake_telegram.bot_messages(chat)]
        assert not any(SECRET in text for text in shown)
        waiting = await a.gateway.store.prompts.waiting_sessions(host="a")
        assert waiting == []  # nothing queued for the agent


def _files_holding(root: Path, needle: bytes) -> list[Path]:
    found = []
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory, name)
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(path)
    return found
