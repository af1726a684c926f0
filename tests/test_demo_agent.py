"""The demo agent through the real adapter: the launcher starts ``python -m gateway.app.demo.agent``
as the demo's codex-app-server project and the Codex codec reads it, scenario by scenario.
Nothing is mocked; every wait is an awaited event under a deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from gateway.app.demo.agent import VERSION
from gateway.app.demo.command import DEMO_PROJECT, build_demo
from gateway.app.demo.scenarios import CRASH_EXIT_CODE, PATCH_TARGET, patched_greeting
from gateway.app.demo.texts import LONG_ANSWER
from gateway.domain import (
    Answer,
    Command,
    Decision,
    FileChange,
    InteractionRequest,
    Plan,
    Resolution,
    TurnStatus,
)
from gateway.events import (
    AgentEvent,
    AgentExited,
    AgentMessage,
    InteractionClosed,
    InteractionOpened,
    Interrupt,
    Prompt,
    Respond,
    TextDelta,
    ToolActivity,
    ToolKind,
    ToolPhase,
    TurnCompleted,
    Warning,
)
from gateway.sessions.agents import RunningAgent

pytestmark = pytest.mark.timeout(60)

DEADLINE = 20
E = TypeVar("E")


@dataclass
class Talk:
    """One demo agent process, and the events read from it so far."""

    agent: RunningAgent
    work_dir: Path

    def __post_init__(self) -> None:
        self._events = self.agent.events()

    async def until(self, kind: type[AgentEvent]) -> list[AgentEvent]:
        """Events up to and including the first of ``kind``."""
        seen: list[AgentEvent] = []
        async with asyncio.timeout(DEADLINE):
            while not seen or not isinstance(seen[-1], kind):
                seen.append(await anext(self._events))
        return seen

    async def turn(self, prompt: str) -> list[AgentEvent]:
        await self.agent.send(Prompt(text=prompt))
        return await self.until(TurnCompleted)

    async def ask(self, prompt: str) -> InteractionRequest:
        """Send ``prompt``; the request the agent opens."""
        await self.agent.send(Prompt(text=prompt))
        opened = (await self.until(InteractionOpened))[-1]
        assert isinstance(opened, InteractionOpened)
        return opened.request

    async def decide(self, request: InteractionRequest, decision: Decision) -> list[AgentEvent]:
        await self.agent.send(Respond(native_key=request.native_key, decision=decision))
        return await self.until(TurnCompleted)


@asynccontextmanager
async def demo_agent(tmp_path: Path, *, pace: float = 0.0) -> AsyncIterator[Talk]:
    demo = build_demo(tmp_path / "data", headless=True, pace=pace)
    project = demo.config.projects[DEMO_PROJECT]
    async with demo.launcher.launch(project, resume_native_id=None) as agent:
        yield Talk(agent=agent, work_dir=demo.work_dir)


def only(events: list[AgentEvent], kind: type[E]) -> list[E]:
    return [event for event in events if isinstance(event, kind)]


def completed(events: list[AgentEvent]) -> TurnCompleted:
    last = events[-1]
    assert isinstance(last, TurnCompleted)
    return last


def said(events: list[AgentEvent]) -> str:
    return "\n".join(message.text for message in only(events, AgentMessage))


async def test_the_launcher_starts_it_as_codex_app_server(tmp_path: Path) -> None:
    demo = build_demo(tmp_path / "data", headless=True)
    project = demo.config.projects[DEMO_PROJECT]
    _, argv = demo.launcher.codec_and_argv(project, resume_native_id=None)
    assert argv[1:3] == ["-m", "gateway.app.demo.agent"]
    assert argv[-5:-2] == ["app-server", "--enable", "default_mode_request_user_input"]
    # the warning about the features the gateway enables is the gateway's to silence
    assert argv[-2:] == ["-c", "suppress_unstable_features_warning=true"]
    async with demo_agent(tmp_path) as talk:
        started = talk.agent.started
        assert started.agent_version == VERSION
        assert started.policy["approval_policy"] == "on-request"
        assert started.policy["approvals_reviewer"] == "user"
        assert started.policy["sandbox"] == "workspace-write"
        events = await talk.turn("hello, what can you do?")
    assert completed(events).status is TurnStatus.COMPLETED
    menu = said(events)
    for word in ("command", "patch", "form", "long", "stop", "crash", str(talk.work_dir)):
        assert word in menu
    assert not only(events, Warning)  # nothing the codec did not understand


async def test_an_accepted_command_runs_in_the_work_dir(tmp_path: Path) -> None:
    async with demo_agent(tmp_path) as talk:
        request = await talk.ask("run the command please")
        assert isinstance(request.detail, Command)
        assert request.detail.command == "/bin/sh -c 'echo hello | tee hello.txt'"
        assert request.detail.cwd == str(talk.work_dir)
        assert [a.id for a in request.actions] == ["accept", "rule", "decline", "cancel"]
        assert not (talk.work_dir / "hello.txt").exists()
        events = await talk.decide(request, Decision(action_id="accept"))
    assert completed(events).status is TurnStatus.COMPLETED
    assert InteractionClosed(native_key=request.native_key, how=Resolution.ANSWERED) in events
    [ran] = [e for e in only(events, ToolActivity) if e.phase is ToolPhase.COMPLETED]
    assert (ran.tool, ran.status, ran.exit_code, ran.output) == (
        ToolKind.COMMAND,
        "completed",
        0,
        "hello\n",
    )
    assert (talk.work_dir / "hello.txt").read_text() == "hello\n"
    assert "It printed:\n\n```\nhello\n```" in said(events)


async def test_always_allow_adds_a_rule_and_the_next_command_is_not_asked(tmp_path: Path) -> None:
    async with demo_agent(tmp_path) as talk:
        request = await talk.ask("command")
        [rule] = [a for a in request.actions if a.id == "rule"]
        # the rule is the whole command: the label stays short, the rule is said beside it
        assert rule.label == "Always allow this command"
        assert rule.rule == "/bin/sh -c 'echo hello | tee hello.txt'"
        events = await talk.decide(request, Decision(action_id="rule"))
        assert "I added your rule" in said(events)
        (talk.work_dir / "hello.txt").unlink()
        again = await talk.turn("command")
    assert not only(again, InteractionOpened)
    assert "Your rule allows this command" in said(again)
    assert (talk.work_dir / "hello.txt").read_text() == "hello\n"


@pytest.mark.parametrize(
    ("action", "status"), [("decline", TurnStatus.COMPLETED), ("cancel", TurnStatus.INTERRUPTED)]
)
async def test_a_denied_command_does_not_run(
    tmp_path: Path, action: str, status: TurnStatus
) -> None:
    async with demo_agent(tmp_path) as talk:
        request = await talk.ask("command")
        events = await talk.decide(request, Decision(action_id=action))
    assert completed(events).status is status
    [ended] = [e for e in only(events, ToolActivity) if e.phase is ToolPhase.COMPLETED]
    assert ended.status == "declined"
    assert not (talk.work_dir / "hello.txt").exists()


async def test_a_patch_shows_its_diff_and_is_applied_when_allowed(tmp_path: Path) -> None:
    async with demo_agent(tmp_path) as talk:
        target = talk.work_dir / PATCH_TARGET
        request = await talk.ask("patch")
        assert isinstance(request.detail, FileChange)
        assert request.detail.paths == (str(target),)
        added = "".join(f"+{line}\n" for line in patched_greeting(None).splitlines())
        assert request.detail.diff.startswith(f"--- /dev/null\n+++ b/{PATCH_TARGET}\n")
        assert request.detail.diff.endswith(added)
        assert [a.id for a in request.actions] == ["accept", "session", "decline", "cancel"]
        await talk.decide(request, Decision(action_id="accept"))
        first = patched_greeting(None)
        assert target.read_text() == first

        update = await talk.ask("patch again")
        assert isinstance(update.detail, FileChange)
        assert update.detail.diff.startswith(f"--- a/{PATCH_TARGET}\n+++ b/{PATCH_TARGET}\n@@ ")
        assert '+print("Hello again: change number 2")\n' in update.detail.diff
        await talk.decide(update, Decision(action_id="session"))
        assert target.read_text() == patched_greeting(first)

        # allowed for the session: the same file is changed without asking (as codex 0.171)
        third = await talk.turn("patch")
    assert not only(third, InteractionOpened)
    assert "You allowed this file for the session" in said(third)
    assert target.read_text() == patched_greeting(patched_greeting(first))


async def test_a_declined_patch_leaves_the_file_alone(tmp_path: Path) -> None:
    async with demo_agent(tmp_path) as talk:
        request = await talk.ask("patch")
        events = await talk.decide(request, Decision(action_id="decline"))
    assert completed(events).status is TurnStatus.COMPLETED
    assert not (talk.work_dir / PATCH_TARGET).exists()
    assert "unchanged" in said(events)


async def test_the_form_takes_other_and_a_secret_and_never_echoes_the_secret(
    tmp_path: Path,
) -> None:
    secret = "s3cr3t-t0ken"
    async with demo_agent(tmp_path) as talk:
        request = await talk.ask("form")
        questions = {q.id: q for q in request.questions}
        assert list(questions) == ["colour", "name", "token"]
        assert questions["colour"].allow_other and not questions["colour"].secret
        assert [o.label for o in questions["name"].options] == ["gateway-demo", "sandbox"]
        assert questions["token"].secret and questions["token"].allow_other
        answers = {
            "colour": Answer(option_ids=("1",)),
            "name": Answer(other="my-own-name"),
            "token": Answer(other=secret),
        }
        events = await talk.decide(request, Decision(answers=answers))
    text = said(events)
    assert "**Colour**: Orange (an option)" in text
    assert '**Name**: "my-own-name" (your own words)' in text
    assert f"got a secret of {len(secret)} characters" in text
    assert secret not in text and secret not in "".join(e.text for e in only(events, TextDelta))


async def test_the_long_answer_streams_in_many_deltas(tmp_path: Path) -> None:
    async with demo_agent(tmp_path) as talk:
        events = await talk.turn("long")
    deltas = only(events, TextDelta)
    assert len(deltas) > 100
    assert "".join(delta.text for delta in deltas) == LONG_ANSWER
    [message] = only(events, AgentMessage)
    assert message.text == LONG_ANSWER
    assert len(LONG_ANSWER) > 4096 and "```python\n" in LONG_ANSWER


async def test_stop_interrupts_the_slow_answer(tmp_path: Path) -> None:
    async with demo_agent(tmp_path, pace=1.0) as talk:
        await talk.agent.send(Prompt(text="stop"))
        while True:  # the counting has begun
            delta = (await talk.until(TextDelta))[-1]
            assert isinstance(delta, TextDelta)
            if delta.text.startswith("1…"):
                break
        await talk.agent.send(Interrupt())
        events = await talk.until(TurnCompleted)
    assert completed(events).status is TurnStatus.INTERRUPTED
    counted = "".join(delta.text for delta in only(events, TextDelta))
    assert "40…" not in counted
    assert not only(events, AgentMessage)  # the counting message never completed


async def test_an_interrupt_withdraws_the_open_request(tmp_path: Path) -> None:
    async with demo_agent(tmp_path) as talk:
        request = await talk.ask("command")
        await talk.agent.send(Interrupt())
        events = await talk.until(InteractionClosed)
    # the order codex 0.171 uses (interrupt_pending_approval): the turn ends, then the request
    assert completed(events[:-1]).status is TurnStatus.INTERRUPTED
    assert events[-1] == InteractionClosed(
        native_key=request.native_key, how=Resolution.CANCELLED_BY_AGENT
    )
    assert not (talk.work_dir / "hello.txt").exists()


async def test_crash_dies_with_an_approval_pending(tmp_path: Path) -> None:
    async with demo_agent(tmp_path) as talk:
        request = await talk.ask("crash")
        assert isinstance(request.detail, Command)
        events = await talk.until(AgentExited)
    exited = events[-1]
    assert isinstance(exited, AgentExited)
    assert (exited.code, exited.reason) == (CRASH_EXIT_CODE, "exited")
    assert "crashing on purpose" in exited.stderr_tail
    assert not only(events, InteractionClosed) and not only(events, TurnCompleted)


async def test_a_plan_sent_back_with_a_message_comes_back_revised_not_the_menu(
    tmp_path: Path,
) -> None:
    # "Keep planning" with a message, and /plan TEXT, are plan-mode turns whose prompt is the
    # person's words: the demo answers with its plan again, taking them in
    async with demo_agent(tmp_path) as talk:
        for words in ("add a test for farewell", "Keep planning: the plan is not approved yet."):
            await talk.agent.send(Prompt(text=words, mode="plan"))
            events = await talk.until(InteractionOpened)
            opened = events[-1]
            assert isinstance(opened, InteractionOpened)
            assert isinstance(opened.request.detail, Plan)
            assert "farewell" in opened.request.detail.markdown
            assert ("as you asked: add a test" in opened.request.detail.markdown) == (
                words.startswith("add")
            )
            assert "Type one of these words" not in said(events)  # not the menu
        # Implement, a default-mode turn, still ends the plan's way
        events = await talk.turn("Implement the plan.")
        assert "You approved the plan" in said(events)
