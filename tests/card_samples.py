"""Every request the recorded agents made, as interactions, and each platform's payload of it.

The requests come from the recordings, through the real codecs: Codex app-server and Claude
Code transcripts replayed (tests/transcript_replay.py, tests/claude_replay.py), OpenCode's
events fed to its codec, and codex-acp's ``session/request_permission`` as the lab recorded it
(../shared/labs/oc-acp-lab/codex-acp-run.log, line 7). Each becomes an
:class:`~gateway.interactions.machine.Interaction` pending on a card, drawn by the core
(:func:`gateway.render.interaction_card.render_interaction`) and then by each platform's
renderer: what the fake platforms would record. Used by tests/test_card_matrix.py and by
scripts/write_card_payloads.py (docs/screenshots/cards/).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from html import unescape
from pathlib import Path
from typing import Any

from adapters.acp import AcpCodec
from adapters.claude_code import ClaudeCodeCodec
from adapters.opencode import OpenCodeCodec
from gateway.cards import Card
from gateway.domain import InteractionRequest, Resolution
from gateway.events import InteractionOpened
from gateway.interactions.machine import (
    DeliveryFact,
    DeliveryOutcome,
    Interaction,
    InteractionState,
    ResolutionFact,
)
from gateway.render.interaction_card import render_interaction
from platforms.console.cards_html import PostContext, card_html
from platforms.console.views import CardView
from platforms.discord.render import render_card as discord_render
from platforms.slack.render import render_card as slack_render
from platforms.telegram.render import render_card as telegram_render
from tests import claude_replay, transcript_replay
from tests.servers.slack_wire import seen_text
from tests.servers.telegram_wire import visible_text

__all__ = [
    "INTERACTION_ID",
    "SESSION_ID",
    "Drawn",
    "Sample",
    "draw",
    "orphaned",
    "samples",
]

HERE = Path(__file__).parent
T0 = datetime(2026, 12, 1, 9, 15, 2, tzinfo=UTC)
INTERACTION_ID = "k3m9x2p7qa"
SESSION_ID = "s7h2q9d4lm"
TELEGRAM_LIMIT = 4096
SLACK_LIMIT = 12000
DISCORD_LIMIT = 4096
WORK_DIR = "/home/ada/project"

# codex-acp asking to run a command, as the lab recorded it (codex-acp-run.log, line 7, some
# ids left out), with the ``rawInput.reason`` codex-acp sends when the model gives one (issue
# 29 saw "Need to create hello.txt"; the lab's fake model gave none)
ACP_PERMISSION: dict[str, Any] = {
    "sessionId": "01a2297e-12b1-7423-b7f1-29edb53e73c9",
    "toolCall": {
        "toolCallId": "call_94221941",
        "kind": "execute",
        "status": "pending",
        "title": "echo hello-from-fake > fake.txt",
        "content": [
            {
                "type": "content",
                "content": {
                    "type": "text",
                    "text": "Proposed Amendment: /bin/bash\n-lc\necho hello-from-fake > fake.txt\n"
                    "Available Decisions: Approved\nApprovedExecpolicyAmendment\nAbort",
                },
            }
        ],
        "rawInput": {
            "call_id": "call_94221941",
            "command": ["/bin/bash", "-lc", "echo hello-from-fake > fake.txt"],
            "cwd": "/tmp/acp-lab/ws",
            "reason": "Need to create fake.txt",
            "proposed_execpolicy_amendment": [
                "/bin/bash",
                "-lc",
                "echo hello-from-fake > fake.txt",
            ],
        },
    },
    "options": [
        {"optionId": "approved", "name": "Yes, proceed", "kind": "allow_once"},
        {
            "optionId": "approved-execpolicy-amendment",
            "name": "Yes, and don't ask again for commands that start with "
            "`/bin/bash -lc echo hello-from-fake > fake.txt`",
            "kind": "allow_always",
        },
        {
            "optionId": "abort",
            "name": "No, and tell Codex what to do differently",
            "kind": "reject_once",
        },
    ],
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Sample:
    """One recorded request: which agent, from which recording, as an interaction."""

    agent: str
    source: str
    request: InteractionRequest

    @property
    def name(self) -> str:
        return f"{self.agent}-{self.source}-{self.request.kind.value}"


def _placed(path: Path, folder: Path) -> Path:
    """The recording with its ``$WORKSPACE`` placeholder as a real work dir, so a path under
    it is shown as a person would see it (relative to the work dir)."""
    placed = folder / path.name
    placed.write_text(path.read_text().replace("$WORKSPACE", WORK_DIR))
    return placed


def _codex(folder: Path) -> Iterator[Sample]:
    for path in sorted(transcript_replay.TRANSCRIPTS.glob("*.jsonl")):
        for segment in transcript_replay.load_transcript(_placed(path, folder)):
            for event in transcript_replay.replay(segment).events:
                if isinstance(event, InteractionOpened):
                    yield Sample(agent="codex", source=path.stem, request=event.request)


def _claude(folder: Path) -> Iterator[Sample]:
    for path in sorted(claude_replay.TRANSCRIPTS.glob("*.jsonl")):
        for segment in claude_replay.load_transcript(_placed(path, folder)):
            codec = ClaudeCodeCodec(segment.launch(), cwd=WORK_DIR)
            for event in claude_replay.replay(segment, codec).events:
                if isinstance(event, InteractionOpened):
                    yield Sample(agent="claude", source=path.stem, request=event.request)


def _opencode() -> Iterator[Sample]:
    for path in sorted((HERE / "transcripts" / "opencode-1.18.33").glob("*.jsonl")):
        codec = OpenCodeCodec()
        for line in path.read_text().splitlines():
            record = json.loads(line)
            msg, heard = record["msg"], record["dir"] == "<<"
            if heard and msg.get("path") == "/session" and "body" in msg:
                codec.created(msg["body"])
            elif heard and "event" in msg:
                for event in codec.feed_event(msg["event"]):
                    if isinstance(event, InteractionOpened):
                        yield Sample(agent="opencode", source=path.stem, request=event.request)


def _acp() -> Iterator[Sample]:
    codec = AcpCodec(cwd="/tmp/acp-lab/ws")
    codec.start()
    codec.data_to_send()
    session = ACP_PERMISSION["sessionId"]
    replies = [
        {"jsonrpc": "2.0", "id": 1, "result": {"agentCapabilities": {}}},
        {"jsonrpc": "2.0", "id": 2, "result": {"sessionId": session}},
    ]
    for reply in replies:
        codec.feed(json.dumps(reply).encode())
        codec.data_to_send()
    asked = {"jsonrpc": "2.0", "id": "p1", "method": "session/request_permission"}
    for event in codec.feed(json.dumps({**asked, "params": ACP_PERMISSION}).encode()):
        if isinstance(event, InteractionOpened):
            yield Sample(agent="codex-acp", source="codex-acp-run", request=event.request)


def samples() -> list[Sample]:
    """Every distinct request of every agent's recordings (the same card once)."""
    found: dict[tuple[object, ...], Sample] = {}
    with tempfile.TemporaryDirectory() as folder:
        recorded = [*_codex(Path(folder)), *_claude(Path(folder))]
    for sample in (*recorded, *_opencode(), *_acp()):
        request = sample.request
        key = (sample.agent, request.kind, request.title, request.summary, request.actions)
        found.setdefault(key, sample)
    return list(found.values())


def pending(request: InteractionRequest, *, at: datetime = T0, **facts: object) -> Interaction:
    """``request`` as the ledger holds it once opened and waiting (``facts``: what differs,
    a decided or ended one)."""
    base = Interaction(
        id=INTERACTION_ID,
        session_id=SESSION_ID,
        runtime_epoch=3,
        turn_id=1,
        native_key=request.native_key,
        kind=request.kind,
        title=request.title,
        summary=request.summary,
        detail=request.detail,
        actions=request.actions,
        questions=request.questions,
        state=InteractionState.PENDING,
        version=1,
        created_at=at,
        updated_at=at,
    )
    return replace(base, **facts)  # type: ignore[arg-type]


def orphaned(item: Interaction) -> Interaction:
    """The card after the agent process ended before anyone answered."""
    at = T0 + timedelta(seconds=40)
    return replace(
        item,
        state=InteractionState.ORPHANED,
        version=2,
        delivery=DeliveryFact(
            outcome=DeliveryOutcome.SKIPPED, at=at, error="not written: the runtime ended first"
        ),
        resolution=ResolutionFact(
            how=Resolution.ORPHANED, at=at, by="gateway", note="exited with code 1"
        ),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Drawn:
    """One platform's payload of a card, what a person reads on it, and its buttons."""

    platform: str
    card: Card
    payload: dict[str, Any]
    text: str  # the card's face as a person reads it (buttons not included)
    labels: list[str]  # every button, in order
    confirms: list[str]  # the texts of confirm dialogs (Slack)


def _card(
    item: Interaction, limit: int, private: bool = True, session_name: str | None = None
) -> Card:
    return render_interaction(
        item,
        token_for=lambda choice: f"tok-{choice}",
        text_max_chars=limit,
        private_surface=private,
        private_places=("the console",),
        session_name=session_name,
    )


def _telegram(item: Interaction, session_name: str | None = None) -> Drawn:
    card = _card(item, TELEGRAM_LIMIT, session_name=session_name)
    drawn = telegram_render(card, None, private=True, limit=TELEGRAM_LIMIT)
    keyboard = [[{"text": b.label, "callback_data": b.data} for b in row] for row in drawn.keyboard]
    payload = {
        "text": drawn.html,
        "parse_mode": "HTML",
        "reply_markup": {"inline_keyboard": keyboard},
        "documents": [a.name for a in drawn.attachments],
    }
    labels = [b.label for row in drawn.keyboard for b in row]
    return Drawn(
        platform="telegram",
        card=card,
        payload=payload,
        text=visible_text(drawn.html),
        labels=labels,
        confirms=[],
    )


def _slack(item: Interaction, session_name: str | None = None) -> Drawn:
    card = _card(item, SLACK_LIMIT, session_name=session_name)
    drawn = slack_render(card)
    face = [block for block in drawn.blocks if block.get("type") != "actions"]
    buttons = [
        element
        for block in drawn.blocks
        if block.get("type") == "actions"
        for element in block["elements"]
    ]
    confirms = [unescape(b["confirm"]["text"]["text"]) for b in buttons if "confirm" in b]
    return Drawn(
        platform="slack",
        card=card,
        payload={"text": drawn.text, "blocks": drawn.blocks},
        text=unescape(seen_text(drawn.text, face)),
        labels=[b["text"]["text"] for b in buttons],
        confirms=confirms,
    )


_DISCORD_ESCAPE = re.compile(r"\\([\\*_~`|>#\-\[\]()<:.!+=])")


def _discord(item: Interaction, session_name: str | None = None) -> Drawn:
    card = _card(item, DISCORD_LIMIT, session_name=session_name)
    drawn = discord_render(card)
    embed = drawn.embed
    parts = [embed.get("title", ""), embed.get("description", "")]
    parts += [f"{f['name']}: {f['value']}" for f in embed.get("fields") or []]
    parts.append((embed.get("footer") or {}).get("text", ""))
    labels = [b["label"] for row in drawn.components for b in row["components"]]
    payload = {
        "content": drawn.content,
        "embeds": [embed],
        "components": drawn.components,
        "allowed_mentions": drawn.allowed_mentions,
        "files": [a.name for a in drawn.files],
    }
    text = _DISCORD_ESCAPE.sub(r"\1", "\n".join(parts)).replace("\u200b", "")
    return Drawn(
        platform="discord", card=card, payload=payload, text=text, labels=labels, confirms=[]
    )


def _console(item: Interaction, session_name: str | None = None) -> Drawn:
    card = _card(item, TELEGRAM_LIMIT, session_name=session_name)
    html = card_html(
        CardView(interaction=item, card=card, session=None, copies=()),
        PostContext(csrf="c", back="/"),
    )
    labels = [unescape(b) for b in re.findall(r"<button[^>]*>([^<]*)</button>", html)]
    # the face: the page without its buttons and the details a person opens (History)
    face = re.sub(r"<button[^>]*>[^<]*</button>", "", html)
    face = re.sub(r"<details class=\"history\">.*?</details>", "", face, flags=re.S)
    text = unescape(re.sub(r"<[^>]+>", " ", face))
    return Drawn(
        platform="console", card=card, payload={"html": html}, text=text, labels=labels, confirms=[]
    )


PLATFORMS = ("telegram", "slack", "discord", "console")
_DRAW = {"telegram": _telegram, "slack": _slack, "discord": _discord, "console": _console}


def draw(item: Interaction, platform: str, *, session_name: str | None = None) -> Drawn:
    """``item`` drawn on ``platform``; ``session_name``: its session's /name."""
    return _DRAW[platform](item, session_name)


# --- the payloads committed under docs/screenshots/cards/ ----------------------------------

PAYLOAD_PLATFORMS = ("slack", "discord", "telegram")
# a file's name: (agent, recording) of the sample drawn
PAYLOAD_CARDS = {
    "codex-command": ("codex", "shell_execpolicy_amendment"),
    "claude-edit": ("claude", "edit_allow"),
    "acp-permission": ("codex-acp", "codex-acp-run"),
    "question": ("claude", "ask_other"),
}


def payload_files() -> dict[str, str]:
    """File name → the JSON it holds: each platform's payload of a Codex command, a Claude
    edit, a codex-acp permission, a question, and the Codex command orphaned."""
    found = {(sample.agent, sample.source): sample.request for sample in samples()}
    items = {name: pending(found[key]) for name, key in PAYLOAD_CARDS.items()}
    items["orphaned"] = orphaned(items["codex-command"])
    return {
        f"{name}.{platform}.json": json.dumps(
            draw(item, platform).payload, indent=2, ensure_ascii=False
        )
        + "\n"
        for name, item in items.items()
        for platform in PAYLOAD_PLATFORMS
    }
