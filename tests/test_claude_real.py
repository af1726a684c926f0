"""The real ``claude`` CLI (pinned 2.1.197) driven through the project's adapter.

Each test runs the binary against the scripted fake Messages API
(``tests/servers/fake_anthropic``) in a hermetic home (``tests/claude_env``), through
``AgentRuntime`` + ``ClaudeCodeCodec`` + ``AgentProcess``: exactly what the gateway runs.
What is asserted is what a person would notice: whether a file appeared in the workspace,
whether the agent asked again, how the turn ended, and what the model was told.
"""

from __future__ import annotations

import os
import signal
import uuid

import pytest

from adapters.claude_launch import ClaudeLaunch
from gateway.domain import (
    Answer,
    Command,
    Decision,
    FileChange,
    InteractionKind,
    InteractionRequest,
    Plan,
    Resolution,
    Scope,
    TurnStatus,
)
from gateway.errors import AgentExitedError, CodecUsageError
from gateway.events import AgentMessage, Interrupt, PolicyChanged, TextDelta, Warning
from tests.claude_env import ClaudeAgent, ClaudeHome, run_claude
from tests.servers import fake_anthropic as fm
from tests.servers.fake_anthropic import CHECKS, COLOR, DONE

pytestmark = [pytest.mark.real_agent("claude"), pytest.mark.timeout(90)]


def told(fake: fm.FakeAnthropic) -> tuple[str, bool] | None:
    """What the model was told about the last tool call, as (text, is_error)."""
    return fake.model_requests()[-1].tool_result()


async def ask_to_touch(agent: ClaudeAgent, fake: fm.FakeAnthropic) -> InteractionRequest:
    fake.enqueue([fm.bash("touch hello.txt", "Create hello.txt"), DONE])
    await agent.prompt("please create hello.txt")
    request = await agent.asked()
    assert request.kind is InteractionKind.APPROVAL
    assert isinstance(request.detail, Command) and request.detail.command == "touch hello.txt"
    return request


# --- command approvals -------------------------------------------------------------------------


async def test_allowed_command_runs_and_the_answer_is_resolved_by_its_result(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic
) -> None:
    async with run_claude(claude_bin, claude_home) as agent:
        assert agent.session.policy["permission_mode"] == "default"
        request = await ask_to_touch(agent, fake_anthropic)
        await agent.decide(request, Decision(action_id="allow"))
        with pytest.raises(CodecUsageError):  # exactly once
            await agent.decide(request, Decision(action_id="allow"))
        turn = await agent.turn_end()
    assert turn.status is TurnStatus.COMPLETED
    assert (claude_home.workspace / "hello.txt").exists()
    assert agent.closed(request) == [Resolution.ANSWERED]
    assert told(fake_anthropic) == ("(Bash completed with no output)", False)
    streamed = "".join(e.text for e in agent.seen if isinstance(e, TextDelta))
    assert "Done. The tool said" in streamed
    assert any(isinstance(e, AgentMessage) and e.text.startswith("Done.") for e in agent.seen)


async def test_denied_command_is_not_run_and_the_model_reads_why(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic
) -> None:
    async with run_claude(claude_bin, claude_home) as agent:
        request = await ask_to_touch(agent, fake_anthropic)
        await agent.decide(request, Decision(action_id="deny", message="Not here, use /tmp."))
        turn = await agent.turn_end()
    assert turn.status is TurnStatus.COMPLETED
    assert not (claude_home.workspace / "hello.txt").exists()
    assert told(fake_anthropic) == ("Not here, use /tmp.", True)


async def test_deny_and_stop_interrupts_the_turn_and_the_next_prompt_works(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic
) -> None:
    async with run_claude(claude_bin, claude_home) as agent:
        request = await ask_to_touch(agent, fake_anthropic)
        await agent.decide(request, Decision(action_id="stop"))
        turn = await agent.turn_end()
        assert turn.status is TurnStatus.INTERRUPTED
        assert len(fake_anthropic.model_requests()) == 1  # the model never heard back
        fake_anthropic.enqueue([fm.text("Stopped as asked.")])
        await agent.prompt("what now?")
        assert (await agent.turn_end()).status is TurnStatus.COMPLETED
    assert not (claude_home.workspace / "hello.txt").exists()


async def test_a_session_rule_means_the_same_command_is_not_asked_again(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic
) -> None:
    async with run_claude(claude_bin, claude_home) as agent:
        request = await ask_to_touch(agent, fake_anthropic)
        [rule] = [a for a in request.actions if a.rule == "Bash(touch hello.txt)"]
        assert rule.scope is Scope.SESSION
        await agent.decide(request, Decision(action_id=rule.id))
        assert (await agent.turn_end()).status is TurnStatus.COMPLETED
        (claude_home.workspace / "hello.txt").unlink()
        fake_anthropic.enqueue([fm.bash("touch hello.txt", "Create hello.txt"), DONE])
        mark = await agent.prompt("once more")
        turn = await agent.turn_end()  # AssertionError if it asked again
        assert agent.opened_since(mark) == []
    assert turn.status is TurnStatus.COMPLETED
    assert (claude_home.workspace / "hello.txt").exists()


async def test_interrupt_with_a_request_pending_cancels_it_and_interrupts_the_turn(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic
) -> None:
    async with run_claude(claude_bin, claude_home) as agent:
        request = await ask_to_touch(agent, fake_anthropic)
        await agent.runtime.send(Interrupt())
        turn = await agent.turn_end()
        assert agent.closed(request) == [Resolution.CANCELLED_BY_AGENT]
        with pytest.raises(CodecUsageError):  # too late: nothing is written
            await agent.decide(request, Decision(action_id="allow"))
    assert turn.status is TurnStatus.INTERRUPTED
    assert not (claude_home.workspace / "hello.txt").exists()


# --- file changes and plans ------------------------------------------------------------------


async def test_an_allowed_edit_shows_its_diff_and_changes_the_file(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic
) -> None:
    notes = claude_home.workspace / "notes.txt"
    notes.write_text("alpha\nbeta\n")
    fake_anthropic.enqueue([fm.read(str(notes)), fm.edit(str(notes), "beta", "BETA"), DONE])
    async with run_claude(claude_bin, claude_home) as agent:
        await agent.prompt("capitalise beta")
        request = await agent.asked()  # the Read was not asked
        assert isinstance(request.detail, FileChange)
        assert request.detail.diff.endswith("-beta\n+BETA\n")
        assert "notes.txt" in request.title
        await agent.decide(request, Decision(action_id="allow"))
        assert (await agent.turn_end()).status is TurnStatus.COMPLETED
    assert notes.read_text() == "alpha\nBETA\n"


async def test_a_plan_is_approved_and_the_agent_leaves_plan_mode(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic
) -> None:
    plan = "# Plan\n\n1. Create hello.txt\n"
    fake_anthropic.enqueue([fm.exit_plan_mode(plan), DONE])
    async with run_claude(
        claude_bin, claude_home, launch=ClaudeLaunch(permission_mode="plan")
    ) as agent:
        assert agent.session.policy["permission_mode"] == "plan"
        await agent.prompt("plan it")
        request = await agent.asked()
        assert request.kind is InteractionKind.PLAN and request.detail == Plan(markdown=plan)
        await agent.decide(request, Decision(action_id="approve"))
        assert (await agent.turn_end()).status is TurnStatus.COMPLETED
        assert agent.codec.policy["permission_mode"] == "default"
    assert any(isinstance(e, PolicyChanged) for e in agent.seen)
    result = told(fake_anthropic)
    assert result is not None and "User has approved your plan" in result[0]


# --- questions -------------------------------------------------------------------------------


async def test_single_and_multi_select_answers_reach_the_model(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic
) -> None:
    fake_anthropic.enqueue([fm.ask_user_question([COLOR, CHECKS]), DONE])
    async with run_claude(claude_bin, claude_home) as agent:
        await agent.prompt("ask me")
        request = await agent.asked()
        assert request.kind is InteractionKind.QUESTION
        assert [q.multi for q in request.questions] == [False, True]
        with pytest.raises(CodecUsageError, match="required"):  # never an allow without answers
            await agent.decide(request, Decision(answers={"q0": Answer(option_ids=("1",))}))
        answers = {"q0": Answer(option_ids=("1",)), "q1": Answer(option_ids=("0", "2"))}
        await agent.decide(request, Decision(answers=answers))
        assert (await agent.turn_end()).status is TurnStatus.COMPLETED
        assert agent.closed(request) == [Resolution.ANSWERED]
    result = told(fake_anthropic)
    assert result is not None and not result[1]
    assert '"Which color should the button be?"="Blue"' in result[0]
    assert '"Which checks should run?"="Lint, Tests"' in result[0]


async def test_a_typed_other_answer_reaches_the_model_as_typed(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic
) -> None:
    fake_anthropic.enqueue([fm.ask_user_question([COLOR]), DONE])
    async with run_claude(claude_bin, claude_home) as agent:
        await agent.prompt("ask me")
        request = await agent.asked()
        await agent.decide(request, Decision(answers={"q0": Answer(other="Green, like the logo")}))
        assert (await agent.turn_end()).status is TurnStatus.COMPLETED
    result = told(fake_anthropic)
    assert result is not None
    assert '"Which color should the button be?"="Green, like the logo"' in result[0]


# --- the model API, the process, resume ------------------------------------------------------


async def test_a_failing_model_call_fails_the_turn_and_a_retry_is_reported(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic
) -> None:
    fake_anthropic.enqueue([fm.http_error(529, "Overloaded", times=1)])
    fake_anthropic.enqueue([fm.http_error(400, "Bad fake request")])
    async with run_claude(claude_bin, claude_home) as agent:
        await agent.prompt("hello")
        retried = await agent.next(Warning)
        assert retried.code == "api_retry" and "529" in retried.message
        assert (await agent.turn_end()).status is TurnStatus.COMPLETED
        await agent.prompt("again")
        failed = await agent.turn_end()
    assert failed.status is TurnStatus.FAILED
    assert failed.error == "API Error: 400 Bad fake request"


async def test_when_the_process_dies_the_events_end_with_agent_exited(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic
) -> None:
    async with run_claude(claude_bin, claude_home) as agent:
        await ask_to_touch(agent, fake_anthropic)
        os.kill(agent.runtime.pid, signal.SIGKILL)
        exited = await agent.exited()
        assert exited.reason == "killed"
        with pytest.raises(AgentExitedError):
            await agent.prompt("anyone there?")
    assert not (claude_home.workspace / "hello.txt").exists()


async def test_a_session_is_resumed_in_a_new_process_with_its_history(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic
) -> None:
    launch = ClaudeLaunch(session_id=str(uuid.uuid4()))
    fake_anthropic.enqueue([fm.text("Noted: kiwi.")], [fm.text("It was kiwi.")])
    async with run_claude(claude_bin, claude_home, launch=launch) as agent:
        await agent.prompt("Remember the word kiwi.")
        await agent.turn_end()
    async with run_claude(claude_bin, claude_home, launch=launch.resumed()) as agent:
        assert agent.session.resumed and agent.session.native_id == launch.session_id
        await agent.prompt("Which word?")
        assert (await agent.turn_end()).status is TurnStatus.COMPLETED
    assert fake_anthropic.model_requests()[-1].prompts() == [
        "Remember the word kiwi.",
        "Which word?",
    ]


async def test_resuming_a_session_that_does_not_exist_fails_to_start(
    claude_bin: str, claude_home: ClaudeHome
) -> None:
    launch = ClaudeLaunch(session_id=str(uuid.uuid4()), resume=True)
    with pytest.raises(AgentExitedError) as failed:
        async with run_claude(claude_bin, claude_home, launch=launch):
            pass
    assert failed.value.code == 1
    assert f"No conversation found with session ID: {launch.session_id}" in failed.value.stderr_tail
