"""Chat text → a gateway command or a prompt for the agent; pure (DESIGN.md, Three channels).

Only a message that *starts* with one of the gateway's slash commands is a command
(``/stop``, ``/stop@my_bot`` in Telegram groups, leading whitespace allowed, any case).
Everything else, including "ok", "yes", "approve" and "允许", is a :class:`ChatPrompt` for
the agent: free text is never a decision. ``/approve``, ``/deny`` and ``/answer`` are the
explicit fallback for buttons; :func:`resolve_action` and :func:`parse_answers` match their
arguments to what the interaction offers, and their errors never echo what was typed (it
may be a secret).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from gateway.domain import Action, Answer, Effect, Question, Scope
from gateway.errors import InvalidDecision

__all__ = [
    "COMMANDS",
    "HELP_TEXT",
    "AnswerCommand",
    "ApproveCommand",
    "ChatInput",
    "ChatPrompt",
    "CommandInfo",
    "CommandName",
    "CommandUsage",
    "ControlCommand",
    "DenyCommand",
    "NotForUs",
    "UnknownCommand",
    "WithdrawCommand",
    "parse_answers",
    "parse_chat_text",
    "resolve_action",
    "slash",
    "spell_commands",
]


class CommandName(StrEnum):
    STOP = "stop"
    RESUME = "resume"
    CLEAR = "clear"
    STATUS = "status"
    NEW = "new"
    PENDING = "pending"
    HELP = "help"
    APPROVE = "approve"
    DENY = "deny"
    ANSWER = "answer"
    WITHDRAW = "withdraw"
    PLAN = "plan"
    GRANTS = "grants"
    REVOKE = "revoke"
    COMPACT = "compact"
    SESSIONS = "sessions"
    SWITCH = "switch"
    NAME = "name"
    MODEL = "model"
    MODE = "mode"
    EVERY = "every"
    AT = "at"
    SCHEDULES = "schedules"
    UNSCHEDULE = "unschedule"
    TRANSCRIBE = "transcribe"


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandInfo:
    name: CommandName
    args: str
    description: str

    @property
    def usage(self) -> str:
        return f"/{self.name} {self.args}".rstrip()


COMMANDS: tuple[CommandInfo, ...] = (
    CommandInfo(
        name=CommandName.STOP,
        args="",
        description="interrupt the agent and hold what is queued",
    ),
    CommandInfo(name=CommandName.RESUME, args="", description="send the held messages, in order"),
    CommandInfo(name=CommandName.CLEAR, args="", description="drop the queued messages"),
    CommandInfo(
        name=CommandName.STATUS, args="", description="the session, its policy and what waits"
    ),
    CommandInfo(
        name=CommandName.NEW,
        args="[name]",
        description="start a new session (in a forum's General topic: in a new topic)",
    ),
    CommandInfo(name=CommandName.PENDING, args="", description="list the requests waiting for you"),
    CommandInfo(name=CommandName.APPROVE, args="ID [action]", description="approve a request"),
    CommandInfo(name=CommandName.DENY, args="ID [message]", description="deny a request"),
    CommandInfo(name=CommandName.ANSWER, args="ID answer", description="answer a question"),
    CommandInfo(
        name=CommandName.WITHDRAW, args="ID", description="take back your vote on a request"
    ),
    CommandInfo(
        name=CommandName.PLAN,
        args="TEXT",
        description="ask the agent for a plan first: it changes nothing until you choose",
    ),
    CommandInfo(
        name=CommandName.GRANTS, args="", description="what was granted beyond one request"
    ),
    CommandInfo(name=CommandName.REVOKE, args="ID", description="take a grant back"),
    CommandInfo(
        name=CommandName.COMPACT, args="", description="have the agent compact its context"
    ),
    CommandInfo(name=CommandName.SESSIONS, args="[page]", description="the sessions you can see"),
    CommandInfo(
        name=CommandName.SWITCH, args="NAME|N", description="continue an earlier session here"
    ),
    CommandInfo(name=CommandName.NAME, args="TEXT", description="name this session"),
    CommandInfo(name=CommandName.MODEL, args="[name]", description="the model, or pick one"),
    CommandInfo(name=CommandName.MODE, args="[mode]", description="the agent's permission mode"),
    CommandInfo(
        name=CommandName.EVERY,
        args="CRON TEXT",
        description="have the agent do TEXT on a schedule (cron, @daily, weekdays)",
    ),
    CommandInfo(
        name=CommandName.AT,
        args="WHEN TEXT",
        description="have the agent do TEXT once (HH:MM, YYYY-MM-DD HH:MM, in 2h)",
    ),
    CommandInfo(name=CommandName.SCHEDULES, args="", description="the project's schedules"),
    CommandInfo(name=CommandName.UNSCHEDULE, args="ID", description="delete a schedule"),
    CommandInfo(
        name=CommandName.TRANSCRIBE,
        args="",
        description="turn your last voice note into text again, after it failed",
    ),
    CommandInfo(name=CommandName.HELP, args="", description="this list"),
)
_INFO = {info.name: info for info in COMMANDS}

# A command named in the gateway's own text: "/stop", not inside a path or a word
_NAMED_COMMAND = re.compile(
    r"(?<![\w/])/(" + "|".join(sorted(CommandName, key=len, reverse=True)) + r")\b(?!/)"
)


def slash(name: str) -> str:
    """How commands are spelled where nothing says otherwise."""
    return f"/{name}"


def spell_commands(text: str, spell: Callable[[str], str]) -> str:
    """The gateway's ``text`` with each command it names (``/stop``) spelled as the platform
    where it is shown takes it (``spell("stop")``): a Slack thread takes no slash command."""
    return _NAMED_COMMAND.sub(lambda match: spell(match.group(1)), text)


HELP_TEXT = "\n".join(
    [
        "Commands:",
        *(f"{info.usage} — {info.description}" for info in COMMANDS),
        "",
        "Anything else is sent to the agent. Typing “ok” or “yes” never approves anything:"
        " use the buttons, or /approve ID.",
        "/answer ID: an option number (1,3 for several), an option's label, or your own text;"
        " for several questions, one answer per line ('-' to skip an optional one).",
        "A voice note is turned into text and sent as a message, where the gateway"
        " transcribes them; a spoken “approve” approves nothing either.",
        "In a Telegram group with privacy mode, send a voice note as a reply to the bot; on"
        " Discord a voice message cannot mention the bot: send it in a DM, or in a thread"
        " where the bot reads messages.",
    ]
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatPrompt:
    """Text for the agent's prompt queue (``mode`` "plan": ``/plan TEXT``)."""

    text: str
    mode: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ControlCommand:
    """/stop, /resume, /clear, /status, /new, /pending, /help (never queued)."""

    name: CommandName
    args: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ApproveCommand:
    interaction_id: str
    action: str | None = None  # an action id, its number (1-based) or its label


@dataclass(frozen=True, kw_only=True, slots=True)
class DenyCommand:
    interaction_id: str
    message: str | None = None  # feedback the agent sees


@dataclass(frozen=True, kw_only=True, slots=True)
class AnswerCommand:
    interaction_id: str
    text: str  # matched to the questions by parse_answers


@dataclass(frozen=True, kw_only=True, slots=True)
class WithdrawCommand:
    interaction_id: str  # the request whose vote (under a policy rule) is taken back


@dataclass(frozen=True, kw_only=True, slots=True)
class UnknownCommand:
    """A slash command the gateway does not know: answered with help, not sent to the agent."""

    name: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandUsage:
    """A known command used wrongly; ``message`` says how to use it."""

    name: CommandName
    message: str


@dataclass(frozen=True, kw_only=True, slots=True)
class NotForUs:
    """A Telegram ``/cmd@other_bot``: meant for another bot in the group; ignored."""

    bot: str


ChatInput = (
    ChatPrompt
    | ControlCommand
    | ApproveCommand
    | DenyCommand
    | AnswerCommand
    | WithdrawCommand
    | UnknownCommand
    | CommandUsage
    | NotForUs
)

_COMMAND = re.compile(
    r"^\s*/(?P<name>[A-Za-z][A-Za-z0-9_]{0,31})(?:@(?P<bot>[A-Za-z0-9_]{1,64}))?(?=\s|$)"
    r"(?P<rest>.*)$",
    re.DOTALL,
)
_ID = re.compile(r"^[A-Za-z0-9_-]{1,48}$")
_ALIASES = {"start": CommandName.HELP}  # Telegram sends /start when a chat is opened


def parse_chat_text(text: str, *, bot_username: str | None = None) -> ChatInput:
    """What a chat message is: a command of the gateway, or a prompt for the agent."""
    match = _COMMAND.match(text)
    if match is None:
        return ChatPrompt(text=text)
    bot = match["bot"]
    if bot and bot_username and bot.casefold() != bot_username.removeprefix("@").casefold():
        return NotForUs(bot=bot)
    word = match["name"].lower()
    name = _ALIASES.get(word) or next((c for c in CommandName if c.value == word), None)
    if name is None:
        return UnknownCommand(name=word)
    rest = match["rest"].strip()
    if name is CommandName.PLAN:
        if not rest:
            return CommandUsage(name=name, message=f"Usage: {_INFO[name].usage}")
        return ChatPrompt(text=rest, mode="plan")
    if name not in (
        CommandName.APPROVE,
        CommandName.DENY,
        CommandName.ANSWER,
        CommandName.WITHDRAW,
    ):
        return ControlCommand(name=name, args=rest)
    parts = rest.split(maxsplit=1)
    if not parts or not _ID.match(parts[0]):
        return CommandUsage(name=name, message=f"Usage: {_INFO[name].usage}")
    interaction_id = parts[0]
    argument = parts[1].strip() if len(parts) > 1 else ""
    if name is CommandName.APPROVE:
        return ApproveCommand(interaction_id=interaction_id, action=argument or None)
    if name is CommandName.DENY:
        return DenyCommand(interaction_id=interaction_id, message=argument or None)
    if name is CommandName.WITHDRAW:
        return WithdrawCommand(interaction_id=interaction_id)
    if not argument:
        return CommandUsage(name=name, message=f"Usage: {_INFO[name].usage}")
    return AnswerCommand(interaction_id=interaction_id, text=argument)


# --- matching arguments to what the interaction offers ------------------------------------


def _choices(actions: Sequence[Action]) -> str:
    return "; ".join(f"{n} = {a.id} ({a.label})" for n, a in enumerate(actions, start=1))


def resolve_action(actions: Sequence[Action], spec: str | None, *, deny: bool = False) -> Action:
    """The action ``/approve ID [action]`` (or ``/deny ID``) names; InvalidDecision if none.

    ``spec`` is an action id, its number in the list (from 1) or its label (any case). With
    no spec, /approve means the one offered "allow once" and /deny the one offered refusal
    (a plain deny before a deny-and-stop); where that is not a single action, the person is
    asked to choose.
    """
    if spec is None:
        if deny:
            wanted = [a for a in actions if a.effect is Effect.DENY]
            wanted = wanted or [a for a in actions if a.effect is Effect.CANCEL]
        else:
            wanted = [a for a in actions if a.effect is Effect.ALLOW and a.scope is Scope.ONCE]
        if len(wanted) == 1:
            return wanted[0]
        raise InvalidDecision(f"say which action: {_choices(actions) or 'none offered'}")
    for action in actions:
        if action.id == spec:
            return action
    if spec.isdigit() and 1 <= int(spec) <= len(actions):
        return actions[int(spec) - 1]
    by_label = [a for a in actions if a.label.casefold() == spec.casefold()]
    if len(by_label) == 1:
        return by_label[0]
    raise InvalidDecision(f"no such action; choose one of: {_choices(actions) or 'none offered'}")


_NUMBERS = re.compile(r"^\d+(?:\s*[,\s]\s*\d+)*$")


def _answer_one(question: Question, text: str) -> Answer:
    options = question.options
    if _NUMBERS.match(text) and options:
        numbers = [int(n) for n in re.split(r"[,\s]+", text)]
        if any(not 1 <= n <= len(options) for n in numbers):
            raise InvalidDecision(f"question {question.id!r}: choose from 1 to {len(options)}")
        return Answer(option_ids=tuple(options[n - 1].id for n in numbers))
    by_label = [o for o in options if o.label.casefold() == text.casefold()]
    if len(by_label) == 1:
        return Answer(option_ids=(by_label[0].id,))
    if options and not question.allow_other:
        raise InvalidDecision(
            f"question {question.id!r}: choose an option by number (1 to {len(options)}) or label"
        )
    return Answer(other=text)


def parse_answers(
    questions: Sequence[Question], text: str, *, private: bool = False
) -> dict[str, Answer]:
    """The answers ``/answer ID text`` gives, keyed by question id; InvalidDecision if unclear.

    One question: the whole text answers it. Several: one line per question, in order, with
    ``-`` to skip an optional one. A secret question is only answered where ``private`` (a
    direct message or a private form), never in a shared chat. Whether the answers are
    complete and fit is then checked by ``interactions.validate_decision``.
    """
    if not questions:
        raise InvalidDecision("this request has no questions")
    if any(q.secret for q in questions) and not private:
        raise InvalidDecision("a secret answer is only taken in a private chat or form")
    if len(questions) == 1:
        lines = [text.strip()]
    else:
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        if len(lines) != len(questions):
            raise InvalidDecision(
                f"{len(questions)} questions: give one answer per line ({len(lines)} given)"
            )
    answers: dict[str, Answer] = {}
    for question, line in zip(questions, lines, strict=True):
        if line == "-" and not question.required:
            continue
        answers[question.id] = _answer_one(question, line)
    return answers
