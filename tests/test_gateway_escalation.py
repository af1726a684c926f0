"""Escalation through the whole gateway and the real codex app-server (issue 17).

What people see: a request nobody answered within the rule's ``escalate_after`` is also
posted in the direct conversation of each person the rule names and in a channel (a copy of
the card, whose buttons decide the same request), the conversation it was first asked in is
told where else it is asked, and a vote cast on an escalated copy counts. The ledger records
the escalation once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.launch import ConfiguredLauncher
from gateway.cards import Card
from gateway.config.model import Config
from gateway.domain import Actor, ConversationRef, InteractionState
from gateway.platform import Ack
from gateway.sessions.engine import Gateway
from gateway.store.escalations import ESCALATED
from platforms.memory.platform import MemoryPlatform, Rendered
from tests.codex_env import CodexHome
from tests.gateway_flows import WHEN, Asked, count_rows, hash_said, settles
from tests.gateway_harness import ALICE, ROOM, Running, gateway_config, running_gateway
from tests.servers.fake_responses import FakeResponses
from tests.test_gateway_policy import ask_to_touch, line_of, refused_at_start

CAROL = Actor(platform="memory", user_id="carol", display="Carol")
DAVE = Actor(platform="memory", user_id="dave", display="Dave")
CAROLS_DM = ConversationRef(platform="memory", space=None, channel="carol")
DAVES_DM = ConversationRef(platform="memory", space=None, channel="dave")
# no space written in the rule: the session's own conversation's ("team")
ESCALATIONS = ConversationRef(platform="memory", space="team", channel="escalations")

ESCALATING = """
[[projects.demo.policy]]
kind = "command"
command_prefix = "touch"
approvals = 2
approvers = ["reviewers"]
escalate_after = 2
escalate_to = ["leads", "memory:#escalations"]

[groups]
reviewers = ["memory:alice", "memory:bob", "carol", "dave"]
leads = ["carol", "dave"]

[people]
carol = ["memory:carol"]
dave = ["memory:dave"]
"""

PEOPLE = ("alice", "bob", "carol", "dave")


def config(codex_bin: str, home: CodexHome, tmp_path: Path, rules: str) -> Config:
    return gateway_config(
        codex_bin, home, tmp_path / "data", allow_from=PEOPLE, approvers=PEOPLE, extra=rules
    )


async def copy_in(gw: Running, conversation: ConversationRef) -> Rendered:
    """The card's copy in ``conversation``, with its buttons, once it is posted there."""

    def find() -> Rendered | None:
        shown = gw.memory.cards(conversation)
        return next((s for s in shown if s.card is not None and s.card.actions), None)

    return await gw.memory.wait_for(find)


def token(shown: Rendered, label: str) -> str:
    """The token of the button ``label`` on the copy as first posted."""
    first = shown.versions[0]
    assert isinstance(first, Card)
    [found] = [action.token for action in first.actions if action.label == label]
    return found


@pytest.mark.real_agent("codex")
@pytest.mark.timeout(90)
async def test_unanswered_it_reaches_a_dm_and_a_channel_and_a_vote_there_counts(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(config(codex_bin, codex_home, tmp_path, ESCALATING)) as gw:
        asked: Asked = await ask_to_touch(gw, fake_model)
        vote = await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        assert vote == Ack(
            text=f"Your vote is counted: 1 of 2: Alice approved{hash_said(asked)}.", accepted=True
        )
        # nobody else answered: after 2 s the card is also in each lead's DM and the channel
        in_dm = await copy_in(gw, CAROLS_DM)
        await copy_in(gw, DAVES_DM)
        in_channel = await copy_in(gw, ESCALATIONS)
        notice = await gw.text_where(lambda text: text.startswith("⏫"))
        record_id = asked.interaction.id
        assert notice == (
            f'⏫ "Run a command" ({record_id}) was not answered within 2 s: also asked in'
            " direct messages to carol and dave, and in #escalations."
        )
        for copy in (in_dm, in_channel):
            assert copy.card is not None and copy.card.title == asked.first.title
            assert "1 of 2: Alice approved" in copy.card.status_line
        # nothing is said in the DM or channel but the card; the notice is where it was asked
        assert gw.memory.texts(CAROLS_DM) == [] and gw.memory.texts(ESCALATIONS) == []
        done = await gw.memory.click(CAROLS_DM, CAROL, token(in_dm, "Allow once"))
        assert done == Ack(text="Approved: Allow once. Sent to the agent.", accepted=True)
        record = await settles(
            gw,
            asked,
            rf'Approved \("Allow once"\) by Carol at {WHEN} · sent to the agent · done'
            r" · 2 of 2: Alice, Carol approved",
        )
        # every copy shows the decision; a late click in the channel is told who decided
        for copy in (in_dm, in_channel):
            await gw.memory.wait_for(
                lambda copy=copy: (
                    copy.card is not None
                    and not copy.card.actions
                    and copy.card.status_line.startswith('Approved ("Allow once") by Carol')
                )
            )
        late = await gw.memory.click(ESCALATIONS, DAVE, token(in_channel, "Allow once"))
        assert not late.accepted and late.text.startswith("Already decided by Carol")
        await gw.text_where(lambda text: "Done." in text)
        escalated = await gw.gateway.store.audit.entries(event=ESCALATED)
    assert record.state is InteractionState.RESOLVED
    assert count_rows(gw, "decisions", record.id) == 1
    assert count_rows(gw, "deliveries", record.id) == 1
    [entry] = escalated  # recorded once
    assert entry.interaction_id == record.id
    assert entry.details["asked"] == ["carol", "dave", "#escalations"]
    assert [v.surface for v in record.votes] == ["memory:team:room:t1", "memory:-:carol:-"]
    assert (codex_home.workspace / "hello.txt").exists()


@pytest.mark.real_agent("codex")
@pytest.mark.timeout(90)
async def test_answered_in_time_it_is_not_escalated(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    rules = ESCALATING.replace("approvals = 2", "approvals = 1")
    async with running_gateway(config(codex_bin, codex_home, tmp_path, rules)) as gw:
        asked = await ask_to_touch(gw, fake_model)
        await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        await gw.text_where(lambda text: "Done." in text)
        assert await gw.gateway.store.audit.entries(event=ESCALATED) == []
    assert gw.memory.cards(CAROLS_DM) == [] and gw.memory.cards(ESCALATIONS) == []


def test_bad_escalation_keys_are_refused_naming_key_and_line(tmp_path: Path) -> None:
    said, lines = refused_at_start(
        tmp_path,
        """
[[projects.demo.policy]]
escalate_after = 30

[[projects.demo.policy]]
escalate_after = 30
escalate_to = ["oncall", "slack:#"]
""",
    )
    alone = line_of(lines, "escalate_after")
    assert f"gateway.toml:{alone}: projects.demo.policy.0.escalate_after: set escalate_to" in said
    where = line_of(lines, "escalate_to")
    assert (
        f"gateway.toml:{where}: projects.demo.policy.1.escalate_to: "
        'unknown group or person "oncall"' in said
    ), said
    assert 'projects.demo.policy.1.escalate_to: "slack:#" names no account or channel' in said


@pytest.mark.real_agent("codex")
@pytest.mark.timeout(90)
async def test_after_a_restart_the_escalated_copies_are_recovered_and_not_posted_again(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    settings = config(codex_bin, codex_home, tmp_path, ESCALATING)
    memory = MemoryPlatform()  # the same chat before and after the restart
    launcher = ConfiguredLauncher(env_source={}, handshake_timeout=60)
    async with Gateway(settings, platforms={"memory": memory}, launcher=launcher) as gateway:
        gw = Running(gateway=gateway, memory=memory)
        asked = await ask_to_touch(gw, fake_model)
        await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        in_dm = await copy_in(gw, CAROLS_DM)
        in_channel = await copy_in(gw, ESCALATIONS)
    async with Gateway(settings, platforms={"memory": memory}, launcher=launcher) as gateway:
        # the restart ended the agent process: every copy, escalated ones too, says so
        for copy in (asked.shown, in_dm, in_channel):
            await memory.wait_for(lambda copy=copy: copy.card is not None and not copy.card.actions)
        late = await memory.click(CAROLS_DM, CAROL, token(in_dm, "Allow once"))
        escalated = await gateway.store.audit.entries(event=ESCALATED)
        orphaned = await gateway.store.interactions.get(asked.interaction.id)
    assert not late.accepted
    # the request is orphaned; Alice's vote stays in the ledger, as audit
    assert orphaned is not None and orphaned.state is InteractionState.ORPHANED
    assert [vote.person for vote in orphaned.votes] == ["memory:alice"]
    assert len(escalated) == 1  # recorded once, never repeated
    assert len(memory.cards(CAROLS_DM)) == 1 and len(memory.cards(ESCALATIONS)) == 1
    assert in_dm.card is not None and in_dm.card.status_line == asked.now.status_line
    assert not (codex_home.workspace / "hello.txt").exists()


@pytest.mark.real_agent("codex")
@pytest.mark.timeout(90)
async def test_a_person_no_people_entry_names_is_said_as_their_account_in_words(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    rules = ESCALATING.replace('leads = ["carol", "dave"]', 'leads = ["carol", "memory:dave"]')
    rules = rules.replace('dave = ["memory:dave"]\n', "")
    rules = rules.replace('"carol", "dave"]\nleads', '"carol", "memory:dave"]\nleads')
    async with running_gateway(config(codex_bin, codex_home, tmp_path, rules)) as gw:
        await ask_to_touch(gw, fake_model)
        await copy_in(gw, DAVES_DM)
        notice = await gw.text_where(lambda text: text.startswith("⏫"))
    assert notice.endswith(
        "also asked in direct messages to carol and memory user dave, and in #escalations."
    ), notice
