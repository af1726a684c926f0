"""What the console's pages show, read from the ledger (pure helpers plus a few reads).

Every page is drawn from the ledger when it is asked for: sessions and their run state,
every open interaction of every session, a session's interactions with their three facts.
The text the core sent the console (the agent's streamed text, tool activity, notices) comes
from the console's own memory (:mod:`platforms.console.feed`); the text of turns from before
the console was attached (an earlier gateway's) from the ledger's turn timelines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gateway.action_tokens import interaction_named
from gateway.cards import Card
from gateway.config.model import Config, SessionScope
from gateway.domain import Actor, AgentKind, ConversationRef, RunState, TurnStatus
from gateway.interactions.machine import Interaction, derive_run_state, run_state_words
from gateway.session_record import SessionRecord
from gateway.sessions.routing import project_for, route_key
from gateway.store.records import CardCopy, TurnRecord, TurnTimeline
from gateway.timeline import EntryKind
from gateway.wording import platform_title

if TYPE_CHECKING:
    from gateway.platform import Platform
    from gateway.sessions.engine import Gateway

__all__ = [
    "AGENT_DID_NOT_START",
    "IDLE_WORDS",
    "YOU",
    "CardView",
    "NoticeItem",
    "SessionRow",
    "TextItem",
    "agent_name",
    "card_view",
    "console_conversations",
    "conversation_items",
    "is_notice",
    "pending_views",
    "person_name",
    "platform_name",
    "remembered_texts",
    "route_channel",
    "run_state",
    "session_rows",
    "session_title",
    "timeline_texts",
    "typing_refusal",
]

PLATFORM = "console"
RECENT_INTERACTIONS = 100
RECENTLY_CLOSED = 10
RECENT_TURNS = 50
TITLE_CHARS = 60  # of the first prompt, in a session's title
# How the console labels what its own person typed: the page is theirs (it acts as one
# identity), so their messages read as their own, not as an account id ("local:alice").
YOU = "You"


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionRow:
    session: SessionRecord
    title: str  # session_title: what a person calls it
    state: str
    open_count: int
    shown_on: tuple[str, ...]  # platforms of the conversations bound to it


@dataclass(frozen=True, kw_only=True, slots=True)
class CardView:
    interaction: Interaction
    card: Card
    session: SessionRecord | None
    copies: tuple[CardCopy, ...]
    session_title: str | None = None  # of ``session``: see session_title


@dataclass(frozen=True, kw_only=True, slots=True)
class TextItem:
    id: str
    at: datetime
    text: str
    version: int | str  # a str where the page drew it changed (pages.without_waiting_tool_lines)
    author: str | None = None  # set for what the console's person typed
    from_gateway: bool = False  # the gateway's own words, not the agent's
    # a file the agent sent: (name, media type, size); the page links /f/<id> to it
    file: tuple[str, str, int] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class NoticeItem:
    """A card that is no request's, as sent (a message whose files did not come: its
    choices), drawn from the console's memory with its buttons."""

    id: str
    at: datetime
    card: Card
    version: int


# --- pure ----------------------------------------------------------------------------------


def is_notice(card: Card) -> bool:
    """Whether a card sent to the console is a notice with buttons of its own (none of
    them a request's token, no form): a request's card is drawn from the ledger."""
    return (
        bool(card.actions)
        and card.form is None
        and not any(interaction_named(action.token) for action in card.actions)
    )


# An agent as a person calls it: its kind is the config's word ("codex-app-server")
_AGENT_NAMES = {
    AgentKind.CODEX_APP_SERVER: "Codex",
    AgentKind.CODEX_EXEC: "Codex (exec)",
    AgentKind.CLAUDE_CODE: "Claude Code",
    AgentKind.ACP: "ACP agent",
    AgentKind.OPENCODE: "OpenCode",
}


def agent_name(kind: AgentKind) -> str:
    return _AGENT_NAMES.get(kind, kind.value)


def platform_name(platform: str) -> str:
    """A platform as its people call it ("Telegram"; the console is "this console")."""
    return "this console" if platform == PLATFORM else platform_title(platform)


def person_name(identity: str) -> str:
    """Who the console acts as, without the auth table's prefix: "alice" for
    "local:alice", "12345 on Telegram" for "telegram:12345"."""
    platform, _, user = identity.partition(":")
    if not user:
        return identity
    return user if platform == "local" else f"{user} on {platform_name(platform)}"


IDLE_WORDS = run_state_words(RunState.IDLE)
AGENT_DID_NOT_START = "agent could not start"  # the header's state, beside why (server.py)


def run_state(
    open_: list[Interaction], latest_turn: TurnRecord | None, *, closed: bool = False
) -> str:
    """The session's state as the console names it: running, waiting for approval, waiting
    for input, idle, failed (its last turn failed, or its agent died under it), closed."""
    if closed:
        return "closed"
    running = latest_turn is not None and latest_turn.is_running
    state = derive_run_state(open_, turn_running=running)
    if state is RunState.IDLE and latest_turn is not None:
        if latest_turn.status is TurnStatus.FAILED:
            state = RunState.FAILED
    return run_state_words(state)


def session_title(session: SessionRecord, first_prompt: str | None) -> str:
    """A session as a person would name it: its project and the first words they said to it
    (cut at a word, about :data:`TITLE_CHARS` long), or, before anyone said anything, the
    time it started; a name given by ``/name`` before all of these. Its id stays on the page,
    beside the title, for commands and logs."""
    if session.name:
        return f"{session.project}: {session.name}"
    words = " ".join((first_prompt or "").split())
    if not words:
        started = session.created_at.astimezone(UTC)
        return f"{session.project}, started {started:%Y-%m-%d %H:%M} UTC"
    if len(words) > TITLE_CHARS:
        cut = words[: TITLE_CHARS + 1].rsplit(" ", 1)[0]
        words = (cut if len(cut) >= TITLE_CHARS // 2 else words[:TITLE_CHARS]).rstrip(" ,.;:")
        words += "…"
    return f"{session.project}: {words}"


def route_channel(config: Config, project: str, auth_platform: str) -> str | None:
    """A channel name that routes a console conversation to ``project`` (the routing of
    gateway/sessions/routing.py: the first project whose channels match), or None if none does."""
    rules = config.projects[project].auth.get(auth_platform)
    if rules is None:
        return None
    candidates = [c for c in rules.channels if c != "*"]
    if "*" in rules.channels:
        candidates.append(PLATFORM)
    for channel in candidates:
        probe = ConversationRef(platform=PLATFORM, space=None, channel=channel)
        if project_for(config, probe, auth_platform) == project:
            return channel
    return None


def typing_refusal(
    config: Config,
    conversation: ConversationRef,
    session: SessionRecord,
    actor: Actor,
    auth_platform: str,
) -> str | None:
    """Why a message typed on this session's console page would not reach this session
    (None when it would): the gateway routes console messages by project and scope."""
    if session.is_closed:
        return None  # a message starts a new session in this conversation
    routed = project_for(config, conversation, auth_platform)
    if routed != session.project:
        return (
            f"Messages typed here would go to project {routed or '(none)'}, not "
            f"{session.project}: see projects.{session.project}.auth.{auth_platform}.channels."
        )
    scope = config.projects[session.project].scope
    if scope is SessionScope.USER and route_key(scope, conversation, actor) != conversation:
        return "This project keeps one session per person: type in your own conversation."
    return None


def timeline_texts(
    turns: Sequence[TurnTimeline], conversations: Sequence[ConversationRef]
) -> list[TextItem]:
    """Turns as the console shows them: what was typed on the console (one of
    ``conversations``), then each section of the turn's timeline (the text between two
    requests) as one message, at the time its first entry happened."""
    items = []
    for turn in turns:
        prompt = turn.prompt
        if prompt is not None and prompt.conversation in conversations:
            items.append(
                TextItem(
                    id=f"p{prompt.id}",
                    at=prompt.created_at,
                    text=prompt.text,
                    version=1,
                    author=YOU,
                )
            )
        section, texts, at = 0, list[str](), None
        for entry in (*turn.entries, None):
            if entry is None or entry.kind is EntryKind.INTERACTION:
                if texts and at is not None:
                    text = "\n\n".join(texts)
                    items.append(
                        TextItem(id=f"turn{turn.turn.id}-{section}", at=at, text=text, version=1)
                    )
                section, texts, at = section + 1, [], None
            elif entry.text.strip():
                texts.append(entry.text)
                at = at or entry.at
    return items


# --- reads ---------------------------------------------------------------------------------


async def remembered_texts(
    gateway: Gateway,
    session: SessionRecord,
    conversations: Sequence[ConversationRef],
    before: datetime | None,
    *,
    typed_here: Sequence[str] = (),
) -> list[TextItem]:
    """The text of the session's turns that began ``before`` (when this console was
    attached: an earlier gateway's turns, whose text the console's memory never held).

    A session another host runs: every recent turn's, the running one's too (its owner
    sends its text to its own host's console; it saves the timeline about once a second and
    the ledger tells every host, gateway/store/turns.py ``TURN_TEXT_CHANNEL``). What was
    typed on this console since (``typed_here``, in its memory) is not shown twice."""
    if before is None:
        return []
    turns = await gateway.store.timeline.of_session(session.id, turns=RECENT_TURNS)
    if gateway.owner_elsewhere(session) is None:
        return timeline_texts([t for t in turns if t.turn.started_at < before], conversations)
    typed = set(typed_here)
    return [
        item
        for item in timeline_texts(turns, conversations)
        if not (item.author == YOU and item.at >= before and item.text in typed)
    ]


async def console_conversations(gateway: Gateway, session_id: str) -> list[ConversationRef]:
    bound = await gateway.store.sessions.list_bindings(session_id)
    return [c for c in bound if c.platform == PLATFORM]


async def session_rows(gateway: Gateway) -> list[SessionRow]:
    store = gateway.store
    rows = []
    sessions = await store.sessions.list_sessions(include_closed=True)
    first = await store.prompts.first_texts([s.id for s in sessions])
    for session in sessions:
        open_ = await store.interactions.list_open(session.id)
        latest = await store.turns.latest(session.id)
        bound = await store.sessions.list_bindings(session.id)
        state = run_state(open_, latest, closed=session.is_closed)
        runner = gateway.existing_runner(session.id)
        if runner is not None and runner.start_failure is not None and state == IDLE_WORDS:
            state = AGENT_DID_NOT_START
        rows.append(
            SessionRow(
                session=session,
                title=session_title(session, first.get(session.id)),
                state=state,
                open_count=len(open_),
                shown_on=tuple(dict.fromkeys(c.platform for c in bound)),
            )
        )
    rows.sort(key=lambda row: (row.session.is_closed, -row.session.created_at.timestamp()))
    return rows


async def card_view(gateway: Gateway, console: Platform, interaction: Interaction) -> CardView:
    session = await gateway.store.sessions.get(interaction.session_id)
    first = await gateway.store.prompts.first_texts([interaction.session_id])
    return CardView(
        interaction=interaction,
        card=gateway.broker.render(interaction, console),
        session=session,
        copies=tuple(await gateway.store.cards.list_for(interaction.id)),
        session_title=(None if session is None else session_title(session, first.get(session.id))),
    )


async def pending_views(
    gateway: Gateway, console: Platform, closed_limit: int = RECENTLY_CLOSED
) -> tuple[list[CardView], list[CardView]]:
    """Every open interaction of every session (oldest first), and the newest that are no
    longer open (newest first). Both lists come from one read of the ledger: read one after
    the other, an interaction that closed in between was in both, and its card shown twice."""
    open_, closed = await gateway.store.interactions.list_open_and_closed(closed_limit=closed_limit)
    return (
        [await card_view(gateway, console, interaction) for interaction in open_],
        [await card_view(gateway, console, interaction) for interaction in closed],
    )


async def conversation_items(
    gateway: Gateway,
    console: Platform,
    session: SessionRecord,
    texts: Sequence[TextItem | NoticeItem],
) -> list[TextItem | NoticeItem | CardView]:
    """The session's text, notices and interactions, in the order they happened."""
    recent = await gateway.store.interactions.list_recent(
        session_id=session.id, limit=RECENT_INTERACTIONS
    )
    cards = [await card_view(gateway, console, interaction) for interaction in recent]
    items: list[TextItem | NoticeItem | CardView] = [*texts, *cards]
    items.sort(
        key=lambda item: item.interaction.created_at if isinstance(item, CardView) else item.at
    )
    return items
