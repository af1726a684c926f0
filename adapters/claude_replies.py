"""Replies to Claude Code ``can_use_tool`` control requests, built from a person's decision.

Each reply keeps what it needs from the request (the tool input, the permission updates each
action grants, the question texts and option labels) so that the native request never
leaves the adapter. ``encode`` returns the ``response`` of the control response (the
claude-agent-sdk's ``PermissionResultAllow`` / ``PermissionResultDeny`` on the wire) and
whether it stops the turn; it raises :class:`gateway.errors.CodecUsageError`, and builds
nothing, for a decision the request cannot take. Wire shapes recorded in
``tests/transcripts/claude-2.1.197/``::

    allow:  {"behavior": "allow", "updatedInput": <input>, "updatedPermissions": [...]?}
    deny:   {"behavior": "deny", "message": <what the model is told>, "interrupt": true?}
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from adapters.jsonrpc import JsonObject, JsonValue
from gateway.domain import Answer, Decision
from gateway.errors import CodecUsageError

__all__ = [
    "ALLOW",
    "ANSWER",
    "APPROVE_PLAN",
    "DECLINE",
    "DENY",
    "KEEP_PLANNING",
    "STOP",
    "Encoded",
    "PlanReply",
    "QuestionsReply",
    "Reply",
    "ToolReply",
    "WireQuestion",
]

# action ids
ALLOW = "allow"
DENY = "deny"
STOP = "stop"
ANSWER = "answer"
DECLINE = "decline"
APPROVE_PLAN = "approve"
KEEP_PLANNING = "keep-planning"

DEFAULT_DENY = "The user denied this tool call."
DEFAULT_STOP = "The user denied this tool call and stopped the turn."
DEFAULT_DECLINE = "The user declined to answer these questions."
DEFAULT_KEEP_PLANNING = "The user did not approve the plan yet: keep planning."
# AskUserQuestion: how several chosen labels go back in one answer string (the CLI's own
# encoding, recorded in ask_answers.jsonl: "Lint, Tests").
MULTI_SELECT_SEPARATOR = ", "


@dataclass(frozen=True, kw_only=True, slots=True)
class Encoded:
    response: JsonObject
    stops_turn: bool = False


def _allow(tool_input: JsonObject, updates: list[JsonValue] | None = None) -> JsonObject:
    response: JsonObject = {"behavior": "allow", "updatedInput": copy.deepcopy(tool_input)}
    if updates:
        response["updatedPermissions"] = copy.deepcopy(updates)
    return response


def _deny(message: str | None, default: str, *, stop: bool = False) -> Encoded:
    response: JsonObject = {"behavior": "deny", "message": (message or "").strip() or default}
    if stop:
        response["interrupt"] = True
    return Encoded(response=response, stops_turn=stop)


def _not_offered(action_id: str | None, offered: list[str]) -> CodecUsageError:
    return CodecUsageError(f"action {action_id!r} was not offered (offered: {', '.join(offered)})")


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolReply:
    """An ordinary tool: allow once, allow with one permission update, deny, deny and stop."""

    tool_input: JsonObject
    grants: tuple[tuple[str, JsonObject], ...] = ()  # (action id, PermissionUpdate to send)

    def encode(self, decision: Decision) -> Encoded:
        if decision.answers:
            raise CodecUsageError("a tool approval takes no answers")
        match decision.action_id:
            case "allow":
                return Encoded(response=_allow(self.tool_input))
            case "deny":
                return _deny(decision.message, DEFAULT_DENY)
            case "stop":
                return _deny(decision.message, DEFAULT_STOP, stop=True)
        for action_id, update in self.grants:
            if action_id == decision.action_id:
                return Encoded(response=_allow(self.tool_input, [update]))
        offered = [ALLOW, *(action_id for action_id, _ in self.grants), DENY, STOP]
        raise _not_offered(decision.action_id, offered)


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanReply:
    """ExitPlanMode: approve the plan (the CLI leaves plan mode), or keep planning."""

    tool_input: JsonObject

    def encode(self, decision: Decision) -> Encoded:
        if decision.answers:
            raise CodecUsageError("a plan takes no answers")
        match decision.action_id:
            case "approve":
                return Encoded(response=_allow(self.tool_input))
            case "keep-planning":
                return _deny(decision.message, DEFAULT_KEEP_PLANNING)
        raise _not_offered(decision.action_id, [APPROVE_PLAN, KEEP_PLANNING])


@dataclass(frozen=True, kw_only=True, slots=True)
class WireQuestion:
    id: str
    text: str  # the full question text: the key of its answer on the wire
    labels: tuple[str, ...]  # option labels by option index; the option id is the index
    multi: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class QuestionsReply:
    """AskUserQuestion: ``updatedInput`` = the input plus ``answers`` keyed by question text.

    Every question needs an answer (an allow without answers would tell the model "The user
    did not answer the questions."); several options of a multi-select question are joined
    with ", ", free text ("other") is sent as typed.
    """

    tool_input: JsonObject
    questions: tuple[WireQuestion, ...]

    def encode(self, decision: Decision) -> Encoded:
        if decision.action_id not in (None, ANSWER, DECLINE, STOP):
            raise _not_offered(decision.action_id, [ANSWER, DECLINE, STOP])
        if decision.action_id in (DECLINE, STOP):
            if decision.answers:
                raise CodecUsageError(f"action {decision.action_id!r} takes no answers")
            if decision.action_id == DECLINE:
                return _deny(decision.message, DEFAULT_DECLINE)
            return _deny(decision.message, DEFAULT_STOP, stop=True)
        asked = {question.id for question in self.questions}
        extra = sorted(set(decision.answers) - asked)
        if extra:
            raise CodecUsageError(f"answers to questions that were not asked: {extra}")
        answers: JsonObject = {}
        for question in self.questions:
            answers[question.text] = self._encode_one(question, decision.answers)
        updated = copy.deepcopy(self.tool_input)
        updated["answers"] = answers
        return Encoded(response={"behavior": "allow", "updatedInput": updated})

    @staticmethod
    def _encode_one(question: WireQuestion, given: dict[str, Answer]) -> str:
        answer = given.get(question.id, Answer())
        other = (answer.other or "").strip()
        if not answer.option_ids and not other:
            raise CodecUsageError(f"question {question.id!r} is required and has no answer")
        if len(set(answer.option_ids)) != len(answer.option_ids):
            raise CodecUsageError(f"an option is chosen twice for question {question.id!r}")
        if not question.multi and len(answer.option_ids) + bool(other) > 1:
            raise CodecUsageError(f"question {question.id!r} takes one option or text, not both")
        values: list[str] = []
        for option_id in answer.option_ids:
            index = int(option_id) if option_id.isdecimal() else -1
            if not 0 <= index < len(question.labels):
                raise CodecUsageError(f"question {question.id!r} has no option {option_id!r}")
            values.append(question.labels[index])
        if other:
            values.append(other)
        return MULTI_SELECT_SEPARATOR.join(values)


Reply = ToolReply | PlanReply | QuestionsReply
