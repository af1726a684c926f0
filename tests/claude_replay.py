"""Replay a recorded Claude Code transcript through the codec.

Transcript format (``tests/transcripts/claude-2.1.197/*.jsonl``, written by
``scripts/record_claude_transcripts.py``): one JSON object a line, ``{"t": seconds, "dir":
">>" (sent to the CLI) | "<<" (received from it) | "--" (a new process starts; ``msg.argv``
is its command line), "msg": {...}}``.

:func:`replay` drives a real :class:`ClaudeCodeCodec` the way the gateway would: it feeds
every ``<<`` message, and where the recording shows the gateway sending something the codec
does not send by itself, it issues the command that should make the codec send it (a user
message ← Prompt, the ``interrupt`` control request ← Interrupt, a ``control_response`` to a
``can_use_tool`` ← Respond with the decision the recorded response stands for). Each
recorded ``>>`` must equal the next line the codec actually wrote.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.claude_code import ClaudeCodeCodec, native_key_for
from adapters.claude_launch import ClaudeLaunch
from gateway.domain import Answer, Decision, InteractionKind, InteractionRequest
from gateway.events import AgentEvent, InteractionOpened, Interrupt, Prompt, Respond

__all__ = ["TRANSCRIPTS", "Replayed", "Segment", "decision_for", "load_transcript", "replay"]

TRANSCRIPTS = Path(__file__).parent / "transcripts" / "claude-2.1.197"
WORKSPACE = "$WORKSPACE"

Message = dict[str, Any]


@dataclass
class Segment:
    """What one process saw: its argv and the records up to the next ``--`` line."""

    argv: list[str]
    records: list[tuple[str, Message]]

    def launch(self) -> ClaudeLaunch:
        """The launch the recording gateway used (mode, session id, resume)."""
        mode = self.argv[self.argv.index("--permission-mode") + 1]
        for arg in self.argv:
            flag, _, value = arg.partition("=")
            if flag in ("--session-id", "--resume"):
                return ClaudeLaunch(
                    permission_mode=mode, session_id=value, resume=flag == "--resume"
                )
        raise AssertionError(f"no session id in {self.argv}")


def load_transcript(path: Path) -> list[Segment]:
    segments: list[Segment] = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["dir"] == "--":
            segments.append(Segment(argv=record["msg"]["argv"], records=[]))
        else:
            segments[-1].records.append((record["dir"], record["msg"]))
    return segments


def _labels_chosen(request: InteractionRequest, answers: dict[str, str]) -> Decision:
    chosen: dict[str, Answer] = {}
    for question in request.questions:
        given = answers[question.text]
        by_label = {option.label: option.id for option in question.options}
        if given in by_label:
            chosen[question.id] = Answer(option_ids=(by_label[given],))
        elif question.multi and all(part in by_label for part in given.split(", ")):
            chosen[question.id] = Answer(option_ids=tuple(by_label[p] for p in given.split(", ")))
        else:
            chosen[question.id] = Answer(other=given)
    return Decision(answers=chosen)


def _grant_for(request: InteractionRequest, update: Message) -> str:
    """The action whose rule (or label) names what ``update`` changes."""
    match update["type"]:
        case "addRules":
            named = ", ".join(
                f"{r['toolName']}({r['ruleContent']})" if r.get("ruleContent") else r["toolName"]
                for r in update["rules"]
            )
        case "addDirectories":
            named = ", ".join(update["directories"])
        case _:
            named = f"{update['mode']} mode"
    [action] = [
        a
        for a in request.actions
        if a.id.startswith("grant-") and (named == a.rule or named in a.label)
    ]
    return action.id


def decision_for(request: InteractionRequest, response: Message) -> Decision:
    """The decision a person would have taken for the recorded can_use_tool ``response``."""
    if response["behavior"] == "deny":
        message = response.get("message")
        if response.get("interrupt"):
            return Decision(action_id="stop", message=message)
        action_id = {
            InteractionKind.QUESTION: "decline",
            InteractionKind.PLAN: "keep-planning",
        }.get(request.kind, "deny")
        return Decision(action_id=action_id, message=message)
    if request.kind is InteractionKind.QUESTION:
        return _labels_chosen(request, response["updatedInput"]["answers"])
    if request.kind is InteractionKind.PLAN:
        return Decision(action_id="approve")
    [update] = response.get("updatedPermissions") or [None]
    return Decision(action_id="allow" if update is None else _grant_for(request, update))


@dataclass
class Replayed:
    codec: ClaudeCodeCodec
    events: list[AgentEvent] = field(default_factory=list)
    sent: list[Message] = field(default_factory=list)


def replay(segment: Segment, codec: ClaudeCodeCodec | None = None) -> Replayed:
    run = Replayed(codec=codec or ClaudeCodeCodec(segment.launch(), cwd=WORKSPACE))
    opened: dict[str, InteractionRequest] = {}
    outbox: list[Message] = []

    def drain() -> None:
        for line in run.codec.data_to_send():
            assert b"\n" not in line
            message = json.loads(line)
            outbox.append(message)
            run.sent.append(message)

    run.codec.start()
    drain()
    for direction, msg in segment.records:
        if direction == "<<":
            for event in run.codec.feed(json.dumps(msg).encode()):
                run.events.append(event)
                if isinstance(event, InteractionOpened):
                    opened[event.request.native_key] = event.request
            drain()
            continue
        if not outbox:
            if msg["type"] == "user":
                run.codec.send(Prompt(text=msg["message"]["content"]))
            elif msg["type"] == "control_request" and msg["request"]["subtype"] == "interrupt":
                run.codec.send(Interrupt())
            elif msg["type"] == "control_response":
                key = native_key_for(msg["response"]["request_id"])
                decision = decision_for(opened[key], msg["response"]["response"])
                run.codec.send(Respond(native_key=key, decision=decision))
            drain()
        assert outbox, f"the codec sent nothing where the recording sent {msg}"
        sent = outbox.pop(0)
        assert sent == msg, f"\nsent:     {sent}\nrecorded: {msg}"
    assert not outbox, f"the codec sent more than the recording: {outbox}"
    return run
