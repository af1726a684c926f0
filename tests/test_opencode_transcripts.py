"""Every recorded OpenCode transcript (tests/transcripts/opencode-1.18.33/, written by
scripts/record_opencode_transcripts.py from the real server) replayed through the codec: what
the server said comes out as the events the gateway acted on when it was recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.opencode import OpenCodeCodec
from gateway.domain import TurnStatus
from gateway.events import (
    AgentEvent,
    AgentMessage,
    InteractionClosed,
    InteractionOpened,
    Interrupt,
    Prompt,
    TextDelta,
    TurnCompleted,
    Warning,
)

FOLDER = Path(__file__).parent / "transcripts" / "opencode-1.18.33"
EXPECTED_ENDS = {
    "once": [TurnStatus.COMPLETED],
    "always": [TurnStatus.COMPLETED, TurnStatus.COMPLETED],
    "reject": [TurnStatus.COMPLETED],
    "question": [TurnStatus.COMPLETED],
    "question_dismissed": [TurnStatus.COMPLETED],
    "abort_pending": [TurnStatus.INTERRUPTED, TurnStatus.COMPLETED],
}


def replay(path: Path) -> tuple[list[AgentEvent], list[str]]:
    codec = OpenCodeCodec()
    events: list[AgentEvent] = []
    prompts: list[str] = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        msg: dict[str, Any] = record["msg"]
        if record["dir"] == ">>" and msg["path"].endswith("/prompt_async"):
            prompts.append(msg["body"]["parts"][0]["text"])
            codec.request_for(Prompt(text=prompts[-1]))
        elif record["dir"] == ">>" and msg["path"].endswith("/abort"):
            codec.request_for(Interrupt())
        elif record["dir"] == "<<" and msg.get("path") == "/session" and "body" in msg:
            codec.created(msg["body"])
        elif record["dir"] == "<<" and "event" in msg:
            events += codec.feed_event(msg["event"])
    return events, prompts


@pytest.mark.parametrize("name", sorted(EXPECTED_ENDS))
def test_transcript_replays_to_what_the_gateway_saw(name: str) -> None:
    events, prompts = replay(FOLDER / f"{name}.jsonl")
    ends = [e.status for e in events if isinstance(e, TurnCompleted)]
    assert ends == EXPECTED_ENDS[name]
    assert not [e for e in events if isinstance(e, Warning)]
    opened = [e.request.native_key for e in events if isinstance(e, InteractionOpened)]
    assert len(opened) == len(set(opened))  # one card per request
    closed = {e.native_key for e in events if isinstance(e, InteractionClosed)}
    if name != "abort_pending":  # after an abort nothing closes it: the turn's end does
        assert closed == set(opened)
    said = "".join(e.text for e in events if isinstance(e, AgentMessage | TextDelta))
    assert not any(prompt in said for prompt in prompts)  # the prompt is never echoed back
    if name == "abort_pending":  # the next prompt's own answer, after the aborted turn's end
        assert said.endswith("Fresh start.")


def test_every_recording_is_replayed() -> None:
    assert {p.stem for p in FOLDER.glob("*.jsonl")} == set(EXPECTED_ENDS)
