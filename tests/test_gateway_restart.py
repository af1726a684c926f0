"""Durability with real process deaths (issue "[2 of 6]").

The gateway runs in a process of its own (tests/harness/gateway_proc.py) so that it can really
die: killed with SIGKILL, or ended with ``os._exit`` at a crash point between a commit and the
write that follows it (gateway/sessions/faults.py). A new process on the same data dir then
recovers.
Agents run in their own process groups and outlive the gateway, as in a real crash.

What a person would notice is what is asserted: nothing delivered twice (the agent ran the
command at most once), nothing lost silently (the ledger keeps the decision and says how the
interaction ended), every card copy edited to say so with no live buttons, a queued prompt that
waits for /resume, the in-flight prompt not resent, and the conversation resumed.

The misbehaving agents (tests/agents/codex_scripted.py) run inside the whole gateway next to a
second, healthy project: each failure is visible in its conversation, and the other
conversation keeps working.

The real-Codex crash-point and SIGKILL tests run on both ledgers (``ledger``: SQLite in the
data dir, and a PostgreSQL database on the throwaway cluster, issue 18).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import pytest

from gateway.config.ledger_url import PgTarget
from gateway.domain import InteractionState, Resolution, TurnStatus
from gateway.interactions.expiry import waited as waited_text
from gateway.interactions.machine import DeliveryOutcome, Interaction
from gateway.session_record import SessionRecord
from gateway.sessions.faults import CRASH_EXIT_CODE
from gateway.store.records import CopyState, PromptRecord, PromptState, TurnRecord
from tests.codex_env import CodexHome
from tests.gateway_flows import without_hash
from tests.harness.driver import (
    GatewayProcess,
    ProjectSpec,
    Shown,
    codex_project,
    conv_json,
    end_leftover_agents,
    gateway_process,
    open_ledger,
    process_alive,
    room,
    scripted_project,
    write_config,
)
from tests.servers.fake_responses import FakeResponses, ModelRequest, message, shell

pytestmark = pytest.mark.timeout(120)

BROKEN = room("broken")
HEALTHY = room("healthy")


# --- reading the ledger once the gateway is down -------------------------------------------------


@dataclass
class Ledger:
    sessions: list[SessionRecord]
    interactions: list[Interaction]
    prompts: list[PromptRecord]


async def read_ledger(data_dir: Path, session_id: str | None = None) -> Ledger:
    async with open_ledger(data_dir) as store:
        sessions = await store.sessions.list_sessions(include_closed=True)
        interactions = await store.interactions.list_recent(limit=100, session_id=session_id)
        prompts = []
        prompt_id = 1
        while (prompt := await store.prompts.get(prompt_id)) is not None:
            prompts.append(prompt)
            prompt_id += 1
    return Ledger(sessions=sessions, interactions=interactions[::-1], prompts=prompts)


async def assert_every_copy_current(data_dir: Path, interaction: Interaction) -> None:
    """Every card copy was sent and shows the interaction as the ledger has it now."""
    async with open_ledger(data_dir) as store:
        copies = await store.cards.list_for(interaction.id)
    assert copies, "the card was never recorded as shown"
    for copy in copies:
        assert copy.state in (CopyState.SENT, CopyState.EDITED), copy
        assert copy.rendered_version == interaction.version, copy


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def cleanup(data_dir: Path) -> AsyncIterator[None]:
    """Whatever a failed test leaves alive (agents of a dead gateway) is ended."""
    yield
    await end_leftover_agents(data_dir)


# --- scripted misbehaving agents, next to a healthy project ------------------------------------


def two_projects(tmp_path: Path, data_dir: Path, broken_mode: str) -> Path:
    """The broken project's agent writes what it was asked to ``tmp_path/prompts.jsonl``."""
    log = tmp_path / "prompts.jsonl"
    projects: list[ProjectSpec] = [
        scripted_project(
            "broken", broken_mode, tmp_path / "broken", channel="broken", prompt_log=log
        ),
        scripted_project("healthy", "normal", tmp_path / "healthy", channel="healthy"),
    ]
    return write_config(tmp_path / "gateway.toml", data_dir, projects)


async def healthy_still_works(gw: GatewayProcess, text: str = "are you there?") -> None:
    await gw.say(HEALTHY, "bob", text)
    await gw.text_containing(f"echo: {text}", HEALTHY)


def session_of(ledger: Ledger, project: str) -> SessionRecord:
    [session] = [s for s in ledger.sessions if s.project == project]
    return session


async def test_scripted_agent_round_trip(tmp_path: Path, data_dir: Path, cleanup: None) -> None:
    config = two_projects(tmp_path, data_dir, "normal")
    async with gateway_process(config, tmp_path / "logs") as gw:
        await gw.say(BROKEN, "alice", "approve this")
        shown = await gw.card_where(lambda card: bool(card["actions"]), BROKEN)
        assert shown.card is not None
        ack = await gw.click(BROKEN, "alice", shown.card["actions"][0]["token"])
        assert ack["accepted"], ack
        await gw.text_containing('decision: "accept"', BROKEN)
        await healthy_still_works(gw)


async def test_agent_dies_with_an_approval_pending(
    tmp_path: Path, data_dir: Path, cleanup: None
) -> None:
    config = two_projects(tmp_path, data_dir, "normal")
    async with gateway_process(config, tmp_path / "logs") as gw:
        await gw.say(BROKEN, "alice", "approve-then-die please")
        orphaned = await gw.card_where(
            lambda card: "before anyone answered" in card["status_line"], BROKEN
        )
        assert orphaned.card is not None and orphaned.card["actions"] == []
        notice = await gw.text_containing("agent process ended", BROKEN)
        assert "exited with code 9" in notice and "dying on purpose" in notice, notice
        await healthy_still_works(gw)
        await gw.say(BROKEN, "alice", "hello again")
        await gw.text_containing("echo: hello again", BROKEN)
    ledger = await read_ledger(data_dir)
    session = session_of(ledger, "broken")
    assert session.current_epoch == 2  # the next message started a new runtime
    asked = [json.loads(line) for line in (tmp_path / "prompts.jsonl").read_text().splitlines()]
    assert [a["text"] for a in asked] == ["approve-then-die please", "hello again"]
    assert asked[0]["pid"] != asked[1]["pid"]
    # ... which resumed the thread the dead process had started
    assert session.native_session_id == f"thread-scripted-{asked[0]['pid']}"
    [interaction] = [i for i in ledger.interactions if i.session_id == session.id]
    assert interaction.state is InteractionState.ORPHANED
    assert interaction.runtime_epoch == 1
    await assert_every_copy_current(data_dir, interaction)


async def test_a_malformed_line_is_a_warning_and_the_session_goes_on(
    tmp_path: Path, data_dir: Path, cleanup: None
) -> None:
    config = two_projects(tmp_path, data_dir, "normal")
    async with gateway_process(config, tmp_path / "logs") as gw:
        await gw.say(BROKEN, "alice", "malformed please")
        warning = await gw.text_containing("malformed", BROKEN)
        assert "not JSON" in warning
        await gw.text_containing("still here after a malformed line", BROKEN)
        await gw.say(BROKEN, "alice", "and now?")
        await gw.text_containing("echo: and now?", BROKEN)
        await healthy_still_works(gw)
        assert not any("agent process ended" in t for t in gw.texts(BROKEN))
    ledger = await read_ledger(data_dir)
    assert session_of(ledger, "broken").current_epoch == 1


async def test_a_20_mib_line_stops_the_agent_with_a_visible_reason(
    tmp_path: Path, data_dir: Path, cleanup: None
) -> None:
    config = two_projects(tmp_path, data_dir, "normal")
    async with gateway_process(config, tmp_path / "logs") as gw:
        await gw.say(BROKEN, "alice", "huge line please")
        notice = await gw.text_containing("agent process ended", BROKEN)
        assert "a line too long" in notice, notice
        assert not any("huge line went through" in t for t in gw.texts(BROKEN))
        await healthy_still_works(gw)
        await gw.say(BROKEN, "alice", "are you back?")
        await gw.text_containing("echo: are you back?", BROKEN)
    ledger = await read_ledger(data_dir)
    states = {p.text: p.state for p in ledger.prompts}
    assert states["huge line please"] is PromptState.INTERRUPTED


async def test_an_agent_that_never_answers_initialize_could_not_start(
    tmp_path: Path, data_dir: Path, cleanup: None
) -> None:
    config = two_projects(tmp_path, data_dir, "silent-init")
    async with gateway_process(config, tmp_path / "logs", handshake_timeout=3) as gw:
        await gw.say(BROKEN, "alice", "hello?")
        await healthy_still_works(gw)
        notice = await gw.text_containing("could not start", BROKEN)
        assert "did not start a session within 3 s" in notice
        assert "/resume" in notice
    ledger = await read_ledger(data_dir)
    session = session_of(ledger, "broken")
    assert session.queue_paused
    assert [(p.text, p.state) for p in ledger.prompts if p.session_id == session.id] == [
        ("hello?", PromptState.QUEUED)
    ]


async def test_an_agent_that_floods_stderr_keeps_working(
    tmp_path: Path, data_dir: Path, cleanup: None
) -> None:
    config = two_projects(tmp_path, data_dir, "normal")
    async with gateway_process(config, tmp_path / "logs") as gw:
        await gw.say(BROKEN, "alice", "flood please")
        await healthy_still_works(gw, "still here?")
        await gw.text_containing("survived the flood", BROKEN)
        await gw.say(BROKEN, "alice", "after the flood")
        await gw.text_containing("echo: after the flood", BROKEN)


async def test_an_agent_that_exits_before_its_first_reply_could_not_start(
    tmp_path: Path, data_dir: Path, cleanup: None
) -> None:
    config = two_projects(tmp_path, data_dir, "exit-early")
    async with gateway_process(config, tmp_path / "logs") as gw:
        await gw.say(BROKEN, "alice", "hello?")
        notice = await gw.text_containing("could not start", BROKEN)
        assert "boom" in notice and "/resume" in notice
        assert "agent-gateway check --config" in notice  # the next step
        # said where an operator looks, and where the person asks
        logged = await gw.wait_for(
            lambda: next(
                (line for line in gw.log_tail().splitlines() if "could not start" in line), None
            ),
            what="the start failure in the log",
        )
        assert "exited with code 3" in logged and "boom" in logged
        await gw.say(BROKEN, "alice", "/status")
        status = await gw.text_containing("Agent: could not start", BROKEN)
        assert "boom" in status
        await healthy_still_works(gw)
    ledger = await read_ledger(data_dir)
    assert session_of(ledger, "broken").queue_paused


# --- the real codex, the gateway dies -------------------------------------------------------------

# One session for the channel, shown in each of its threads (and the channel itself): a card
# has a copy in each, and every copy must be edited after the restart.
ROOM = room("demo", "t1")
SECOND_THREAD = room("demo", "t2")
FIRST_PROMPT = "please append to ran.txt"


def codex_config(
    tmp_path: Path,
    data_dir: Path,
    codex_bin: str,
    home: CodexHome,
    ledger: PgTarget | None = None,
) -> Path:
    projects = [codex_project("demo", codex_bin, home, channel="demo", scope="channel")]
    return write_config(tmp_path / "gateway.toml", data_dir, projects, store=ledger)


def runs_recorded(home: CodexHome) -> int:
    """How many times the approved command really ran (it appends one line each time)."""
    path = home.workspace / "ran.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


async def live_agent(data_dir: Path) -> tuple[int, int]:
    """The pid and start time of the one agent process the ledger records as live."""
    async with open_ledger(data_dir) as store:
        [epoch] = await store.sessions.live_epochs()
    assert epoch.pid is not None and epoch.process_start_time is not None
    return epoch.pid, int(epoch.process_start_time)


async def turn_of_prompt(data_dir: Path, prompt_id: int) -> TurnRecord:
    async with open_ledger(data_dir) as store:
        turn_id = 1
        while (turn := await store.turns.get(turn_id)) is not None:
            if turn.prompt_id == prompt_id:
                return turn
            turn_id += 1
    raise AssertionError(f"no turn for prompt {prompt_id}")


def last_user_text(request: ModelRequest) -> str | None:
    texts = request.user_texts()
    return texts[-1] if texts else None


def outputs_of_first_turn(fake: FakeResponses) -> int:
    """Model requests that carry a command's output back within the first prompt's turn:
    one per run of the approved command."""
    return sum(1 for r in fake.model_requests() if last_user_text(r) == FIRST_PROMPT and r.step > 0)


async def card_waiting_in_two_threads(gw: GatewayProcess) -> tuple[Shown, list[str]]:
    """Ask in the first thread, let a second thread join while the card waits; returns the
    card as first shown and the message ids of every copy, once the ledger records them."""
    await gw.say(ROOM, "alice", FIRST_PROMPT)
    shown = await gw.card_where(lambda card: bool(card["actions"]), ROOM)
    await gw.say(SECOND_THREAD, "bob", "/pending")
    await gw.card_where(lambda card: bool(card["actions"]), SECOND_THREAD)
    copies = await gw.until_cards_recorded(copies=2)
    refs = sorted(c["message_ref"] for c in copies)
    assert refs == sorted(m.id for m in gw.shown() if m.card is not None)
    return shown, refs


async def every_copy_edited(gw: GatewayProcess, refs: list[str]) -> list[str]:
    """Each card message the dead gateway sent, as the restarted one edited it: no buttons.
    Returns their status lines."""
    statuses = []
    for ref in refs:
        edited = await gw.wait_for(partial(gw.messages.get, ref), what=f"card {ref} edited")
        assert edited.card is not None and edited.card["actions"] == [], edited
        statuses.append(without_hash(edited.card["status_line"]))
    return statuses


@pytest.mark.real_agent("codex")
async def test_a_crash_between_an_expiry_and_its_write_leaves_a_card_that_says_so(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    tmp_path: Path,
    data_dir: Path,
    cleanup: None,
) -> None:
    fake_model.enqueue((shell("echo ran >> ran.txt", escalated=True), message("Done.")))
    project = codex_project("demo", codex_bin, codex_home, channel="demo", scope="channel")
    expiring = replace(project, expire_after_seconds=0.3)
    config = write_config(tmp_path / "gateway.toml", data_dir, [expiring])
    logs = tmp_path / "logs"

    async with gateway_process(config, logs, crash_at="expiry_committed") as gw:
        await gw.say(ROOM, "alice", FIRST_PROMPT)
        shown = await gw.card_where(lambda card: bool(card["actions"]), ROOM)
        # nobody answers: the expiry commits, and the gateway dies before writing "deny"
        assert await gw.exited() == CRASH_EXIT_CODE, gw.log_tail()
    [expired] = (await read_ledger(data_dir)).interactions
    assert expired.state is InteractionState.EXPIRED and expired.delivery is None

    # the restarted gateway cannot know whether "deny" reached the agent: it says so, once
    restarted = write_config(tmp_path / "gateway.toml", data_dir, [project])
    async with gateway_process(restarted, logs) as gw:

        def edited_card() -> Shown | None:
            now = gw.messages.get(shown.id)
            return now if now and now.card and "not known" in now.card["status_line"] else None

        edited = await gw.wait_for(edited_card, what="the expired card edited")
        assert edited.card is not None and edited.card["actions"] == []
        assert without_hash(edited.card["status_line"]) == (
            f"Timed out: nobody answered within {waited_text(expired)} · whether a refusal"
            " reached the agent is not known: the gateway restarted and ended the agent process"
        )
    assert runs_recorded(codex_home) == 0  # nothing was approved
    [after] = (await read_ledger(data_dir)).interactions
    assert after.state is InteractionState.EXPIRED and after.decision is None
    assert after.delivery is not None and after.delivery.outcome is DeliveryOutcome.UNKNOWN
    await assert_every_copy_current(data_dir, after)


@pytest.mark.real_agent("codex")
@pytest.mark.parametrize("point", ["decision_committed", "response_written", "delivery_recorded"])
async def test_a_crash_between_a_commit_and_the_next_write_delivers_once_and_loses_nothing(
    point: str,
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    tmp_path: Path,
    data_dir: Path,
    ledger: PgTarget | None,
    cleanup: None,
) -> None:
    fake_model.enqueue(
        (shell("echo ran >> ran.txt", escalated=True), message("Done.")),
        (message("Back after the crash."),),
    )
    config = codex_config(tmp_path, data_dir, codex_bin, codex_home, ledger)
    logs = tmp_path / "logs"

    async with gateway_process(config, logs, crash_at=point) as gw:
        shown, refs = await card_waiting_in_two_threads(gw)
        assert shown.card is not None
        accept = shown.card["actions"][0]
        gw.send_only("click", conversation=conv_json(ROOM), user="alice", token=accept["token"])
        assert await gw.exited() == CRASH_EXIT_CODE, gw.log_tail()

    # What the dead gateway left: the decision is committed whatever the point.
    before = await read_ledger(data_dir)
    [asked] = before.interactions
    assert asked.decision is not None and asked.decision.actor.user_id == "alice"
    expected_state = {
        "decision_committed": InteractionState.DECIDED,
        "response_written": InteractionState.DECIDED,
        "delivery_recorded": InteractionState.DELIVERED,
    }[point]
    # delivery_recorded: the agent's answer may be recorded beside the delivery's record (a
    # host's writes run side by side on PostgreSQL's lanes) before the crash: then the request
    # is resolved, and the restart has nothing to orphan
    answered_first = point == "delivery_recorded" and asked.state is InteractionState.RESOLVED
    assert answered_first or asked.state is expected_state
    agent = await live_agent(data_dir)

    async with gateway_process(config, logs) as gw:
        # recovery is over: the agent the dead gateway left is gone, whatever it did before
        assert not process_alive(*agent)
        ran, told = runs_recorded(codex_home), outputs_of_first_turn(fake_model)
        assert told <= ran <= 1  # (it may be ended between running it and telling the model)
        if point == "decision_committed":
            assert ran == 0  # nothing was ever written to the agent
        # every copy the first process sent is edited: no buttons, says what happened
        for status in await every_copy_edited(gw, refs):
            assert status.startswith('Approved ("Allow once") by Alice'), status
            if answered_first:
                assert status.endswith("· done"), status
            elif point == "delivery_recorded":
                assert status.endswith(
                    "sent to the agent, then the gateway restarted and ended the agent process"
                    " · your next message starts the agent again"
                )
            else:
                assert status.endswith(
                    "whether it reached the agent is not known: the gateway stopped before"
                    " recording it, and the agent process was ended · your next message starts"
                    " the agent again"
                ), status
        await gw.text_containing("The gateway restarted", ROOM)
        # the conversation goes on; nothing of the first turn is replayed
        requests_before = len(fake_model.model_requests())
        await gw.say(ROOM, "alice", "what happened?")
        await gw.text_containing("Back after the crash.", ROOM)
        after = fake_model.model_requests()[requests_before:]
        assert after and all(last_user_text(r) == "what happened?" for r in after)
        assert runs_recorded(codex_home) == ran and outputs_of_first_turn(fake_model) == told

    ledger = await read_ledger(data_dir)
    [interaction] = ledger.interactions
    assert interaction.state is (
        InteractionState.RESOLVED if answered_first else InteractionState.ORPHANED
    )
    assert interaction.decision is not None
    assert interaction.decision.decision == asked.decision.decision  # the decision stays
    assert interaction.resolution is not None
    assert answered_first or interaction.resolution.how is Resolution.ORPHANED
    if point == "delivery_recorded":
        assert interaction.delivery is not None
        assert interaction.delivery.outcome is DeliveryOutcome.OK
    else:
        # the dead gateway may or may not have written it: no "not written" fact is invented
        assert interaction.delivery is None
        assert "not known" in interaction.resolution.note
    await assert_every_copy_current(data_dir, interaction)
    # (the later prompt's own end races the shutdown: the model requests above tell its story)
    first, second = ledger.prompts
    assert (first.text, first.state) == (FIRST_PROMPT, PromptState.INTERRUPTED)
    assert second.text == "what happened?"


@pytest.mark.real_agent("codex")
async def test_sigkill_with_an_approval_pending_then_resume(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    tmp_path: Path,
    data_dir: Path,
    ledger: PgTarget | None,
    cleanup: None,
) -> None:
    fake_model.enqueue(
        (shell("echo ran >> ran.txt", escalated=True), message("Done.")),
        (message("Resumed, and I remember."),),
    )
    config = codex_config(tmp_path, data_dir, codex_bin, codex_home, ledger)
    logs = tmp_path / "logs"

    async with gateway_process(config, logs) as gw:
        _, refs = await card_waiting_in_two_threads(gw)
        await gw.say(ROOM, "alice", "and then say hello")
        await gw.text_containing("Queued as a message for the agent", ROOM)
        running = "▸ `/bin/bash -c 'echo ran >> ran.txt'`"
        [shows_it] = await gw.until_turn_saved(running)
        gw.kill()
        assert await gw.exited() == -9

    agent = await live_agent(data_dir)
    [session] = (await read_ledger(data_dir)).sessions
    thread_id = session.native_session_id
    assert thread_id
    requests_at_kill = len(fake_model.model_requests())

    async with gateway_process(config, logs) as gw:
        assert not process_alive(*agent)
        # the tool line the dead process showed running is closed where it was shown
        closed = running.replace("▸", "✗") + " (stopped: the gateway restarted)"
        edited = await gw.wait_for(
            lambda: (m := gw.messages.get(shows_it)) is not None and closed in (m.text or ""),
            what="the turn's message closed",
        )
        assert edited
        for status in await every_copy_edited(gw, refs):
            assert status == (
                "The gateway restarted and ended the agent process before anyone answered: no"
                " answer can reach it now · your next message starts the agent again"
            )
        for thread in (ROOM, SECOND_THREAD):
            notice = await gw.text_containing("The gateway restarted", thread)
            assert "1 earlier message is held: /resume runs it" in notice
            # a short line that notifies and points at the card, which carries the detail
            assert notice.startswith('↻ The gateway restarted: the card of "'), notice
            assert "no answer can reach it" not in notice and "agent process" not in notice
        await gw.say(ROOM, "alice", "/status")
        status = await gw.text_containing("Queue:", ROOM)
        assert "Queue: 0 waiting, 1 held (the gateway restarted)" in status, status
        assert len(fake_model.model_requests()) == requests_at_kill  # nothing sent on its own
        await gw.say(ROOM, "alice", "/resume")
        await gw.text_containing("Resumed: 1 held message runs next", ROOM)
        await gw.text_containing("Resumed, and I remember.", ROOM)
        assert runs_recorded(codex_home) == 0

    after = fake_model.model_requests()[requests_at_kill:]
    assert after and all(last_user_text(r) == "and then say hello" for r in after)
    # the thread was resumed: the model sees the earlier conversation
    assert FIRST_PROMPT in after[0].user_texts()
    ledger = await read_ledger(data_dir)
    [session] = ledger.sessions
    assert session.native_session_id == thread_id
    assert session.current_epoch == 2
    [interaction] = ledger.interactions
    assert interaction.state is InteractionState.ORPHANED and interaction.decision is None
    await assert_every_copy_current(data_dir, interaction)
    first, second = ledger.prompts
    assert (first.text, first.state) == (FIRST_PROMPT, PromptState.INTERRUPTED)
    assert second.text == "and then say hello" and second.state is not PromptState.QUEUED
    turn = await turn_of_prompt(data_dir, first.id)
    assert turn.status is TurnStatus.INTERRUPTED


async def test_a_leftover_agent_is_ended_and_the_prompt_in_flight_is_not_resent(
    tmp_path: Path, data_dir: Path, cleanup: None
) -> None:
    config = two_projects(tmp_path, data_dir, "linger")
    logs = tmp_path / "logs"

    async with gateway_process(config, logs) as gw:
        await gw.say(BROKEN, "alice", "approve this, then the gateway dies")
        shown = await gw.card_where(lambda card: bool(card["actions"]), BROKEN)
        await gw.until_cards_recorded()
        gw.kill()
        await gw.exited()

    pid, start_time = await live_agent(data_dir)
    assert process_alive(pid, start_time)  # the agent outlived its gateway

    async with gateway_process(config, logs) as gw:
        assert not process_alive(pid, start_time)
        edited = await gw.wait_for(lambda: gw.messages.get(shown.id), what="the card edit")
        assert edited.card is not None and edited.card["actions"] == []
        notice = await gw.text_containing("The gateway restarted", BROKEN)
        assert "paused" not in notice  # nothing was queued behind the prompt in flight
        await gw.say(BROKEN, "alice", "next one")
        await gw.text_containing("echo: next one", BROKEN)
        await healthy_still_works(gw)

    prompt_log = tmp_path / "prompts.jsonl"
    received = [json.loads(line) for line in prompt_log.read_text().splitlines()]
    assert [r["text"] for r in received] == ["approve this, then the gateway dies", "next one"]
    assert received[0]["pid"] == pid and received[1]["pid"] != pid
    async with open_ledger(data_dir) as store:
        outcomes = await store.audit.entries(event="recovery.leftover_agent")
    assert [e.details["outcome"] for e in outcomes] == ["terminated"]
    ledger = await read_ledger(data_dir)
    first = ledger.prompts[0]
    assert first.state is PromptState.INTERRUPTED
    assert (await turn_of_prompt(data_dir, first.id)).status is TurnStatus.INTERRUPTED
