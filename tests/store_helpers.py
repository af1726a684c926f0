"""Shared plumbing for the store tests: a stepping clock and ready-made requests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from gateway.domain import (
    Action,
    Actor,
    AgentKind,
    Command,
    ConversationRef,
    Effect,
    InteractionKind,
    InteractionRequest,
    Option,
    Question,
    Scope,
)
from gateway.session_record import SessionRecord
from gateway.store.migrations import MIGRATIONS, VOTES_TABLE
from gateway.store.store import Store

__all__ = [
    "ALICE",
    "BOB",
    "SLACK",
    "TELEGRAM",
    "SteppingClock",
    "all_bytes",
    "approval",
    "as_it_was",
    "question_form",
    "running_session",
    "todays_reads",
]

ALICE = Actor(platform="telegram", user_id="100", display="Alice")
BOB = Actor(platform="slack", user_id="U200", display="Bob")
TELEGRAM = ConversationRef(platform="telegram", space="-1001", channel="-1001", thread="7")
SLACK = ConversationRef(platform="slack", space="T1", channel="C1", thread="1700000000.0001")


class SteppingClock:
    """An aware clock that moves one second every time it is read."""

    def __init__(self) -> None:
        self.now = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def approval(native_key: str = "codex:0", *, title: str = "Run ls?") -> InteractionRequest:
    return InteractionRequest(
        native_key=native_key,
        kind=InteractionKind.APPROVAL,
        title=title,
        summary="the agent wants to run a command",
        detail=Command(command="ls -la", cwd="/srv/project", reason="look around"),
        actions=(
            Action(id="accept", label="Approve", effect=Effect.ALLOW),
            Action(
                id="acceptForSession",
                label="Approve for session",
                effect=Effect.ALLOW,
                scope=Scope.SESSION,
            ),
            Action(id="decline", label="Deny", effect=Effect.DENY),
        ),
    )


def question_form(native_key: str = "codex:1") -> InteractionRequest:
    return InteractionRequest(
        native_key=native_key,
        kind=InteractionKind.QUESTION,
        title="A few questions",
        questions=(
            Question(
                id="env",
                header="Env",
                text="Which environment?",
                options=(Option(id="prod", label="Production"), Option(id="dev", label="Dev")),
            ),
            Question(id="token", header="Token", text="Paste the deploy token", secret=True),
        ),
    )


async def running_session(store: Store, project: str = "demo") -> tuple[SessionRecord, int]:
    """A session with a live runtime epoch."""
    session = await store.sessions.create(project=project, agent_kind=AgentKind.CODEX_APP_SERVER)
    epoch = await store.sessions.begin_epoch(
        session.id, pid=4242, pgid=4242, process_start_time=123456, agent_version="0.171.0"
    )
    return session, epoch


def all_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file())


SESSION_HOST_COLUMN = "ALTER TABLE sessions ADD COLUMN host TEXT"  # migration 8's column
SESSION_NAME_COLUMN = "ALTER TABLE sessions ADD COLUMN name TEXT"  # migration 17's column
SEALED_ANSWERS_TABLE = MIGRATIONS[9].statements[0]  # migration 10's table (a delivery deletes)


# who asks an interaction (migration 17), which today's reads of an interaction select
INTERACTION_ORIGIN_COLUMN = (
    "ALTER TABLE interactions ADD COLUMN origin TEXT NOT NULL DEFAULT 'agent'"
)

# the hash of an interaction whose details were pruned (migration 20), which reads select
PRUNED_HASH_COLUMN = "ALTER TABLE interactions ADD COLUMN pruned_hash TEXT"

# a card's copy drawn again in its conversation (migration 5's rebuild), which the reads of
# a card's copies select (a delivery's record reads them: gateway/store/interaction_rows.py)
COPY_AGAIN_COLUMN = "ALTER TABLE interaction_messages ADD COLUMN again INTEGER NOT NULL DEFAULT 0"


async def todays_reads(store: Store) -> Store:
    """``store``, opened at an older schema, with what today's reads of an interaction need
    (the votes table, which migration 6 creates only where it is missing, and its origin,
    migration 18) and today's sessions (their host column, migration 8, their name,
    migration 17, and the sealed
    answers of migration 10, which :func:`as_it_was` takes away again)."""
    await store.writer.write(lambda conn: conn.execute(VOTES_TABLE))
    await store.writer.write(lambda conn: conn.execute(SESSION_HOST_COLUMN))
    await store.writer.write(lambda conn: conn.execute(SESSION_NAME_COLUMN))
    await store.writer.write(lambda conn: conn.execute(SEALED_ANSWERS_TABLE))
    await store.writer.write(lambda conn: conn.execute(INTERACTION_ORIGIN_COLUMN))
    await store.writer.write(lambda conn: conn.execute(PRUNED_HASH_COLUMN))
    await store.writer.write(lambda conn: conn.execute(COPY_AGAIN_COLUMN))
    return store


async def as_it_was(store: Store) -> None:
    """Undo :func:`todays_reads`' columns, so that today's migrations find the old schema."""
    await store.writer.write(lambda conn: conn.execute("ALTER TABLE sessions DROP COLUMN host"))
    await store.writer.write(lambda conn: conn.execute("ALTER TABLE sessions DROP COLUMN name"))
    await store.writer.write(lambda conn: conn.execute("DROP TABLE sealed_answers"))
    await store.writer.write(
        lambda conn: conn.execute("ALTER TABLE interactions DROP COLUMN origin")
    )
    await store.writer.write(
        lambda conn: conn.execute("ALTER TABLE interactions DROP COLUMN pruned_hash")
    )
    await store.writer.write(
        lambda conn: conn.execute("ALTER TABLE interaction_messages DROP COLUMN again")
    )
