"""Policy rules through the whole gateway and the real codex app-server (issue 17).

What people see: a rule asking two people keeps the card open after one approval, every
copy shows the tally, the second approval sends the answer to the agent once (even when two
people press at the same moment), one deny decides, a person (whatever their account)
counts once (on two platforms too), and a deny rule refuses at once with nobody asked.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config.model import Config
from gateway.domain import Actor, InteractionState
from gateway.platform import Ack
from tests.codex_env import CodexHome
from tests.console_harness import CONSOLE_TABLES, client, console_gateway, logged_in, origin
from tests.gateway_flows import (
    DONE,
    WHEN,
    Asked,
    ask,
    count_rows,
    hash_said,
    interaction,
    settles,
    told,
)
from tests.gateway_harness import ALICE, BOB, ROOM, Running, gateway_config, running_gateway
from tests.platform_contract.console_driver import page_items
from tests.servers.fake_responses import FakeResponses, shell

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(90)]

CAROL = Actor(platform="memory", user_id="carol", display="Carol")
ALICE_AGAIN = Actor(platform="memory", user_id="alice2", display="Alice (laptop)")

TWO_OF_THREE = """
[[projects.demo.policy]]
kind = "command"
command_prefix = "touch"
approvals = 2
approvers = ["reviewers"]

[people]
alice = ["memory:alice", "memory:alice2"]

[groups]
reviewers = ["alice", "memory:bob", "memory:carol"]
"""

DENY_TOUCH = """
[[projects.demo.policy]]
command_regex = "^touch "
action = "deny"
message = "Nobody touches files in this project."
"""

PEOPLE = ("alice", "alice2", "bob", "carol")


def config(codex_bin: str, home: CodexHome, tmp_path: Path, rules: str) -> Config:
    return gateway_config(
        codex_bin, home, tmp_path / "data", allow_from=PEOPLE, approvers=PEOPLE, extra=rules
    )


async def ask_to_touch(gw: Running, fake: FakeResponses) -> Asked:
    steps = [shell("touch hello.txt", escalated=True), DONE]
    return await ask(gw, fake, steps, "please create hello.txt")


async def tally_shown(gw: Running, asked: Asked, tally: str) -> None:
    """Wait until the card (still with its buttons) shows ``tally``."""
    await gw.memory.wait_for(
        lambda: (
            (card := asked.shown.card) is not None and card.actions and tally in card.status_line
        )
    )


async def test_two_of_three_pressing_at_once_write_once(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(config(codex_bin, codex_home, tmp_path, TWO_OF_THREE)) as gw:
        asked = await ask_to_touch(gw, fake_model)
        allow = asked.token("Allow once")
        ack = await gw.memory.click(ROOM, ALICE, allow)
        assert ack == Ack(
            text=f"Your vote is counted: 1 of 2: Alice approved{hash_said(asked)}.", accepted=True
        )
        await tally_shown(gw, asked, "Waiting for a decision · 1 of 2: Alice approved")
        assert (await interaction(gw, asked.interaction.id)).state is InteractionState.PENDING
        both = await asyncio.gather(
            gw.memory.click(ROOM, BOB, allow), gw.memory.click(ROOM, CAROL, allow)
        )
        [won] = [a for a in both if a.accepted]
        [lost] = [a for a in both if not a.accepted]
        assert won.text == "Approved: Allow once. Sent to the agent."
        assert lost.text.startswith("Already ")
        record = await settles(
            gw,
            asked,
            rf'Approved \("Allow once"\) by (Bob|Carol) at {WHEN} · sent to the agent · done'
            r" · 2 of 2: Alice, (Bob|Carol) approved",
        )
        assert count_rows(gw, "decisions", record.id) == 1
        assert count_rows(gw, "deliveries", record.id) == 1
        await gw.text_where(lambda text: "Done." in text)
    assert (codex_home.workspace / "hello.txt").exists()
    assert "Process exited with code 0" in told(fake_model)
    # what they approved is what the card showed: the same hash, on the card's face (several
    # people vote: it lets them see they approve the same content) and every vote
    shown = re.fullmatch(
        r"Waiting for a decision · content hash ([0-9a-f]{10})", asked.first.status_line
    )
    assert shown is not None, asked.first.status_line
    assert asked.now.status_line.endswith(f" · content hash {shown[1]}")
    assert (asked.first.content_hash, asked.now.content_hash) == ("", "")  # not again in details
    assert [vote.content_hash[:10] for vote in record.votes] == [shown[1]] * 2


async def test_one_deny_decides_at_once(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(config(codex_bin, codex_home, tmp_path, TWO_OF_THREE)) as gw:
        asked = await ask_to_touch(gw, fake_model)
        await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        ack = await gw.memory.click(ROOM, BOB, asked.token("Deny"))
        assert ack == Ack(text="Denied. Sent to the agent.", accepted=True)
        await settles(
            gw,
            asked,
            rf'Denied \("Deny"\) by Bob at {WHEN} · sent to the agent · done'
            r" · 1 of 2: Alice approved; Bob denied",
        )
        await gw.text_where(lambda text: "Done." in text)
    assert not (codex_home.workspace / "hello.txt").exists()
    assert "rejected by user" in told(fake_model)


async def test_without_deny_wins_a_mixed_tally_waits_and_two_denies_decide(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    rules = TWO_OF_THREE.replace("approvals = 2", "approvals = 2\ndeny_wins = false")
    async with running_gateway(config(codex_bin, codex_home, tmp_path, rules)) as gw:
        asked = await ask_to_touch(gw, fake_model)
        denied = await gw.memory.click(ROOM, BOB, asked.token("Deny"))
        assert denied == Ack(
            text=f"Your vote is counted: 1 of 2: Bob denied{hash_said(asked)}.", accepted=True
        )
        approved = await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        assert approved.accepted and "Alice approved" in approved.text, approved
        await tally_shown(gw, asked, "Alice approved")  # one of each: still waiting
        assert (await interaction(gw, asked.interaction.id)).state is InteractionState.PENDING
        done = await gw.memory.click(ROOM, CAROL, asked.token("Deny"))
        assert done == Ack(text="Denied. Sent to the agent.", accepted=True)
        record = await settles(
            gw, asked, rf'Denied \("Deny"\) by Carol at {WHEN} · sent to the agent · done · .*'
        )
        await gw.text_where(lambda text: "Done." in text)
    assert sorted((v.person, v.action_id) for v in record.votes) == [
        ("alice", "accept"),
        ("memory:bob", "decline"),
        ("memory:carol", "decline"),
    ]
    assert count_rows(gw, "decisions", record.id) == 1
    assert not (codex_home.workspace / "hello.txt").exists()


async def test_the_same_person_counts_once_whatever_the_account(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(config(codex_bin, codex_home, tmp_path, TWO_OF_THREE)) as gw:
        asked = await ask_to_touch(gw, fake_model)
        allow = asked.token("Allow once")
        assert (await gw.memory.click(ROOM, ALICE, allow)).accepted
        again = await gw.memory.click(ROOM, ALICE, allow)
        assert again == Ack(
            text=f"Your vote was already counted: 1 of 2: Alice approved{hash_said(asked)}.",
            accepted=False,
        )
        other_account = await gw.memory.click(ROOM, ALICE_AGAIN, allow)
        assert not other_account.accepted and "1 of 2" in other_account.text
        record = await interaction(gw, asked.interaction.id)
        assert record.state is InteractionState.PENDING
        assert [vote.person for vote in record.votes] == ["alice"]
        assert not (codex_home.workspace / "hello.txt").exists()
        # a second person still decides it
        done = await gw.memory.click(ROOM, CAROL, allow)
        assert done.text == "Approved: Allow once. Sent to the agent."
        await gw.text_where(lambda text: "Done." in text)
    assert (codex_home.workspace / "hello.txt").exists()


async def test_one_persons_accounts_on_two_platforms_count_once(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    """Alice on the memory platform and Alice at the console (``local:alice``) are one
    person under ``[people]``: her second vote, from the other platform's copy of the card,
    is not a second approval."""
    rules = TWO_OF_THREE.replace('"memory:alice2"]', '"memory:alice2", "local:alice"]')
    settings = gateway_config(
        codex_bin,
        codex_home,
        tmp_path / "data",
        allow_from=PEOPLE,
        approvers=PEOPLE,
        extra=CONSOLE_TABLES + rules,
    )
    async with console_gateway(settings) as running, client() as http:
        gw = Running(gateway=running.gateway, memory=running.memory)
        asked = await ask_to_touch(gw, fake_model)
        assert (await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))).accepted
        session = await gw.gateway.store.sessions.lookup(ROOM)
        assert session is not None
        csrf = await logged_in(http, running)
        async with http.get(f"{running.console.url}s/{session.id}") as response:
            [card] = [item for item in page_items(await response.text()) if item.card]
        form = {"csrf": csrf, "token": card.button("Allow once").token}
        async with http.post(
            f"{running.console.url}i/{card.key}/act", data=form, headers=origin(running)
        ) as response:
            from_console = await response.json()
        assert not from_console["accepted"]
        assert from_console["text"] == (
            f"Your vote was already counted: 1 of 2: Alice approved{hash_said(asked)}."
        )
        record = await interaction(gw, asked.interaction.id)
        assert record.state is InteractionState.PENDING
        assert [vote.person for vote in record.votes] == ["alice"]
        done = await gw.memory.click(ROOM, BOB, asked.token("Allow once"))
        assert done.text == "Approved: Allow once. Sent to the agent."
        await gw.text_where(lambda text: "Done." in text)
    assert (codex_home.workspace / "hello.txt").exists()


async def test_a_vote_withdrawn_no_longer_counts(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(config(codex_bin, codex_home, tmp_path, TWO_OF_THREE)) as gw:
        asked = await ask_to_touch(gw, fake_model)
        allow = asked.token("Allow once")
        await gw.memory.click(ROOM, ALICE, allow)
        await tally_shown(gw, asked, "1 of 2: Alice approved")
        before = len(gw.memory.texts(ROOM))
        await gw.memory.say(ROOM, ALICE, f"/withdraw {asked.interaction.id}")
        reply = await gw.memory.wait_for(
            lambda: next((t for t in gw.memory.texts(ROOM)[before:] if "withdrawn" in t), None)
        )
        assert reply == "Your vote is withdrawn: no votes now."
        await gw.memory.wait_for(
            lambda: (
                (card := asked.shown.card) is not None
                and card.actions
                and " of 2" not in card.status_line
            )
        )
        # Bob alone is one of two: still waiting
        assert (await gw.memory.click(ROOM, BOB, allow)).text == (
            f"Your vote is counted: 1 of 2: Bob approved{hash_said(asked)}."
        )
        done = await gw.memory.click(ROOM, ALICE, allow)
        assert done.text == "Approved: Allow once. Sent to the agent."
        await gw.text_where(lambda text: "Done." in text)
        # the withdrawal stays in the ledger, as audit
        entries = await gw.gateway.store.audit.entries(interaction_id=asked.interaction.id)
        said = [(e.event, e.details.get("person")) for e in reversed(entries)]
        assert [entry for entry in said if entry[0].startswith("vote.")] == [
            ("vote.cast", "alice"),
            ("vote.withdrawn", "alice"),
            ("vote.cast", "memory:bob"),
            ("vote.cast", "alice"),
        ]


async def test_a_deny_rule_refuses_at_once(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(config(codex_bin, codex_home, tmp_path, DENY_TOUCH)) as gw:
        fake_model.enqueue([shell("touch hello.txt", escalated=True), DONE])
        await gw.memory.say(ROOM, ALICE, "please create hello.txt")
        refused = await gw.card_where(
            lambda card: (
                not card.actions
                and re.match(rf'Denied \("Deny"\) by a policy rule at {WHEN}', card.status_line)
                is not None
            )
        )
        await gw.text_where(lambda text: "Done." in text)
        assert refused.card is not None
        assert "sent to the agent" in refused.card.status_line
    assert not (codex_home.workspace / "hello.txt").exists()
    assert "rejected by user" in told(fake_model)


async def test_a_rules_expiry_overrides_the_projects(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    # the project never expires; the rule for "touch" gives nobody more than half a second
    rule = TWO_OF_THREE.replace("approvals = 2", "approvals = 2\nexpiry = 0.5")
    async with running_gateway(config(codex_bin, codex_home, tmp_path, rule)) as gw:
        asked = await ask_to_touch(gw, fake_model)
        await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        record = await settles(
            gw,
            asked,
            # (what it waited, measured: half a second, a little more on a busy machine)
            r"Timed out: nobody answered within 0\.[5-9] s · a refusal was sent to the agent"
            r" · 1 of 2: Alice approved",
        )
        await gw.text_where(lambda text: "Done." in text)
    assert record.state is InteractionState.EXPIRED and record.decision is None
    assert [vote.person for vote in record.votes] == ["alice"]  # kept, as audit
    assert not (codex_home.workspace / "hello.txt").exists()


HEAD = """\
[gateway]
data_dir = "{data}"

[projects.demo]
work_dir = "{work}"
agent = "codex-app-server"

[projects.demo.auth.memory]
allow_from = ["alice"]

[platforms.memory]

[groups]
reviewers = ["memory:alice", "memory:bob"]
"""


def refused_at_start(tmp_path: Path, rules: str) -> tuple[str, list[str]]:
    """Start ``python -m gateway run`` on a config with ``rules``: what it said, and the
    file's lines. It must refuse to start."""
    text = HEAD.format(data=tmp_path / "data", work=tmp_path) + rules
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    run = subprocess.run(
        [sys.executable, "-m", "gateway", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode != 0
    assert not (tmp_path / "data").exists()  # nothing started
    return run.stderr.replace(str(path), "gateway.toml"), text.splitlines()


def line_of(lines: list[str], needle: str, nth: int = 0) -> int:
    return [n for n, row in enumerate(lines, 1) if row.startswith(needle)][nth]


def test_bad_rules_stop_the_gateway_naming_key_and_line(tmp_path: Path) -> None:
    said, lines = refused_at_start(
        tmp_path,
        """
[[projects.demo.policy]]
approvals = 3
approvers = ["reviewers"]

[[projects.demo.policy]]
approvers = ["ops"]
""",
    )
    too_many = line_of(lines, "approvals")
    assert (
        f"gateway.toml:{too_many}: projects.demo.policy.0.approvals: 3 approvals asked of 2 people"
        in said
    ), said
    unknown = line_of(lines, "approvers", 1)
    assert (
        f'gateway.toml:{unknown}: projects.demo.policy.1.approvers: unknown group or person "ops"'
        in said
    ), said


def test_a_regex_that_does_not_compile_stops_the_gateway(tmp_path: Path) -> None:
    said, lines = refused_at_start(
        tmp_path, '\n[[projects.demo.policy]]\ncommand_regex = "^git (push"\n'
    )
    where = line_of(lines, "command_regex")
    assert (
        f"gateway.toml:{where}: projects.demo.policy.0.command_regex: not a regular expression"
        in said
    ), said
