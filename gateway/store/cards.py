"""Every copy of every interaction card (DESIGN.md, "Platforms"): where it is shown, whether
it was sent, and which version of the interaction it shows.

A copy is ``pending`` until the platform confirms the send, then ``sent``; after an edit
``edited``; ``failed`` when the last send or edit failed (no ``message_ref``: send it again;
with one: edit it again). ``rendered_version`` lags the interaction's version until the copy
is edited, which is how a restart finds the cards it still has to update.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from gateway.domain import ConversationRef
from gateway.errors import StoreError
from gateway.store.database import (
    Conn,
    Database,
    Row,
    conversation_from_row,
    conversation_params,
    fetch_all,
    fetch_one,
    parse_time,
)
from gateway.store.records import CardCopy, CopyState
from gateway.store.sessions import ON_HOST

__all__ = ["CardCopies", "add_copy", "copies_for"]

_COLUMNS = (
    "m.id, m.interaction_id, m.platform, m.space, m.channel, m.thread, m.message_ref, m.state,"
    " m.rendered_version, m.error, m.updated_at, m.again"
)
_RETURNED = _COLUMNS.replace("m.", "")  # the same columns, unqualified (RETURNING)


class CardCopies:
    """``store.cards``: the interaction_messages table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, interaction_id: str, conversation: ConversationRef) -> CardCopy:
        """Record that the card is to be shown in ``conversation`` (state pending).
        Idempotent: one copy per interaction and conversation."""

        return await self._db.write(
            lambda conn: add_copy(conn, interaction_id, conversation, now=self._db.now())
        )

    async def add_again(self, interaction_id: str, conversation: ConversationRef) -> CardCopy:
        """Record one more copy of the card in ``conversation`` (state pending), beside the
        ones it has there: the card drawn again under a reply to it. Every copy is edited
        after the decision, like any other."""

        def add_again(conn: Conn) -> CardCopy:
            row = fetch_one(
                conn,
                "SELECT coalesce(max(again), -1) + 1 AS next FROM interaction_messages"
                " WHERE interaction_id = ? AND platform = ? AND space = ? AND channel = ?"
                " AND thread = ?",
                (interaction_id, *conversation_params(conversation)),
            )
            again = 0 if row is None else int(row["next"])
            inserted = fetch_one(
                conn,
                "INSERT INTO interaction_messages (interaction_id, platform, space, channel,"
                " thread, again, state, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)"
                " RETURNING id",
                (interaction_id, *conversation_params(conversation), again, self._db.now()),
            )
            assert inserted is not None
            return _copy(conn, int(inserted["id"]))

        return await self._db.write(add_again)

    async def shown_by(self, conversation: ConversationRef, message_ref: str) -> CardCopy | None:
        """The copy of a card that is the message ``message_ref`` in ``conversation`` (a
        reply to a card names it), or None when that message is no card."""

        def shown_by(conn: Conn) -> CardCopy | None:
            row = fetch_one(
                conn,
                f"SELECT {_COLUMNS} FROM interaction_messages m WHERE m.platform = ?"
                " AND m.space = ? AND m.channel = ? AND m.thread = ? AND m.message_ref = ?"
                " ORDER BY m.id DESC LIMIT 1",
                (*conversation_params(conversation), message_ref),
            )
            return None if row is None else _copy_from_row(row)

        return await self._db.read(shown_by)

    async def mark_sent(self, copy_id: int, *, message_ref: str, version: int) -> CardCopy:
        return await self._update(
            copy_id,
            "state = 'sent', message_ref = ?, rendered_version = ?, error = NULL",
            (message_ref, version),
        )

    async def mark_edited(self, copy_id: int, *, version: int) -> CardCopy:
        return await self._update(
            copy_id, "state = 'edited', rendered_version = ?, error = NULL", (version,)
        )

    async def mark_failed(self, copy_id: int, *, error: str) -> CardCopy:
        return await self._update(copy_id, "state = 'failed', error = ?", (error,))

    async def _update(self, copy_id: int, assignments: str, params: tuple[object, ...]) -> CardCopy:
        def update(conn: Conn) -> CardCopy:
            # RETURNING: the copy as written, without reading it back; one statement, so
            # no transaction around it (one network round trip on PostgreSQL)
            row = fetch_one(
                conn,
                f"UPDATE interaction_messages SET {assignments}, updated_at = ? WHERE id = ?"
                f" RETURNING {_RETURNED}",
                (*params, self._db.now(), copy_id),
            )
            if row is None:
                raise StoreError(f"no card copy {copy_id}")
            return _copy_from_row(row)

        return await self._db.write(update, one_statement=True)

    async def list_for(self, interaction_id: str) -> list[CardCopy]:
        """Every copy of one interaction's card."""
        return await self._db.read(
            lambda conn: copies_for(conn, interaction_id), one_statement=True
        )

    async def list_failed(self, *, host: str | None = None) -> list[CardCopy]:
        """Copies whose last send or edit failed: to send (no ref) or edit again.
        ``host``: only the cards of that host's sessions (it alone edits them)."""
        return await self._list("m.state = 'failed'", (), host)

    async def list_outdated(self, *, host: str | None = None) -> list[CardCopy]:
        """Copies on a platform that show an older version than the interaction has (after
        a restart: the orphaned cards whose buttons must go); ``host`` as in list_failed."""
        return await self._list(
            "m.state IN ('sent', 'edited') AND m.rendered_version"
            " < (SELECT version FROM interactions i WHERE i.id = m.interaction_id)",
            (),
            host,
        )

    async def _list(
        self, where: str, params: tuple[object, ...], host: str | None = None
    ) -> list[CardCopy]:
        def list_copies(conn: Conn) -> list[CardCopy]:
            rows = fetch_all(
                conn,
                f"SELECT {_COLUMNS} FROM interaction_messages m WHERE {where}"
                " AND m.interaction_id IN (SELECT i.id FROM interactions i"
                f" WHERE i.session_id IN (SELECT id FROM sessions WHERE {ON_HOST}))"
                " ORDER BY m.id",
                (*params, host, host),
            )
            return [_copy_from_row(row) for row in rows]

        return await self._db.read(list_copies)


def add_copy(
    conn: Conn, interaction_id: str, conversation: ConversationRef, *, now: str
) -> CardCopy:
    """``CardCopies.add`` inside a caller's transaction."""
    conn.execute(
        "INSERT INTO interaction_messages (interaction_id, platform, space, channel,"
        " thread, state, updated_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)"
        " ON CONFLICT (interaction_id, platform, space, channel, thread, again) DO NOTHING",
        (interaction_id, *conversation_params(conversation), now),
    )
    cursor = conn.execute(
        f"SELECT {_COLUMNS} FROM interaction_messages m WHERE m.interaction_id = ?"
        " AND m.platform = ? AND m.space = ? AND m.channel = ? AND m.thread = ?"
        " AND m.again = 0",
        (interaction_id, *conversation_params(conversation)),
    )
    row = cursor.fetchone()
    assert row is not None
    return _copy_from_row(row)


def add_bound_copies_sent(
    conn: Conn, interaction_id: str, session_id: str, now: str
) -> Callable[[], list[CardCopy]]:
    """A new interaction's pending copy in every conversation bound to its session, in
    binding order (``sessions.list_bindings``'s), in one statement: the bindings are read by
    the insert itself. Sent; what it returns reads the copies."""
    cursor = conn.execute(
        "INSERT INTO interaction_messages (interaction_id, platform, space, channel, thread,"
        " state, updated_at) SELECT ?, platform, space, channel, thread, 'pending', ?"
        " FROM conversations WHERE session_id = ?"
        f" ORDER BY bound_at, platform, space, channel, thread RETURNING {_RETURNED}",
        (interaction_id, now, session_id),
    )
    # ids are drawn in the SELECT's order; RETURNING's own order is not promised
    return lambda: sorted((_copy_from_row(row) for row in cursor.fetchall()), key=_by_id)


def _by_id(copy: CardCopy) -> int:
    return copy.id


def copies_for(conn: Conn, interaction_id: str) -> list[CardCopy]:
    """``CardCopies.list_for`` inside a caller's read or transaction."""
    rows = fetch_all(
        conn,
        f"SELECT {_COLUMNS} FROM interaction_messages m WHERE m.interaction_id = ? ORDER BY m.id",
        (interaction_id,),
    )
    return [_copy_from_row(row) for row in rows]


# A request's card copies, oldest first, as one column of its row (``i``): a JSON array of
# arrays of the copy's columns, read by copies_from_json. The card's reads take the request
# and its copies in one statement (one result, one snapshot: no transaction for the two).
COPIES_JSON = """(SELECT json_group_array(json_array(m.id, m.interaction_id, m.platform,
                    m.space, m.channel, m.thread, m.message_ref, m.state,
                    m.rendered_version, m.error, m.updated_at, m.again))
        FROM (SELECT * FROM interaction_messages WHERE interaction_id = i.id
              ORDER BY id) m) AS copies_json"""
_NAMES = tuple(name.strip() for name in _RETURNED.split(","))  # COPIES_JSON's, in order


def copies_from_json(text: str | None) -> list[CardCopy]:
    """The copies of ``COPIES_JSON``, each read as a row of them is."""
    if not text or text == "[]":
        return []
    return [_copy_from_row(dict(zip(_NAMES, values, strict=True))) for values in json.loads(text)]


def _copy(conn: Conn, copy_id: int) -> CardCopy:
    row = fetch_one(
        conn, f"SELECT {_COLUMNS} FROM interaction_messages m WHERE m.id = ?", (copy_id,)
    )
    if row is None:
        raise StoreError(f"no card copy {copy_id}")
    return _copy_from_row(row)


def _copy_from_row(row: Row) -> CardCopy:
    return CardCopy(
        id=row["id"],
        interaction_id=row["interaction_id"],
        conversation=conversation_from_row(row),
        message_ref=row["message_ref"],
        state=CopyState(row["state"]),
        rendered_version=row["rendered_version"],
        error=row["error"],
        updated_at=parse_time(row["updated_at"]),
        again=row["again"],
    )
