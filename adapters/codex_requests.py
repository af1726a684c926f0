"""Codex app-server server requests as interactions (and the reply each one will take).

Pure functions over decoded params (schema: ``../shared/protocols/codex-0.171``,
``ServerRequest``); :mod:`adapters.codex_app_server` owns the table from native key to the
reply (:mod:`adapters.codex_replies`) each ``open_*`` function returns.

=====================================  ===========================================  ==========
method                                 interaction                                  reply
=====================================  ===========================================  ==========
item/commandExecution/requestApproval  approval, Command or Network detail,         ApprovalReply
                                       actions = ``availableDecisions`` + decline
item/fileChange/requestApproval        approval, FileChange detail (from the        ApprovalReply
                                       fileChange item), accept/acceptForSession/
                                       decline/cancel
item/permissions/requestApproval       approval, Permissions detail, grant for      PermissionsReply
                                       turn / for session / deny
item/tool/requestUserInput             question(s)                                  QuestionsReply
=====================================  ===========================================  ==========

Every reply echoes what the server offered (a decision object is sent back exactly as it
came); a decision that names an action the request did not offer, or that leaves a
required question unanswered, raises :class:`gateway.errors.CodecUsageError` and nothing is
written. Malformed params raise :class:`gateway.errors.MalformedMessage`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

from adapters.codex_replies import (
    ApprovalReply,
    PermissionsReply,
    QuestionsReply,
    Reply,
    WireQuestion,
)
from adapters.json_fields import (
    as_object,
    get_array,
    get_bool,
    get_object,
    get_strings,
    get_text,
    require_text,
)
from adapters.jsonrpc import JsonObject, JsonValue
from gateway.domain import (
    Action,
    Command,
    Effect,
    FileChange,
    InteractionKind,
    InteractionRequest,
    Network,
    Option,
    Permissions,
    Question,
    Scope,
)
from gateway.errors import MalformedMessage

__all__ = [
    "FileChangeSet",
    "OpenedRequest",
    "file_changes_from_item",
    "open_command_approval",
    "open_file_change_approval",
    "open_permissions_approval",
    "open_user_input",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class OpenedRequest:
    request: InteractionRequest
    reply: Reply
    warnings: tuple[str, ...] = ()


# --- command execution approval ------------------------------------------------------------


def _command_rule(prefix: tuple[str, ...], command: str) -> Action:
    """The action adding a lasting command rule. Its label is short (a button on a phone:
    Telegram cuts at 60 characters, Slack at 75); the rule goes whole in ``rule``, shown
    beside the description, also where it is the whole command (then in the command's own
    words): the card's command is what runs now, the rule what lasts, and a person reads
    what lasts beside the button that adds it (issue 29)."""
    try:
        whole = tuple(shlex.split(command)) == prefix
    except ValueError:
        whole = False
    if whole:
        return Action(
            id="rule",
            label="Always allow this command",
            effect=Effect.ALLOW,
            scope=Scope.ALWAYS,
            description=(
                "Run it, and add a lasting rule: this command, and any command that starts "
                "with it, runs without asking, now and in later sessions:"
            ),
            rule=command,
        )
    return Action(
        id="rule",
        label="Always allow commands like this",
        effect=Effect.ALLOW,
        scope=Scope.ALWAYS,
        description=(
            "Run it, and add a lasting rule: commands starting with these words run without "
            "asking, now and in later sessions:"
        ),
        rule=shlex.join(prefix),
    )


def _describe_command_decision(value: JsonValue, command: str = "") -> Action | None:
    """The action for one CommandExecutionApprovalDecision (its id not yet made unique).

    Schema: CommandExecutionApprovalDecision (all six variants); None for anything else.
    """
    match value:
        case "accept":
            return Action(
                id="accept",
                label="Allow once",
                effect=Effect.ALLOW,
                description="Run it this time.",
            )
        case "acceptForSession":
            description = "Run it, and similar commands without asking for the rest of the session."
            return Action(
                id="session",
                label="Allow for this session",
                effect=Effect.ALLOW,
                scope=Scope.SESSION,
                description=description,
            )
        case "decline":
            description = "Do not run it; the agent continues the turn."
            return Action(id="decline", label="Deny", effect=Effect.DENY, description=description)
        case "cancel":
            description = "Do not run it, and stop the turn."
            return Action(
                id="cancel",
                label="Deny and stop the turn",
                effect=Effect.CANCEL,
                description=description,
            )
        # An empty prefix would be a rule allowing every command: never offered.
        case {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": list(words)}} if words:
            return _command_rule(tuple(str(word) for word in words), command)
        case {"applyNetworkPolicyAmendment": {"network_policy_amendment": dict(amendment)}}:
            host, rule = amendment.get("host"), amendment.get("action")
            if not isinstance(host, str) or rule not in ("allow", "deny"):
                return None
            # the host is the card's own subject (its title, its Host field): not said again
            if rule == "allow":
                description = (
                    "Allow it, and add a lasting rule allowing network access to this host."
                )
                return Action(
                    id="net-allow",
                    label="Always allow this host",
                    effect=Effect.ALLOW,
                    scope=Scope.ALWAYS,
                    description=description,
                )
            description = "Refuse it, and add a lasting rule blocking network access to this host."
            return Action(
                id="net-deny",
                label="Always block this host",
                effect=Effect.DENY,
                scope=Scope.ALWAYS,
                description=description,
            )
    return None


def _default_command_decisions(params: JsonObject, kind: str) -> list[JsonValue]:
    """What to offer when ``availableDecisions`` is absent (servers before the field).

    The schema gives no default list, so we offer what every server accepts (accept, decline,
    cancel; the only ones valid for ``humanCommand``), plus the amendments the server itself
    proposed. ``acceptForSession`` is not guessed: 0.171 did not offer it for commands.
    """
    offered: list[JsonValue] = ["accept"]
    if kind != "humanCommand":
        prefix = get_strings(params, "proposedExecpolicyAmendment")
        if prefix:
            amendment: JsonObject = {"execpolicy_amendment": list(prefix)}
            offered.append({"acceptWithExecpolicyAmendment": amendment})
        for proposal in get_array(params, "proposedNetworkPolicyAmendments") or ():
            if isinstance(proposal, dict):
                network: JsonObject = {"network_policy_amendment": proposal}
                offered.append({"applyNetworkPolicyAmendment": network})
    offered += ["decline", "cancel"]
    return offered


def _approval_actions(
    offered: list[JsonValue], command: str = ""
) -> tuple[tuple[Action, ...], ApprovalReply, tuple[str, ...]]:
    actions: list[Action] = []
    decisions: list[tuple[str, JsonValue]] = []
    warnings: list[str] = []
    # 0.171 accepts "decline" for command approvals without listing it (transcript
    # shell_decline): always offer it, before "cancel" so that the milder choice comes first.
    if "decline" not in offered:
        at = offered.index("cancel") if "cancel" in offered else len(offered)
        offered = [*offered[:at], "decline", *offered[at:]]
    for value in offered:
        described = _describe_command_decision(value, command)
        if described is None:
            warnings.append(f"the agent offered a decision this gateway does not know: {value!r}")
            continue
        taken = {action.id for action in actions}
        unique_id, n = described.id, 1
        while unique_id in taken:
            n += 1
            unique_id = f"{described.id}-{n}"
        actions.append(replace(described, id=unique_id))
        decisions.append((unique_id, value))
    return tuple(actions), ApprovalReply(decisions=tuple(decisions)), tuple(warnings)


def _describe_additional_permissions(params: JsonObject) -> str:
    extra = get_object(params, "additionalPermissions")
    if not extra:
        return ""
    asked = _describe_permission_profile(extra)
    return f"It also asks for: {'; '.join(asked)}." if asked else ""


def _sentences(parts: list[str]) -> str:
    """The parts of a summary as sentences: each ends with a full stop where the agent's
    words did not ("write outside. It also asks for: …")."""
    kept = [part.strip() for part in parts if part.strip()]
    return " ".join(part if part[-1] in ".!?…:" else f"{part}." for part in kept)


def open_command_approval(native_key: str, params: JsonObject) -> OpenedRequest:
    """Schema: CommandExecutionRequestApprovalParams; ``kind`` defaults to ``command``."""
    kind = get_text(params, "kind") or "command"
    command = get_text(params, "command")
    cwd = get_text(params, "cwd")
    reason = get_text(params, "reason")
    network = get_object(params, "networkApprovalContext")
    offered = get_array(params, "availableDecisions")
    if offered is None:
        offered = _default_command_decisions(params, kind)
    actions, reply, warnings = _approval_actions(offered, command or "")
    summary_parts = [reason or ""]
    detail: Command | Network
    if network is not None:
        host = require_text(network, "host", where="networkApprovalContext")
        protocol = get_text(network, "protocol")
        title = f"Allow network access to {host}"
        detail = Network(host=host, protocol=protocol, reason=reason)
        if command:
            summary_parts.append(f"For the command: {command}")
    elif kind == "writeStdin":
        title = "Send input to a running command"
        detail = Command(
            command=command or "", cwd=cwd, reason=reason, stdin_for_running_process=True
        )
        summary_parts.append("This is input for a command that is already running.")
    else:
        title = "Confirm a command" if kind == "humanCommand" else "Run a command"
        detail = Command(command=command or "", cwd=cwd, reason=reason)
    summary_parts.append(_describe_additional_permissions(params))
    request = InteractionRequest(
        native_key=native_key,
        kind=InteractionKind.APPROVAL,
        title=title,
        summary=_sentences(summary_parts),
        detail=detail,
        actions=actions,
        turn_native_id=get_text(params, "turnId"),
    )
    return OpenedRequest(request=request, reply=reply, warnings=warnings)


# --- file change approval ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class FileChangeSet:
    """The paths and a readable diff of a ``fileChange`` thread item."""

    paths: tuple[str, ...]
    diff: str


def _shown_path(path: str, cwd: str | None, side: str) -> str:
    """``a/rel`` or ``b/rel`` for a path under the work dir, else the path as it is."""
    root = cwd.rstrip("/") if cwd else ""
    if root and path.startswith(root + "/"):
        return f"{side}/{path[len(root) + 1 :]}"
    return path


def _lines(text: str, mark: str) -> str:
    return "".join(f"{mark}{line}\n" for line in text.splitlines())


def _count(text: str) -> str:
    lines = len(text.splitlines())
    return "0,0" if lines == 0 else f"1,{lines}"


def file_changes_from_item(item: JsonObject, cwd: str | None = None) -> FileChangeSet:
    """Schema: FileChangeThreadItem ``changes`` (FileUpdateChange: path, kind, diff).

    The diff is a unified diff, as a person reads every other change: an ``add`` carries the
    new content (shown as ``+`` lines from ``/dev/null``), an ``update`` a unified diff's
    hunks, a ``delete`` the removed content (``-`` lines). A path under ``cwd`` (the work
    dir) is shown relative to it (``a/…``, ``b/…``); ``paths`` stay as the agent gave them.
    """
    paths: list[str] = []
    sections: list[str] = []
    for raw in get_array(item, "changes") or ():
        change = as_object(raw, where="fileChange change")
        path = require_text(change, "path", where="fileChange change")
        kind = get_object(change, "kind") or {}
        kind_type = get_text(kind, "type") or "update"
        move_path = get_text(kind, "move_path")
        paths.append(path)
        body = get_text(change, "diff") or ""
        before, after = _shown_path(path, cwd, "a"), _shown_path(path, cwd, "b")
        if kind_type == "add":
            hunk = f"@@ -0,0 +{_count(body)} @@\n" if body else ""
            sections.append(f"--- /dev/null\n+++ {after}\n{hunk}{_lines(body, '+')}")
            continue
        if kind_type == "delete":
            hunk = f"@@ -{_count(body)} +0,0 @@\n" if body else ""
            sections.append(f"--- {before}\n+++ /dev/null\n{hunk}{_lines(body, '-')}")
            continue
        if move_path:
            paths.append(move_path)
            after = _shown_path(move_path, cwd, "b")
        if body and not body.endswith("\n"):
            body += "\n"
        sections.append(f"--- {before}\n+++ {after}\n{body}")
    return FileChangeSet(paths=tuple(paths), diff="".join(sections))


def open_file_change_approval(
    native_key: str, params: JsonObject, changes: FileChangeSet | None
) -> OpenedRequest:
    """Schema: FileChangeRequestApprovalParams (the changes are on the fileChange item with
    the same ``itemId``, announced by ``item/started`` before the request)."""
    reason = get_text(params, "reason")
    grant_root = get_text(params, "grantRoot")
    # Schema: FileChangeApprovalDecision = accept | acceptForSession | decline | cancel.
    # Seen on 0.171: acceptForSession covers later changes to the SAME files only; a change
    # to another file is asked again (tests/transcripts/.../patch_accept_for_session*.jsonl).
    session = (
        "Apply these, and later changes to these same files without asking, for the rest of"
        " the session (changes to other files are still asked)."
    )
    actions = (
        Action(id="accept", label="Allow once", effect=Effect.ALLOW, description="Apply these."),
        Action(
            id="session",
            label="Allow these files for this session",
            effect=Effect.ALLOW,
            scope=Scope.SESSION,
            description=session,
        ),
        Action(
            id="decline",
            label="Deny",
            effect=Effect.DENY,
            description="Do not apply them; the agent continues the turn.",
        ),
        Action(
            id="cancel",
            label="Deny and stop the turn",
            effect=Effect.CANCEL,
            description="Do not apply them, and stop the turn.",
        ),
    )
    wire = ("accept", "acceptForSession", "decline", "cancel")
    reply = ApprovalReply(decisions=tuple(zip((a.id for a in actions), wire, strict=True)))
    # the diff names each file (relative to the work dir): the summary does not again
    summary = reason or ""
    if changes is None:
        changes = FileChangeSet(paths=(), diff="")
        summary += " The agent did not announce which files it wants to change."
    if grant_root:
        summary += f" It also asks to write anywhere under {grant_root} for the session."
    summary = summary.strip()
    request = InteractionRequest(
        native_key=native_key,
        kind=InteractionKind.APPROVAL,
        title="Apply file changes",
        summary=summary,
        detail=FileChange(
            paths=changes.paths, diff=changes.diff, reason=reason, grant_root=grant_root
        ),
        actions=actions,
        turn_native_id=get_text(params, "turnId"),
    )
    return OpenedRequest(request=request, reply=reply)


# --- permissions approval (transcripts permissions_grant_turn/_session, permissions_deny) ---


def _describe_permission_profile(profile: JsonObject) -> list[str]:
    """Schema: RequestPermissionProfile / AdditionalPermissionProfile."""
    asked: list[str] = []
    file_system = get_object(profile, "fileSystem") or {}
    asked += [f"read {path}" for path in get_strings(file_system, "read")]
    asked += [f"write {path}" for path in get_strings(file_system, "write")]
    for raw in get_array(file_system, "entries") or ():
        if not isinstance(raw, dict):
            continue
        access = get_text(raw, "access") or "access"
        where = get_object(raw, "path") or {}
        special = get_object(where, "value") or {}
        target = (
            get_text(where, "path")
            or get_text(where, "pattern")
            or get_text(special, "path")
            or get_text(special, "kind")
            or "?"
        )
        asked.append(f"{access} {target}")
    network = get_object(profile, "network") or {}
    if get_bool(network, "enabled"):
        asked.append("network access")
    return asked


def open_permissions_approval(native_key: str, params: JsonObject) -> OpenedRequest:
    """Schema: PermissionsRequestApprovalParams → PermissionsRequestApprovalResponse.

    The person grants what was asked for this turn or for the session, or denies it (the
    reply then grants an empty profile).
    """
    profile = get_object(params, "permissions")
    if profile is None:
        raise MalformedMessage("permissions request without permissions", repr(params)[:200])
    requested: JsonObject = {k: profile[k] for k in ("fileSystem", "network") if k in profile}
    asked = _describe_permission_profile(profile)
    reason = get_text(params, "reason")
    cwd = get_text(params, "cwd")
    description = "; ".join(asked) or "no specific permission"
    actions = (
        Action(
            id="turn",
            label="Allow for this turn",
            effect=Effect.ALLOW,
            scope=Scope.TURN,
            description=f"Grant {description} until the turn ends.",
        ),
        Action(
            id="session",
            label="Allow for this session",
            effect=Effect.ALLOW,
            scope=Scope.SESSION,
            description=f"Grant {description} for the rest of the session.",
        ),
        Action(
            id="deny",
            label="Deny",
            effect=Effect.DENY,
            description="Grant nothing; the agent continues without it.",
        ),
    )
    summary = " ".join(part for part in (reason, f"(in {cwd})" if cwd else None) if part)
    request = InteractionRequest(
        native_key=native_key,
        kind=InteractionKind.APPROVAL,
        title="Grant extra permissions",
        summary=summary or description,
        detail=Permissions(
            description=description, scope=Scope.TURN, reason=reason, requested=tuple(asked)
        ),
        actions=actions,
        turn_native_id=get_text(params, "turnId"),
    )
    return OpenedRequest(request=request, reply=PermissionsReply(requested=requested))


# --- request user input --------------------------------------------------------------------


def open_user_input(native_key: str, params: JsonObject) -> OpenedRequest:
    """Schema: ToolRequestUserInputParams (ToolRequestUserInputQuestion, ...Option).

    Option ids are the option's index ("0", "1", ...): stable, short, never the label; the
    label is what goes back on the wire. A question without options takes free text.
    """
    raw_questions = get_array(params, "questions")
    if not raw_questions:
        raise MalformedMessage("requestUserInput without questions", repr(params)[:200])
    questions: list[Question] = []
    wire: list[WireQuestion] = []
    for raw in raw_questions:
        item = as_object(raw, where="question")
        question_id = require_text(item, "id", where="question")
        options: list[Option] = []
        for index, raw_option in enumerate(get_array(item, "options") or ()):
            option = as_object(raw_option, where="question option")
            options.append(
                Option(
                    id=str(index),
                    label=require_text(option, "label", where="question option"),
                    description=get_text(option, "description") or "",
                )
            )
        free_text = get_bool(item, "isOther") or not options
        questions.append(
            Question(
                id=question_id,
                header=get_text(item, "header") or "",
                text=require_text(item, "question", where="question"),
                options=tuple(options),
                allow_other=free_text,
                secret=get_bool(item, "isSecret"),
            )
        )
        wire.append(
            WireQuestion(
                id=question_id, labels=tuple(o.label for o in options), free_text=free_text
            )
        )
    first = questions[0]
    title = (first.header or first.text) if len(questions) == 1 else "The agent has questions"
    request = InteractionRequest(
        native_key=native_key,
        kind=InteractionKind.QUESTION,
        title=title,
        summary=first.text if len(questions) == 1 else f"{len(questions)} questions",
        questions=tuple(questions),
        turn_native_id=get_text(params, "turnId"),
    )
    return OpenedRequest(request=request, reply=QuestionsReply(questions=tuple(wire)))
