"""``/grants`` and ``/revoke`` through the whole gateway and the real codex app-server
(issue 17): what a person granted beyond one request is listed with who and when, and
revoking takes it back where Codex keeps it (its process, or its rules file)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.console_harness import CONSOLE_TABLES, client, console_gateway, logged_in, origin
from tests.gateway_flows import DONE, add_file, ask
from tests.gateway_harness import (
    ALICE,
    BOB,
    MALLORY,
    ROOM,
    Running,
    gateway_config,
    running_gateway,
)
from tests.servers.fake_responses import FakeResponses, apply_patch, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

SESSION_FILES = "Allow these files for this session"
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d UTC"


async def said(gw: Running, text: str, starts: str) -> str:
    """Say ``text`` in the room as Alice; the first reply since then starting ``starts``."""
    before = len(gw.memory.texts(ROOM))
    await gw.memory.say(ROOM, ALICE, text)
    return await gw.memory.wait_for(
        lambda: next((t for t in gw.memory.texts(ROOM)[before:] if t.startswith(starts)), None)
    )


async def test_a_session_grant_is_listed_and_revoking_it_ends_the_process(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    update = "*** Begin Patch\n*** Update File: one.txt\n@@\n-hello\n+hello again\n*** End Patch\n"
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", sandbox="read-only")
    async with running_gateway(config) as gw:
        steps = [apply_patch(add_file("one.txt")), apply_patch(update), DONE]
        asked = await ask(gw, fake_model, steps, "please write the file")
        await gw.memory.click(ROOM, ALICE, asked.token(SESSION_FILES))
        await gw.text_where(lambda text: "Done." in text)
        assert len(gw.cards()) == 1  # the second patch was not asked: the grant is in force
        listed = await said(gw, "/grants", "Grants in force")
        assert re.fullmatch(
            rf"Grants in force:\n1\. {SESSION_FILES}: Apply file changes — by Alice, {DATE}"
            r" · held by the agent process, until it ends\n/revoke ID takes one back\.",
            listed,
        ), listed
        asked_first = await said(gw, "/revoke 1", "Revoking")
        assert asked_first.endswith("To go on: /revoke 1 confirm")
        assert "the agent process is ended" in asked_first
        # a stranger may not
        before = len(gw.memory.texts(ROOM))
        await gw.memory.say(ROOM, MALLORY, "/revoke 1 confirm")
        done = await said(gw, "/revoke 1 confirm", "Grant 1 revoked")
        assert "your next message resumes the conversation without it" in done
        assert not any("revoked" in t for t in gw.memory.texts(ROOM)[before:-1])
        assert await said(gw, "/grants", "Grants in force") == "Grants in force: none."
        again = await said(gw, "/revoke 1", "Grant 1 was")
        assert re.fullmatch(rf"Grant 1 was revoked by Alice, {DATE}\.", again), again
        # the next message resumes the thread in a new process, without the grant: asked again
        third = (
            "*** Begin Patch\n*** Update File: one.txt\n@@\n-hello again\n+third\n*** End Patch\n"
        )
        fake_model.enqueue([apply_patch(third), DONE])
        await gw.memory.say(ROOM, ALICE, "once more")
        await gw.memory.wait_for(lambda: len(gw.cards()) == 2)
        session = await gw.gateway.store.sessions.lookup(ROOM)
        assert session is not None and session.current_epoch == 2


async def test_an_exec_policy_amendment_names_its_line_and_revoking_removes_it(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    rules = codex_home.home / "rules" / "default.rules"
    # two people must agree: the grant names both
    two = '[[projects.demo.policy]]\ncommand_prefix = "touch"\napprovals = 2\n'
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", extra=two)
    async with running_gateway(config) as gw:
        steps = [shell("touch hello.txt", escalated=True, prefix_rule=["touch"]), DONE]
        asked = await ask(gw, fake_model, steps, "please create hello.txt")
        always = asked.token("Always allow commands like this")
        await gw.memory.click(ROOM, ALICE, always)
        await gw.memory.click(ROOM, BOB, always)
        await gw.text_where(lambda text: "Done." in text)
        written = rules.read_text().splitlines()
        [number] = [n for n, line in enumerate(written, 1) if '["touch"]' in line]
        listed = await said(gw, "/grants", "Grants in force")
        assert "— by Alice and Bob, " in listed
        assert f" · line {number} of {rules}\n" in listed, listed
        shown = await said(gw, "/revoke 1", "Grant 1 is line")
        assert shown.startswith(f"Grant 1 is line {number} of {rules}:\n{written[number - 1]}")
        assert "/revoke 1 remove deletes that line" in shown
        assert rules.read_text().splitlines() == written  # nothing removed yet
        done = await said(gw, "/revoke 1 remove", "Grant 1 revoked")
        assert done.startswith(f"Grant 1 revoked: line {number} removed from {rules}")
        assert not any('["touch"]' in line for line in rules.read_text().splitlines())
        assert await said(gw, "/grants", "Grants in force") == "Grants in force: none."


async def test_the_console_lists_the_grants_with_a_button_that_revokes(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    config = gateway_config(
        codex_bin, codex_home, tmp_path / "data", sandbox="read-only", extra=CONSOLE_TABLES
    )
    async with console_gateway(config) as running:
        gw = Running(gateway=running.gateway, memory=running.memory)
        steps = [apply_patch(add_file("one.txt")), DONE]
        asked = await ask(gw, fake_model, steps, "please write the file")
        await gw.memory.click(ROOM, ALICE, asked.token(SESSION_FILES))
        await gw.text_where(lambda text: "Done." in text)
        session = await gw.gateway.store.sessions.lookup(ROOM)
        assert session is not None
        page_url = f"{running.console.url}s/{session.id}/grants"
        async with client() as http:
            csrf = await logged_in(http, running)
            async with http.get(page_url) as response:
                page = await response.text()
            assert f"1. {SESSION_FILES}: Apply file changes" in page
            assert "by Alice" in page and "held by the agent process, until it ends" in page
            assert "Revoke: end the agent process" in page
            form = {"csrf": csrf, "grant": "1", "then": "confirm"}
            async with http.post(
                f"{running.console.url}s/{session.id}/revoke", data=form, headers=origin(running)
            ) as response:
                reply = await response.json()
            async with http.get(page_url) as response:
                after = await response.text()
        assert reply["accepted"], reply
        assert reply["text"].startswith("Grant 1 revoked: the agent process is ended")
        assert "No grant is in force." in after
        [entry] = await gw.gateway.store.audit.entries(event="grant.revoked")
        assert entry.actor == "local:alice"
