"""``/grants`` and ``/revoke`` of an OpenCode "always" through the whole gateway and the real
``opencode serve`` (1.18.33), against the fake Chat Completions API (issue 17).

1.18.33 keeps "always" in the server's memory (``/api/permission/saved`` lists nothing), so
revoking it asks the server for any saved permission of those patterns to delete, then ends
the server; the next message starts a new server that asks again. A server that did save it
keeps it in its database's ``permission`` table: the second test puts rows there, as such a
server would, and the real server's ``DELETE /api/permission/saved/{id}`` removes the
grant's row, and only it.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from pathlib import Path

import pytest

import tests.servers.fake_chat_completions as fc
from gateway.domain import InteractionState
from tests.gateway_harness import ALICE, ROOM, Running, running_gateway
from tests.opencode_env import OPENCODE_WAIT, OpenCodeHome
from tests.servers.fake_chat_completions import DONE, FakeChatCompletions
from tests.test_gateway_opencode import opencode_config

pytestmark = [pytest.mark.real_agent("opencode"), pytest.mark.timeout(300)]

DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d UTC"


async def said(gw: Running, text: str, starts: str) -> str:
    """Say ``text`` in the room as Alice; the first reply since then starting ``starts``."""
    before = len(gw.memory.texts(ROOM))
    await gw.memory.say(ROOM, ALICE, text)
    return await gw.wait_for(
        lambda: next((t for t in gw.memory.texts(ROOM)[before:] if t.startswith(starts)), None)
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_always_is_listed_and_revoking_it_ends_the_server_which_then_asks_again(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue(
        [fc.bash("echo one > one.txt", "Write one.txt"), DONE],
        [fc.bash("echo two > two.txt", "Write two.txt"), DONE],
    )
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "write one")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[1].token)  # Always allow
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done. The tool said" in text)
        [session] = await gw.gateway.store.sessions.list_sessions()
        runner = gw.gateway.existing_runner(session.id)
        assert runner is not None and runner.agent is not None and runner.agent.pid
        server = runner.agent.pid

        listed = await said(gw, "/grants", "Grants in force")
        assert re.fullmatch(
            rf"Grants in force:\n1\. Always allow `echo \*`[^\n]* — by Alice, {DATE}"
            r" · held by the OpenCode server, until it stops\n/revoke ID takes one back\.",
            listed,
        ), listed
        asked = await said(gw, "/revoke 1", "Revoking")
        assert "any permission OpenCode saved for it is deleted" in asked, asked
        assert asked.endswith("To go on: /revoke 1 confirm"), asked
        assert alive(server)  # nothing is done before the confirmation

        done = await said(gw, "/revoke 1 confirm", "Grant 1 revoked")
        assert done == (
            "Grant 1 revoked: the OpenCode server, which holds it in its memory, is ended; "
            "your next message starts a new one without it."
        )
        await gw.wait_for(lambda: not alive(server) or None)
        assert await said(gw, "/grants", "Grants in force") == "Grants in force: none."

        # a new server: the same kind of command is asked again
        await gw.memory.say(ROOM, ALICE, "write two")
        again = await gw.card_where(
            lambda card: bool(card.actions) and "echo two" in str(card.blocks)
        )
        assert again.card is not None
        await gw.memory.click(ROOM, ALICE, again.card.actions[0].token)  # Allow once
        await gw.wait_for(lambda: (opencode_home.workspace / "two.txt").exists() or None)
        [entry] = await gw.gateway.store.audit.entries(event="grant.revoked")
        records = await gw.gateway.store.interactions.list_open()
    assert entry.details["how"] == "OpenCode server ended"
    assert all(r.state is not InteractionState.PENDING for r in records)


def saved_rows(home: OpenCodeHome) -> list[tuple[str, str, str]]:
    with sqlite3.connect(home.home / ".local/share/opencode/opencode.db") as db:
        return list(db.execute("SELECT id, action, resource FROM permission ORDER BY id"))


def save(home: OpenCodeHome, saved_id: str, action: str, resource: str) -> None:
    """A saved permission of the server's project ("global": the work dir is no repository),
    as a server that saves "always" keeps it."""
    now = int(time.time() * 1000)
    with sqlite3.connect(home.home / ".local/share/opencode/opencode.db") as db:
        db.execute(
            "INSERT INTO permission (id, project_id, action, resource, time_created,"
            " time_updated) VALUES (?, 'global', ?, ?, ?, ?)",
            (saved_id, action, resource, now, now),
        )


async def test_a_saved_permission_of_the_grant_is_deleted_by_the_server_others_are_kept(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue([fc.bash("echo one > one.txt", "Write one.txt"), DONE])
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "write one")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        await gw.memory.click(ROOM, ALICE, shown.card.actions[1].token)  # Always allow
        await gw.text_where(lambda text: "Done. The tool said" in text)
        save(opencode_home, "psv_granted", "bash", "echo *")
        save(opencode_home, "psv_edit", "edit", "echo *")  # another permission
        save(opencode_home, "psv_other", "bash", "ls *")  # another pattern
        done = await said(gw, "/revoke 1 confirm", "Grant 1 revoked")
        assert done == (
            "Grant 1 revoked: OpenCode's saved permission psv_granted is deleted, and the "
            "OpenCode server, which holds it in its memory, is ended; your next message "
            "starts a new one without it."
        ), done
        [entry] = await gw.gateway.store.audit.entries(event="grant.revoked")
    assert entry.details["how"] == "saved permission psv_granted deleted; OpenCode server ended"
    assert saved_rows(opencode_home) == [
        ("psv_edit", "edit", "echo *"),
        ("psv_other", "bash", "ls *"),
    ]
