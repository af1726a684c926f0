"""The gateway's slash commands on Discord, as data: each command's name, what it does and
what each of its options asks a person to type; pure (the client builds discord.py's
commands from it, platforms/discord/client.py).

Discord shows an option's description under the box being typed into, and discord.py
writes "…" where none is given: every option here says what to type. ``/approve``,
``/deny`` and ``/answer`` name a request by its id; their ``request`` option is completed
from the requests waiting in the conversation (:func:`request_choices`), because an id
like ``k3xq9a2b7f`` is read on a card, not remembered. Slash commands work in threads,
where a session's card is, so the gateway's notices can name them as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.platform import WaitingRequest

__all__ = [
    "CHOICES_MAX",
    "COMMANDS",
    "CommandSpec",
    "OptionSpec",
    "command_text",
    "request_choices",
    "spec_of",
]

CHOICES_MAX = 25  # Discord's limit on an autocomplete answer's choices
CHOICE_NAME_MAX = 100  # and on a choice's name


@dataclass(frozen=True, kw_only=True, slots=True)
class OptionSpec:
    """A string option: its name, what to type (its description), whether it must be
    given, and whether its value is completed from the waiting requests."""

    name: str
    description: str
    required: bool = False
    requests: bool = False  # completed from the conversation's waiting requests


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandSpec:
    name: str
    description: str
    options: tuple[OptionSpec, ...] = ()
    questions: bool = False  # its requests are questions (/answer), else approvals


def _request(what: str) -> OptionSpec:
    return OptionSpec(
        name="request",
        description=f"The request {what}: its id, from the card (pick one from the list)",
        required=True,
        requests=True,
    )


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec(
        name="new",
        description="Start a new session here",
        options=(
            OptionSpec(name="name", description="A short name for it, to find it again (optional)"),
        ),
    ),
    CommandSpec(name="stop", description="Stop the agent's turn"),
    CommandSpec(name="resume", description="Send the held messages, in order"),
    CommandSpec(name="clear", description="Drop the queued messages"),
    CommandSpec(name="status", description="What the session is doing"),
    CommandSpec(name="pending", description="The requests waiting for a decision"),
    CommandSpec(name="compact", description="Have the agent compact its context"),
    CommandSpec(
        name="transcribe", description="Turn your last voice note into text again, after it failed"
    ),
    CommandSpec(
        name="approve",
        description="Approve a waiting request (as its card's button would)",
        options=(
            _request("to approve"),
            OptionSpec(
                name="action",
                description="Which of the card's buttons: its label or number (empty: allow once)",
            ),
        ),
    ),
    CommandSpec(
        name="deny",
        description="Deny a waiting request",
        options=(
            _request("to deny"),
            OptionSpec(
                name="message",
                description="What the agent should do instead (optional, the agent reads it)",
            ),
        ),
    ),
    CommandSpec(
        name="answer",
        description="Answer a waiting question",
        options=(
            _request("to answer"),
            OptionSpec(
                name="answer",
                description="An option's number or label (1,3 for several), or your own text",
                required=True,
            ),
        ),
        questions=True,
    ),
    CommandSpec(
        name="withdraw",
        description="Take back your vote on a request that needs several approvals",
        options=(_request("whose vote to take back"),),
    ),
    CommandSpec(
        name="plan",
        description="Ask the agent for a plan first: it changes nothing until you choose",
        options=(
            OptionSpec(
                name="text",
                description="What the agent should plan, as you would ask it",
                required=True,
            ),
        ),
    ),
    CommandSpec(name="grants", description="What was granted beyond one request"),
    CommandSpec(
        name="revoke",
        description="Take a grant back",
        options=(
            OptionSpec(
                name="grant", description="The grant's id, as /grants lists it", required=True
            ),
        ),
    ),
    CommandSpec(
        name="sessions",
        description="The sessions you can see",
        options=(OptionSpec(name="page", description="Which page of the list (1, 2, …)"),),
    ),
    CommandSpec(
        name="switch",
        description="Continue an earlier session here",
        options=(
            OptionSpec(
                name="session",
                description="Its name, or its number in /sessions",
                required=True,
            ),
        ),
    ),
    CommandSpec(
        name="name",
        description="Name this session",
        options=(
            OptionSpec(name="name", description="The session's name (one line)", required=True),
        ),
    ),
    CommandSpec(
        name="model",
        description="The model, or pick one of the project's",
        options=(OptionSpec(name="model", description="The model's name, from /model's list"),),
    ),
    CommandSpec(
        name="mode",
        description="The agent's permission mode, or set one of the project's",
        options=(OptionSpec(name="mode", description="The mode, from /mode's list"),),
    ),
    CommandSpec(
        name="every",
        description="Have the agent do something on a schedule",
        options=(
            OptionSpec(
                name="cron",
                description="Five cron fields (0 9 * * 1-5), @hourly, @daily, @weekly or weekdays",
                required=True,
            ),
            OptionSpec(name="text", description="What the agent should do", required=True),
        ),
    ),
    CommandSpec(
        name="at",
        description="Have the agent do something once, later",
        options=(
            OptionSpec(name="when", description="HH:MM, YYYY-MM-DD HH:MM or in 2h", required=True),
            OptionSpec(name="text", description="What the agent should do", required=True),
        ),
    ),
    CommandSpec(name="schedules", description="The project's schedules"),
    CommandSpec(
        name="unschedule",
        description="Delete a schedule",
        options=(
            OptionSpec(
                name="schedule", description="Its id, as /schedules lists it (S3)", required=True
            ),
        ),
    ),
    CommandSpec(name="help", description="What the gateway understands"),
)
_BY_NAME = {spec.name: spec for spec in COMMANDS}


def spec_of(name: str) -> CommandSpec:
    spec = _BY_NAME.get(name)
    if spec is None:
        raise ValueError(f"no command /{name}")
    return spec


def command_text(name: str, *arguments: str) -> str:
    """A slash command as the gateway's chat command: ``/approve`` ``k3x`` ``2`` →
    ``/approve k3x 2`` (each argument's whitespace folded: a command is one line)."""
    spec_of(name)
    words = [" ".join(argument.split()) for argument in arguments]
    return " ".join([f"/{name}", *(word for word in words if word)])


def request_choices(
    name: str, waiting: Sequence[WaitingRequest], typed: str
) -> list[tuple[str, str]]:
    """The choices (what is shown, the id) offered while ``request`` of ``/name`` is being
    typed: the conversation's waiting requests of its kind (questions for /answer), those
    whose id or title holds what was typed, at most :data:`CHOICES_MAX`."""
    spec = spec_of(name)
    typed = typed.strip().casefold()
    found: list[tuple[str, str]] = []
    for request in waiting:
        if request.question is not spec.questions:
            continue
        shown = f"{request.title} ({request.id})"
        if typed and typed not in shown.casefold():
            continue
        if len(shown) > CHOICE_NAME_MAX:  # the id stays whole: it is what is typed
            room = CHOICE_NAME_MAX - len(request.id) - 4
            shown = f"{request.title[:room]}… ({request.id})"
        found.append((shown, request.id))
    return found[:CHOICES_MAX]
