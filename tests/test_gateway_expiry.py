"""The expiry policy (``[projects.<p>.expiry]``): a request nobody answers in time.

Through the whole gateway and the memory platform: with the real codex app-server (against
the fake model) an unanswered command approval expires with outcome deny (the command is
not run, the model is told it was rejected) or cancel (the turn is interrupted), and a
decision made first wins; with the scripted agent (tests/scripted_launcher.py) the fallbacks
where the agent offers no such action, the default (never), and restarts. No test sleeps:
``after_seconds`` is small and each test awaits the card's change under a deadline. The
pure choice of what to write and the ledger's compare-and-set are tested at the bottom.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.config.model import ExpiryOutcome, ExpiryPolicy
from gateway.domain import (
    Action,
    ConversationRef,
    Decision,
    Effect,
    InteractionKind,
    InteractionOrigin,
    InteractionState,
    Resolution,
    Scope,
)
from gateway.errors import AlreadyDecided
from gateway.interactions.expiry import TIMED_OUT_MESSAGE, ExpiryPlan, plan_expiry
from gateway.interactions.machine import DeliveryOutcome, Interaction
from gateway.platform import Ack
from gateway.render.card_status import status_line
from gateway.sessions.engine import Gateway
from gateway.store.database import utc_now
from gateway.store.store import Store
from tests.codex_env import CodexHome
from tests.gateway_flows import (
    DONE,
    Asked,
    ask,
    count_rows,
    interaction,
    settles,
    told,
    without_hash,
)
from tests.gateway_harness import ALICE, ROOM, Running, gateway_config, running_gateway
from tests.scripted_gateway import open_card, scripted_config, scripted_gateway, with_expiry
from tests.servers.fake_responses import FakeResponses, shell
from tests.store_helpers import SteppingClock, approval, running_session

pytestmark = pytest.mark.timeout(90)

WAITED = r"\d+(\.\d)? s"  # how a card writes the time a request waited (gateway/wording.py)
FAST = ConversationRef(platform="memory", space="team", channel="fast", thread="t1")
COMMAND_ACTIONS = [
    "Allow once",
    "Always allow commands like this",
    "Deny",
    "Deny and stop the turn",
]


async def expired_ids(gw: Gateway) -> list[str]:
    return [
        e.interaction_id or "" for e in await gw.store.audit.entries(event="interaction.expired")
    ]


def record_said(record: Interaction) -> str:
    """What a card says of an expired request, after its "Timed out: "."""
    return status_line(record).removeprefix("Timed out: ")


def assert_expired(record: Interaction, after_seconds: float, outcome: str) -> None:
    """The facts of an expiry whose outcome was written: nobody decided, it timed out."""
    assert record.state is InteractionState.EXPIRED
    assert record.decision is None  # never "the user declined"
    assert record.resolution is not None
    assert (record.resolution.how, record.resolution.by) == (Resolution.EXPIRED, "gateway")
    assert record.resolution.note == outcome
    assert record.delivery is not None and record.delivery.outcome is DeliveryOutcome.OK
    deadline = record.created_at + timedelta(seconds=after_seconds)
    assert deadline <= record.resolution.at <= record.delivery.at


# --- the real codex app-server -------------------------------------------------------------


async def ask_to_touch(gw: Running, fake: FakeResponses, name: str = "hello.txt") -> Asked:
    steps = [shell(f"touch {name}", escalated=True), DONE]
    asked = await ask(gw, fake, steps, f"please create {name}")
    assert asked.first.status_line == "Waiting for a decision"
    return asked


@pytest.mark.real_agent("codex")
async def test_an_approval_nobody_answers_expires_denied_and_the_model_is_told(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    config = with_expiry(gateway_config(codex_bin, codex_home, tmp_path / "data"), 0.5)
    async with running_gateway(config) as gw:
        asked = await ask_to_touch(gw, fake_model)
        assert asked.labels == COMMAND_ACTIONS
        record = await settles(
            gw,
            asked,
            rf"Timed out: nobody answered within {WAITED} · a refusal was sent to the agent",
        )
        notice = await gw.text_where(lambda text: text.startswith("⌛"))
        await gw.text_where(lambda text: "Done." in text)  # the turn went on
        # told before the agent's reply to the refusal: the notice, then "Done."
        texts = gw.memory.texts(ROOM)
        assert texts.index(notice) < next(i for i, t in enumerate(texts) if "Done." in t)
        # the command's line stays where it started, before the card: it expired (Codex
        # reports the item "declined", but nobody declined it)
        line = await gw.text_where(lambda text: "(expired: nobody answered)" in text)
        late = await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        assert count_rows(gw, "decisions", record.id) == 0
        assert count_rows(gw, "deliveries", record.id) == 1
        assert await expired_ids(gw.gateway) == [record.id]
    assert_expired(record, 0.5, "deny")
    assert " by " not in asked.now.status_line  # nobody is said to have denied it
    assert "✗ `" in line and "(declined)" not in line
    # one short line that notifies (the card's edit does not) and points at the card,
    # which alone says what the agent was told
    assert notice == f'⌛ "Run a command" ({record.id}) timed out: its card says what became of it.'
    assert record_said(record) in asked.now.status_line and record_said(record) not in notice
    assert late == Ack(
        text=f"This request is no longer open. {without_hash(asked.now.status_line)}",
        accepted=False,
    )
    assert not (codex_home.workspace / "hello.txt").exists()
    assert "rejected" in told(fake_model)


@pytest.mark.real_agent("codex")
async def test_outcome_cancel_interrupts_the_turn(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    config = with_expiry(gateway_config(codex_bin, codex_home, tmp_path / "data"), 0.5, "cancel")
    async with running_gateway(config) as gw:
        asked = await ask_to_touch(gw, fake_model)
        record = await settles(
            gw,
            asked,
            rf"Timed out: nobody answered within {WAITED} · a refusal that stops the turn was sent"
            " to the agent",
        )
        await gw.text_where(lambda text: text == "⏹ The turn was interrupted.")
        await gw.text_where(lambda text: text.startswith("⌛"))
    assert_expired(record, 0.5, "deny and stop")
    assert not (codex_home.workspace / "hello.txt").exists()
    assert len(fake_model.model_requests()) == 1  # the model never heard back in that turn


@pytest.mark.real_agent("codex")
async def test_a_decision_made_before_the_expiry_wins(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    config = with_expiry(gateway_config(codex_bin, codex_home, tmp_path / "data"), 2.0)
    async with running_gateway(config) as gw:
        asked = await ask_to_touch(gw, fake_model)
        ack = await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        assert ack == Ack(text="Approved: Allow once. Sent to the agent.", accepted=True)
        decided = await settles(gw, asked, r'Approved \("Allow once"\) by Alice at .* · done')
        await gw.text_where(lambda text: "Done." in text)
        # a second request nobody answers expires: by then the first was overdue too
        second = await ask_to_touch(gw, fake_model, "second.txt")
        expired = await settles(
            gw,
            second,
            rf"Timed out: nobody answered within {WAITED} · a refusal was sent to the agent",
        )
        first = await interaction(gw, decided.id)
        assert await expired_ids(gw.gateway) == [expired.id]
        assert count_rows(gw, "deliveries", first.id) == 1
    assert first.state is InteractionState.RESOLVED
    assert first.decision is not None and first.decision.actor == ALICE
    assert first.resolution is not None and first.resolution.how is Resolution.ANSWERED
    assert (codex_home.workspace / "hello.txt").exists()
    assert not (codex_home.workspace / "second.txt").exists()


# --- the scripted agent --------------------------------------------------------------------


class AheadClock:
    """The gateway's injected clock: ten days ahead of the wall clock, moving with it."""

    ahead = timedelta(days=10)

    def __call__(self) -> datetime:
        return utc_now() + self.ahead


async def test_the_default_never_expires_while_an_expiring_project_does(tmp_path: Path) -> None:
    config = scripted_config(tmp_path, fast=ExpiryPolicy(after_seconds=0.2))
    async with scripted_gateway(config, clock=AheadClock()) as (gw, launcher):
        waiting = await open_card(gw, ROOM, "approve")  # project "slow": no after_seconds
        expiring = await open_card(gw, FAST, "approve")
        record = await settles(
            gw,
            expiring,
            rf"Timed out: nobody answered within {WAITED} · a refusal was sent to the agent",
        )
        # older than the one that expired, and still waiting for a person
        still = await interaction(gw, waiting.interaction.id)
        assert still.state is InteractionState.PENDING
        assert waiting.now.status_line == "Waiting for a decision"
        ack = await gw.memory.click(ROOM, ALICE, waiting.token("Approve"))
        assert ack == Ack(text="Approved. Sent to the agent.", accepted=True)
        assert await expired_ids(gw.gateway) == [record.id]
    assert_expired(record, 0.2, "deny")
    assert still.created_at < record.created_at
    assert record.created_at > datetime.now(UTC) + timedelta(days=9)  # the injected clock's
    assert launcher.received == [
        Decision(action_id="decline", message=TIMED_OUT_MESSAGE),
        Decision(action_id="accept"),
    ]


async def test_a_question_with_no_way_to_decline_expires_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    config = scripted_config(tmp_path, fast=ExpiryPolicy(after_seconds=0.2))
    async with scripted_gateway(config) as (gw, launcher):
        asked = await open_card(gw, FAST, "ask")
        why = "the agent offers no way to decline this question"
        record = await settles(
            gw,
            asked,
            rf"Timed out: nobody answered within {WAITED} · nothing was sent to the agent: {why}",
        )
        notice = await gw.text_where(lambda text: text.startswith("⌛"), FAST)
    assert notice.endswith(" timed out: its card says what became of it.")  # not why
    assert record.state is InteractionState.EXPIRED and record.decision is None
    assert record.delivery is not None
    assert record.delivery.outcome is DeliveryOutcome.SKIPPED
    assert record.delivery.error == f"not written: {why}"
    assert launcher.received == []


async def test_cancel_with_no_deny_and_stop_action_refuses_and_interrupts(
    tmp_path: Path,
) -> None:
    config = scripted_config(tmp_path, fast=ExpiryPolicy(after_seconds=0.2, outcome="cancel"))
    async with scripted_gateway(config) as (gw, launcher):
        # the question offers nothing: nothing is written, and the turn is stopped
        asked = await open_card(gw, FAST, "ask")
        await settles(
            gw,
            asked,
            rf"Timed out: nobody answered within {WAITED} · nothing was sent to the agent: .*"
            "; the turn is stopped instead",
        )
        await gw.text_where(lambda text: text == "⏹ The turn was interrupted.", FAST)
        # the approval offers a plain deny only: it is written, saying it timed out
        denied = await open_card(gw, FAST, "approve")
        record = await settles(
            gw,
            denied,
            rf"Timed out: nobody answered within {WAITED} · a refusal that stops the turn was sent"
            " to the agent",
        )
    assert_expired(record, 0.2, "deny and stop")
    assert launcher.received == [Decision(action_id="decline", message=TIMED_OUT_MESSAGE)]


async def test_after_a_restart_nothing_is_expired_twice(tmp_path: Path) -> None:
    never = scripted_config(tmp_path, fast=ExpiryPolicy())
    expiring = scripted_config(tmp_path, fast=ExpiryPolicy(after_seconds=0.2))
    async with scripted_gateway(never) as (gw, _):
        left = await open_card(gw, FAST, "approve")  # pending when the gateway stops
    async with scripted_gateway(expiring) as (gw, _):
        orphaned = await interaction(gw, left.interaction.id)
        asked = await open_card(gw, FAST, "approve")
        record = await settles(
            gw,
            asked,
            rf"Timed out: nobody answered within {WAITED} · a refusal was sent to the agent",
        )
        assert await expired_ids(gw.gateway) == [record.id]
    async with scripted_gateway(expiring) as (gw, launcher):
        await gw.memory.say(FAST, ALICE, "hello again")  # a new epoch, with its expiry task
        await gw.text_where(lambda text: text == "echo: hello again", FAST)
        assert await expired_ids(gw.gateway) == [record.id]
        assert count_rows(gw, "deliveries", record.id) == 1
        after = await interaction(gw, record.id)
        before_left = await interaction(gw, left.interaction.id)
    assert orphaned.state is InteractionState.ORPHANED  # orphaned at the restart, not expired
    assert before_left.state is InteractionState.ORPHANED
    assert after == record
    assert launcher.received == []


# --- what is written, and the compare-and-set -----------------------------------------------

DENY = Action(id="decline", label="Deny", effect=Effect.DENY)
STOP = Action(id="cancel", label="Deny and stop", effect=Effect.CANCEL)
BLOCK = Action(id="net-deny", label="Always block", effect=Effect.DENY, scope=Scope.ALWAYS)
ALLOW = Action(id="accept", label="Allow", effect=Effect.ALLOW)
NONE_OFFERED = "not written: the agent offers no way to decline this approval"


def pending(
    *actions: Action,
    native_key: str | None = "k",
    origin: InteractionOrigin = InteractionOrigin.AGENT,
) -> Interaction:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return Interaction(
        id="i1",
        session_id="s1",
        runtime_epoch=1,
        turn_id=None,
        native_key=native_key,
        origin=origin,
        kind=InteractionKind.APPROVAL,
        title="Run ls?",
        summary="",
        detail=None,
        actions=actions,
        questions=(),
        state=InteractionState.PENDING,
        version=1,
        created_at=now,
        updated_at=now,
    )


@pytest.mark.parametrize(
    ("actions", "outcome", "expected"),
    [
        ((ALLOW, DENY, STOP), "deny", ExpiryPlan(action=DENY, interrupt=False, outcome="deny")),
        (
            (ALLOW, DENY, STOP),
            "cancel",
            ExpiryPlan(action=STOP, interrupt=False, outcome="deny and stop"),
        ),
        # a standing rule is never what a timeout writes
        ((ALLOW, BLOCK, DENY), "deny", ExpiryPlan(action=DENY, interrupt=False, outcome="deny")),
        (
            (ALLOW, BLOCK),
            "deny",
            ExpiryPlan(action=None, interrupt=False, outcome="", not_written=NONE_OFFERED),
        ),
        # the only refusal offered stops the turn too
        ((ALLOW, STOP), "deny", ExpiryPlan(action=STOP, interrupt=False, outcome="deny and stop")),
        # no deny-and-stop offered: the plain refusal, then the turn's interrupt
        ((ALLOW, DENY), "cancel", ExpiryPlan(action=DENY, interrupt=True, outcome="deny and stop")),
        (
            (ALLOW,),
            "cancel",
            ExpiryPlan(
                action=None,
                interrupt=True,
                outcome="",
                not_written=f"{NONE_OFFERED}; the turn is stopped instead",
            ),
        ),
    ],
)
def test_what_an_expiry_writes(
    actions: tuple[Action, ...], outcome: str, expected: ExpiryPlan
) -> None:
    assert plan_expiry(pending(*actions), ExpiryOutcome(outcome)) == expected


def test_a_gateway_plan_expires_without_a_write() -> None:
    plan = plan_expiry(
        pending(ALLOW, DENY, native_key=None, origin=InteractionOrigin.PLAN), ExpiryOutcome.CANCEL
    )
    assert plan.action is None and plan.decision is None and not plan.interrupt
    assert plan.not_written == "not written: the gateway's own plan has no agent request to answer"


def test_a_setting_change_expires_without_a_write_and_changes_nothing() -> None:
    asked = pending(ALLOW, DENY, native_key="setting:x", origin=InteractionOrigin.SETTING)
    plan = plan_expiry(asked, ExpiryOutcome.DENY)
    assert plan.action is None and plan.decision is None and not plan.interrupt
    assert plan.not_written == "nothing changed: nobody accepted it in time"


async def test_a_decision_and_an_expiry_in_the_same_instant_exactly_one_wins(
    tmp_path: Path,
) -> None:
    winners: set[str] = set()
    async with Store.open(tmp_path / "data", clock=SteppingClock()) as store:
        session, epoch = await running_session(store)
        for n in range(6):
            opened = await store.interactions.create(session.id, epoch, approval(f"k{n}"))
            first = opened.interaction
            decide = store.interactions.decide(
                first.id,
                expected_version=first.version,
                actor=ALICE,
                decision=Decision(action_id="accept"),
            )
            expire = store.interactions.expire(
                first.id, expected_version=first.version, outcome="deny"
            )
            if n % 2:  # either may reach the ledger first
                expired, decided = await asyncio.gather(expire, decide, return_exceptions=True)
            else:
                decided, expired = await asyncio.gather(decide, expire, return_exceptions=True)
            record = await store.interactions.get(first.id)
            assert record is not None
            if isinstance(decided, Interaction):  # the person was first: nothing expired
                assert expired is None
                assert record.state is InteractionState.DECIDED
                winners.add("decision")
            else:
                assert isinstance(decided, AlreadyDecided) and decided.state == "expired"
                assert expired is not None and record.state is InteractionState.EXPIRED
                assert record.decision is None
                winners.add("expiry")
        # decided or ended: never expired afterwards
        for later in await store.interactions.list_recent(session_id=session.id):
            assert later.state is not InteractionState.PENDING
            again = await store.interactions.expire(
                later.id, expected_version=later.version, outcome="deny"
            )
            assert again is None
    assert winners == {"decision", "expiry"}
