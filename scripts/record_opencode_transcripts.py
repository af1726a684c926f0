#!/usr/bin/env python3
"""Record the project's own OpenCode transcripts from the real, pinned ``opencode serve``.

Each scenario runs ``opencode serve`` through the project's runtime (``OpenCodeAgent``: the
process, its HTTP API and its event stream, exactly what the gateway runs) against the
scripted fake Chat Completions API (``tests/servers/fake_chat_completions.py``) in a hermetic
home (``tests/opencode_env.py``), answers each request as a person would, and writes
``tests/transcripts/opencode-1.18.33/<scenario>.jsonl``: ``{"t", "dir": ">>" (a request we
made: method, path, body) | "<<" (its answer: status, path, body; or an SSE ``event``),
"msg"}``, with the real paths replaced by ``$HOME`` and ``$WORKSPACE``. The password is
never in it (it travels in a header, which the tap does not see). Plugin announcements
(``plugin.added``) are left out.

    .venv/bin/python scripts/record_opencode_transcripts.py [--only NAME ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.opencode_runtime import OpenCodeAgent, OpenCodeSettings  # noqa: E402
from gateway.domain import Answer, Decision  # noqa: E402
from gateway.events import (  # noqa: E402
    AgentEvent,
    InteractionOpened,
    Interrupt,
    Prompt,
    Respond,
    TurnCompleted,
)
from tests.agent_driver import placeholders  # noqa: E402
from tests.opencode_env import OpenCodeHome, make_opencode_home  # noqa: E402
from tests.servers import fake_chat_completions as fc  # noqa: E402
from tests.transcript_recording import ScenarioFailed, Transcript, check  # noqa: E402

DEFAULT_OUT = ROOT / "tests" / "transcripts" / "opencode-1.18.33"
DEADLINE = 60.0
COLOR = {
    "question": "Which color?",
    "header": "Color",
    "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}],
}

Answerer = Callable[[InteractionOpened], Awaitable[AgentEvent | None]]


async def run_turn(
    agent: OpenCodeAgent, prompt: str, decide: Callable[[InteractionOpened], Decision | None]
) -> TurnCompleted:
    """Prompt, answer every request with ``decide`` (None: /stop instead), until the end."""
    await agent.send(Prompt(text=prompt))
    async with asyncio.timeout(DEADLINE):
        async for event in agent.events():
            if isinstance(event, InteractionOpened):
                decision = decide(event)
                if decision is None:
                    await agent.send(Interrupt())
                else:
                    key = event.request.native_key
                    await agent.send(Respond(native_key=key, decision=decision))
            if isinstance(event, TurnCompleted):
                return event
    raise ScenarioFailed("the events ended before the turn did")


def binary() -> str:
    found = ROOT / ".cache" / "agents" / "node_modules" / ".bin" / "opencode"
    return str(found)


async def scenario(name: str, out: Path) -> None:
    async with fc.FakeChatCompletions() as fake:
        with make_opencode_home(fake.base_url) as home:
            transcript = Transcript(substitutions=_subs(home))

            def tap(direction: str, msg: object) -> None:
                event = msg.get("event") if isinstance(msg, dict) else None
                if isinstance(event, dict) and event.get("type") == "plugin.added":
                    return
                transcript.add(direction, msg)

            settings = OpenCodeSettings(
                command=[binary()], cwd=home.workspace, env=home.env, stop_grace_seconds=2
            )
            print(name)
            async with OpenCodeAgent(settings, tap=tap) as agent:
                await SCENARIOS[name](agent, fake, home)
            transcript.write(out / f"{name}.jsonl")


def _subs(home: OpenCodeHome) -> list[tuple[str, str]]:
    # the session's "path" is the workspace without its leading slash
    relative = [(str(home.workspace).lstrip("/"), "$WORKSPACE_RELATIVE")]
    return placeholders([(str(home.home), "$HOME"), (str(home.workspace), "$WORKSPACE")], relative)


async def once(agent: OpenCodeAgent, fake: fc.FakeChatCompletions, home: OpenCodeHome) -> None:
    fake.enqueue([fc.bash("echo hi > made.txt", "Write made.txt"), fc.DONE])
    ended = await run_turn(agent, "make a file", lambda _: Decision(action_id="once"))
    check(ended.status.value == "completed", "the turn completed")
    check((home.workspace / "made.txt").exists(), "made.txt was written")


async def always(agent: OpenCodeAgent, fake: fc.FakeChatCompletions, home: OpenCodeHome) -> None:
    fake.enqueue([fc.bash("echo one > one.txt"), fc.DONE], [fc.bash("echo two > two.txt"), fc.DONE])
    asked: list[InteractionOpened] = []

    def decide(opened: InteractionOpened) -> Decision:
        asked.append(opened)
        return Decision(action_id="always")

    await run_turn(agent, "write one", decide)
    await run_turn(agent, "write two", decide)
    check(len(asked) == 1, "the second matching command was not asked")
    check((home.workspace / "two.txt").exists(), "two.txt was written")


async def reject(agent: OpenCodeAgent, fake: fc.FakeChatCompletions, home: OpenCodeHome) -> None:
    fake.enqueue([fc.bash("echo hi > made.txt"), fc.DONE])
    decision = Decision(action_id="reject", message="not in this folder")
    await run_turn(agent, "make a file", lambda _: decision)
    told = fake.model_requests()[-1].tool_result() or ""
    check("not in this folder" in told, "the model read the message")
    check(not (home.workspace / "made.txt").exists(), "nothing was written")


async def question(agent: OpenCodeAgent, fake: fc.FakeChatCompletions, home: OpenCodeHome) -> None:
    fake.enqueue([fc.question([COLOR, {**COLOR, "multiple": True}]), fc.DONE])
    answers = {"q0": Answer(other="Green"), "q1": Answer(option_ids=("0", "1"))}
    await run_turn(agent, "ask me", lambda _: Decision(answers=answers))
    told = fake.model_requests()[-1].tool_result() or ""
    check('"Which color?"="Green"' in told and "Red, Blue" in told, "the model read the answers")


async def question_dismissed(
    agent: OpenCodeAgent, fake: fc.FakeChatCompletions, home: OpenCodeHome
) -> None:
    fake.enqueue([fc.question([COLOR]), fc.DONE])
    ended = await run_turn(agent, "ask me", lambda _: Decision(action_id="dismiss"))
    check(ended.status.value == "completed", "the turn ended at once")


async def abort_pending(
    agent: OpenCodeAgent, fake: fc.FakeChatCompletions, home: OpenCodeHome
) -> None:
    fake.enqueue([fc.bash("echo hi > made.txt"), fc.DONE], [fc.text("Fresh start.")])
    ended = await run_turn(agent, "make a file", lambda _: None)
    check(ended.status.value == "interrupted", "the turn was interrupted")
    again = await run_turn(agent, "hello", lambda _: Decision(action_id="once"))
    check(again.status.value == "completed", "the next prompt worked")
    check(not (home.workspace / "made.txt").exists(), "nothing was written")


SCENARIOS: dict[
    str, Callable[[OpenCodeAgent, fc.FakeChatCompletions, OpenCodeHome], Awaitable[None]]
] = {
    "once": once,
    "always": always,
    "reject": reject,
    "question": question,
    "question_dismissed": question_dismissed,
    "abort_pending": abort_pending,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=list(SCENARIOS))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    async def run_all() -> None:
        for name in args.only:
            await scenario(name, args.out)

    asyncio.run(run_all())


if __name__ == "__main__":
    main()
