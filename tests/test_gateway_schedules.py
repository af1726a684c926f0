"""Scheduled work through the whole gateway (issue 35): the memory platform, the scripted agent
(tests/scripted_launcher.py), a real SQLite ledger, and the scheduler's clock in a file the test
sets (gateway/clock.py). Asserted on what the chat shows and what the ledger recorded:
/every, /at, /schedules and /unschedule, their refusals, a run ("⏰ scheduled: TEXT", a fresh
session, "schedule S1 by Alice" as who asked), and the runs skipped and said."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.cards import Card
from gateway.clock import FileClock
from gateway.config.model import Config
from gateway.domain import Actor, ConversationRef, InteractionState
from platforms.memory.platform import Rendered
from platforms.registry import parse_config
from tests.forgery import tampered
from tests.gateway_flows import session_of
from tests.gateway_harness import ALICE, BOB, ROOM, Running
from tests.scripted_gateway import scripted_gateway
from tests.scripted_launcher import ScriptedLauncher

pytestmark = pytest.mark.timeout(60)

CAROL = Actor(platform="memory", user_id="carol", display="Carol")  # may talk, not approve
OTHER = ConversationRef(platform="memory", space="team", channel="ops", thread="t9")
START = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # a Friday; Berlin springs forward Sunday


def config(
    tmp_path: Path,
    *,
    extra: str = "",
    approvers: str = '["alice", "bob"]',
    demo: str = "",
    tail: str = "",
) -> Config:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    text = f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}
stop_grace_seconds = 5
{extra}

[projects.ops]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"
time_zone = "Europe/Berlin"

[projects.ops.auth.memory]
allow_from = ["alice", "bob", "carol"]
approvers = {approvers}
channels = ["ops"]

[projects.demo]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"
time_zone = "Europe/Berlin"
{demo}

[projects.demo.auth.memory]
allow_from = ["alice", "bob", "carol"]
approvers = {approvers}

[platforms.memory]
{tail}
"""
    return parse_config(text, "test.toml")


@asynccontextmanager
async def gateway(
    tmp_path: Path, **options: str
) -> AsyncIterator[tuple[Running, FileClock, ScriptedLauncher]]:
    clock = FileClock(tmp_path / "clock")
    clock.set(START)
    config_ = config(tmp_path, **options)
    async with scripted_gateway(config_, schedule_clock=clock) as (gw, launcher):
        yield gw, clock, launcher


async def reply_to(
    gw: Running, text: str, conversation: ConversationRef = ROOM, *, by: Actor = ALICE
) -> str:
    before = len(gw.memory.texts(conversation))
    await gw.memory.say(conversation, by, text)
    [reply] = await gw.memory.wait_for(lambda: gw.memory.texts(conversation)[before:] or None)
    return reply


def audit_export(data_dir: Path, project: str) -> list[dict[str, object]]:
    """What ``agent-gateway audit`` exports of ``project`` (JSON lines)."""
    run = subprocess.run(
        [
            *(sys.executable, "-m", "gateway", "audit", "--data-dir", str(data_dir)),
            *("--since", "2000-01-01", "--project", project),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()]


def now_card(gw: Running, shown: Rendered, conversation: ConversationRef = ROOM) -> Card:
    """The card ``shown`` as the platform shows it now (edits included)."""
    [now] = [m for m in gw.memory.cards(conversation) if m.ref == shown.ref]
    assert now.card is not None
    return now.card


async def listing(gw: Running, conversation: ConversationRef = ROOM) -> list[Rendered]:
    """Ask /schedules; the cards it shows, one per schedule (after its closing line)."""
    before = {shown.ref.message_id for shown in gw.memory.messages(conversation)}
    await gw.memory.say(conversation, ALICE, "/schedules")
    closing = "/unschedule ID deletes one; the buttons pause, resume or delete."
    await gw.text_where(lambda said: said == closing, conversation)
    return [
        shown
        for shown in gw.memory.cards(conversation)
        if shown.ref.message_id not in before and shown.card is not None
    ]


def summaries(cards: list[Rendered]) -> str:
    return "\n".join(shown.card.summary for shown in cards if shown.card is not None)


async def at(gw: Running, clock: FileClock, moment: datetime) -> None:
    """Move the scheduler's clock to ``moment`` and let it make one pass."""
    clock.set(moment)
    assert gw.gateway.scheduler is not None
    await gw.gateway.scheduler.tick()


async def test_every_makes_a_schedule_and_its_run_says_it_and_runs_in_a_fresh_session(
    tmp_path: Path,
) -> None:
    async with gateway(tmp_path) as (gw, clock, launcher):
        await gw.memory.say(ROOM, ALICE, "hello")
        await gw.text_where(lambda said: said == "echo: hello")
        await launcher.turn_over.wait()  # else the run is skipped: the session still works
        first_session = await session_of(gw)
        made = await reply_to(gw, "/every 30 2 * * * run the tests and say what broke")
        assert made.splitlines()[0] == (
            "⏰ Schedule S1 made: every 30 2 * * * (Europe/Berlin), next run"
            " 2026-03-28 02:30 CET (01:30 UTC)."
        )
        assert made.splitlines()[1].startswith(
            "Each run gives the agent “run the tests and say what broke” in a fresh session;"
        )
        launcher.turn_over.clear()
        await at(gw, clock, datetime(2026, 3, 28, 1, 30, tzinfo=UTC))
        await gw.text_where(lambda said: said == "⏰ scheduled: run the tests and say what broke")
        await gw.text_where(lambda said: said == "echo: run the tests and say what broke")
        await launcher.turn_over.wait()
        [run] = await gw.gateway.store.schedules.runs(1)
        assert run.session_id is not None
        run_session = await gw.gateway.store.sessions.get(run.session_id)
        assert run_session is not None
        assert run_session.id != first_session.id  # a fresh session: no grant, no mode kept
        assert run_session.initiator == ALICE
        runs = await gw.gateway.store.audit.entries(event="schedule.run")
        assert [entry.actor for entry in runs] == ["memory:alice"]
        # spring forward: the 02:30 that does not exist runs at 03:00 CEST, right after
        listed = summaries(await listing(gw))
        assert "next 2026-03-29 03:00 CEST (01:00 UTC)" in listed
        # its echo is shown: the turn is ending or ended
        assert re.search(
            r"last 2026-03-28 02:30 CET \(01:30 UTC\), (running|done) · by Alice", listed
        )
        await at(gw, clock, datetime(2026, 3, 29, 1, 0, tzinfo=UTC))
        await gw.wait_for(
            lambda: (
                gw.memory.texts(ROOM).count("echo: run the tests and say what broke") == 2 or None
            )
        )
        assert "last 2026-03-29 03:00 CEST (01:00 UTC)" in summaries(await listing(gw))
        await at(gw, clock, datetime(2026, 3, 29, 1, 1, tzinfo=UTC))  # a pass settles runs
        runs = await gw.gateway.store.schedules.runs(1)
        assert [run.due_at for run in runs] == [
            datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
            datetime(2026, 3, 28, 1, 30, tzinfo=UTC),
        ]
        assert runs[1].state.value == "done"


async def test_the_author_of_a_run_is_the_schedule_by_its_creator(tmp_path: Path) -> None:
    async with gateway(tmp_path) as (gw, clock, _):
        await reply_to(gw, "/at in 2h summarize the open PRs")
        await at(gw, clock, START + timedelta(hours=2))
        await gw.text_where(lambda said: said == "echo: summarize the open PRs")
        session = await session_of(gw)
        timeline = await gw.gateway.store.timeline.of_session(session.id)
        [turn] = timeline
        assert turn.prompt is not None
        assert turn.prompt.author.display == "schedule S1 by Alice"
        assert "S1: once (Europe/Berlin) · no next run · last" in summaries(await listing(gw))


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("/every 0 25 * * * x", "Not scheduled: the hour field `25` is not valid in `0 25 * * *`."),
        ("/every 0 9 * * 1-5", "Not scheduled: say what the agent should do, after the time."),
        (
            "/every */2 * * * * poll",
            "Not scheduled: `*/2 * * * *` would run every 2 minutes at its most frequent;"
            " schedules here run at most every 5 minutes.",
        ),
        (
            "/every * 9 * * * burst",
            "Not scheduled: `* 9 * * *` would run every 1 minute at its most frequent;"
            " schedules here run at most every 5 minutes.",
        ),
        (
            "/at 2026-03-01 09:00 late",
            "Not scheduled: 2026-03-01 09:00 (Europe/Berlin) has passed.",
        ),
        ("/at soon do it", "Not scheduled: not a time: `soon` (HH:MM, YYYY-MM-DD HH:MM or in 2h)."),
        ("/at 25:00 do it", "Not scheduled: 25:00 is no valid time."),
        ("/at 2026-02-30 10:00 do it", "Not scheduled: 2026-02-30 10:00 is no valid date."),
        (
            "/at",
            "Usage: /at WHEN TEXT, WHEN being HH:MM, YYYY-MM-DD HH:MM or in 2h (in 90m, in 1d)."
            " Example: /at 18:00 summarize today's failed builds",
        ),
    ],
)
async def test_bad_input_is_refused_and_says_why(tmp_path: Path, typed: str, said: str) -> None:
    async with gateway(tmp_path) as (gw, _, _):
        assert (await reply_to(gw, typed)).splitlines()[0] == said
        assert await gw.gateway.store.schedules.of_project("demo") == []


async def test_limits_who_may_and_another_projects_schedule(tmp_path: Path) -> None:
    extra = "schedule_max_per_project = 1\nschedule_text_max_chars = 20"
    async with gateway(tmp_path, extra=extra) as (gw, _, _):
        assert (await reply_to(gw, "/every @daily x", by=CAROL)).startswith(
            "Only an approver of project demo (or one of its schedulers) may make schedules"
        )
        too_long = await reply_to(gw, "/every @daily " + "y" * 21)
        assert too_long.splitlines()[0] == (
            "Not scheduled: the text is 21 characters; a scheduled prompt is at most 20."
        )
        made = await reply_to(gw, "/every @daily check CI")
        assert made.startswith("⏰ Schedule S1 made: every @daily: 0 0 * * * (Europe/Berlin)")
        full = await reply_to(gw, "/every weekdays check CI")
        assert full == (
            "Not scheduled: project demo has 1 schedules already (the most it may have):"
            " delete one first."
        )
        elsewhere = await reply_to(gw, "/unschedule S1", OTHER)
        assert elsewhere == (
            "Schedule S1 is not a schedule of project ops: it is changed only from a"
            " conversation of its own project."
        )
        assert (await reply_to(gw, "/unschedule S1", by=CAROL)).startswith(
            "Only an approver of project demo (or one of its schedulers) may delete schedules"
        )
        assert await reply_to(gw, "/unschedule S1", by=BOB) == (
            "Schedule S1 deleted: it runs no more."
        )
        assert await reply_to(gw, "/unschedule S1") == (
            "No schedule S1: /schedules lists this project's."
        )
        events = [entry.event for entry in await gw.gateway.store.audit.entries()]
        assert events.count("schedule.created") == 1 and "schedule.deleted" in events
    # `agent-gateway audit` lists each change of a schedule, and who made it
    changes = audit_export(tmp_path / "data", "demo")
    assert [(c["kind"], c["title"], c["asked_by"]) for c in changes] == [
        ("schedule", "schedule.created S1", "memory:alice"),
        ("schedule", "schedule.deleted S1", "memory:bob"),
    ]
    assert changes[0]["summary"] == "S1: every 0 0 * * * (Europe/Berlin): check CI"


async def test_a_run_due_while_the_last_ones_card_waits_is_skipped_and_said(
    tmp_path: Path,
) -> None:
    async with gateway(tmp_path) as (gw, clock, _):
        await reply_to(gw, "/every 0 */1 * * * approve")
        await at(gw, clock, datetime(2026, 3, 27, 13, 0, tzinfo=UTC))
        card = await gw.card_where(lambda card: "Run ls?" in card.title)
        # Carol may talk but not decide: the scheduled run's request waits for an approver
        allow = next(a for a in card.card.actions if a.label.startswith("Approve"))
        refused = await gw.memory.click(ROOM, CAROL, allow.token)
        assert not refused.accepted
        await at(gw, clock, datetime(2026, 3, 27, 14, 0, tzinfo=UTC))
        await gw.text_where(
            lambda said: (
                said == "⏰ Schedule S1: the run of 2026-03-27 15:00 CET (14:00 UTC) was skipped:"
                " a request of the conversation's session still waits for a decision."
            )
        )
        session = await session_of(gw)
        [waiting] = await gw.gateway.store.interactions.list_open(session.id)
        assert waiting.state is InteractionState.PENDING
        runs = await gw.gateway.store.schedules.runs(1)
        assert [run.state.value for run in runs] == ["skipped", "started"]
    # the audit export says who asked the run's request: the schedule, by its creator
    [asked] = [r for r in audit_export(tmp_path / "data", "demo") if r["kind"] == "approval"]
    assert asked["asked_by"] == "schedule S1 by memory:alice"


async def test_a_run_that_meets_a_held_queue_is_skipped_and_said(tmp_path: Path) -> None:
    async with gateway(tmp_path) as (gw, clock, _):
        await reply_to(gw, "/every 0 */1 * * * check CI")
        await gw.memory.say(ROOM, ALICE, "approve")
        await gw.card_where(lambda card: "Run ls?" in card.title)
        await gw.memory.say(ROOM, ALICE, "and then this")
        await reply_to(gw, "/stop")
        session = await session_of(gw)
        assert await gw.gateway.store.prompts.list_held(session.id)
        await at(gw, clock, datetime(2026, 3, 27, 13, 0, tzinfo=UTC))
        said = await gw.text_where(lambda said: said.startswith("⏰ Schedule S1: the run of"))
        assert said.endswith(
            "was skipped: the conversation's queue is held (after /stop or a restart):"
            " /resume or /clear."
        )
        assert "⏰ scheduled: check CI" not in gw.memory.texts(ROOM)


async def test_the_buttons_pause_resume_and_delete_for_an_approver_only(tmp_path: Path) -> None:
    async with gateway(tmp_path) as (gw, clock, _):
        await reply_to(gw, "/every 0 9 * * * check CI")
        [shown] = await listing(gw)
        assert shown.card is not None and shown.card.title == "⏰ Schedule S1"
        pause, delete = shown.card.actions
        assert (pause.label, delete.label) == ("Pause", "Delete")
        refused = await gw.memory.click(ROOM, CAROL, pause.token)
        assert not refused.accepted
        assert refused.text.startswith(
            "Only an approver of project demo (or one of its schedulers) may pause or resume"
        )
        elsewhere = await gw.memory.click(OTHER, ALICE, pause.token)
        assert not elsewhere.accepted and "not a schedule of project ops" in elsewhere.text
        forged = await gw.memory.click(ROOM, ALICE, tampered(pause.token))
        assert (forged.accepted, forged.text) == (False, "This button is not valid.")
        paused = await gw.memory.click(ROOM, BOB, pause.token)
        assert paused.accepted and paused.text == (
            "Schedule S1 paused: it runs no more until resumed."
        )
        # the pressed card is redrawn: it says so, and offers Resume
        redrawn = now_card(gw, shown)
        assert "paused" in redrawn.summary
        assert [a.label for a in redrawn.actions] == ["Resume", "Delete"]
        await at(gw, clock, datetime(2026, 3, 28, 8, 0, tzinfo=UTC))  # 09:00 CET: paused
        assert "⏰ scheduled: check CI" not in gw.memory.texts(ROOM)
        [shown] = await listing(gw)
        assert shown.card is not None and "paused" in shown.card.summary
        resume, delete = shown.card.actions
        assert resume.label == "Resume"
        resumed = await gw.memory.click(ROOM, ALICE, resume.token)
        assert resumed.text == ("Schedule S1 resumed: next run 2026-03-29 09:00 CEST (07:00 UTC).")
        deleted = await gw.memory.click(ROOM, ALICE, delete.token)
        assert deleted.text == "Schedule S1 deleted: it runs no more."
        gone = now_card(gw, shown)
        assert (gone.summary, gone.actions) == ("Deleted by Alice.", ())
        events = [entry.event for entry in await gw.gateway.store.audit.entries()]
        assert {"schedule.paused", "schedule.resumed", "schedule.deleted"} <= set(events)
        assert events.count("schedule.click_refused") == 3


CHANNEL = ConversationRef(platform="memory", space="team", channel="room")


def configured(tmp_path: Path, *entries: tuple[str, str, str], session: str = "") -> Config:
    """The test's config with ``[[projects.demo.schedule]]`` entries (name, cron, creator),
    each run in the session named ``session`` if given."""
    base = config(tmp_path)
    text = "\n".join(
        f'[[projects.x.schedule]]\nname = "{name}"\ncron = "{cron}"\n'
        f'text = "{name} now"\nchannel = "memory:#team/room"\ncreator = "{creator}"\n'
        + (f'session = "{session}"\n' if session else "")
        for name, cron, creator in entries
    )
    parsed = parse_config(f"[projects.x]\nwork_dir = '.'\nagent = 'codex-app-server'\n{text}")
    schedule = parsed.projects["x"].schedule
    demo = base.projects["demo"].model_copy(update={"schedule": schedule})
    return base.model_copy(update={"projects": {**base.projects, "demo": demo}})


async def test_config_schedules_are_kept_by_name_across_restarts_and_read_only_in_chat(
    tmp_path: Path,
) -> None:
    clock = FileClock(tmp_path / "clock")
    clock.set(START)
    first = configured(
        tmp_path, ("tests", "0 9 * * 1-5", "memory:alice"), ("nightly", "@daily", "memory:dave")
    )
    async with scripted_gateway(first, schedule_clock=clock) as (gw, _):
        cards = await listing(gw, CHANNEL)
        assert [shown.card.title for shown in cards if shown.card] == [
            "⏰ Schedule tests",
            "⏰ Schedule nightly",
        ]
        assert all(shown.card and not shown.card.actions for shown in cards)
        tests_id = (await gw.gateway.store.schedules.of_project("demo"))[0].id
        refused = await reply_to(gw, f"/unschedule S{tests_id}", CHANNEL)
        assert refused == (
            "Schedule tests comes from the config file ([[projects.demo.schedule]]):"
            " change it there."
        )
        # Monday 09:00 CET: "tests" runs as Alice; "nightly" ran at midnight as Dave, who may
        # not talk to the project: skipped and said
        await at(gw, clock, datetime(2026, 3, 28, 0, 0, tzinfo=UTC) - timedelta(hours=1))
        await gw.text_where(
            lambda said: (
                said.startswith("⏰ Schedule nightly: the run of 2026-03-28 00:00 CET")
                and said.endswith("its creator dave may no longer talk to project demo.")
            ),
            CHANNEL,
        )
        await at(gw, clock, datetime(2026, 3, 30, 7, 0, tzinfo=UTC))
        await gw.text_where(lambda said: said == "echo: tests now", CHANNEL)
    # the file changes: "nightly" goes, "tests" moves to 10:00; the same schedule, its id kept
    second = configured(tmp_path, ("tests", "0 10 * * 1-5", "memory:alice"))
    async with scripted_gateway(second, schedule_clock=clock) as (gw, _):
        [kept] = await gw.gateway.store.schedules.of_project("demo")
        assert (kept.id, kept.cron) == (tests_id, "0 10 * * 1-5")
        assert kept.next_at == datetime(2026, 3, 30, 8, 0, tzinfo=UTC)
        events = [entry.event for entry in await gw.gateway.store.audit.entries()]
        assert "schedule.config_removed" in events and "schedule.config_changed" in events


async def test_a_scheduled_approve_command_is_a_prompt_never_a_decision(tmp_path: Path) -> None:
    async with gateway(tmp_path) as (gw, clock, _):
        await gw.memory.say(OTHER, ALICE, "approve")  # a card waits in project ops
        shown = await gw.card_where(lambda card: "Run ls?" in card.title, OTHER)
        session = await session_of(gw, OTHER)
        [waiting] = await gw.gateway.store.interactions.list_open(session.id)
        await reply_to(gw, f"/every @hourly /approve {waiting.id}", OTHER)
        await reply_to(gw, f"/at in 1h /approve {waiting.id}")  # and in another conversation
        await at(gw, clock, START + timedelta(hours=1))
        await gw.text_where(lambda said: said == f"echo: /approve {waiting.id}")
        [still] = await gw.gateway.store.interactions.list_open(session.id)
        assert still.state is InteractionState.PENDING and still.decision is None
        assert shown.card is not None and shown.card.actions  # its buttons are still there
        # the run in the card's own conversation was not even started: a card waits there
        assert any(
            said.endswith("a request of the conversation's session still waits for a decision.")
            for said in gw.memory.texts(OTHER)
        )


async def test_a_scheduler_who_is_not_an_approver_may_make_and_delete_schedules(
    tmp_path: Path,
) -> None:
    leads = '[groups]\nops-leads = ["memory:carol"]'
    async with gateway(tmp_path, demo='schedulers = ["ops-leads"]', tail=leads) as (gw, _, _):
        made = await reply_to(gw, "/every @daily check CI", by=CAROL)
        assert made.startswith("⏰ Schedule S1 made")
        assert await reply_to(gw, "/unschedule S1", by=CAROL) == (
            "Schedule S1 deleted: it runs no more."
        )


async def test_a_config_schedule_runs_in_its_named_session_until_it_holds_a_grant(
    tmp_path: Path,
) -> None:
    clock = FileClock(tmp_path / "clock")
    clock.set(START)
    hourly = configured(tmp_path, ("checks", "0 * * * *", "memory:alice"), session="ops")
    async with scripted_gateway(hourly, schedule_clock=clock) as (gw, launcher):
        await gw.memory.say(CHANNEL, ALICE, "hello")
        await gw.text_where(lambda said: said == "echo: hello", CHANNEL)
        await launcher.turn_over.wait()
        await reply_to(gw, "/name ops", CHANNEL)
        named = await session_of(gw, CHANNEL)
        launcher.turn_over.clear()
        await at(gw, clock, datetime(2026, 3, 27, 13, 0, tzinfo=UTC))
        await gw.text_where(lambda said: said == "echo: checks now", CHANNEL)
        await launcher.turn_over.wait()
        assert (await session_of(gw, CHANNEL)).id == named.id  # the named one, not a fresh one
        # a person gives the session a grant: the next run does not inherit it
        await gw.memory.say(CHANNEL, ALICE, "approve")
        card = await gw.card_where(lambda card: "Run ls?" in card.title, CHANNEL)
        assert card.card is not None
        for_session = next(a for a in card.card.actions if a.label == "Approve for session")
        launcher.turn_over.clear()
        assert (await gw.memory.click(CHANNEL, ALICE, for_session.token)).accepted
        await launcher.turn_over.wait()
        await at(gw, clock, datetime(2026, 3, 27, 14, 0, tzinfo=UTC))
        await gw.text_where(
            lambda said: said.endswith(
                "was skipped: session “ops” holds a grant a person gave (/grants, /revoke)."
            ),
            CHANNEL,
        )
        assert gw.memory.texts(CHANNEL).count("echo: checks now") == 1


async def test_a_run_over_gives_the_conversation_back_to_the_persons_session(
    tmp_path: Path,
) -> None:
    async with gateway(tmp_path) as (gw, clock, launcher):
        await gw.memory.say(ROOM, ALICE, "hello")
        await gw.text_where(lambda said: said == "echo: hello")
        await launcher.turn_over.wait()
        mine = await session_of(gw)
        await reply_to(gw, "/at in 2h summarize the open PRs")
        await at(gw, clock, START + timedelta(hours=2))
        await gw.text_where(lambda said: said == "echo: summarize the open PRs")
        back = await gw.text_where(lambda said: said.startswith("⏰ Schedule S1's run is over"))
        [run] = await gw.gateway.store.schedules.runs(1)
        assert run.session_id is not None and run.session_id != mine.id
        assert back == (
            "⏰ Schedule S1's run is over: this conversation is back to the session it showed"
            f" before ({mine.id}). /sessions lists the run's ({run.session_id})."
        )
        # Alice's next message goes on in her session, not the run's
        await reply_to(gw, "and now mine")
        assert (await session_of(gw)).id == mine.id
        turns = await gw.gateway.store.timeline.of_session(mine.id)
        assert [turn.prompt.text for turn in turns if turn.prompt] == ["hello", "and now mine"]
        handed = await gw.gateway.store.audit.entries(event="schedule.handed_back")
        assert [entry.session_id for entry in handed] == [mine.id]


async def test_a_run_someone_talked_to_keeps_the_conversation(tmp_path: Path) -> None:
    async with gateway(tmp_path) as (gw, clock, launcher):
        await gw.memory.say(ROOM, ALICE, "hello")
        await gw.text_where(lambda said: said == "echo: hello")
        await launcher.turn_over.wait()
        mine = await session_of(gw)
        await reply_to(gw, "/at in 2h summarize the open PRs")
        launcher.may_end.clear()  # the run's turn goes on until Alice has answered it
        await at(gw, clock, START + timedelta(hours=2))
        await gw.text_where(lambda said: said == "echo: summarize the open PRs")
        await gw.memory.say(ROOM, ALICE, "and the closed ones")  # to the run's session
        launcher.may_end.set()
        await gw.text_where(lambda said: said == "echo: and the closed ones")
        await at(gw, clock, START + timedelta(hours=2, minutes=1))  # a pass settles the run
        ran = await session_of(gw)
        assert ran.id != mine.id
        assert not [t for t in gw.memory.texts(ROOM) if "run is over" in t]
