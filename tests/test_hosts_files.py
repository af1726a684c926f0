"""Download where the agent runs (issue 32): with two hosts on one ledger, a document that
reaches host "b" (the load balancer's choice) is queued with its file's reference only; host
"a", which runs the project's agents, fetches it from Telegram when the prompt's turn comes,
saves it in the inbox and gives it to its agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pg_cluster import PgCluster
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import FakeTelegram
from tests.servers.telegram_people import document_update, private_chat
from tests.telegram_harness import ALICE
from tests.telegram_hosts_harness import through, two_telegram_hosts

pytestmark = pytest.mark.timeout(120)

PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


async def test_a_file_received_by_one_host_is_fetched_by_the_host_that_runs_the_agent(
    fake_telegram: FakeTelegram, tmp_path: Path, pg_database: PgCluster
) -> None:
    async with two_telegram_hosts(fake_telegram, tmp_path, pg_database.dsn, requests={}) as (
        a,
        b,
    ):
        through(b)
        update = document_update(
            fake_telegram, private_chat(ALICE), ALICE, PDF, "spec.pdf", caption="read it"
        )
        await fake_telegram.push(update)
        echo = await fake_telegram.wait_for(
            lambda: next(
                (m.text for m in fake_telegram.bot_messages(ALICE.id) if "echo:" in m.text), None
            )
        )
        launchers = [host.telegram.launcher for host in (a, b)]
        assert all(isinstance(launcher, ScriptedLauncher) for launcher in launchers)
        taken_by_a, taken_by_b = (
            [p.text for p in launcher.prompts]  # type: ignore[attr-defined]
            for launcher in launchers
        )
    saved = tmp_path / "work" / ".agent-gateway" / "inbox" / "spec.pdf"
    assert saved.read_bytes() == PDF
    assert f"spec.pdf (application/pdf, {len(PDF)} bytes): {saved}" in echo
    assert len(taken_by_a) == 1 and taken_by_b == []
    assert len(fake_telegram.downloads) == 1  # fetched once, by a


async def test_a_choice_pressed_on_one_host_sends_the_message_from_the_host_that_runs_it(
    fake_telegram: FakeTelegram, tmp_path: Path, pg_database: PgCluster
) -> None:
    """Issue 32: host "a" fails to download the file and offers the choice; the press reaches
    host "b", whose compare-and-set in the ledger wakes "a" (migration 23's trigger), which
    sends the message without its file."""
    fake_telegram.file_fails = 3  # every try of the one fetch answered 502
    async with two_telegram_hosts(fake_telegram, tmp_path, pg_database.dsn, requests={}) as (
        a,
        b,
    ):
        through(b)
        update = document_update(
            fake_telegram, private_chat(ALICE), ALICE, PDF, "spec.pdf", caption="read it"
        )
        await fake_telegram.push(update)
        card = await b.telegram.card(ALICE.id, lambda m: "did not come" in m.text)
        answer = await b.telegram.press(ALICE, card, "Send without the file")
        echo = await fake_telegram.wait_for(
            lambda: next(
                (m.text for m in fake_telegram.bot_messages(ALICE.id) if "echo:" in m.text), None
            )
        )
        taken_by_a, taken_by_b = (
            [p.text for p in host.telegram.launcher.prompts]  # type: ignore[attr-defined]
            for host in (a, b)
        )
        settled = await fake_telegram.wait_for(
            lambda: (m := fake_telegram.message(ALICE.id, card.message_id)).markup is None and m
        )
    assert answer["text"] == "📎 Sending your message without spec.pdf."
    assert "could not be downloaded: spec.pdf." in echo
    # the card host "a" showed, edited by "b", which took the press: said, its buttons gone
    assert "sent without spec.pdf" in settled.text
    assert len(taken_by_a) == 1 and taken_by_b == []
