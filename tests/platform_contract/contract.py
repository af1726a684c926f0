"""The platform contract as a person meets it: what a driver does for a case, and what every
case reads.

A :class:`Driver` starts a whole gateway (the real engine and ledger, the scripted agent of
tests/scripted_launcher.py) on one platform, served by that platform's own fake or its own
HTTP, and does what a person does there: say something, press a button labelled L on a card,
answer a form, read what is shown now. It can also make the platform misbehave (429s, an
outage) and restart the gateway over the same data dir. A case is written once against this
class; a case a platform cannot take is named in :attr:`Driver.not_applicable` with the
reason, which the report shows as the case's skip reason. Nothing is skipped silently: a
driver that leaves out a misbehaviour (``storm``, ``drop``...) without naming the case fails
it with NotImplementedError.

Everything is awaited under deadlines (:data:`DEADLINE`): a driver waits on its platform's
own change signal, never sleeps.
"""

from __future__ import annotations

import abc
import json
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

import pytest

from gateway.domain import (
    Action,
    Answer,
    Command,
    Decision,
    Effect,
    InteractionKind,
    InteractionRequest,
    Option,
    Plan,
    Question,
    Scope,
)
from gateway.platform import PlatformLimits
from gateway.sessions.engine import Gateway
from tests.scripted_launcher import ScriptedLauncher

__all__ = [
    "DEADLINE",
    "PLAN_MARKDOWN",
    "Button",
    "Case",
    "Driver",
    "FormAnswers",
    "Seen",
    "before_hash",
    "long_plan",
    "not_seen",
    "policy_rules",
    "requests_for",
]

T = TypeVar("T")
DEADLINE = 20.0


class Case(StrEnum):
    """The cases of the suite, for a driver's :attr:`Driver.not_applicable`."""

    TEXT = "text"
    CARD_ROUND_TRIP = "card round trip"
    CLICKS = "signed, forged, stale and foreign clicks"
    NON_APPROVER = "a non-approver's click"
    FORM = "form"
    SECRET = "secret answer on a private surface"
    NO_PRIVATE_SURFACE = "a secret question where no answer stays private"
    STORM = "429 storm"
    OUTAGE = "connection dropped and back"
    RESTART = "gateway restart with a card on screen"
    ATTACHMENT = "a command too long for a card"
    PLAN = "a plan card"
    PLAN_MESSAGE = "Keep planning with a message"
    SECOND_VOTE = "a second approver's vote decides"
    ESCALATION = "escalation to a channel"
    DELETED = "the turn's message deleted while it streams"
    FILES_IN = "files sent with a message reach the agent"
    FILES_KEPT = "a held prompt's files kept across a restart"


@dataclass(frozen=True, kw_only=True, slots=True)
class Button:
    label: str
    token: str  # what the platform sends back when it is pressed


@dataclass(frozen=True, kw_only=True, slots=True)
class Seen:
    """One message of the bot as the person sees it now."""

    key: str  # stable across edits
    text: str  # everything it says (a card: title, body, answers, status)
    card: bool = False
    status: str = ""  # a card's status line: who decided what, and what came of it
    details: str = ""  # what a card keeps behind "details" (the content hash, unless voted)
    buttons: tuple[Button, ...] = ()
    files: tuple[tuple[str, str], ...] = ()  # attached files: (name, content)
    edits: int = 0  # how many times it changed since it was sent

    def button(self, label: str) -> Button:
        found = (
            [b for b in self.buttons if b.label == label]
            or [b for b in self.buttons if b.label.startswith(label)]
            or [b for b in self.buttons if label in b.label]
        )
        if len(found) != 1:
            raise AssertionError(f"{len(found)} buttons labelled {label!r} on {self}")
        return found[0]

    @property
    def labels(self) -> list[str]:
        return [b.label for b in self.buttons]


@dataclass(frozen=True, kw_only=True, slots=True)
class FormAnswers:
    """What a person fills in: chosen option labels, free text, per question id."""

    chosen: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    typed: Mapping[str, str] = field(default_factory=dict)


class Driver(abc.ABC):
    """One platform, driven as a person uses it. People: ``alice`` talks and approves,
    ``carol`` may talk and may not decide."""

    name: str
    limits: PlatformLimits
    not_applicable: Mapping[Case, str] = {}
    shown_as: Mapping[str, str]  # how a person is named on a card ("alice" → "@alice")
    # each person's account as a policy rule names it ("alice" → "slack:U0ALICE")
    accounts: Mapping[str, str]
    # a channel as a rule's ``escalate_to`` names it ("slack:#C0ESC"); None: none to name
    channel_name: str | None = None
    # a button of its own beside an action that takes a message (Telegram: no modal to
    # ask in), rather than a field or modal behind the action's own button
    message_button: str | None = None
    # the project's work dir, and the largest file its [projects.X.files] takes (issue 32)
    work_dir: Path
    max_file_bytes: int = 20 * 1024 * 1024

    def __init__(self, requests: Mapping[str, InteractionRequest]) -> None:
        self.requests = requests
        # one agent script over every start
        self.launcher = ScriptedLauncher(requests, streams=streams_for(self.limits))

    @property
    def received(self) -> list[Decision]:
        """What the agent was given, in order, over every start."""
        return self.launcher.received

    @property
    def title(self) -> str:
        """The platform and its variant, as a report names it."""
        return self.name

    def require(self, case: Case) -> None:
        """Skip with the driver's stated reason where ``case`` does not apply here."""
        reason = self.not_applicable.get(case)
        if case is Case.SECRET and not self.limits.has_private_surface:
            reason = "no private surface (PlatformLimits.has_private_surface): no secret here"
        if case is Case.NO_PRIVATE_SURFACE and self.limits.has_private_surface:
            reason = "it has a private surface (PlatformLimits.has_private_surface)"
        if reason is not None:
            assert reason.strip(), f"{self.name}: {case} is left out without a reason"
            pytest.skip(f"{self.title}: {reason}")

    # --- the gateway ----------------------------------------------------------------------

    @abc.abstractmethod
    def running(self) -> AbstractAsyncContextManager[Gateway]:
        """A gateway on this platform; entered again after it left: a restart over the same
        data dir (the platform keeps what it showed)."""

    # --- what a person does ---------------------------------------------------------------

    @abc.abstractmethod
    async def say(self, text: str, *, who: str = "alice") -> None: ...

    async def say_with_files(
        self, text: str, files: Sequence[tuple[str, bytes]], *, who: str = "alice"
    ) -> None:
        """Send ``text`` with ``files`` (name, content) attached, as the platform lets a
        person (a caption, a message with files), served by the platform's fake."""
        raise NotImplementedError

    @abc.abstractmethod
    async def click(self, card: Seen, token: str, *, who: str = "alice") -> str:
        """Send ``token`` as a press on ``card``; the answer the person is shown."""

    async def press(self, card: Seen, label: str, *, who: str = "alice") -> str:
        return await self.click(card, card.button(label).token, who=who)

    async def press_with_message(
        self, card: Seen, label: str, message: str, *, who: str = "alice"
    ) -> str:
        """Press ``label`` with ``message`` in the field (or modal) the card asks it in."""
        raise NotImplementedError

    @abc.abstractmethod
    async def answer_form(
        self, card: Seen, request: InteractionRequest, answers: FormAnswers, *, who: str = "alice"
    ) -> str | None:
        """Fill in the card's form (asking ``request``'s questions) as this platform lets a
        person, and send it; the answer shown on sending. None: the platform offers no way to
        send these answers (a required one is missing and nothing lets the person past it)."""

    # --- what the platform does -----------------------------------------------------------

    def lose_files(self) -> None:
        """Every file sent from now on can no longer be downloaded (the platform's file
        server fails or refuses, or the console's spool has lost it)."""
        raise NotImplementedError

    def storm(self, seconds: float) -> None:
        """Answer every outbound call 429 for ``seconds`` from now."""
        raise NotImplementedError

    def too_many(self) -> int:
        """How many calls the platform answered 429."""
        raise NotImplementedError

    async def drop(self) -> None:
        """The platform can no longer be reached."""
        raise NotImplementedError

    async def delete(self, key: str) -> None:
        """Someone deletes the bot's message ``key`` (a :attr:`Seen.key`)."""
        raise NotImplementedError

    async def drop_at_next_card(self) -> None:
        """The platform can no longer be reached from the moment the next card is sent; returns
        once that card's send has failed."""
        raise NotImplementedError

    async def refused_while_down(self) -> None:
        """Returns once the platform refused a call since :meth:`drop`."""
        raise NotImplementedError

    async def back(self) -> None:
        """The platform answers again (and the gateway hears it is back)."""
        raise NotImplementedError

    async def click_in_channel(self, card: Seen, token: str, *, who: str = "alice") -> str:
        """Send ``token`` as a press on ``card`` in the channel :attr:`channel_name` names."""
        raise NotImplementedError

    # --- what a person sees ---------------------------------------------------------------

    @abc.abstractmethod
    async def seen(self) -> list[Seen]:
        """The bot's messages in the person's conversation, oldest first."""

    @abc.abstractmethod
    async def wait_for(
        self, probe: Callable[[list[Seen]], T | None], deadline: float = DEADLINE
    ) -> T:
        """Wait on the platform's own change signal until ``probe(what is shown)`` returns
        something other than None or False."""

    async def card(self, probe: Callable[[Seen], bool] = lambda s: True) -> Seen:
        """The first card ``probe`` accepts, once shown."""
        return await self.wait_for(
            lambda seen: next((s for s in seen if s.card and probe(s)), None)
        )

    async def in_channel(self) -> list[Seen]:
        """The bot's messages in the channel :attr:`channel_name` names, oldest first."""
        raise NotImplementedError

    async def card_in_channel(self, probe: Callable[[Seen], bool] = lambda s: True) -> Seen:
        """The first card ``probe`` accepts in the channel :attr:`channel_name` names."""
        raise NotImplementedError

    async def now(self, key: str) -> Seen:
        [found] = [s for s in await self.seen() if s.key == key]
        return found

    async def text(self, probe: Callable[[str], bool], deadline: float = DEADLINE) -> Seen:
        return await self.wait_for(
            lambda seen: next((s for s in seen if not s.card and probe(s.text)), None), deadline
        )


def not_seen(name: str, deadline: float, last: list[Seen]) -> AssertionError:
    shown = "\n".join(f"  {s}" for s in last)
    return AssertionError(f"{name}: not seen within {deadline} s; shown now:\n{shown}")


# --- what the scripted agent asks -----------------------------------------------------------

ACTIONS = (
    Action(id="accept", label="Allow once", effect=Effect.ALLOW),
    Action(
        id="acceptForSession", label="Allow for session", effect=Effect.ALLOW, scope=Scope.SESSION
    ),
    Action(id="decline", label="Deny", effect=Effect.DENY),
    Action(id="cancel", label="Deny and stop", effect=Effect.CANCEL),
)
COLOURS = (
    Option(id="red", label="Red"),
    Option(id="green", label="Green"),
    Option(id="blue", label="Blue"),
)


def approval(key: str, command: str, title: str = "Run a command?") -> InteractionRequest:
    return InteractionRequest(
        native_key=key,
        kind=InteractionKind.APPROVAL,
        title=title,
        detail=Command(command=command, cwd="/srv/project", reason="look around"),
        actions=ACTIONS,
    )


FORM = InteractionRequest(
    native_key="scripted:form",
    kind=InteractionKind.QUESTION,
    title="The agent asks",
    questions=(
        Question(id="env", header="Env", text="Which environment?", options=COLOURS[:2]),
        Question(id="langs", header="Langs", text="Which colours?", options=COLOURS, multi=True),
        Question(id="note", header="Note", text="A note?", allow_other=True),
    ),
)
SECRET = InteractionRequest(
    native_key="scripted:secret",
    kind=InteractionKind.QUESTION,
    title="The agent needs a token",
    questions=(
        Question(
            id="token", header="Token", text="Paste the deploy token", allow_other=True, secret=True
        ),
    ),
)


# A plan as Claude's ExitPlanMode brings it: Markdown with a heading, a list, inline code and
# a fenced block, which every surface must draw, never show raw.
PLAN_MARKDOWN = (
    "# Ship the release\n\n"
    "1. Bump the **version** in `pyproject.toml`\n"
    "2. Run the tests:\n\n"
    "```sh\npytest -q\n```\n\n"
    "- Tag it *after* the tests pass\n"
)
PLAN_ACTIONS = (
    Action(
        id="approve-plan",
        label="Approve the plan",
        effect=Effect.ALLOW,
        description="The agent leaves plan mode and starts on the plan.",
    ),
    Action(
        id="keep-planning",
        label="Keep planning",
        effect=Effect.DENY,
        description="The agent stays in plan mode; your message tells it what to change.",
    ),
)


def plan(key: str, markdown: str) -> InteractionRequest:
    return InteractionRequest(
        native_key=key,
        kind=InteractionKind.PLAN,
        title="Approve the plan",
        summary="The agent has a plan and asks to start on it.",
        detail=Plan(markdown=markdown),
        actions=PLAN_ACTIONS,
    )


def long_plan(limits: PlatformLimits) -> str:
    """A plan longer than the card body takes: it must be attached, whole."""
    step = "1. A step of a long plan that goes on and on, with `code` and **bold** words\n"
    return "# A long plan\n\n" + step * (limits.card_max_chars // len(step) + 2)


def long_command(limits: PlatformLimits) -> str:
    """A command longer than the card body takes: it must be attached, whole."""
    line = "echo 'a line of a long generated script that goes on and on' && \\\n"
    return line * (limits.card_max_chars // len(line) + 2) + "true"


STREAMED = ("The answer is coming", ", and here is all of it.")


def long_reply(limits: PlatformLimits) -> str:
    """A reply longer than a message takes, a code fence open across the limit."""
    head = "Here is the listing:\n\n```python\n"
    lines = [f"print('line {n:05d} of the listing')\n" for n in range(limits.text_max_chars // 20)]
    return head + "".join(lines) + "```\n\nThat is the whole listing."


def marked_reply(limits: PlatformLimits) -> str:
    """A reply longer than a message takes, full of marks a platform may escape (stray
    underscores and stars): longer once escaped than as written."""
    rows = [
        f"row {n:04d}: snake_case_value_{n} = a_b_c_d_e_f * 2 * 3\n"
        for n in range(limits.text_max_chars // 30)
    ]
    return "".join(rows) + "That is all."


def streams_for(limits: PlatformLimits) -> dict[str, tuple[str, ...]]:
    """What the scripted agent answers in parts, by the prompt that makes it."""
    whole = long_reply(limits)
    half = limits.text_max_chars // 2
    return {
        "stream": STREAMED,
        "marked reply": (marked_reply(limits),),
        "long reply": (whole,),
        "long stream": (whole[:half], whole[half:]),  # one message grows past the limit
    }


def requests_for(limits: PlatformLimits) -> dict[str, InteractionRequest]:
    """What the scripted agent asks, by the prompt that makes it ask."""
    return {
        "approve": approval("scripted:approve", "ls -la"),
        **{
            f"approve {n}": approval(f"scripted:approve-{n}", f"ls -la /tmp/{n}")
            for n in range(2, 5)
        },
        "form": FORM,
        "secret": SECRET,
        "two": approval("scripted:two", TWO_PERSON, "Touch a file?"),
        "escalate": approval("scripted:escalate", ESCALATED, "Touch a file?"),
        "long": approval("scripted:long", long_command(limits), "Run a long script?"),
        "plan": plan("scripted:plan", PLAN_MARKDOWN),
        "long plan": plan("scripted:long-plan", long_plan(limits)),
    }


# what the two-person rule governs: "two" asks one person, "escalate" is also asked in the
# driver's channel after a second
TWO_PERSON = "touch two-person"
ESCALATED = "touch escalated"


def policy_rules(accounts: Mapping[str, str], channel: str | None) -> str:
    """The project's ``[[projects.demo.policy]]`` rules: two people must agree (Alice and
    Carol, by their accounts), and the second rule's request is escalated to ``channel``."""
    approvers = [accounts["alice"], accounts["carol"]]
    escalate = f"escalate_after = 1\nescalate_to = [{json.dumps(channel)}]\n" if channel else ""
    return f"""
[[projects.demo.policy]]
kind = "command"
command_prefix = {json.dumps(TWO_PERSON)}
approvals = 2
approvers = {json.dumps(approvers)}

[[projects.demo.policy]]
kind = "command"
command_prefix = {json.dumps(ESCALATED)}
approvals = 2
approvers = {json.dumps(approvers)}
{escalate}"""


def answers_of(driver: Driver) -> list[dict[str, Answer]]:
    return [decision.answers for decision in driver.received]


def before_hash(status: str) -> str:
    """A card's status line as drawn, without the content hash a voted card ends with (on
    other cards the hash is a detail: :attr:`Seen.details`)."""
    head, _, hashed = status.rpartition(" · content hash ")
    return head if head and re.fullmatch(r"[0-9a-f]{10}", hashed) else status
