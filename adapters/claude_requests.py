"""Claude Code ``can_use_tool`` control requests as interactions (and the reply each takes).

Pure functions over the decoded ``request`` object of a control request (claude-agent-sdk
``SDKControlPermissionRequest``: ``tool_name``, ``input``, ``permission_suggestions``,
``tool_use_id``, and optionally ``title``, ``display_name``, ``description``,
``decision_reason``, ``blocked_path``, ``agent_id``); recorded in
``tests/transcripts/claude-2.1.197/``.

==================  ========================================================  ==============
tool                interaction                                               reply
==================  ========================================================  ==============
AskUserQuestion     question(s): single or multi select, "other" free text    QuestionsReply
ExitPlanMode        plan: the plan's markdown; approve / keep planning        PlanReply
Bash                approval, Command detail                                  ToolReply
Edit, MultiEdit,    approval, FileChange detail with a diff built from the    ToolReply
Write, NotebookEdit  input (old_string/new_string, or the new content)
any other tool      approval, Text detail with the tool input                 ToolReply
==================  ========================================================  ==============

An approval offers: allow once; each ``permission_suggestions`` entry as its own action
(allow, plus exactly that update: a rule, a directory, a mode; :func:`describe_suggestion`);
deny (the model is told the decision's message); deny and stop the turn (``interrupt``).
Malformed requests raise :class:`gateway.errors.MalformedMessage`.
"""

from __future__ import annotations

import difflib
import json
import os.path
from dataclasses import dataclass

from adapters.claude_replies import (
    ALLOW,
    ANSWER,
    APPROVE_PLAN,
    DECLINE,
    DENY,
    KEEP_PLANNING,
    STOP,
    PlanReply,
    QuestionsReply,
    Reply,
    ToolReply,
    WireQuestion,
)
from adapters.json_fields import (
    as_object,
    get_array,
    get_bool,
    get_strings,
    get_text,
    require_object,
    require_text,
)
from adapters.jsonrpc import JsonObject
from gateway.domain import (
    Action,
    Command,
    Effect,
    FileChange,
    InteractionKind,
    InteractionRequest,
    Option,
    Plan,
    Question,
    Scope,
    Text,
)
from gateway.errors import MalformedMessage

__all__ = [
    "CARD_TOOLS",
    "FILE_TOOLS",
    "OpenedRequest",
    "describe_suggestion",
    "file_change_diff",
    "open_can_use_tool",
]

FILE_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
# Tools that only ask the person something: their card is all that is shown of them.
CARD_TOOLS = frozenset({"AskUserQuestion", "ExitPlanMode"})
TOOL_INPUT_SHOWN = 4000  # characters of an unknown tool's input shown on the card
# Permission modes a suggestion may switch to only where the project allows an agent to act
# without a person (adapters.claude_launch.DANGEROUS_PERMISSION_MODES).
_DANGEROUS_MODES = frozenset({"bypassPermissions", "auto"})
# Settings files Claude ignores in a workspace nobody trusted (headless `-p` never asks):
# 2.1.197 logs "Dropped 1 project-scoped permissions.allow entry — workspace not yet
# trusted", so a rule saved there does not stop the next ask (transcript bash_allow_rule).
_PROJECT_DESTINATIONS = frozenset({"localSettings", "projectSettings"})
_MODE_EFFECTS = {
    "acceptEdits": "file edits are accepted without asking",
    "plan": "the agent plans and does not change anything",
    "default": "every tool that needs permission asks",
    "dontAsk": "tools that are not pre-approved are denied without asking",
    "auto": "a model classifier approves tool calls",
    "bypassPermissions": "nothing asks for permission",
}


# What a mode grants, in the few words a button holds (its whole effect is the description).
_MODE_LABELS = {
    "acceptEdits": "accept all edits",
    "plan": "plan mode",
    "default": "ask each time",
    "dontAsk": "deny other tools",
    "auto": "auto-approve",
    "bypassPermissions": "ask nothing",
}


def _reach_label(grant: str, scope: Scope) -> str:
    """A label that says what the button grants besides this call, and for how long, in at
    most 40 characters (gateway.cards.LABEL_SHORT_CHARS): "Allow + accept all edits for the
    session". Two suggestions on one card never read alike."""
    if scope is Scope.ALWAYS:
        return f"Always allow + {grant}"
    return f"Allow + {grant} for the session"


@dataclass(frozen=True, kw_only=True, slots=True)
class OpenedRequest:
    request: InteractionRequest
    reply: Reply
    warnings: tuple[str, ...] = ()


def open_can_use_tool(
    native_key: str, request: JsonObject, *, cwd: str | None = None, allow_dangerous: bool = False
) -> OpenedRequest:
    tool = require_text(request, "tool_name", where="can_use_tool")
    tool_input = require_object(request, "input", where="can_use_tool")
    match tool:
        case "AskUserQuestion":
            return _open_question(native_key, tool_input)
        case "ExitPlanMode":
            return _open_plan(native_key, tool_input)
    return _open_approval(native_key, tool, tool_input, request, cwd, allow_dangerous)


# --- approvals -------------------------------------------------------------------------------


def _relative(path: str, cwd: str | None) -> str:
    if cwd and os.path.isabs(path) and (path == cwd or path.startswith(cwd.rstrip("/") + "/")):
        return os.path.relpath(path, cwd)
    return path


def _hunk(old: str, new: str, label: str) -> list[str]:
    """Removed and added lines of one replacement, under a hunk header without line numbers
    (the input says what is replaced, not where in the file)."""
    before, after = old.splitlines(), new.splitlines()
    context = max(len(before), len(after))  # one hunk: every line of the snippet
    lines = list(difflib.unified_diff(before, after, lineterm="", n=context))
    return [f"@@ {label} @@", *lines[3:]]


def file_change_diff(tool: str, tool_input: JsonObject, cwd: str | None) -> tuple[str, str]:
    """(path, diff) of an Edit, MultiEdit, Write or NotebookEdit input."""
    key = "notebook_path" if tool == "NotebookEdit" else "file_path"
    path = require_text(tool_input, key, where=f"{tool} input")
    shown = _relative(path, cwd)
    body: list[str] = []
    match tool:
        case "Edit":
            everywhere = get_bool(tool_input, "replace_all")
            body = _hunk(
                get_text(tool_input, "old_string") or "",
                get_text(tool_input, "new_string") or "",
                "every occurrence" if everywhere else "one occurrence",
            )
        case "MultiEdit":
            for index, raw in enumerate(get_array(tool_input, "edits") or (), start=1):
                edit = as_object(raw, where="MultiEdit edit")
                label = f"edit {index}" + (
                    ", every occurrence" if get_bool(edit, "replace_all") else ""
                )
                old, new = get_text(edit, "old_string") or "", get_text(edit, "new_string") or ""
                body += _hunk(old, new, label)
        case "Write":
            content = get_text(tool_input, "content") or ""
            body = ["@@ the whole file @@", *(f"+{line}" for line in content.splitlines())]
        case _:  # NotebookEdit
            mode = get_text(tool_input, "edit_mode") or "replace"
            cell = get_text(tool_input, "cell_id")
            label = f"{mode} cell {cell}" if cell else f"{mode} a cell"
            source = get_text(tool_input, "new_source") or ""
            body = [f"@@ {label} @@", *(f"+{line}" for line in source.splitlines())]
    before, after = (shown, shown) if os.path.isabs(shown) else (f"a/{shown}", f"b/{shown}")
    return path, "\n".join([f"--- {before}", f"+++ {after}", *body]) + "\n"


def _rule_text(rule: JsonObject) -> str:
    name = get_text(rule, "toolName") or "?"
    content = get_text(rule, "ruleContent")
    return f"{name}({content})" if content else name


def describe_suggestion(
    suggestion: JsonObject, action_id: str, *, allow_dangerous: bool = False
) -> tuple[Action, JsonObject] | None:
    """The action that allows the call together with one suggested permission update, and the
    update to send; None for a suggestion this gateway does not offer.

    A rule or directory the CLI
    would save to the project's settings is offered for the session instead (see
    ``_PROJECT_DESTINATIONS``); one saved to the user's settings is offered as "always".
    """
    kind = get_text(suggestion, "type")
    destination = get_text(suggestion, "destination") or "session"
    update: JsonObject = dict(suggestion)
    if destination in _PROJECT_DESTINATIONS:
        destination = update["destination"] = "session"
    scope = Scope.ALWAYS if destination == "userSettings" else Scope.SESSION
    lasting = (
        "in every later session too (saved to your Claude user settings)"
        if scope is Scope.ALWAYS
        else "until this session ends"
    )
    rule_text = ""
    if kind == "addRules" and get_text(suggestion, "behavior") == "allow":
        rules = [r for r in get_array(suggestion, "rules") or () if isinstance(r, dict)]
        if not rules:
            return None
        shown = ", ".join(_rule_text(rule) for rule in rules)
        # a short label (a button on a phone); the rules go whole beside the description
        label = (
            "Always allow calls like this"
            if scope is Scope.ALWAYS
            else "Allow calls like this for this session"
        )
        description = f"Allow it now, and calls matching these rules run without asking {lasting}:"
        rule_text = shown
    elif kind == "addDirectories":
        directories = get_strings(suggestion, "directories")
        if not directories:
            return None
        shown = ", ".join(directories)
        # the folder itself is in the description, said beside the button on every platform:
        # a path in the label would be cut to the same words as the next button's
        label = _reach_label("folder access", scope)
        description = f"Allow it now, and the agent may use {shown} without asking {lasting}."
    elif kind == "setMode":
        mode = get_text(suggestion, "mode") or ""
        if mode not in _MODE_EFFECTS or (mode in _DANGEROUS_MODES and not allow_dangerous):
            return None
        label = _reach_label(_MODE_LABELS[mode], scope)
        description = f"Allow it now, and switch to {mode} mode: {_MODE_EFFECTS[mode]}, {lasting}."
    else:
        return None
    action = Action(
        id=action_id,
        label=label,
        effect=Effect.ALLOW,
        scope=scope,
        description=description,
        rule=rule_text,
    )
    return action, update


def _approval_actions(
    request: JsonObject, allow_dangerous: bool
) -> tuple[tuple[Action, ...], tuple[tuple[str, JsonObject], ...], tuple[str, ...]]:
    actions = [
        Action(id=ALLOW, label="Allow once", effect=Effect.ALLOW, description="Allow this call."),
    ]
    grants: list[tuple[str, JsonObject]] = []
    warnings: list[str] = []
    for raw in get_array(request, "permission_suggestions") or ():
        action_id = f"grant-{len(grants) + 1}"
        described = None
        if isinstance(raw, dict):
            described = describe_suggestion(raw, action_id, allow_dangerous=allow_dangerous)
        if described is None:
            text = f"the agent suggested a permission this gateway does not offer: {raw!r}"
            warnings.append(text[:500])
            continue
        action, update = described
        actions.append(action)
        grants.append((action_id, update))
    actions += [
        Action(
            id=DENY,
            label="Deny",
            effect=Effect.DENY,
            description="Do not allow it; the agent is told why and continues the turn.",
        ),
        Action(
            id=STOP,
            label="Deny and stop the turn",
            effect=Effect.CANCEL,
            description="Do not allow it, and stop the turn.",
        ),
    ]
    return tuple(actions), tuple(grants), tuple(warnings)


def _sentences(parts: list[str]) -> str:
    """The parts of a summary as sentences: each ends with a full stop where the agent's
    words did not ("Create hello.txt. It touches /w/hello.txt.")."""
    kept = [part.strip() for part in parts if part.strip()]
    return " ".join(part if part[-1] in ".!?…:" else f"{part}." for part in kept)


def _open_approval(
    native_key: str,
    tool: str,
    tool_input: JsonObject,
    request: JsonObject,
    cwd: str | None,
    allow_dangerous: bool,
) -> OpenedRequest:
    name = get_text(request, "display_name") or tool
    description = get_text(request, "description")
    summary = [get_text(request, "decision_reason") or ""]
    blocked = get_text(request, "blocked_path")
    detail: Command | FileChange | Text
    if tool == "Bash":
        command = require_text(tool_input, "command", where="Bash input")
        reason = get_text(tool_input, "description") or description
        detail = Command(command=command, cwd=cwd, reason=reason)
        title = "Run a command"
        summary.insert(0, reason or "")
    elif tool in FILE_TOOLS:
        path, diff = file_change_diff(tool, tool_input, cwd)
        detail = FileChange(paths=(path,), diff=diff)
        title = "Write a file" if tool == "Write" else f"Edit {_relative(path, cwd)}"
        # the diff's header names the file: the summary does not again
    else:
        shown = json.dumps(tool_input, indent=2, ensure_ascii=False)
        if len(shown) > TOOL_INPUT_SHOWN:
            shown = shown[:TOOL_INPUT_SHOWN] + "\n… (input truncated)"
        detail = Text(text=shown)
        title = f"Use {name}"
        summary.insert(0, description or "")
    if blocked:
        summary.append(f"It touches {blocked}.")
    title = get_text(request, "title") or title
    actions, grants, warnings = _approval_actions(request, allow_dangerous)
    opened = InteractionRequest(
        native_key=native_key,
        kind=InteractionKind.APPROVAL,
        title=title,
        summary=_sentences(summary),
        detail=detail,
        actions=actions,
    )
    reply = ToolReply(tool_input=tool_input, grants=grants)
    return OpenedRequest(request=opened, reply=reply, warnings=warnings)


# --- questions and plans -----------------------------------------------------------------------


def _open_question(native_key: str, tool_input: JsonObject) -> OpenedRequest:
    """AskUserQuestion input: ``questions[{question, header, options[{label, description}],
    multiSelect}]``. Ids: questions ``q0``, ``q1``...; options their index ``"0"``, ``"1"``..."""
    raw_questions = get_array(tool_input, "questions")
    if not raw_questions:
        raise MalformedMessage("AskUserQuestion without questions", repr(tool_input)[:200])
    questions: list[Question] = []
    wire: list[WireQuestion] = []
    for index, raw in enumerate(raw_questions):
        item = as_object(raw, where="AskUserQuestion question")
        text = require_text(item, "question", where="AskUserQuestion question")
        options = []
        for option_index, raw_option in enumerate(get_array(item, "options") or ()):
            option = as_object(raw_option, where="AskUserQuestion option")
            label = require_text(option, "label", where="AskUserQuestion option")
            description = get_text(option, "description") or ""
            options.append(Option(id=str(option_index), label=label, description=description))
        multi = get_bool(item, "multiSelect")
        question_id = f"q{index}"
        questions.append(
            Question(
                id=question_id,
                header=get_text(item, "header") or "",
                text=text,
                options=tuple(options),
                multi=multi,
                allow_other=True,  # Claude Code always lets the person type their own answer
            )
        )
        wire.append(
            WireQuestion(
                id=question_id, text=text, labels=tuple(o.label for o in options), multi=multi
            )
        )
    first = questions[0]
    title = (first.header or first.text) if len(questions) == 1 else "The agent has questions"
    actions = (
        Action(id=ANSWER, label="Answer", effect=Effect.ALLOW, description="Send the answers."),
        Action(
            id=DECLINE,
            label="Do not answer",
            effect=Effect.DENY,
            description="The agent is told you declined and continues the turn.",
        ),
        Action(
            id=STOP,
            label="Do not answer and stop the turn",
            effect=Effect.CANCEL,
            description="Stop the turn.",
        ),
    )
    request = InteractionRequest(
        native_key=native_key,
        kind=InteractionKind.QUESTION,
        title=title,
        summary=first.text if len(questions) == 1 else f"{len(questions)} questions",
        questions=tuple(questions),
        actions=actions,
    )
    return OpenedRequest(
        request=request, reply=QuestionsReply(tool_input=tool_input, questions=tuple(wire))
    )


def _open_plan(native_key: str, tool_input: JsonObject) -> OpenedRequest:
    """ExitPlanMode input ``{"plan": markdown}``. Approving it makes the CLI leave plan mode
    (it reports ``permissionMode: "default"`` in a ``system/status``: plan_approve.jsonl);
    keeping planning is a deny whose message the model reads as feedback."""
    plan = get_text(tool_input, "plan")
    warnings = () if plan else ("the agent asked to leave plan mode without a plan text",)
    actions = (
        Action(
            id=APPROVE_PLAN,
            label="Approve the plan",
            effect=Effect.ALLOW,
            description="The agent leaves plan mode and starts on the plan.",
        ),
        Action(
            id=KEEP_PLANNING,
            label="Keep planning",
            effect=Effect.DENY,
            description="The agent stays in plan mode; your message tells it what to change.",
        ),
    )
    request = InteractionRequest(
        native_key=native_key,
        kind=InteractionKind.PLAN,
        title="Approve the plan",
        summary="The agent has a plan and asks to start on it.",
        detail=Plan(markdown=plan or "(no plan text)"),
        actions=actions,
    )
    return OpenedRequest(request=request, reply=PlanReply(tool_input=tool_input), warnings=warnings)
