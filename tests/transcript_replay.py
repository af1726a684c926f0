"""Replay a recorded Codex app-server transcript through the codec.

Transcript format (``tests/transcripts/codex-0.171/*.jsonl``, written by the lab runner and by
``scripts/record_codex_transcripts.py``): one JSON object a line, ``{"t": seconds, "dir": ">>"
(sent by the client) | "<<" (received from the server) | "--" (a new app-server process
starts), "msg": {...}}``.

:func:`replay` drives a real :class:`CodexAppServerCodec` the way the gateway would: it feeds
every ``<<`` message, and where the recording shows the client sending something, it issues
the command that should make the codec send it (``turn/start`` ← Prompt, ``turn/interrupt`` ←
Interrupt, a result to a server request ← Respond with the decision the recorded result
stands for). Each recorded ``>>`` is compared in substance (method, id, result or error code,
and the recorded params) with the next line the codec actually wrote.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.codex_app_server import CodexAppServerCodec, native_key_for
from adapters.codex_replies import FREE_TEXT_PREFIX
from gateway.domain import Answer, Decision, InteractionKind, InteractionRequest
from gateway.events import AgentEvent, InteractionOpened, Interrupt, Prompt, Respond

TRANSCRIPTS = Path(__file__).parent / "transcripts" / "codex-0.171"

# Params a recording client sent that the gateway does not (its own client name, Plan mode).
RECORDER_ONLY_PARAMS = frozenset({"clientInfo"})

# Wire decision -> the action id the codec gives it (adapters/codex_requests.py).
ACTION_IDS = {
    "accept": "accept",
    "acceptForSession": "session",
    "decline": "decline",
    "cancel": "cancel",
    "acceptWithExecpolicyAmendment": "rule",
}

Message = dict[str, Any]


@dataclass
class Segment:
    """What one app-server process saw: the records between two ``--`` lines."""

    records: list[tuple[str, Message]]

    def first_sent(self, method: str) -> Message | None:
        for direction, msg in self.records:
            if direction == ">>" and msg.get("method") == method:
                return msg
        return None


def load_transcript(path: Path) -> list[Segment]:
    segments = [Segment(records=[])]
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["dir"] == "--":
            segments.append(Segment(records=[]))
        elif record["dir"] in (">>", "<<"):
            segments[-1].records.append((record["dir"], record["msg"]))
    return [segment for segment in segments if segment.records]


def codec_for(segment: Segment) -> CodexAppServerCodec:
    """A codec configured as the recording client was (cwd, policy, sandbox, resume)."""
    init = segment.first_sent("initialize") or {}
    experimental = bool(init.get("params", {}).get("capabilities", {}).get("experimentalApi"))
    opened = segment.first_sent("thread/start") or segment.first_sent("thread/resume")
    assert opened is not None, "a transcript opens a thread"
    params = opened["params"]
    return CodexAppServerCodec(
        cwd=params.get("cwd", "$WORKSPACE"),
        approval_policy=params.get("approvalPolicy", "on-request"),
        sandbox=params.get("sandbox", "workspace-write"),
        resume_thread_id=params["threadId"] if opened["method"] == "thread/resume" else None,
        experimental_api=experimental,
    )


def decision_for(request: InteractionRequest, result: Message) -> Decision:
    """The decision a person would have taken for the recorded ``result``."""
    if request.kind is InteractionKind.QUESTION:
        answers: dict[str, Answer] = {}
        for question in request.questions:
            chosen, other = [], None
            for value in result["answers"][question.id]["answers"]:
                if value.startswith(FREE_TEXT_PREFIX):
                    other = value.removeprefix(FREE_TEXT_PREFIX)
                    continue
                chosen += [option.id for option in question.options if option.label == value]
            answers[question.id] = Answer(option_ids=tuple(chosen), other=other)
        return Decision(answers=answers)
    if "scope" in result:  # PermissionsRequestApprovalResponse
        return Decision(action_id="deny" if not result["permissions"] else result["scope"])
    decision = result["decision"]
    name = decision if isinstance(decision, str) else next(iter(decision))
    return Decision(action_id=ACTION_IDS[name])


def assert_same_substance(sent: Message, recorded: Message) -> None:
    where = f"\nsent:     {sent}\nrecorded: {recorded}"
    assert sent.get("method") == recorded.get("method"), where
    assert sent.get("id") == recorded.get("id"), where
    if "result" in recorded:
        assert sent.get("result") == recorded["result"], where
    if "error" in recorded:
        assert sent["error"]["code"] == recorded["error"]["code"], where
    for key, value in (recorded.get("params") or {}).items():
        if key not in RECORDER_ONLY_PARAMS:
            assert sent["params"].get(key) == value, f"params[{key!r}] differ{where}"


@dataclass
class Replayed:
    codec: CodexAppServerCodec
    events: list[AgentEvent] = field(default_factory=list)
    sent: list[Message] = field(default_factory=list)


def replay(segment: Segment, codec: CodexAppServerCodec | None = None) -> Replayed:
    run = Replayed(codec=codec or codec_for(segment))
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
        if msg.get("method") == "turn/start":
            mode = (msg["params"].get("collaborationMode") or {}).get("mode")
            run.codec.send(Prompt(text=msg["params"]["input"][0]["text"], mode=mode))
        elif msg.get("method") == "turn/interrupt":
            run.codec.send(Interrupt())
        elif "result" in msg and "method" not in msg:
            key = native_key_for(msg["id"])
            decision = decision_for(opened[key], msg["result"])
            run.codec.send(Respond(native_key=key, decision=decision))
        drain()
        assert outbox, f"the codec sent nothing where the recording sent {msg}"
        assert_same_substance(outbox.pop(0), msg)
    assert not outbox, f"the codec sent more than the recording: {outbox}"
    return run
