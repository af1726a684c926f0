"""Replies to Codex app-server server requests, built from a person's decision.

Each reply keeps what it needs from the request (the exact decision values offered, the
permissions asked, the question ids and option labels) so that the native request never
leaves the adapter. ``encode`` returns the JSON-RPC ``result``; it raises
:class:`gateway.errors.CodecUsageError`, and builds nothing, for a decision the request
cannot take. Schema: ``codex-0.171`` ``*RequestApprovalResponse``, ToolRequestUserInputResponse.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from adapters.jsonrpc import JsonObject, JsonValue
from gateway.domain import Answer, Decision
from gateway.errors import CodecUsageError

__all__ = [
    "FREE_TEXT_PREFIX",
    "ApprovalReply",
    "PermissionsReply",
    "QuestionsReply",
    "Reply",
    "WireQuestion",
]

# Free text goes back as one more answer string with this mark, the encoding Codex's own
# clients use (codex-rs tui request_user_input) so that the model can tell a typed note from
# a chosen label; recorded in tests/transcripts/codex-0.171/user_input_other.jsonl.
FREE_TEXT_PREFIX = "user_note: "


# --- replies -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalReply:
    """``{"decision": <value>}`` where value is exactly what the server offered for the action.

    Schema: CommandExecutionRequestApprovalResponse, FileChangeRequestApprovalResponse.
    """

    decisions: tuple[tuple[str, JsonValue], ...]  # (action id, wire decision), offered order

    def encode(self, decision: Decision) -> JsonObject:
        for action_id, wire in self.decisions:
            if action_id == decision.action_id:
                return {"decision": copy.deepcopy(wire)}
        offered = ", ".join(action_id for action_id, _ in self.decisions)
        raise CodecUsageError(f"action {decision.action_id!r} was not offered (offered: {offered})")


@dataclass(frozen=True, kw_only=True, slots=True)
class PermissionsReply:
    """``{"permissions": <granted>, "scope": "turn"|"session"}``; deny grants nothing.

    Schema: PermissionsRequestApprovalResponse (GrantedPermissionProfile, PermissionGrantScope).
    """

    requested: JsonObject  # the RequestPermissionProfile as asked: granted whole, or not at all

    def encode(self, decision: Decision) -> JsonObject:
        match decision.action_id:
            case "turn" | "session" as scope:
                return {"permissions": copy.deepcopy(self.requested), "scope": scope}
            case "deny":
                return {"permissions": {}, "scope": "turn"}
        raise CodecUsageError(
            f"action {decision.action_id!r} was not offered (offered: turn, session, deny)"
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class WireQuestion:
    id: str
    labels: tuple[str, ...]  # option labels by option index; the option id is the index
    free_text: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class QuestionsReply:
    """``{"answers": {question id: {"answers": [option labels..., free text]}}}``.

    Schema: ToolRequestUserInputResponse; the shape is confirmed by the recorded transcripts
    ``lab-user_input_feature_flag`` (``{"answers": {"color": {"answers": ["Blue"]}}}``) and
    ``user_input_other`` (free text as ``"user_note: ..."``).
    """

    questions: tuple[WireQuestion, ...]

    def encode(self, decision: Decision) -> JsonObject:
        asked = {question.id for question in self.questions}
        extra = sorted(set(decision.answers) - asked)
        if extra:
            raise CodecUsageError(f"answers to questions that were not asked: {extra}")
        answers: JsonObject = {}
        for question in self.questions:
            answers[question.id] = {"answers": self._encode_one(question, decision.answers)}
        return {"answers": answers}

    @staticmethod
    def _encode_one(question: WireQuestion, given: dict[str, Answer]) -> list[JsonValue]:
        answer = given.get(question.id, Answer())
        other = (answer.other or "").strip()
        if not answer.option_ids and not other:
            raise CodecUsageError(f"question {question.id!r} is required and has no answer")
        if len(answer.option_ids) > 1:
            raise CodecUsageError(f"question {question.id!r} takes one option, not several")
        if other and not question.free_text:
            raise CodecUsageError(f"question {question.id!r} does not take free text")
        values: list[JsonValue] = []
        for option_id in answer.option_ids:
            index = int(option_id) if option_id.isdecimal() else -1
            if not 0 <= index < len(question.labels):
                raise CodecUsageError(f"question {question.id!r} has no option {option_id!r}")
            values.append(question.labels[index])
        if other:
            values.append(FREE_TEXT_PREFIX + other)
        return values


Reply = ApprovalReply | PermissionsReply | QuestionsReply
