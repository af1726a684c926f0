"""Take the screenshots of docs/screenshots/cards-*.png: one card of each kind on the console.

    .venv/bin/python scripts/card_screenshots.py            # into docs/screenshots/
    .venv/bin/python scripts/card_screenshots.py --out DIR  # anywhere else

Each card is an agent's request as its own codec parses it (the Codex app-server request
parser, Claude Code's can_use_tool parser, the ACP codec fed codex-acp's
session/request_permission line, Codex's requestUserInput), drawn by the console's own pages
(`render_interaction`, then `pending_page`), and shown in Debian's headless chromium at a
desktop's width (1280 px) and a phone's (390 px, the ``-phone`` files). The demo's
screenshots (scripts/screenshots.py) show one agent; these show the others' cards without
their binaries. tests/test_console_card_screens.py runs it, so that it keeps working.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from playwright.async_api import ViewportSize, async_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout: `python scripts/card_screenshots.py`

from adapters.acp import AcpCodec  # noqa: E402
from adapters.claude_requests import open_can_use_tool  # noqa: E402
from adapters.codex_requests import open_command_approval, open_user_input  # noqa: E402
from gateway.domain import (  # noqa: E402
    AgentKind,
    InteractionRequest,
    InteractionState,
    Resolution,
)
from gateway.events import InteractionOpened  # noqa: E402
from gateway.interactions.machine import (  # noqa: E402
    DeliveryFact,
    DeliveryOutcome,
    Interaction,
    ResolutionFact,
)
from gateway.render.interaction_card import render_interaction  # noqa: E402
from gateway.session_record import SessionRecord  # noqa: E402
from platforms.console.cards_html import PostContext  # noqa: E402
from platforms.console.pages import Frame, pending_page  # noqa: E402
from platforms.console.views import CardView  # noqa: E402
from tests.card_samples import pending  # noqa: E402
from tests.session_records import session_record  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
WORK = "/home/ada/project"
T0 = datetime(2026, 12, 1, 9, 15, 2, tzinfo=UTC)
CARDS = ("codex-command", "claude-edit", "acp-permission", "question", "orphaned")
SHOTS = tuple(f"cards-{name}{suffix}.png" for name in CARDS for suffix in ("", "-phone"))


def codex_command() -> InteractionRequest:
    """Codex 0.171's item/commandExecution/requestApproval (shell_accept_rule)."""
    params = {
        "threadId": "t",
        "turnId": "u",
        "itemId": "call_1",
        "command": "/bin/bash -c 'touch hello.txt'",
        "cwd": WORK,
        "reason": "Create hello.txt in the work dir",
        "availableDecisions": [
            "accept",
            {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch", "hello.txt"]}},
            "decline",
            "cancel",
        ],
    }
    return open_command_approval("rpc:0", params).request


def claude_edit() -> InteractionRequest:
    """Claude Code 2.1.197's can_use_tool for an Edit (transcript edit_allow.jsonl)."""
    request = {
        "subtype": "can_use_tool",
        "tool_name": "Edit",
        "display_name": "Edit",
        "input": {
            "file_path": f"{WORK}/notes.txt",
            "old_string": "beta",
            "new_string": "BETA",
            "replace_all": False,
        },
        "description": "notes.txt",
        "permission_suggestions": [
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
        ],
        "tool_use_id": "toolu_0003",
    }
    return open_can_use_tool("ctl:1", request, cwd=WORK).request


def acp_permission() -> InteractionRequest:
    """codex-acp's session/request_permission, read by the ACP codec as it reads the agent."""
    codec = AcpCodec(cwd=WORK)
    codec.start()
    codec.feed(_line({"id": 1, "result": {"agentCapabilities": {}, "agentInfo": {}}}))
    codec.feed(_line({"id": 2, "result": {"sessionId": "s"}}))
    call = {
        "toolCallId": "call_1",
        "kind": "execute",
        "title": "touch hello.txt",
        "rawInput": {
            "command": ["/bin/bash", "-lc", "touch hello.txt"],
            "cwd": WORK,
            "reason": "Need to create hello.txt",
        },
        "content": [
            {
                "type": "content",
                "content": {
                    "type": "text",
                    "text": "Need to create hello.txt\n\nAvailable Decisions: approved, "
                    "approved_for_session, abort",
                },
            }
        ],
    }
    options = [
        {"optionId": "approved", "name": "Yes", "kind": "allow_once"},
        {
            "optionId": "approved-always",
            "name": "Yes, and don't ask again for this command",
            "kind": "allow_always",
        },
        {
            "optionId": "abort",
            "name": "No, and tell Codex what to do differently",
            "kind": "reject_once",
        },
    ]
    params = {"sessionId": "s", "toolCall": call, "options": options}
    events = codec.feed(_line({"id": 7, "method": "session/request_permission", "params": params}))
    [opened] = [event for event in events if isinstance(event, InteractionOpened)]
    return opened.request


def question() -> InteractionRequest:
    """Codex's item/tool/requestUserInput with options (each described) and Other."""
    params = {
        "threadId": "t",
        "turnId": "u",
        "itemId": "call_2",
        "questions": [
            {
                "id": "tone",
                "header": "Tone",
                "question": "Which tone should the greeting take?",
                "isOther": True,
                "options": [
                    {"label": "Warm", "description": "friendly, with an exclamation mark"},
                    {"label": "Cool", "description": "short and plain"},
                ],
            }
        ],
    }
    return open_user_input("rpc:3", params).request


def _line(message: dict[str, object]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode()


def _interaction(request: InteractionRequest, **facts: object) -> Interaction:
    return pending(request, at=T0, **facts)


def _orphaned() -> Interaction:
    ended = T0 + timedelta(seconds=40)
    return _interaction(
        codex_command(),
        state=InteractionState.ORPHANED,
        version=2,
        delivery=DeliveryFact(
            outcome=DeliveryOutcome.SKIPPED, at=ended, error="not written: the runtime ended"
        ),
        resolution=ResolutionFact(
            how=Resolution.ORPHANED, at=ended, by="gateway", note="exited with code 17"
        ),
    )


def _session(kind: AgentKind) -> SessionRecord:
    return session_record(created_at=T0, id="3kxs2qdrh0", project="project", agent_kind=kind)


def page(name: str) -> str:
    """The console's pending page with the card ``name`` on it."""
    interaction, kind = {
        "codex-command": (_interaction(codex_command()), AgentKind.CODEX_APP_SERVER),
        "claude-edit": (_interaction(claude_edit()), AgentKind.CLAUDE_CODE),
        "acp-permission": (_interaction(acp_permission()), AgentKind.ACP),
        "question": (_interaction(question()), AgentKind.CODEX_APP_SERVER),
        "orphaned": (_orphaned(), AgentKind.CODEX_APP_SERVER),
    }[name]
    card = render_interaction(interaction, token_for=lambda choice: f"tok-{choice}")
    view = CardView(
        interaction=interaction,
        card=card,
        session=_session(kind),
        copies=(),
        session_title="project: make hello.txt",
    )
    live = [] if name == "orphaned" else [view]
    closed = [view] if name == "orphaned" else []
    frame = Frame(identity="local:alice", pending=len(live), sessions=1)
    return pending_page(frame, live, closed, PostContext(csrf="c", back="/pending"))


async def take(out: Path, *, chromium: Path = CHROMIUM) -> list[Path]:
    """Every screen of :data:`SHOTS`, written into ``out``; the files written."""
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    written = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(chromium), args=CHROMIUM_ARGS
        )
        try:
            for suffix, viewport in (("", DESKTOP), ("-phone", PHONE)):
                context = await browser.new_context(viewport=viewport)
                shown = await context.new_page()
                for name in CARDS:
                    await shown.set_content(page(name))
                    path = out / f"cards-{name}{suffix}.png"
                    await shown.screenshot(path=path, full_page=True)
                    written.append(path)
                await context.close()
        finally:
            await browser.close()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    for path in asyncio.run(take(args.out)):
        print(path)


if __name__ == "__main__":
    main()
