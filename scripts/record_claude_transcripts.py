#!/usr/bin/env python3
"""Record the project's own Claude Code stream-json transcripts from the real, pinned binary.

Each scenario runs ``claude -p --input-format stream-json --output-format stream-json
--verbose --permission-prompt-tool stdio --include-partial-messages`` through the project's
adapter (``run_claude`` in ``tests/claude_env.py``: ``AgentRuntime`` + ``ClaudeCodeCodec`` +
``AgentProcess``) against the scripted fake Messages API (``tests/servers/fake_anthropic.py``)
in a hermetic home, and writes ``tests/transcripts/claude-2.1.197/<scenario>.jsonl``: one
line per stream-json message, ``{"t": seconds since the scenario started, "dir": ">>" (to
the agent) | "<<" (from it), "msg"}``, with the real paths replaced by ``$HOME`` and
``$WORKSPACE``. A line ``{"dir": "--", "msg": {"argv": [...]}}`` starts each process. What
``>>`` shows is what the gateway itself sends.

Each scenario prints what a person would notice (files, how the turn ended, what the model
was told) and fails, writing nothing, if the binary did not behave as the scenario expects.

    .venv/bin/python scripts/record_claude_transcripts.py [--only NAME ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.claude_launch import ClaudeLaunch  # noqa: E402
from gateway.domain import Answer, Decision, Resolution  # noqa: E402
from gateway.domain import TurnStatus as Status  # noqa: E402
from gateway.events import Interrupt, PolicyChanged, Warning  # noqa: E402
from tests.claude_env import ClaudeAgent, ClaudeHome, make_claude_home, run_claude  # noqa: E402
from tests.servers import fake_anthropic as fm  # noqa: E402
from tests.transcript_recording import ScenarioFailed, Transcript, check  # noqa: E402

DEFAULT_BIN = ROOT / ".cache" / "agents" / "node_modules" / ".bin" / "claude"
DEFAULT_OUT = ROOT / "tests" / "transcripts" / "claude-2.1.197"


@dataclass
class Run:
    """What a scenario gets: the binary, the fake model, the home and the transcript."""

    claude_bin: str
    fake: fm.FakeAnthropic
    home: ClaudeHome
    transcript: Transcript

    @asynccontextmanager
    async def claude(self, launch: ClaudeLaunch | None = None) -> AsyncIterator[ClaudeAgent]:
        launch = launch or ClaudeLaunch()
        argv = ["claude", *launch.argv()[1:]]
        self.transcript.add("--", {"argv": argv})
        async with run_claude(
            self.claude_bin, self.home, launch=launch, tap=self.transcript.tap
        ) as agent:
            yield agent

    def told(self) -> tuple[str, bool] | None:
        """What the model was told about the last tool call of the last request."""
        requests = self.fake.model_requests()
        return requests[-1].tool_result() if requests else None


def act(action_id: str, message: str | None = None) -> Decision:
    return Decision(action_id=action_id, message=message)


Scenario = Callable[[Run], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


# --- approvals -------------------------------------------------------------------------------


@scenario
async def bash_allow(run: Run) -> None:
    run.fake.enqueue([fm.bash("touch hello.txt", "Create hello.txt"), fm.DONE])
    async with run.claude() as claude:
        await claude.prompt("Create hello.txt please.")
        request = await claude.asked()
        await claude.decide(request, act("allow"))
        turn = await claude.turn_end()
    check(turn.status is Status.COMPLETED, f"turn {turn.status}")
    check((run.home.workspace / "hello.txt").exists(), "hello.txt was created")
    check(claude.closed(request) == [Resolution.ANSWERED], "closed as answered")


@scenario
async def bash_deny(run: Run) -> None:
    run.fake.enqueue([fm.bash("touch hello.txt", "Create hello.txt"), fm.DONE])
    async with run.claude() as claude:
        await claude.prompt("Create hello.txt please.")
        request = await claude.asked()
        await claude.decide(request, act("deny", "Not now, use /tmp."))
        turn = await claude.turn_end()
    check(turn.status is Status.COMPLETED, f"turn {turn.status}")
    check(not (run.home.workspace / "hello.txt").exists(), "hello.txt was not created")
    check(run.told() == ("Not now, use /tmp.", True), f"the model was told {run.told()}")


@scenario
async def bash_deny_stop(run: Run) -> None:
    run.fake.enqueue([fm.bash("touch hello.txt", "Create hello.txt"), fm.DONE])
    run.fake.enqueue([fm.text("Fine, stopped.")])
    async with run.claude() as claude:
        await claude.prompt("Create hello.txt please.")
        request = await claude.asked()
        await claude.decide(request, act("stop"))
        turn = await claude.turn_end()
        check(turn.status is Status.INTERRUPTED, f"turn {turn.status}")
        await claude.prompt("What now?")
        second = await claude.turn_end()
    check(second.status is Status.COMPLETED, "the next turn works")
    check(not (run.home.workspace / "hello.txt").exists(), "hello.txt was not created")


@scenario
async def bash_allow_rule(run: Run) -> None:
    for _ in range(2):
        run.fake.enqueue([fm.bash("touch hello.txt", "Create hello.txt"), fm.DONE])
    async with run.claude() as claude:
        await claude.prompt("Create hello.txt please.")
        request = await claude.asked()
        [rule] = [a for a in request.actions if "Bash(touch hello.txt)" in a.label]
        print(f"      {rule.label!r}: {rule.description}")
        await claude.decide(request, act(rule.id))
        await claude.turn_end()
        mark = await claude.prompt("Once more please.")
        turn = await claude.turn_end()
    check(claude.opened_since(mark) == [], "the second identical command was not asked")
    check(turn.status is Status.COMPLETED, f"turn {turn.status}")


@scenario
async def interrupt_pending(run: Run) -> None:
    run.fake.enqueue([fm.bash("touch hello.txt", "Create hello.txt"), fm.DONE])
    async with run.claude() as claude:
        await claude.prompt("Create hello.txt please.")
        request = await claude.asked()
        await claude.runtime.send(Interrupt())
        turn = await claude.turn_end()
        check(turn.status is Status.INTERRUPTED, f"turn {turn.status}")
        check(claude.closed(request) == [Resolution.CANCELLED_BY_AGENT], "request cancelled")
        await claude.runtime.stop()
    check(not (run.home.workspace / "hello.txt").exists(), "hello.txt was not created")


@scenario
async def edit_allow(run: Run) -> None:
    notes = run.home.workspace / "notes.txt"
    notes.write_text("alpha\nbeta\ngamma\n")
    run.fake.enqueue([fm.read(str(notes)), fm.edit(str(notes), "beta", "BETA"), fm.DONE])
    async with run.claude() as claude:
        await claude.prompt("Capitalise beta in notes.txt.")
        request = await claude.asked()
        print("      diff:", request.detail)
        await claude.decide(request, act("allow"))
        await claude.turn_end()
    check(notes.read_text() == "alpha\nBETA\ngamma\n", "notes.txt was edited")


@scenario
async def edit_deny(run: Run) -> None:
    notes = run.home.workspace / "notes.txt"
    notes.write_text("alpha\nbeta\n")
    run.fake.enqueue([fm.read(str(notes)), fm.edit(str(notes), "beta", "BETA"), fm.DONE])
    async with run.claude() as claude:
        await claude.prompt("Capitalise beta in notes.txt.")
        request = await claude.asked()
        await claude.decide(request, act("deny", "Keep it lower case."))
        await claude.turn_end()
    check(notes.read_text() == "alpha\nbeta\n", "notes.txt was not edited")
    check(run.told() == ("Keep it lower case.", True), f"the model was told {run.told()}")


@scenario
async def write_allow(run: Run) -> None:
    target = run.home.workspace / "src" / "new.py"
    run.fake.enqueue([fm.write(str(target), "print('hi')\n"), fm.DONE])
    async with run.claude() as claude:
        await claude.prompt("Write src/new.py.")
        request = await claude.asked()
        await claude.decide(request, act("allow"))
        await claude.turn_end()
    check(target.read_text() == "print('hi')\n", "src/new.py was written")


# --- questions and plans -----------------------------------------------------------------------

QUESTIONS = [fm.COLOR, fm.CHECKS]


@scenario
async def ask_answers(run: Run) -> None:
    run.fake.enqueue([fm.ask_user_question(QUESTIONS), fm.DONE])
    async with run.claude() as claude:
        await claude.prompt("Ask me about the button.")
        request = await claude.asked()
        answers = {"q0": Answer(option_ids=("1",)), "q1": Answer(option_ids=("0", "2"))}
        await claude.decide(request, Decision(answers=answers))
        await claude.turn_end()
    told = run.told()
    check(told is not None and '="Blue"' in told[0] and '="Lint, Tests"' in told[0], f"{told}")


@scenario
async def ask_other(run: Run) -> None:
    run.fake.enqueue([fm.ask_user_question(QUESTIONS[:1]), fm.DONE])
    async with run.claude() as claude:
        await claude.prompt("Ask me about the button.")
        request = await claude.asked()
        answers = {"q0": Answer(other="Green, like the logo")}
        await claude.decide(request, Decision(answers=answers))
        await claude.turn_end()
    told = run.told()
    check(told is not None and '="Green, like the logo"' in told[0], f"told {told}")


PLAN = "# Plan\n\n1. Create `hello.txt`.\n2. Say done.\n"


@scenario
async def plan_approve(run: Run) -> None:
    run.fake.enqueue([fm.exit_plan_mode(PLAN), fm.bash("touch hello.txt", "Create hello"), fm.DONE])
    async with run.claude(ClaudeLaunch(permission_mode="plan")) as claude:
        check(claude.session.policy["permission_mode"] == "plan", "the session runs in plan mode")
        await claude.prompt("Plan how to create hello.txt.")
        plan = await claude.asked()
        check(plan.kind.value == "plan", f"a plan interaction: {plan.title}")
        await claude.decide(plan, act("approve"))
        request = await claude.asked()
        check(request.title == "Run a command", "after the plan, the command is asked")
        await claude.decide(request, act("allow"))
        turn = await claude.turn_end()
    changed = [e for e in claude.seen if isinstance(e, PolicyChanged)]
    check(bool(changed), f"the mode change was reported: {[c.message for c in changed]}")
    check(turn.status is Status.COMPLETED, f"turn {turn.status}")
    check((run.home.workspace / "hello.txt").exists(), "hello.txt was created")
    result = run.fake.model_requests()[1].tool_result()
    told = result[0] if result is not None else ""
    check("approved" in told, f"the model was told the plan is approved: {told!r}")


@scenario
async def plan_keep_planning(run: Run) -> None:
    run.fake.enqueue([fm.exit_plan_mode(PLAN), fm.DONE])
    async with run.claude(ClaudeLaunch(permission_mode="plan")) as claude:
        await claude.prompt("Plan how to create hello.txt.")
        plan = await claude.asked()
        await claude.decide(plan, act("keep-planning", "Also add a README step."))
        turn = await claude.turn_end()
    check(turn.status is Status.COMPLETED, f"turn {turn.status}")
    check(run.told() == ("Also add a README step.", True), f"the model was told {run.told()}")


# --- the model API, the process --------------------------------------------------------------


@scenario
async def api_retry(run: Run) -> None:
    run.fake.enqueue([fm.http_error(529, "Overloaded", times=1)])
    async with run.claude() as claude:
        await claude.prompt("Say hello.")
        warning = await claude.next(Warning)
        print("      warning:", warning.message)
        check(warning.code == "api_retry", "the retry is reported")
        turn = await claude.turn_end()
    check(turn.status is Status.COMPLETED, f"turn {turn.status} after one retry")


@scenario
async def api_error(run: Run) -> None:
    run.fake.enqueue([fm.http_error(400, "Bad fake request")])
    async with run.claude() as claude:
        await claude.prompt("Say hello.")
        turn = await claude.turn_end()
        check(turn.status is Status.FAILED, f"turn {turn.status}: {turn.error}")
        await claude.runtime.stop()


@scenario
async def resume(run: Run) -> None:
    session_id = str(uuid.uuid4())
    run.fake.enqueue([fm.text("First answer.")], [fm.text("Second answer.")])
    async with run.claude(ClaudeLaunch(session_id=session_id)) as claude:
        await claude.prompt("Remember the word kiwi.")
        await claude.turn_end()
    async with run.claude(ClaudeLaunch(session_id=session_id, resume=True)) as claude:
        check(claude.session.resumed, "the session is resumed")
        await claude.prompt("Which word?")
        await claude.turn_end()
    prompts = run.fake.model_requests()[-1].prompts()
    check(prompts == ["Remember the word kiwi.", "Which word?"], f"history {prompts}")


# --- main ------------------------------------------------------------------------------------


async def record(name: str, claude_bin: str, out: Path) -> None:
    print(f"  {name}")
    async with fm.FakeAnthropic() as fake:
        with make_claude_home(fake.base_url) as home:
            transcript = Transcript(substitutions=home.substitutions())
            run = Run(claude_bin=claude_bin, fake=fake, home=home, transcript=transcript)
            await SCENARIOS[name](run)
            transcript.write(out / f"{name}.jsonl")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--claude", default=str(DEFAULT_BIN))
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in args.only or SCENARIOS:
        try:
            asyncio.run(record(name, args.claude, args.out))
        except (ScenarioFailed, AssertionError, TimeoutError) as exc:
            print(f"    FAILED: {exc!r}")
            failed.append(name)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
