#!/usr/bin/env python3
"""Record the project's own Codex app-server transcripts from the real, pinned binary.

Each scenario runs ``codex app-server`` through the project's adapter (``run_codex`` in
``tests/codex_env.py``: ``AgentRuntime`` + ``CodexAppServerCodec`` + ``AgentProcess``)
against the scripted fake model (``tests/servers/fake_responses.py``) in a hermetic
CODEX_HOME, and writes ``tests/transcripts/codex-0.171/<scenario>.jsonl``: one line per
JSON-RPC message, ``{"t": seconds since the scenario started, "dir": ">>" (to the agent) |
"<<" (from it), "msg"}``, with the real paths replaced by ``$CODEX_HOME``, ``$WORKSPACE``
and ``$OUTSIDE`` (a directory outside the workspace). A line ``{"dir": "--", "msg": {"note":
...}}`` marks a new app-server process (resume). What ``>>`` shows is what the gateway
itself sends.

Each scenario prints what a person would notice (files, turn status, what the model was
told) and fails, writing nothing, if the binary did not behave as the scenario expects.

    .venv/bin/python scripts/record_codex_transcripts.py [--only NAME ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.domain import Answer, Decision, Effect, InteractionRequest, Plan, Scope  # noqa: E402
from gateway.events import InteractionOpened, Interrupt, TurnCompleted  # noqa: E402
from tests.codex_env import CodexAgent, CodexHome, choose, make_codex_home  # noqa: E402
from tests.codex_env import run_codex as run_codex_in  # noqa: E402
from tests.servers import fake_responses as fm  # noqa: E402
from tests.transcript_recording import ScenarioFailed, Transcript, check  # noqa: E402

DEFAULT_BIN = ROOT / ".cache" / "agents" / "node_modules" / ".bin" / "codex"
DEFAULT_OUT = ROOT / "tests" / "transcripts" / "codex-0.171"


@dataclass
class Run:
    """What a scenario gets: the binary, the fake model, the home and the transcript."""

    codex_bin: str
    fake: fm.FakeResponses
    home: CodexHome
    transcript: Transcript
    processes: int = 0

    @asynccontextmanager
    async def codex(self, **options: Any) -> AsyncIterator[CodexAgent]:
        if self.processes:
            self.transcript.add("--", {"note": "new app-server process"})
        self.processes += 1
        tap = self.transcript.tap
        async with run_codex_in(self.codex_bin, self.home, tap=tap, **options) as agent:
            yield agent

    def exists(self, name: str) -> bool:
        return (self.home.workspace / name).exists()

    def outside(self, name: str) -> bool:
        return (self.home.outside / name).exists()

    def told(self) -> str:
        """The tool output the model got last (what the agent reported back)."""
        return self.fake.last_tool_output()


DONE = fm.message(lambda r: f"Done. Tool said: {(r.tool_output() or '')[:300]}")
TOUCH = "touch hello.txt"
UPDATE_ONE = "*** Begin Patch\n*** Update File: one.txt\n@@\n-hello\n+hello again\n*** End Patch\n"


def add_file(name: str, text: str = "hello") -> str:
    return f"*** Begin Patch\n*** Add File: {name}\n+{text}\n*** End Patch\n"


def question(qid: str, header: str, text: str, *labels: str) -> dict[str, Any]:
    options = [{"label": label, "description": f"use {label}"} for label in labels]
    return {"id": qid, "header": header, "question": text, "options": options}


QUESTIONS = [
    question("color", "Color", "Which color should I use?", "Red (Recommended)", "Blue"),
    question("name", "Name", "What should the file be called?", "notes.txt", "notes.md"),
]


def asked_again(agent: CodexAgent, mark: int) -> bool:
    return any(isinstance(e, InteractionOpened) for e in agent.seen[mark:])


def show(request: InteractionRequest) -> None:
    print(f"    asked: {request.title}; actions: {[a.id for a in request.actions]}")


# --- command approvals -------------------------------------------------------------------------


async def one_command(run: Run, effect: Effect, scope: Scope = Scope.ONCE) -> TurnCompleted:
    run.fake.enqueue([fm.shell(TOUCH, escalated=True), DONE])
    async with run.codex() as agent:
        await agent.prompt("please create hello.txt")
        request = await agent.asked()
        show(request)
        await agent.decide(request, choose(request, effect, scope))
        return await agent.turn_end()


async def shell_accept(run: Run) -> None:
    turn = await one_command(run, Effect.ALLOW)
    check(turn.status == "completed" and run.exists("hello.txt"), "completed, file created")


async def shell_decline(run: Run) -> None:
    turn = await one_command(run, Effect.DENY)
    check(turn.status == "completed", f"turn {turn.status} (decline is not listed)")
    check(not run.exists("hello.txt"), "file not created")
    check("rejected by user" in run.told(), f"model told: {run.told()!r}")


async def shell_cancel(run: Run) -> None:
    turn = await one_command(run, Effect.CANCEL)
    check(turn.status == "interrupted", f"turn {turn.status}")
    check(not run.exists("hello.txt"), "file not created")


async def shell_execpolicy_amendment(run: Run) -> None:
    first = [fm.shell(TOUCH, escalated=True, prefix_rule=["touch"]), DONE]
    second = [fm.shell("touch second.txt", escalated=True, prefix_rule=["touch"]), DONE]
    run.fake.enqueue(first, second)
    async with run.codex() as agent:
        await agent.prompt("please create hello.txt")
        request = await agent.asked()
        show(request)
        await agent.decide(request, choose(request, Effect.ALLOW, Scope.ALWAYS))
        check((await agent.turn_end()).status == "completed", "first turn completed")
        mark = await agent.prompt("now create second.txt")
        await agent.turn_end()
    check(not asked_again(agent, mark), "second matching command not asked")
    check(run.exists("second.txt"), "second.txt created")
    check((run.home.home / "rules" / "default.rules").is_file(), "rule kept in $CODEX_HOME/rules")


# --- file changes ------------------------------------------------------------------------------


async def patches(run: Run, steps: list[fm.Step], *clicks: tuple[Effect, Scope]) -> CodexAgent:
    """A read-only sandbox, so that every patch is asked; one click per expected request."""
    run.fake.enqueue([*steps, DONE])
    async with run.codex(sandbox="read-only") as agent:
        await agent.prompt("please write the files")
        for effect, scope in clicks:
            request = await agent.asked()
            show(request)
            await agent.decide(request, choose(request, effect, scope))
        await agent.turn_end()
    opened = [e for e in agent.seen if isinstance(e, InteractionOpened)]
    check(len(opened) == len(clicks), f"asked {len(opened)} time(s)")
    return agent


async def patch_accept(run: Run) -> None:
    await patches(run, [fm.apply_patch(add_file("patched.txt"))], (Effect.ALLOW, Scope.ONCE))
    check(run.exists("patched.txt"), "patched.txt created")


async def patch_accept_for_session(run: Run) -> None:
    # the session grant covers the approved patch's paths: the second patch edits that file
    steps = [fm.apply_patch(add_file("one.txt")), fm.apply_patch(UPDATE_ONE)]
    await patches(run, steps, (Effect.ALLOW, Scope.SESSION))
    text = (run.home.workspace / "one.txt").read_text()
    check(text == "hello again\n", f"one.txt written twice: {text!r}")


async def patch_accept_for_session_other_file(run: Run) -> None:
    steps = [fm.apply_patch(add_file("one.txt")), fm.apply_patch(add_file("two.txt"))]
    await patches(run, steps, (Effect.ALLOW, Scope.SESSION), (Effect.ALLOW, Scope.ONCE))
    check(run.exists("one.txt") and run.exists("two.txt"), "both files created")


async def patch_decline(run: Run) -> None:
    await patches(run, [fm.apply_patch(add_file("patched.txt"))], (Effect.DENY, Scope.ONCE))
    check(not run.exists("patched.txt"), "patched.txt not created")
    check(run.told() == "patch rejected by user", f"model told: {run.told()!r}")


# --- questions, interrupt, resume, failures ----------------------------------------------------


async def user_input_other(run: Run) -> None:
    run.fake.enqueue([fm.request_user_input(QUESTIONS), DONE])
    async with run.codex(enable=["default_mode_request_user_input"]) as agent:
        await agent.prompt("ask me first")
        request = await agent.asked()
        color, _ = request.questions
        [blue] = [option.id for option in color.options if option.label == "Blue"]
        answers = {"color": Answer(option_ids=(blue,)), "name": Answer(other="shopping-list.txt")}
        await agent.decide(request, Decision(answers=answers))
        turn = await agent.turn_end()
    check(turn.status == "completed", "turn completed")
    check("shopping-list.txt" in run.told(), f"model told: {run.told()!r}")


PLAN_TEXT = "# Plan\n\n1. Create `hello.txt`\n2. Say done\n"
PROPOSED = f"Here is my plan.\n\n<proposed_plan>\n{PLAN_TEXT}</proposed_plan>\n"


def in_plan_mode(request: fm.ModelRequest) -> bool:
    return "Plan" in request.mode_told()


async def plan_turn(agent: CodexAgent, text: str, mode: str | None) -> InteractionRequest:
    """A turn that ends with a proposed plan: the plan card comes after the turn's end."""
    await agent.prompt(text, mode=mode)
    turn = await agent.turn_end()
    check(turn.status == "completed", "plan turn completed")
    return await agent.asked()


async def plan_implement(run: Run) -> None:
    """/plan, then Implement as Codex's TUI does it: a default-mode turn, "Implement the plan."
    A turn with no collaborationMode keeps the thread's last mode."""
    run.fake.enqueue([fm.message(PROPOSED)], [fm.message(PROPOSED)], [fm.shell(TOUCH), DONE])
    async with run.codex(experimental_api=True) as agent:
        plan = await plan_turn(agent, "plan hello.txt", "plan")
        check(plan.detail == Plan(markdown=PLAN_TEXT), f"plan: {plan.detail!r}")
        check(in_plan_mode(run.fake.model_requests()[-1]), "plan-mode instructions sent")
        again = await plan_turn(agent, "ok", None)
        check(in_plan_mode(run.fake.model_requests()[-1]), "no mode given: still plan mode")
        check(again.detail == plan.detail, "a plan again")
        await agent.prompt("Implement the plan.", mode="default")
        turn = await agent.turn_end()  # the workspace may be written: nothing is asked
    told = run.fake.model_requests()[-1].mode_told()
    check(told == "# Collaboration Mode: Default", f"default mode told: {told!r}")
    check(turn.status == "completed", "implementing turn completed")
    check(run.exists("hello.txt"), "file created")


async def plan_keep_planning(run: Run) -> None:
    """Keep planning: a plan-mode turn with the person's message."""
    run.fake.enqueue([fm.message(PROPOSED)], [fm.message(PROPOSED)])
    async with run.codex(experimental_api=True) as agent:
        await plan_turn(agent, "plan hello.txt", "plan")
        again = await plan_turn(agent, "use two files instead", "plan")
    check(isinstance(again.detail, Plan), "a new plan")
    check(in_plan_mode(run.fake.model_requests()[-1]), "still plan mode")
    check("use two files instead" in run.fake.model_requests()[-1].user_texts(), "message read")
    check(not run.exists("hello.txt"), "nothing created")


async def interrupt_pending_approval(run: Run) -> None:
    run.fake.enqueue([fm.shell(TOUCH, escalated=True), DONE])
    async with run.codex() as agent:
        await agent.prompt("please create hello.txt")
        request = await agent.asked()
        await agent.runtime.send(Interrupt())
        turn = await agent.turn_end()
        if not agent.closed(request):
            await agent.until(lambda e: bool(agent.closed(request)))
    check(turn.status == "interrupted", "turn interrupted")
    check(agent.closed(request) == ["cancelled_by_agent"], "request closed by the agent")
    check(not run.exists("hello.txt"), "file not created")


async def resume(run: Run) -> None:
    run.fake.enqueue([fm.message("first answer")], [fm.message("second answer")])
    async with run.codex() as agent:
        await agent.prompt("remember the word pineapple")
        check((await agent.turn_end()).status == "completed", "first turn completed")
    thread_id = agent.session.native_id
    async with run.codex(resume=thread_id) as agent:
        check(agent.session.native_id == thread_id, "resumed thread has the same id")
        await agent.prompt("which word?")
        check((await agent.turn_end()).status == "completed", "resumed turn completed")
    history = run.fake.model_requests()[-1].user_texts()
    check("remember the word pineapple" in history, "the model saw the first turn")


async def one_failing_turn(run: Run, step: fm.Step) -> TurnCompleted:
    run.fake.enqueue([step])
    async with run.codex() as agent:
        await agent.prompt("hello")
        return await agent.turn_end()


async def model_failed(run: Run) -> None:
    turn = await one_failing_turn(run, fm.failure("fake model failure"))
    check(turn.status == "failed", "turn failed")
    check("fake model failure" in (turn.error or ""), f"error: {turn.error}")


async def model_http_500(run: Run) -> None:
    turn = await one_failing_turn(run, fm.failure("overloaded", http_status=500))
    check(turn.status == "failed" and bool(turn.error), f"turn failed: {turn.error}")


# --- extra permissions -------------------------------------------------------------------------

PERMISSIONS_TOOL = ["request_permissions_tool"]  # under development in 0.171


def ask_write_outside(run: Run) -> fm.Step:
    permissions = {"file_system": {"write": [str(run.home.outside)]}}
    reason = "I need to write the report outside the workspace"
    return fm.function_call("request_permissions", {"permissions": permissions, "reason": reason})


async def permissions(run: Run, effect: Effect, scope: Scope) -> None:
    """The model asks for write access outside the workspace and writes there; the next turn
    writes there again without asking. Only a session grant lets the second write through."""
    first = [ask_write_outside(run), fm.shell(f"touch {run.home.outside}/one.txt"), DONE]
    second = [fm.shell(f"touch {run.home.outside}/two.txt"), DONE]
    run.fake.enqueue(first, second)
    async with run.codex(enable=PERMISSIONS_TOOL) as agent:
        await agent.prompt("write one.txt outside")
        request = await agent.asked()
        show(request)
        await agent.decide(request, choose(request, effect, scope))
        check((await agent.turn_end()).status == "completed", "first turn completed")
        print(f"    model told: {run.fake.model_requests()[1].tool_output()!r}")
        mark = await agent.prompt("write two.txt outside")
        await agent.turn_end()
    check(not asked_again(agent, mark), "second turn did not ask")
    granted = effect is Effect.ALLOW
    check(run.outside("one.txt") == granted, f"one.txt written: {granted}")
    session = scope is Scope.SESSION
    check(run.outside("two.txt") == session, f"two.txt written: {session}")


async def permissions_grant_turn(run: Run) -> None:
    await permissions(run, Effect.ALLOW, Scope.TURN)


async def permissions_grant_session(run: Run) -> None:
    await permissions(run, Effect.ALLOW, Scope.SESSION)


async def permissions_deny(run: Run) -> None:
    await permissions(run, Effect.DENY, Scope.ONCE)


async def permissions_tool_off(run: Run) -> None:
    """Without the feature flag the tool is not offered, and a call to it is refused."""
    run.fake.enqueue([ask_write_outside(run), DONE])
    async with run.codex() as agent:
        await agent.prompt("write outside")
        await agent.turn_end()
    check(not asked_again(agent, 0), "nothing asked")
    check("request_permissions" not in run.fake.model_requests()[0].tool_names, "not offered")
    check("unsupported call" in run.told(), f"model told: {run.told()!r}")


async def shell_additional_permissions(run: Run) -> None:
    """With exec_permission_approvals a command may ask for sandboxed extra access: it comes
    as a command approval carrying additionalPermissions (only with the experimental API)."""
    extra = {"file_system": {"write": [str(run.home.outside)]}}
    cmd = f"touch {run.home.outside}/extra.txt"
    run.fake.enqueue(
        [
            fm.shell(
                cmd,
                justification="write outside",
                sandbox_permissions="with_additional_permissions",
                additional_permissions=extra,
            ),
            DONE,
        ]
    )
    async with run.codex(enable=["exec_permission_approvals"], experimental_api=True) as agent:
        await agent.prompt("write outside")
        request = await agent.asked()
        show(request)
        asks = [line for line in run.transcript.lines if "commandExecution/requestApproval" in line]
        check('"additionalPermissions": {' in asks[-1], "additionalPermissions in the request")
        await agent.decide(request, choose(request, Effect.ALLOW))
        turn = await agent.turn_end()
    check(turn.status == "completed", "turn completed")
    check(run.outside("extra.txt"), "extra.txt written outside")


Scenario = Callable[[Run], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {
    scenario.__name__: scenario
    for scenario in (
        shell_accept,
        shell_decline,
        shell_cancel,
        shell_execpolicy_amendment,
        patch_accept,
        patch_accept_for_session,
        patch_accept_for_session_other_file,
        patch_decline,
        user_input_other,
        interrupt_pending_approval,
        resume,
        model_failed,
        model_http_500,
        permissions_grant_turn,
        permissions_grant_session,
        permissions_deny,
        permissions_tool_off,
        shell_additional_permissions,
        plan_implement,
        plan_keep_planning,
    )
}


async def record(name: str, scenario: Scenario, codex_bin: str) -> Transcript | None:
    """Run one scenario; its transcript, or None if the binary did not behave."""
    print(f"{name}:")
    async with fm.FakeResponses() as fake:
        with make_codex_home(fake.base_url) as home:
            transcript = Transcript(home.substitutions())
            run = Run(codex_bin=codex_bin, fake=fake, home=home, transcript=transcript)
            try:
                await scenario(run)
            except (ScenarioFailed, AssertionError, TimeoutError) as exc:
                print(f"    FAILED: {exc!r}; transcript not written")
                return None
    return transcript


async def record_all(names: Iterable[str], codex_bin: str) -> dict[str, Transcript | None]:
    return {name: await record(name, SCENARIOS[name], codex_bin) for name in names}


def main() -> int:
    parser = argparse.ArgumentParser(description="Record Codex app-server transcripts.")
    parser.add_argument("--codex", default=str(DEFAULT_BIN))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), default=None)
    args = parser.parse_args()
    recorded = asyncio.run(record_all(args.only or list(SCENARIOS), args.codex))
    args.out.mkdir(parents=True, exist_ok=True)
    for name, transcript in recorded.items():
        if transcript is not None:
            transcript.write(args.out / f"{name}.jsonl")
    return 0 if all(transcript is not None for transcript in recorded.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
