"""A turn's timeline (gateway/timeline.py) and its place in the ledger (store.timeline): the
order things happened, the sections a surface shows as messages, and saves that write only
what is new."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.config.ledger_url import PgTarget
from gateway.domain import ConversationRef, TurnStatus
from gateway.sessions.outbound import TurnStream
from gateway.sessions.turn_close import close_shown_turn
from gateway.store.ledger_faults import Fault, LedgerFaults
from gateway.store.migrations import MIGRATIONS
from gateway.store.records import TurnTimeline
from gateway.store.store import Store
from gateway.timeline import EntryKind, Timeline
from platforms.memory.platform import MemoryPlatform
from tests.store_backends import open_store
from tests.store_helpers import SESSION_NAME_COLUMN, SteppingClock, approval, running_session

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def store(tmp_path: Path, ledger: PgTarget | None) -> AsyncIterator[Store]:
    async with open_store(ledger, tmp_path / "data", clock=SteppingClock()) as store:
        yield store


async def a_turn(store: Store) -> tuple[int, int, str]:
    """A running turn; its id, its epoch and its session."""
    session, epoch = await running_session(store)
    turn = await store.turns.start(session.id, epoch)
    return turn.id, epoch, session.id


async def save(store: Store, turn_id: int, timeline: Timeline) -> int:
    """Save what the ledger lacks; the number of entries written."""
    unsaved = timeline.unsaved()
    await store.timeline.save(turn_id, unsaved.writes)
    timeline.saved(unsaved)
    return len(unsaved.writes)


async def stored(store: Store, session_id: str) -> TurnTimeline:
    [turn] = await store.timeline.of_session(session_id)
    return turn


async def text_parts(store: Store, turn_id: int) -> list[tuple[int, int, str]]:
    rows = await store.writer.read(
        lambda conn: conn.execute(
            "SELECT seq, part, text FROM timeline_text WHERE turn_id = ? ORDER BY seq, part",
            (turn_id,),
        ).fetchall()
    )
    return [(row["seq"], row["part"], row["text"]) for row in rows]


def test_what_is_said_after_a_card_is_a_section_after_it() -> None:
    timeline = Timeline()
    timeline.delta("m1", "I will ")
    timeline.delta("m1", "look.")
    timeline.tool("c1", "▸ `ls`")
    assert timeline.interaction_opened("i1")
    timeline.tool("c1", "✓ `ls`")  # the command's line stays where it started
    timeline.delta("m1", " Then more.")  # the same message, after the card: a new entry
    timeline.delta("m2", "Done.")
    assert not timeline.interaction_opened("i1")  # the same request again: nothing new
    assert timeline.sections == 2
    assert timeline.section_text(0) == "I will look.\n\n✓ `ls`"
    assert timeline.section_text(1) == " Then more.\n\nDone."
    assert [(e.kind, e.item_id) for e in timeline.entries] == [
        (EntryKind.TEXT, "m1"),
        (EntryKind.TOOL, "c1"),
        (EntryKind.INTERACTION, None),
        (EntryKind.TEXT, "m1"),
        (EntryKind.TEXT, "m2"),
    ]


def test_a_final_message_split_by_a_card_keeps_each_part_in_its_place() -> None:
    timeline = Timeline()
    timeline.delta("m1", "Before the card.")
    timeline.interaction_opened("i1")
    timeline.delta("m1", " After i")
    timeline.message("m1", "Before the card. After it.")
    assert [timeline.section_text(0), timeline.section_text(1)] == [
        "Before the card.",
        " After it.",
    ]
    timeline.message("m1", "Something else entirely.")  # not a continuation: one place
    assert [timeline.section_text(0), timeline.section_text(1)] == [
        "Something else entirely.",
        "",
    ]


def test_text_that_comes_while_a_save_is_written_is_in_the_next_save() -> None:
    timeline = Timeline()
    timeline.delta("m1", "one")
    first = timeline.unsaved()
    timeline.delta("m1", " two")  # while the first save is being written...
    timeline.section_text(0)  # ...a surface shows it...
    timeline.interaction_opened("i1")  # ...and a card closes the message
    timeline.saved(first)
    [write] = [w for w in timeline.unsaved().writes if w.kind is EntryKind.TEXT]
    assert (write.new, write.replace, write.part, write.text) == (False, False, 1, " two")


async def test_a_streamed_text_is_saved_as_appended_parts_and_read_back_whole(
    store: Store,
) -> None:
    turn_id, _, session_id = await a_turn(store)
    timeline = Timeline()
    timeline.delta("m1", "one")
    timeline.delta("m1", " two")
    assert await save(store, turn_id, timeline) == 1
    assert await save(store, turn_id, timeline) == 0  # nothing new: nothing written
    timeline.delta("m1", " three")
    timeline.delta("m1", " four")
    assert await save(store, turn_id, timeline) == 1
    # the second save wrote the new text only, never the whole again
    assert await text_parts(store, turn_id) == [(0, 0, "one two"), (0, 1, " three four")]
    assert [e.text for e in (await stored(store, session_id)).entries] == ["one two three four"]
    timeline.message("m1", "One, two, three, four.")  # the final text replaces the deltas
    assert await save(store, turn_id, timeline) == 1
    assert await text_parts(store, turn_id) == [(0, 0, "One, two, three, four.")]


async def test_a_turn_reads_back_in_the_order_it_happened(store: Store) -> None:
    turn_id, epoch, session_id = await a_turn(store)
    timeline = Timeline(clock=SteppingClock())
    timeline.delta("m1", "Let me look.")
    timeline.tool("c1", "▸ `ls`")
    await save(store, turn_id, timeline)
    opened = await store.interactions.create(
        session_id, epoch, approval("codex:0"), turn_id=turn_id
    )
    timeline.interaction_opened(opened.interaction.id)
    timeline.tool("c1", "✓ `ls`")
    timeline.delta("m2", "Three files.")
    await save(store, turn_id, timeline)
    await store.turns.end(turn_id, TurnStatus.COMPLETED)
    turn = await stored(store, session_id)
    assert turn.turn.status is TurnStatus.COMPLETED and turn.prompt is None
    assert [(e.seq, e.kind, e.text, e.interaction_id) for e in turn.entries] == [
        (0, EntryKind.TEXT, "Let me look.", None),
        (1, EntryKind.TOOL, "✓ `ls`", None),
        (2, EntryKind.INTERACTION, "", opened.interaction.id),
        (3, EntryKind.TEXT, "Three files.", None),
    ]
    times = [e.at for e in turn.entries]
    assert times == sorted(times)


async def test_a_ledger_of_the_last_schema_gets_timelines(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    # the schema before turn messages (migration 16), with today's session name (17) only
    # while today's reads need it
    async with Store.open(data_dir, migrations=MIGRATIONS[:15]) as old:
        await old.writer.write(lambda conn: conn.execute(SESSION_NAME_COLUMN))
        session, epoch = await running_session(old)
        await old.turns.start(session.id, epoch)
        await old.writer.write(lambda conn: conn.execute("ALTER TABLE sessions DROP COLUMN name"))
    async with Store.open(data_dir) as store:
        [turn] = await store.timeline.of_session(session.id)
        assert turn.entries == ()  # a turn from before: no timeline, still read
        timeline = Timeline()
        timeline.delta("m1", "hello")
        await save(store, turn.turn.id, timeline)
        assert [e.text for e in (await stored(store, session.id)).entries] == ["hello"]


async def test_a_turn_a_dead_process_showed_running_is_closed_in_the_ledger_and_its_messages(
    store: Store,
) -> None:
    """What a recovery does for a turn its previous process died in (close_shown_turn): the
    tool lines left running are closed in the ledger and in the messages that showed them;
    a message with nothing running in it is not touched."""
    turn_id, epoch, session_id = await a_turn(store)
    opened = await store.interactions.create(session_id, epoch, approval(), turn_id=turn_id)
    platform = MemoryPlatform("memory")
    room = ConversationRef(platform="memory", space=None, channel="room")
    stream = TurnStream()
    stream.delta("m1", "Let me look.")
    stream.timeline.tool("tool:ls", "✓ `ls`")
    stream.interaction_opened(opened.interaction.id)  # a card: what follows is a message of its own
    stream.delta("m1", "Now the tests.")
    stream.timeline.tool("tool:make", "▸ `make test`")
    for section in range(stream.timeline.sections):
        [chunk] = stream.chunks(section, platform.limits)
        ref = await platform.send_text(room, chunk)
        stream.posted(room, section, 0, ref.message_id)
    first, second = platform.messages(room)
    unsaved = stream.timeline.unsaved()
    await store.timeline.save(turn_id, unsaved.writes, stream.take_posted())

    assert await close_shown_turn(store, {"memory": platform}, turn_id) == 1

    closed = "✗ `make test` (stopped: the gateway restarted)"
    assert platform.messages(room)[1].text == f"Now the tests.\n\n{closed}"
    assert platform.messages(room)[1].edits == 1 and first.edits == 0
    texts = [entry.text for entry in (await stored(store, session_id)).entries]
    assert closed in texts and "▸ `make test`" not in texts
    # a second recovery finds nothing left running: nothing edited again
    assert await close_shown_turn(store, {"memory": platform}, turn_id) == 0
    assert second.ref == platform.messages(room)[1].ref


async def test_a_save_whose_answer_a_cut_lost_is_run_again_and_kept_once(store: Store) -> None:
    """A cut ends every call in flight on a host's pool: a timeline save whose COMMIT was
    done but whose answer was lost is run again on a new connection (not an unknown outcome
    that ends the agent), and the turn reads back as said, each part once."""
    turn_id, _, session_id = await a_turn(store)
    timeline = Timeline()
    timeline.delta("m1", "one")
    await save(store, turn_id, timeline)
    timeline.delta("m1", " two")
    timeline.tool("c1", "▸ `ls`")
    store.writer.faults = LedgerFaults.parse("TimelineLedger.save#1=cut")
    await save(store, turn_id, timeline)
    assert store.writer.faults.fired == [("TimelineLedger.save", Fault.CUT)]
    assert await text_parts(store, turn_id) == [(0, 0, "one"), (0, 1, " two"), (1, 0, "▸ `ls`")]
    turn = await stored(store, session_id)
    assert [entry.text for entry in turn.entries] == ["one two", "▸ `ls`"]
