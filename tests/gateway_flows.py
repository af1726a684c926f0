"""Recipes shared by the gateway decision tests (tests/test_gateway_*.py).

Everything goes through the memory platform (what a person sees and does) and the real
ledger (what the gateway recorded); nothing here reaches into the engine. A card the memory
platform shows is edited in place, so an :class:`Asked` follows one card from its first
version (with buttons) to its final status line.
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from dataclasses import dataclass

from gateway.cards import Card
from gateway.config.model import Config, SessionScope
from gateway.domain import Actor, ConversationRef
from gateway.interactions.machine import Interaction
from gateway.session_record import SessionRecord
from platforms.memory.platform import Rendered
from tests.gateway_harness import ALICE, ROOM, Running
from tests.servers.fake_responses import FakeResponses, Step, message

__all__ = [
    "CAROL",
    "DEADLINE",
    "DONE",
    "ELSEWHERE",
    "ORPHANED",
    "ROOM_T2",
    "WHEN",
    "Asked",
    "add_file",
    "ask",
    "count_rows",
    "interaction",
    "session_of",
    "settles",
    "told",
    "with_scope",
    "without_hash",
]

DEADLINE = 30.0  # seconds for any one awaited thing; a whole approval turn takes ~0.3 s
CAROL = Actor(platform="memory", user_id="carol", display="Carol")  # may talk, not decide
ROOM_T2 = ConversationRef(platform="memory", space="team", channel="room", thread="t2")
ELSEWHERE = ConversationRef(platform="memory", space="team", channel="other", thread="t9")
WHEN = r"\d\d:\d\d UTC"  # how a status line writes a time (gateway/wording.py)
# a card whose agent process ended before anyone answered (a regex, the whole status line)
ORPHANED = (
    r"The (agent process ended( \(.*\))?|gateway ended the agent process) before anyone"
    r" answered: no answer can reach it now · your next message starts the agent again"
)
DONE = message(lambda request: f"Done. Tool said: {request.tool_output() or ''}")


def add_file(name: str, text: str = "hello") -> str:
    return f"*** Begin Patch\n*** Add File: {name}\n+{text}\n*** End Patch\n"


def with_scope(config: Config, scope: SessionScope) -> Config:
    project = config.projects["demo"].model_copy(update={"scope": scope})
    return config.model_copy(update={"projects": {"demo": project}})


@dataclass
class Asked:
    """A card as shown (edited in place) and its interaction as recorded when it appeared."""

    shown: Rendered
    interaction: Interaction

    @property
    def first(self) -> Card:
        """The card as first shown, with its buttons."""
        card = self.shown.versions[0]
        assert isinstance(card, Card)
        return card

    @property
    def now(self) -> Card:
        assert self.shown.card is not None
        return self.shown.card

    @property
    def labels(self) -> list[str]:
        return [action.label for action in self.first.actions]

    def token(self, label: str) -> str:
        """The token of the button labelled ``label`` on the first version of the card."""
        [token] = [action.token for action in self.first.actions if action.label == label]
        return token


async def session_of(gw: Running, conversation: ConversationRef = ROOM) -> SessionRecord:
    session = await gw.gateway.store.sessions.lookup(conversation)
    assert session is not None, f"no session in {conversation}"
    return session


async def ask(
    gw: Running,
    fake: FakeResponses,
    steps: list[Step],
    prompt: str = "please do it",
    *,
    actor: Actor = ALICE,
    conversation: ConversationRef = ROOM,
) -> Asked:
    """Send a prompt whose turn plays ``steps``, and wait for the card it makes the agent ask."""
    fake.enqueue(steps)
    before = {shown.ref.message_id for shown in gw.cards(conversation)}

    def new_card() -> Rendered | None:
        for shown in gw.cards(conversation):
            if shown.ref.message_id not in before:
                return shown
        return None

    await gw.memory.say(conversation, actor, prompt)
    shown = await gw.memory.wait_for(new_card, deadline=DEADLINE)
    session = await session_of(gw, conversation)
    [opened] = await gw.gateway.store.interactions.list_open(session.id)
    return Asked(shown=shown, interaction=opened)


async def settles(gw: Running, asked: Asked, status: str) -> Interaction:
    """Wait until the card's status line matches ``status`` (a regex, the whole line before
    the content hash a voted card ends with); the card has no buttons or form left then.
    Returns the ledger's record at that point."""
    whole = rf"(?:{status})(?: · content hash [0-9a-f]{{10}})?"

    def final() -> Card | None:
        card = asked.shown.card
        return card if card is not None and re.fullmatch(whole, card.status_line) else None

    try:
        card = await gw.memory.wait_for(final, deadline=DEADLINE)
    except TimeoutError:
        raise AssertionError(f"card status stayed {asked.now.status_line!r}") from None
    assert card.actions == ()
    assert card.form is None
    return await interaction(gw, asked.interaction.id)


def hash_said(asked: Asked) -> str:
    """How a vote's receipt names what it approves: " (content hash 5a0426e840)"."""
    return f" (content hash {asked.interaction.content_hash[:10]})"


def without_hash(card_status: str) -> str:
    """A card's status line without the content hash a voted card ends with (elsewhere the
    hash is a detail, not on the line)."""
    head, _, hashed = card_status.rpartition(" · content hash ")
    return head if head and re.fullmatch(r"[0-9a-f]{10}", hashed) else card_status


async def interaction(gw: Running, interaction_id: str) -> Interaction:
    found = await gw.gateway.store.interactions.get(interaction_id)
    assert found is not None
    return found


def told(fake: FakeResponses) -> str:
    """The last tool output the agent sent back to the model."""
    return next((out for r in reversed(fake.model_requests()) if (out := r.tool_output())), "")


def count_rows(gw: Running, table: str, interaction_id: str) -> int:
    """Rows of a ledger fact table (decisions, deliveries) for one interaction, read from the
    database file itself: every write, not just the latest one the record shows."""
    assert table in {"decisions", "deliveries", "resolutions"}
    uri = f"file:{gw.gateway.store.path}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        row = conn.execute(
            f"SELECT count(*) FROM {table} WHERE interaction_id = ?",
            (interaction_id,),
        ).fetchone()
    return int(row[0])
