"""The real ``codex app-server`` (pinned 0.171) driven through the project's adapter.

Each test runs the binary against the scripted fake model (``tests/servers/fake_responses``)
in a hermetic CODEX_HOME (``tests/codex_env``), through ``AgentRuntime`` +
``CodexAppServerCodec`` + ``AgentProcess``: exactly what the gateway runs. What is asserted
is what a person would notice: whether a file appeared in the workspace, whether the agent
asked again, how the turn ended, and what the model was told about the decision.
"""

from __future__ import annotations

import pytest

from gateway.domain import (
    Answer,
    Command,
    Decision,
    Effect,
    FileChange,
    InteractionKind,
    InteractionRequest,
    Permissions,
    Resolution,
    Scope,
    TurnStatus,
)
from gateway.errors import CodecUsageError
from gateway.events import AgentMessage, InteractionClosed, Interrupt, TextDelta, TurnCompleted
from tests.codex_env import CodexAgent, CodexHome, choose, run_codex
from tests.servers import fake_responses as fm

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(90)]

DONE = fm.message(lambda request: f"Done. Tool said: {request.tool_output() or ''}")


def add_file(name: str, text: str = "hello") -> str:
    return f"*** Begin Patch\n*** Add File: {name}\n+{text}\n*** End Patch\n"


# --- command approvals -------------------------------------------------------------------------


async def ask_to_touch(agent: CodexAgent, fake: fm.FakeResponses) -> InteractionRequest:
    fake.enqueue([fm.shell("touch hello.txt", escalated=True), DONE])
    await agent.prompt("please create hello.txt")
    request = await agent.asked()
    assert request.kind is InteractionKind.APPROVAL
    assert isinstance(request.detail, Command)
    assert "touch hello.txt" in request.detail.command
    return request


async def test_accepted_command_runs_and_the_turn_completes(
    codex_bin: str, codex_home: CodexHome, fake_model: fm.FakeResponses
) -> None:
    async with run_codex(codex_bin, codex_home) as agent:
        request = await ask_to_touch(agent, fake_model)
        await agent.decide(request, choose(request, Effect.ALLOW))
        turn = await agent.turn_end()
    assert turn.status is TurnStatus.COMPLETED
    assert (codex_home.workspace / "hello.txt").exists()
    assert agent.closed(request) == [Resolution.ANSWERED]
    assert "exited with code 0" in fake_model.last_tool_output()


async def test_declined_command_is_not_run_and_the_turn_goes_on(
    codex_bin: str, codex_home: CodexHome, fake_model: fm.FakeResponses
) -> None:
    # 0.171 does not list "decline" in availableDecisions, yet accepts it
    async with run_codex(codex_bin, codex_home) as agent:
        request = await ask_to_touch(agent, fake_model)
        await agent.decide(request, choose(request, Effect.DENY))
        turn = await agent.turn_end()
    assert turn.status is TurnStatus.COMPLETED
    assert not (codex_home.workspace / "hello.txt").exists()
    assert "rejected by user" in fake_model.last_tool_output()
    assert any(isinstance(e, AgentMessage) and "rejected" in e.text for e in agent.seen)


async def test_cancelled_command_is_not_run_and_the_turn_is_interrupted(
    codex_bin: str, codex_home: CodexHome, fake_model: fm.FakeResponses
) -> None:
    async with run_codex(codex_bin, codex_home) as agent:
        request = await ask_to_touch(agent, fake_model)
        await agent.decide(request, choose(request, Effect.CANCEL))
        turn = await agent.turn_end()
    assert turn.status is TurnStatus.INTERRUPTED
    assert not (codex_home.workspace / "hello.txt").exists()
    assert len(fake_model.model_requests()) == 1  # the model never heard back in that turn


async def test_always_allowed_prefix_is_not_asked_again_in_the_next_turn(
    codex_bin: str, codex_home: CodexHome, fake_model: fm.FakeResponses
) -> None:
    first = [fm.shell("touch hello.txt", escalated=True, prefix_rule=["touch"]), DONE]
    second = [fm.shell("touch second.txt", escalated=True, prefix_rule=["touch"]), DONE]
    fake_model.enqueue(first, second)
    async with run_codex(codex_bin, codex_home) as agent:
        await agent.prompt("please create hello.txt")
        request = await agent.asked()
        always = choose(request, Effect.ALLOW, Scope.ALWAYS)
        assert next(a.rule for a in request.actions if a.id == always.action_id) == "touch"
        await agent.decide(request, always)
        assert (await agent.turn_end()).status is TurnStatus.COMPLETED
        mark = await agent.prompt("now create second.txt")
        turn = await agent.turn_end()
    assert turn.status is TurnStatus.COMPLETED
    assert agent.opened_since(mark) == []
    assert (codex_home.workspace / "second.txt").exists()


# --- file change approvals ---------------------------------------------------------------------


async def patch_turn(
    codex_bin: str,
    home: CodexHome,
    fake: fm.FakeResponses,
    steps: list[fm.Step],
    click: Effect,
    scope: Scope = Scope.ONCE,
) -> tuple[CodexAgent, InteractionRequest, TurnCompleted]:
    fake.enqueue([*steps, DONE])
    async with run_codex(codex_bin, home, sandbox="read-only") as agent:
        await agent.prompt("please write the file")
        request = await agent.asked()
        await agent.decide(request, choose(request, click, scope))
        turn = await agent.turn_end()
    return agent, request, turn


async def test_accepted_file_change_is_written(
    codex_bin: str, codex_home: CodexHome, fake_model: fm.FakeResponses
) -> None:
    steps = [fm.apply_patch(add_file("patched.txt", "patched by the model"))]
    _, request, turn = await patch_turn(codex_bin, codex_home, fake_model, steps, Effect.ALLOW)
    assert request.kind is InteractionKind.APPROVAL
    assert isinstance(request.detail, FileChange)
    assert any(path.endswith("patched.txt") for path in request.detail.paths)
    assert "patched by the model" in request.detail.diff
    assert turn.status is TurnStatus.COMPLETED
    assert (codex_home.workspace / "patched.txt").read_text() == "patched by the model\n"


async def test_file_change_allowed_for_the_session_is_not_asked_again(
    codex_bin: str, codex_home: CodexHome, fake_model: fm.FakeResponses
) -> None:
    # the grant covers the approved patch's paths, so the second patch edits the same file
    update = "*** Begin Patch\n*** Update File: one.txt\n@@\n-hello\n+hello again\n*** End Patch\n"
    steps = [fm.apply_patch(add_file("one.txt")), fm.apply_patch(update)]
    agent, _, turn = await patch_turn(
        codex_bin, codex_home, fake_model, steps, Effect.ALLOW, Scope.SESSION
    )
    assert turn.status is TurnStatus.COMPLETED
    assert len(agent.opened_since(0)) == 1
    assert (codex_home.workspace / "one.txt").read_text() == "hello again\n"


async def test_declined_file_change_is_not_written_and_the_model_is_told(
    codex_bin: str, codex_home: CodexHome, fake_model: fm.FakeResponses
) -> None:
    steps = [fm.apply_patch(add_file("patched.txt"))]
    _, _, turn = await patch_turn(codex_bin, codex_home, fake_model, steps, Effect.DENY)
    assert turn.status is TurnStatus.COMPLETED
    assert not (codex_home.workspace / "patched.txt").exists()
    assert fake_model.last_tool_output() == "patch rejected by user"


# --- questions ---------------------------------------------------------------------------------


def question(qid: str, header: str, text: str, *labels: str) -> dict[str, object]:
    options = [{"label": label, "description": f"use {label}"} for label in labels]
    return {"id": qid, "header": header, "question": text, "options": options}


async def test_questions_answered_with_an_option_and_with_free_text(
    codex_bin: str, codex_home: CodexHome, fake_model: fm.FakeResponses
) -> None:
    questions = [
        question("color", "Color", "Which color should I use?", "Red (Recommended)", "Blue"),
        question("name", "Name", "What should the file be called?", "notes.txt", "notes.md"),
    ]
    fake_model.enqueue([fm.request_user_input(questions), DONE])
    async with run_codex(
        codex_bin, codex_home, enable=["default_mode_request_user_input"]
    ) as agent:
        await agent.prompt("ask me first")
        request = await agent.asked()
        assert request.kind is InteractionKind.QUESTION
        color, name = request.questions
        assert [o.label for o in color.options] == ["Red (Recommended)", "Blue"]
        assert name.allow_other
        [blue] = [o.id for o in color.options if o.label == "Blue"]
        answers = {
            "color": Answer(option_ids=(blue,)),
            "name": Answer(other="call it shopping-list.txt"),
        }
        await agent.decide(request, Decision(answers=answers))
        turn = await agent.turn_end()
    assert turn.status is TurnStatus.COMPLETED
    assert agent.closed(request) == [Resolution.ANSWERED]
    model_was_told = fake_model.last_tool_output()
    assert '"color":{"answers":["Blue"]}' in model_was_told
    assert "call it shopping-list.txt" in model_was_told


# --- interrupt, resume, failure ----------------------------------------------------------------


async def test_interrupt_with_an_approval_pending_closes_it_as_cancelled_by_the_agent(
    codex_bin: str, codex_home: CodexHome, fake_model: fm.FakeResponses
) -> None:
    async with run_codex(codex_bin, codex_home) as agent:
        request = await ask_to_touch(agent, fake_model)
        await agent.runtime.send(Interrupt())
        await agent.next(TurnCompleted)
        if not agent.closed(request):  # 0.171 resolves the request after turn/completed
            await agent.next(InteractionClosed)
        [turn] = [e for e in agent.seen if isinstance(e, TurnCompleted)]
        assert turn.status is TurnStatus.INTERRUPTED
        assert agent.closed(request) == [Resolution.CANCELLED_BY_AGENT]
        with pytest.raises(CodecUsageError):  # a late click is refused, nothing is written
            await agent.decide(request, choose(request, Effect.ALLOW))
    assert not (codex_home.workspace / "hello.txt").exists()


async def test_thread_resumed_in_a_new_process_keeps_its_id_and_history(
    codex_bin: str, codex_home: CodexHome, fake_model: fm.FakeResponses
) -> None:
    fake_model.enqueue([fm.message("first answer")], [fm.message("second answer")])
    async with run_codex(codex_bin, codex_home) as first:
        await first.prompt("remember the word pineapple")
        assert (await first.turn_end()).status is TurnStatus.COMPLETED
    thread_id = first.session.native_id
    async with run_codex(codex_bin, codex_home, resume=thread_id) as second:
        assert second.session.native_id == thread_id
        assert second.session.resumed
        await second.prompt("which word?")
        reply = await second.next(AgentMessage)
        turn = await second.turn_end()
    assert reply.text == "second answer"
    assert turn.status is TurnStatus.COMPLETED
    history = fake_model.model_requests()[-1].user_texts()
    assert "remember the word pineapple" in history
    assert "which word?" in history


async def test_reply_streams_as_deltas_before_the_whole_message(
    codex_bin: str, codex_home: CodexHome, fake_model: fm.FakeResponses
) -> None:
    fake_model.enqueue([fm.message("one two three four five six", chunks=3)])
    async with run_codex(codex_bin, codex_home) as agent:
        await agent.prompt("count")
        message = await agent.next(AgentMessage)
        await agent.turn_end()
    deltas = [e.text for e in agent.seen if isinstance(e, TextDelta)]
    assert len(deltas) == 3
    assert "".join(deltas) == message.text == "one two three four five six"


@pytest.mark.parametrize(
    ("failure", "shown"),
    [
        (fm.failure("the fake model fell over"), "the fake model fell over"),
        (fm.failure("overloaded", http_status=500), "high demand"),
    ],
    ids=["response.failed", "http-500"],
)
async def test_model_failure_fails_the_turn_with_the_error(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: fm.FakeResponses,
    failure: fm.Step,
    shown: str,
) -> None:
    fake_model.enqueue([failure])
    async with run_codex(codex_bin, codex_home) as agent:
        await agent.prompt("hello")
        turn = await agent.turn_end()
    assert turn.status is TurnStatus.FAILED
    assert turn.error is not None and shown in turn.error


# --- extra permissions (needs the under-development request_permissions_tool) -------------


@pytest.mark.parametrize(
    ("effect", "written"), [(Effect.ALLOW, True), (Effect.DENY, False)], ids=["grant", "deny"]
)
async def test_permissions_request_decides_whether_the_agent_may_write_outside(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: fm.FakeResponses,
    effect: Effect,
    written: bool,
) -> None:
    outside = codex_home.outside
    ask = fm.function_call(
        "request_permissions",
        {"permissions": {"file_system": {"write": [str(outside)]}}, "reason": "write a report"},
    )
    fake_model.enqueue([ask, fm.shell(f"touch {outside}/report.txt"), DONE])
    async with run_codex(codex_bin, codex_home, enable=["request_permissions_tool"]) as agent:
        await agent.prompt("write the report outside the workspace")
        request = await agent.asked()
        assert isinstance(request.detail, Permissions)
        assert any(str(outside) in asked for asked in request.detail.requested)
        scope = Scope.TURN if effect is Effect.ALLOW else Scope.ONCE
        await agent.decide(request, choose(request, effect, scope))
        turn = await agent.turn_end()
    assert turn.status is TurnStatus.COMPLETED
    assert (outside / "report.txt").exists() is written
