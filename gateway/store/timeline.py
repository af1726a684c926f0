"""Turn timelines: what the agent said, the tools it ran and the moments it asked, in order.

Written by the session's runner as the turn goes (gateway/timeline.py computes what changed
since the last save); read by the surfaces that show a conversation's history, after a
restart too (the web console).
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.errors import StoreError
from gateway.store.database import (
    Conn,
    Database,
    Reader,
    conversation_from_row,
    conversation_params,
    fetch_all,
    parse_time,
)
from gateway.store.prompts import prompt_by_id
from gateway.store.records import TimelineEntry, TurnTimeline
from gateway.store.turns import TURN_COLUMNS, tell_turn_changed, turn_from_row
from gateway.timeline import EntryKind, EntryWrite, ShownPart

__all__ = ["TimelineLedger"]


class TimelineLedger:
    """``store.timeline``: each turn's entries under one sequence."""

    def __init__(self, db: Database, *, views: Reader | None = None) -> None:
        self._db = db
        self._views: Reader = views or db  # the console's reads (store.readers)

    async def save(
        self, turn_id: int, writes: Sequence[EntryWrite], shown: Sequence[ShownPart] = ()
    ) -> None:
        """Record new entries and their text: appended as a new part, or replacing the
        entry's parts; and the platform messages that show the turn (a part posted anew
        replaces the one it stood in for). One transaction: nothing of it, or all of it; run
        twice, as run once."""
        if not writes and not shown:
            return

        def save(conn: Conn) -> None:
            for write in writes:
                if write.new:
                    conn.execute(
                        "INSERT INTO timeline_entries"
                        " (turn_id, seq, kind, item_id, interaction_id, at)"
                        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (turn_id, seq) DO NOTHING",
                        (
                            turn_id,
                            write.seq,
                            write.kind.value,
                            write.item_id,
                            write.interaction_id,
                            self._db.stored_time(write.at),
                        ),
                    )
                if write.replace:
                    conn.execute(
                        "DELETE FROM timeline_text WHERE turn_id = ? AND seq = ?",
                        (turn_id, write.seq),
                    )
                if write.text:
                    conn.execute(
                        "INSERT INTO timeline_text (turn_id, seq, part, text) VALUES (?, ?, ?, ?)"
                        " ON CONFLICT (turn_id, seq, part) DO UPDATE SET text = excluded.text",
                        (turn_id, write.seq, write.part, write.text),
                    )
            for message in shown:
                conn.execute(
                    "INSERT INTO turn_messages"
                    " (turn_id, platform, space, channel, thread, section, part, message_id)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (turn_id, platform, space, channel, thread, section, part)"
                    " DO UPDATE SET message_id = excluded.message_id",
                    (
                        turn_id,
                        *conversation_params(message.conversation),
                        message.section,
                        message.part,
                        message.message_id,
                    ),
                )
            if any(write.text or write.new for write in writes):
                tell_turn_changed(self._db, conn, turn_id=turn_id)  # other hosts' consoles

        try:
            # the same rows, run twice (the entries and parts by their keys, the messages
            # upserted), and the runner saves a turn one save at a time: a save whose answer
            # a cut lost is run again, not an unknown outcome that ends the agent
            await self._db.write(save, again=True)
        except StoreError as exc:
            raise StoreError(f"turn {turn_id}'s timeline was not saved: {exc}") from exc

    async def of_turn(self, turn_id: int) -> tuple[tuple[TimelineEntry, ...], list[ShownPart]]:
        """One turn's timeline as saved, and the platform messages that show it."""

        def of_turn(conn: Conn) -> tuple[tuple[TimelineEntry, ...], list[ShownPart]]:
            rows = fetch_all(
                conn,
                "SELECT platform, space, channel, thread, section, part, message_id"
                " FROM turn_messages WHERE turn_id = ?"
                " ORDER BY platform, space, channel, thread, section, part",
                (turn_id,),
            )
            shown = [
                ShownPart(
                    conversation=conversation_from_row(row),
                    section=int(row["section"]),
                    part=int(row["part"]),
                    message_id=row["message_id"],
                )
                for row in rows
            ]
            return _entries(conn, turn_id), shown

        return await self._db.read(of_turn)

    async def of_session(self, session_id: str, *, turns: int = 50) -> list[TurnTimeline]:
        """The session's latest ``turns`` turns, oldest first, each with its prompt and its
        timeline (one read)."""

        def of_session(conn: Conn) -> list[TurnTimeline]:
            rows = fetch_all(
                conn,
                f"SELECT {TURN_COLUMNS} FROM turns WHERE session_id = ? ORDER BY id DESC LIMIT ?",
                (session_id, turns),
            )
            found = []
            for row in reversed(rows):
                turn = turn_from_row(row)
                prompt = None if turn.prompt_id is None else prompt_by_id(conn, turn.prompt_id)
                entries = _entries(conn, turn.id)
                found.append(TurnTimeline(turn=turn, prompt=prompt, entries=entries))
            return found

        return await self._views.read(of_session)


def _entries(conn: Conn, turn_id: int) -> tuple[TimelineEntry, ...]:
    texts: dict[int, list[str]] = {}
    for row in fetch_all(
        conn,
        "SELECT seq, text FROM timeline_text WHERE turn_id = ? ORDER BY seq, part",
        (turn_id,),
    ):
        texts.setdefault(row["seq"], []).append(row["text"])
    rows = fetch_all(
        conn,
        "SELECT seq, kind, item_id, interaction_id, at FROM timeline_entries"
        " WHERE turn_id = ? ORDER BY seq",
        (turn_id,),
    )
    return tuple(
        TimelineEntry(
            seq=row["seq"],
            kind=EntryKind(row["kind"]),
            at=parse_time(row["at"]),
            text="".join(texts.get(row["seq"], ())),
            item_id=row["item_id"],
            interaction_id=row["interaction_id"],
        )
        for row in rows
    )
