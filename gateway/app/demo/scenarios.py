"""The demo agent's scenarios, picked by what the person types.

==========  ======================================================================
command     asks to run ``/bin/sh -c 'echo hello | tee hello.txt'`` (request shaped as in
            shell_accept); runs it in the work dir when accepted and reports its output;
            "always allow" adds an in-memory rule, after which it runs without asking
patch       a fileChange item on ``greeting.py`` (add, then updates with a unified diff, as
            in patch_accept / patch_accept_for_session) and item/fileChange/requestApproval;
            applies it when accepted; acceptForSession stops the asking for that file
form        item/tool/requestUserInput with three questions (options + isOther, options +
            isOther, isSecret); says what it received and only the length of the secret
long        a long markdown answer with a code block, in many small deltas
stop        a slow count; honours turn/interrupt (the turn ends ``interrupted``)
crash       opens a command approval, writes a line to stderr and exits 17
(other)     the menu
==========  ======================================================================
"""

from __future__ import annotations

import asyncio
import difflib
import os
import re
import shlex
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from gateway.app.demo.texts import LONG_ANSWER, MENU, SLOW_INTRO
from gateway.app.demo.turn import Turn, TurnCancelled
from gateway.app.demo.wire import Json, command_item, file_change_item, now_ms
from gateway.interactions.plans import IMPLEMENT_TEXT, KEEP_PLANNING_TEXT, PLAN_MODE

__all__ = [
    "COMMAND_ARGV",
    "CRASH_EXIT_CODE",
    "FREE_TEXT_PREFIX",
    "PATCH_TARGET",
    "SCENARIOS",
    "SLOW_COUNT",
    "Scenario",
    "patched_greeting",
    "pick",
]

COMMAND_SCRIPT = "echo hello | tee hello.txt"
COMMAND_ARGV = ("/bin/sh", "-c", COMMAND_SCRIPT)
PATCH_TARGET = "greeting.py"
FREE_TEXT_PREFIX = "user_note: "  # how codex clients send typed text (user_input_other)
SLOW_COUNT = 40
CRASH_EXIT_CODE = 17

_ALLOW = ("accept", "acceptForSession")


@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario:
    name: str
    words: tuple[str, ...]  # what the person may type to pick it (with its number)
    run: Callable[[Turn], Awaitable[None]]
    about: str = ""  # what it shows, in a few words (the console's start page offers it)


def _approved(decision: object) -> bool:
    return decision in _ALLOW or (
        isinstance(decision, dict) and "acceptWithExecpolicyAmendment" in decision
    )


# --- menu -----------------------------------------------------------------------------------


async def menu(turn: Turn) -> None:
    await turn.say(MENU.format(command=COMMAND_SCRIPT, cwd=turn.cwd))


# --- command --------------------------------------------------------------------------------


async def command(turn: Turn) -> None:
    shown = shlex.join(COMMAND_ARGV)
    by_rule = COMMAND_ARGV in turn.memory.command_rules
    # the card shows the command: said here too, it would be read three times with the
    # tool's line; run by a rule, with no card, it is said here
    if by_rule:
        await turn.say(f"I will write `hello.txt` in my work dir with `{COMMAND_SCRIPT}`.")
    else:
        await turn.say("I will write `hello.txt` in my work dir. The gateway asks you first.")
    call, started = turn.memory.next_call_id(), now_ms()
    item = command_item(call, shown, turn.cwd, inner=COMMAND_SCRIPT, started_ms=started)
    turn.item_started(item)
    decision: object = "accept"
    if not by_rule:
        rule: Json = {"execpolicy_amendment": list(COMMAND_ARGV)}
        result = await turn.ask(
            "item/commandExecution/requestApproval",
            {
                "kind": "command",
                "itemId": call,
                "startedAtMs": started,
                "environmentId": "local",
                "reason": "The demo wants to write hello.txt in its work dir",
                "command": shown,
                "cwd": turn.cwd,
                "commandActions": [{"type": "unknown", "command": COMMAND_SCRIPT}],
                "proposedExecpolicyAmendment": list(COMMAND_ARGV),
                "availableDecisions": ["accept", {"acceptWithExecpolicyAmendment": rule}, "cancel"],
            },
            waiting="waitingOnApproval",
        )
        decision = result.get("decision")
    if not _approved(decision):
        turn.item_completed({**item, "status": "declined", "completedAtMs": now_ms()})
        if decision == "cancel":
            raise TurnCancelled
        await turn.say(f"You declined ({decision}), so I did not run it. Type **command** again.")
        return
    if isinstance(decision, dict):
        turn.memory.command_rules.add(COMMAND_ARGV)
    output, code = await _run(COMMAND_ARGV, turn.cwd)
    status = "completed" if code == 0 else "failed"
    done = command_item(
        call,
        shown,
        turn.cwd,
        inner=COMMAND_SCRIPT,
        started_ms=started,
        status=status,
        output=output,
        exit_code=code,
    )
    turn.item_completed(done)
    lead = "Your rule allows this command, so I did not ask. " if by_rule else ""
    if isinstance(decision, dict):
        lead = "I added your rule: next time this command runs without asking. "
    await turn.say(
        f"{lead}I ran `{shown}` in `{turn.cwd}` (exit code {code}). It printed:\n\n"
        f"```\n{output}```\n\n`hello.txt` is in my work dir now."
    )


async def _run(argv: tuple[str, ...], cwd: str) -> tuple[str, int]:
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await process.communicate()
    except asyncio.CancelledError:
        process.kill()
        raise
    return out.decode(errors="replace"), process.returncode or 0


# --- patch ----------------------------------------------------------------------------------


def patched_greeting(old: str | None) -> str:
    """The content the patch scenario proposes for ``greeting.py`` (now ``old``)."""
    if old is None:
        return '"""Written by the agent-gateway demo agent."""\n\nprint("Hello from the demo")\n'
    changes = sum(1 for line in old.splitlines() if line.startswith("print(")) + 1
    return old + f'print("Hello again: change number {changes}")\n'


def _change(path: Path, old: str | None, new: str) -> Json:
    """FileUpdateChange: an add carries the content, an update a unified diff without the
    file headers (patch_accept, patch_accept_for_session)."""
    if old is None:
        return {"path": str(path), "kind": {"type": "add"}, "diff": new}
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True))
    hunks = "".join(list(lines)[2:])
    return {"path": str(path), "kind": {"type": "update", "move_path": None}, "diff": hunks}


async def patch(turn: Turn) -> None:
    path = Path(turn.cwd) / PATCH_TARGET
    old = path.read_text(encoding="utf-8") if path.is_file() else None
    new = patched_greeting(old)
    allowed = str(path) in turn.memory.session_paths
    ask = "" if allowed else " The gateway shows you the diff first."
    await turn.say(f"I want to {'create' if old is None else 'edit'} `{PATCH_TARGET}`.{ask}")
    call, started = turn.memory.next_call_id(), now_ms()
    changes = [_change(path, old, new)]
    turn.item_started(file_change_item(call, changes, started_ms=started))
    decision: object = "accept"
    if not allowed:
        params: Json = {"itemId": call, "startedAtMs": started, "reason": None, "grantRoot": None}
        result = await turn.ask(
            "item/fileChange/requestApproval", params, waiting="waitingOnApproval"
        )
        decision = result.get("decision")
    current = path.read_text(encoding="utf-8") if path.is_file() else None
    if not _approved(decision) or current != old:
        status = "declined" if not _approved(decision) else "failed"
        turn.item_completed(file_change_item(call, changes, started_ms=started, status=status))
        if decision == "cancel":
            raise TurnCancelled
        if status == "failed":
            await turn.say(f"`{PATCH_TARGET}` changed while you decided; I left it alone.")
        else:
            await turn.say(f"You declined ({decision}); `{PATCH_TARGET}` is unchanged.")
        return
    path.write_text(new, encoding="utf-8")
    if decision == "acceptForSession":
        turn.memory.session_paths.add(str(path))
    turn.item_completed(file_change_item(call, changes, started_ms=started, status="completed"))
    lead = "You allowed this file for the session, so I did not ask. " if allowed else ""
    await turn.say(
        f"{lead}Applied. `{PATCH_TARGET}` now reads:\n\n```python\n{new}```\n\n"
        "Type **patch** again for another change."
    )


# --- form -----------------------------------------------------------------------------------

_QUESTIONS: list[Json] = [
    {
        "id": "colour",
        "header": "Colour",
        "question": "Which colour should the demo's banner be?",
        "isOther": True,
        "isSecret": False,
        "options": [
            {"label": "Teal (Recommended)", "description": "calm on dark and light screens"},
            {"label": "Orange", "description": "loud"},
        ],
    },
    {
        "id": "name",
        "header": "Name",
        "question": "What should I call your project?",
        "isOther": True,
        "isSecret": False,
        "options": [
            {"label": "gateway-demo", "description": "the obvious one"},
            {"label": "sandbox", "description": "short"},
        ],
    },
    {
        "id": "token",
        "header": "Token",
        "question": "Paste a pretend API token (any text: I never show it back).",
        "isOther": False,
        "isSecret": True,
        "options": None,
    },
]


def _received(question: Json, answers: list[str]) -> str:
    """One line about an answer; a secret's text never appears in it."""
    typed = [a.removeprefix(FREE_TEXT_PREFIX) for a in answers if a.startswith(FREE_TEXT_PREFIX)]
    chosen = [a for a in answers if not a.startswith(FREE_TEXT_PREFIX)]
    header = question["header"]
    if question["isSecret"]:
        size = sum(len(text) for text in typed + chosen)
        return f"- **{header}**: got a secret of {size} characters; I will not repeat it."
    parts = [f"{label} (an option)" for label in chosen]
    parts += [f'"{text}" (your own words)' for text in typed]
    return f"- **{header}**: {', '.join(parts) or 'no answer'}"


async def form(turn: Turn) -> None:
    await turn.say("I have three questions for you; the last one is a secret.")
    params: Json = {
        "itemId": turn.memory.next_call_id(),
        "questions": _QUESTIONS,
        "isBlocking": False,
        "autoResolutionMs": None,
    }
    result = await turn.ask("item/tool/requestUserInput", params, waiting="waitingOnUserInput")
    given = result.get("answers")
    if not isinstance(given, dict):
        await turn.say("I got no answers back, so I will not guess any.")
        return
    lines = []
    for question in _QUESTIONS:
        entry = given.get(question["id"])
        raw = entry.get("answers") if isinstance(entry, dict) else None
        answers = [a for a in raw if isinstance(a, str)] if isinstance(raw, list) else []
        lines.append(_received(question, answers))
    await turn.say("Thanks. Here is what I received:\n\n" + "\n".join(lines))


# --- long, stop, crash ----------------------------------------------------------------------


async def long(turn: Turn) -> None:
    await turn.say(LONG_ANSWER, chunk=40, delay=0.01)


async def slow(turn: Turn) -> None:
    await turn.say(SLOW_INTRO.format(count=SLOW_COUNT))
    counting = " ".join(f"{n}…" for n in range(1, SLOW_COUNT + 1))
    await turn.say(counting, chunk=1, delay=0.5)
    await turn.say("Done, and nobody stopped me. Type **stop** and send /stop while I count.")


async def crash(turn: Turn) -> None:
    # what the crash does to the card and what to do next, the card and the gateway's
    # notice say: said here ahead of time too, it was read three times
    await turn.say("I will ask to run a command, then my process dies before you answer.")
    call, started = turn.memory.next_call_id(), now_ms()
    script = "echo this never runs"
    shown = shlex.join(("/bin/sh", "-c", script))
    turn.item_started(command_item(call, shown, turn.cwd, inner=script, started_ms=started))
    turn.status("waitingOnApproval")
    request_id = turn.wire.request(
        "item/commandExecution/requestApproval",
        {
            "kind": "command",
            "threadId": turn.thread_id,
            "turnId": turn.id,
            "itemId": call,
            "startedAtMs": started,
            "environmentId": "local",
            "reason": "The demo is about to crash with this request open",
            "command": shown,
            "cwd": turn.cwd,
            "commandActions": [{"type": "unknown", "command": script}],
            "proposedExecpolicyAmendment": None,
            "availableDecisions": ["accept", "cancel"],
        },
    )
    await turn.pause(1.5)  # long enough to see the card before it is orphaned
    sys.stderr.write(
        f"demo agent: crashing on purpose (the crash scenario) with request {request_id} open\n"
    )
    sys.stderr.flush()
    os._exit(CRASH_EXIT_CODE)


# --- plan -----------------------------------------------------------------------------------

DEMO_PLAN = """\
# Add a farewell to `greeting.py`

1. Add a `farewell(name)` function next to `greet`.
2. Print it after the greeting:

```python
print(farewell("world"))
```

3. Run `python greeting.py` and check **both** lines.
"""


async def plan(turn: Turn) -> None:
    """A plan item, as Codex's plan mode ends a turn: the gateway shows it as a card with
    Implement and Keep planning, and its decision is the next turn."""
    if turn.prompt.startswith(IMPLEMENT_TEXT):
        await turn.say(
            "You approved the plan. A real agent would carry it out now; "
            "I am the demo, so I leave `greeting.py` as it is."
        )
        return
    asked = turn.prompt.strip()
    text = DEMO_PLAN
    if turn.mode == PLAN_MODE and asked.lower() not in (
        "",
        "plan",
        "7",
        KEEP_PLANNING_TEXT.lower(),
    ):
        # sent back with a message ("Keep planning" with text, or /plan TEXT): the plan
        # takes it in, so the way back to Implement stays open
        await turn.say("I changed my plan as you asked. I change nothing until you decide.")
        text = f"{DEMO_PLAN}4. Also, as you asked: {asked}\n"
    else:
        await turn.say("Here is my plan. I change nothing until you decide.")
    item: Json = {"type": "plan", "id": turn.memory.next_message_id(), "text": text}
    turn.item_started({**item, "text": ""})
    turn.item_completed(item)


# --- picking ----------------------------------------------------------------------------------

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(name="command", words=("1", "command"), run=command, about="a command to approve"),
    Scenario(
        name="patch", words=("2", "patch", "diff", "edit"), run=patch, about="a diff to apply"
    ),
    Scenario(
        name="form",
        words=("3", "form", "question", "questions"),
        run=form,
        about="three questions, one secret",
    ),
    Scenario(name="long", words=("4", "long"), run=long, about="a long answer, streamed"),
    Scenario(
        name="stop",
        words=("5", "stop", "slow"),
        run=slow,
        about="a slow answer to interrupt with /stop",
    ),
    Scenario(
        name="crash",
        words=("6", "crash", "die"),
        run=crash,
        about="the agent dies while a card waits",
    ),
    Scenario(name="plan", words=("7", "plan"), run=plan, about="a plan to implement or send back"),
)
PLAN_SCENARIO = SCENARIOS[-1]
MENU_SCENARIO = Scenario(name="menu", words=("menu", "help"), run=menu)


def pick(prompt: str, *, mode: str | None = None) -> Scenario:
    """In plan mode (Keep planning, /plan TEXT) the plan, revised by what was said; else
    the scenario named by the first word of the prompt that names one; else the menu."""
    if mode == PLAN_MODE:
        return PLAN_SCENARIO
    for word in re.findall(r"[a-z0-9]+", prompt.lower()):
        for scenario in SCENARIOS:
            if word in scenario.words:
                return scenario
    return MENU_SCENARIO
