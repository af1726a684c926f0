"""Escalation's pure parts and its ledger record: where a rule escalates to, and that a
request is escalated once (a restart reads the record and does not repeat it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.config.policy_rules import PolicyRule
from gateway.domain import Actor, ConversationRef, Decision
from gateway.interactions.escalation import (
    ChannelTarget,
    channel_conversation,
    channel_target,
    escalation_of,
)
from gateway.store.escalations import ESCALATED
from gateway.store.store import Store
from tests.store_helpers import SteppingClock, approval, running_session

ROOM = ConversationRef(platform="slack", space="T1", channel="C1", thread="1.0")
DM = ConversationRef(platform="slack", space="T1", channel="D9")
ESC = ConversationRef(platform="slack", space="T1", channel="C0ESC")


@pytest.mark.parametrize(
    ("entry", "target"),
    [
        ("slack:#C0ESC", ChannelTarget(platform="slack", space=None, channel="C0ESC")),
        ("slack:#T2/C0ESC", ChannelTarget(platform="slack", space="T2", channel="C0ESC")),
        ("telegram:#-100123", ChannelTarget(platform="telegram", space=None, channel="-100123")),
        ("slack:U1", None),  # an account: its DM
        ("leads", None),  # a group or person
        ("slack:#", None),
    ],
)
def test_what_a_channel_target_is(entry: str, target: ChannelTarget | None) -> None:
    assert channel_target(entry) == target


def test_a_channel_without_a_space_takes_the_sessions() -> None:
    target = ChannelTarget(platform="slack", space=None, channel="C0ESC")
    assert channel_conversation(target, [ROOM]) == ESC
    assert channel_conversation(target, []).space is None


async def test_whom_a_rule_escalates_to(tmp_path: Path) -> None:
    rule = PolicyRule(escalate_after=30, escalate_to=("leads", "bob", "slack:#C0ESC"))
    groups = {"leads": ("alice", "slack:U3")}
    people = {"alice": ("slack:U1", "telegram:42"), "bob": ("slack:U2",)}
    async with Store.open(tmp_path / "data", clock=SteppingClock()) as store:
        session, epoch = await running_session(store)
        opened = await store.interactions.create(session.id, epoch, approval())
    found = escalation_of([rule], opened.interaction, groups, people)
    assert found is not None and found.after_seconds == 30
    assert found.accounts == ("slack:U1", "telegram:42", "slack:U3", "slack:U2")
    assert found.channels == (ChannelTarget(platform="slack", space=None, channel="C0ESC"),)
    assert escalation_of([PolicyRule()], opened.interaction, groups, people) is None


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with Store.open(tmp_path / "data", clock=SteppingClock()) as opened:
        yield opened


async def test_escalated_once_with_copies_and_never_after_a_decision(store: Store) -> None:
    session, epoch = await running_session(store)
    opened = await store.interactions.create(session.id, epoch, approval())
    interaction_id = opened.interaction.id
    await store.cards.add(interaction_id, ROOM)
    first = await store.escalations.record(
        interaction_id, [DM, ESC, ROOM], after_seconds=2, asked=["alice", "#C0ESC"]
    )
    assert first is not None
    assert [copy.conversation for copy in first] == [DM, ESC]  # ROOM had its copy
    again = await store.escalations.record(interaction_id, [DM], after_seconds=2, asked=[])
    assert again is None
    copies = await store.cards.list_for(interaction_id)
    assert [copy.conversation for copy in copies] == [ROOM, DM, ESC]
    [entry] = await store.audit.entries(event=ESCALATED)
    assert entry.details["asked"] == ["alice", "#C0ESC"]
    assert await store.escalations.escalated(interaction_id)
    # decided first: nothing to escalate
    other = await store.interactions.create(session.id, epoch, approval("codex:7"))
    await store.interactions.decide(
        other.interaction.id,
        expected_version=other.interaction.version,
        actor=Actor(platform="slack", user_id="U1"),
        decision=Decision(action_id="accept"),
    )
    late = await store.escalations.record(other.interaction.id, [DM], after_seconds=2, asked=[])
    assert late is None
