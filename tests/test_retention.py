"""Retention without breaking the audit (issue 36, ``[gateway.retention]``).

A ledger with old, middle-aged and new stories (a prompt, its turn's text, a request with a
vote and a decision, delivered and confirmed), on both backends: pruning removes exactly
what the rules say; the audit export of a request whose texts went still says who asked,
who decided and what; a request a grant in force refers to is kept; a dry run changes
nothing; a click on a pruned card is answered "too old" (and not audited as forged);
``agent-gateway prune`` says what would go, then prunes; the gateway prunes in the
background. The indexes: the console's first page and ``/pending`` are read through an
index on a ledger with many closed requests.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.attachments import InboundAttachment
from gateway.config.ledger_url import PgTarget
from gateway.config.model import ExpiryPolicy
from gateway.domain import Actor, ConversationRef, Decision, InteractionState, TurnStatus
from gateway.interactions.machine import InteractionEvent
from gateway.interactions.policy import Requirement
from gateway.store.audit_export import audit_records
from gateway.store.cards import _COLUMNS
from gateway.store.database import Conn, fetch_all
from gateway.store.records import FilesChoice
from gateway.store.retention import PruneCounts, RetentionRules
from gateway.store.store import DATABASE_FILE, Store
from gateway.timeline import EntryKind, EntryWrite
from tests.store_backends import open_store
from tests.store_helpers import ALICE, TELEGRAM, approval, running_session

pytestmark = pytest.mark.timeout(120)

BOB = Actor(platform="slack", user_id="U200", display="Bob")
TWO = Requirement(approvals=2)
RULES = RetentionRules(texts=timedelta(days=30), audit=timedelta(days=365), batch=2)
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class SetClock:
    """An aware clock a test sets; it moves a microsecond per read (times stay ordered)."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        self.at += timedelta(microseconds=1)
        return self.at


@dataclass(frozen=True)
class Story:
    session_id: str
    prompt_id: int
    turn_id: int
    interaction_id: str
    content_hash: str


_messages = iter(range(1, 10_000))


async def story(
    store: Store, clock: SetClock, at: datetime, *, action: str = "accept", prompt: str
) -> Story:
    """At ``at``: Alice asks ``prompt``; the turn says something and asks to run ls; Bob
    votes and Alice decides ``action``; delivered, confirmed; the turn, the prompt and the
    agent process end."""
    clock.at = at
    session, epoch = await running_session(store)
    queued = await store.prompts.enqueue(
        session.id,
        conversation=TELEGRAM,
        platform_message_id=f"m{next(_messages)}",
        author=ALICE,
        text=prompt,
        max_depth=10,
    )
    assert queued.prompt is not None
    claimed = await store.prompts.claim_next(session.id)
    assert claimed is not None
    turn = await store.turns.start(session.id, epoch, prompt_id=claimed.id)
    said = f"the answer to {prompt}"
    await store.timeline.save(
        turn.id,
        [
            EntryWrite(
                seq=0,
                kind=EntryKind.TEXT,
                at=clock(),
                item_id=None,
                interaction_id=None,
                new=True,
                replace=False,
                part=0,
                text=said,
            )
        ],
    )
    opened = await store.interactions.create(session.id, epoch, approval(), turn_id=turn.id)
    asked = opened.interaction
    await store.votes.cast(
        asked.id, person="bob", actor=BOB, action_id="accept", requirement=TWO, surface="slack:T1"
    )
    current = await store.interactions.get(asked.id)
    assert current is not None
    await store.interactions.decide(
        asked.id,
        expected_version=current.version,
        actor=ALICE,
        decision=Decision(action_id=action),
    )
    await store.interactions.record_delivery(asked.id, ok=True)
    await store.interactions.resolve(asked.id, InteractionEvent.CONFIRM, by="agent")
    await store.turns.end(turn.id, TurnStatus.COMPLETED)
    await store.prompts.mark_done(claimed.id)
    await store.sessions.end_epoch(session.id, epoch, exit_description="exited 0")
    return Story(session.id, claimed.id, turn.id, asked.id, asked.content_hash)


async def rows(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the tables pruning touches, to compare before and after."""

    def read(conn: Conn) -> dict[str, list[tuple[Any, ...]]]:
        tables = {
            "prompts": "id",
            "turns": "id",
            "timeline_text": "turn_id, seq, part",
            "timeline_entries": "turn_id, seq",
            "interactions": "id",
            "decisions": "interaction_id",
            "votes": "interaction_id, person",
            "deliveries": "id",
            "resolutions": "interaction_id",
            "grants": "id",
            "audit": "id",
        }
        return {
            table: [
                tuple(dict(row).values())
                for row in fetch_all(conn, f"SELECT * FROM {table} ORDER BY {key}")
            ]
            for table, key in tables.items()
        }

    return await store.writer.read(read)


async def prompt_text(store: Store, prompt_id: int) -> str:
    record = await store.prompts.get(prompt_id)
    assert record is not None
    return record.text


async def turn_text(store: Store, turn_id: int) -> str:
    entries, _ = await store.timeline.of_turn(turn_id)
    return "".join(entry.text for entry in entries)


async def audit_of(store: Store, interaction_id: str) -> list[str]:
    return [e.event for e in reversed(await store.audit.entries(interaction_id=interaction_id))]


async def test_prune_removes_exactly_what_the_rules_say_and_keeps_the_audit(
    ledger: PgTarget | None, tmp_path: Path
) -> None:
    clock = SetClock(NOW)
    async with open_store(ledger, tmp_path / "data", clock=clock) as store:
        old = await story(store, clock, NOW - timedelta(days=400), prompt="old secret plan")
        granted = await story(
            store,
            clock,
            NOW - timedelta(days=400),
            action="acceptForSession",
            prompt="granted long ago",
        )
        middle = await story(store, clock, NOW - timedelta(days=100), prompt="middle plan")
        new = await story(store, clock, NOW - timedelta(days=5), prompt="new plan")
        clock.at = NOW
        before = await rows(store)
        export_before = {
            r["interaction"]: r for r in await audit_records(store, NOW - timedelta(days=500), None)
        }

        # a dry run counts, and changes nothing
        counted = await store.retention.count(RULES)
        assert counted == PruneCounts(
            prompt_texts=3,  # old, granted, middle (a prompt is not an interaction)
            timeline_texts=3,
            request_details=1,  # middle (old goes whole; the granted one keeps its details)
            interactions=1,  # old: the granted one stays
            audit_entries=0,
        )
        assert await rows(store) == before

        pruned = await store.retention.prune(RULES)  # in batches of 2
        assert pruned == counted
        assert await store.retention.count(RULES) == PruneCounts()

        # the old story's request is gone whole, its audit with it; its skeleton stays
        assert await store.interactions.get(old.interaction_id) is None
        assert await audit_of(store, old.interaction_id) == []
        assert await prompt_text(store, old.prompt_id) == ""
        assert await turn_text(store, old.turn_id) == ""
        # the granted one is kept, details and all (its grant is in force)
        kept = await store.interactions.get(granted.interaction_id)
        assert kept is not None and kept.detail is not None
        assert [
            g.interaction_id for g in await store.interactions.list_grants(granted.session_id)
        ] == [granted.interaction_id]
        # the middle one: texts gone, the request's facts kept, its hash as it was
        aged = await store.interactions.get(middle.interaction_id)
        assert aged is not None and aged.detail is None
        assert aged.state is InteractionState.RESOLVED
        assert aged.content_hash == middle.content_hash
        assert aged.decision is not None and aged.decision.actor == ALICE
        assert await prompt_text(store, middle.prompt_id) == ""
        assert await turn_text(store, middle.turn_id) == ""
        # the new one untouched
        fresh = await store.interactions.get(new.interaction_id)
        assert fresh is not None and fresh.detail is not None
        assert await prompt_text(store, new.prompt_id) == "new plan"
        assert await turn_text(store, new.turn_id) == "the answer to new plan"

        export = {
            r["interaction"]: r for r in await audit_records(store, NOW - timedelta(days=500), None)
        }
    assert set(export) == {granted.interaction_id, middle.interaction_id, new.interaction_id}
    # who asked, who voted, who decided and what: as before pruning, every field
    assert export[middle.interaction_id] == export_before[middle.interaction_id]
    said = export[middle.interaction_id]
    assert said["asked_by"] == "telegram:100"
    assert said["decided_by"] == ALICE.key() and said["decision"] == "accept"
    assert [v["account"] for v in said["votes"]] == ["slack:U200"]
    assert said["summary"] == "the agent wants to run a command"
    assert said["content_hash"] == said["decided_hash"] == middle.content_hash


async def test_a_revoked_grant_no_longer_keeps_its_request(
    ledger: PgTarget | None, tmp_path: Path
) -> None:
    clock = SetClock(NOW)
    async with open_store(ledger, tmp_path / "data", clock=clock) as store:
        granted = await story(
            store, clock, NOW - timedelta(days=800), action="acceptForSession", prompt="p"
        )
        [held] = await store.grants.for_session(granted.session_id, "demo")
        clock.at = NOW - timedelta(days=700)
        assert await store.grants.revoke(held.grant, ALICE, how="/revoke")
        clock.at = NOW
        pruned = await store.retention.prune(RULES)
        assert pruned is not None and pruned.interactions == 1
        assert await store.interactions.get(granted.interaction_id) is None
        assert await store.grants.get(held.grant.id) is None


async def test_a_recent_audit_entry_keeps_an_old_request(
    ledger: PgTarget | None, tmp_path: Path
) -> None:
    """Every audit entry of a request is as old as the clock before any of it goes."""
    clock = SetClock(NOW)
    async with open_store(ledger, tmp_path / "data", clock=clock) as store:
        old = await story(store, clock, NOW - timedelta(days=400), prompt="p")
        clock.at = NOW - timedelta(days=10)  # a late click on its card, audited
        await store.audit.record(
            "click.rejected", actor="telegram:100", interaction_id=old.interaction_id
        )
        clock.at = NOW
        pruned = await store.retention.prune(RULES)
        assert pruned is not None and pruned.interactions == 0
        assert await store.interactions.get(old.interaction_id) is not None


async def test_a_prompt_waiting_for_its_authors_files_choice_keeps_its_text_and_files(
    ledger: PgTarget | None, tmp_path: Path
) -> None:
    """A prompt whose files failed waits (interrupted, ``files_choice`` waiting) for its
    author's "send without them": however long it waits, it is not a finished prompt, and
    the agent gets its words and files when the author chooses."""
    clock = SetClock(NOW - timedelta(days=100))
    photo = InboundAttachment(name="screen.jpg", reference="AgAC", size=48_213)
    async with open_store(ledger, tmp_path / "data", clock=clock) as store:
        session, _ = await running_session(store)
        await store.prompts.enqueue(
            session.id,
            conversation=TELEGRAM,
            platform_message_id="m-files",
            author=ALICE,
            text="why is this broken?",
            max_depth=10,
            attachments=(photo,),
        )
        claimed = await store.prompts.claim_next(session.id)
        assert claimed is not None
        waiting = await store.prompts.wait_for_files_choice(
            claimed.id, why="502 three times", again=True
        )
        clock.at = NOW
        assert await store.retention.count(RULES) == PruneCounts()
        await store.retention.prune(RULES)
        chosen = await store.prompts.choose_for_files(
            claimed.id, files_round=waiting.files_round, choice=FilesChoice.WITHOUT, actor=ALICE
        )
        assert chosen is not None
        again = await store.prompts.claim_next(session.id)
    assert again is not None and (again.text, again.attachments) == (
        "why is this broken?",
        (photo,),
    )


# --- the indexes ---------------------------------------------------------------------------

TELEGRAM_CHAT2 = ConversationRef(platform="telegram", space=None, channel="chat2")


async def many_closed(store: Store, clock: SetClock, count: int) -> None:
    """``count`` closed requests (written straight into the tables: a bench's ledger), and
    one still pending."""
    session, epoch = await running_session(store)
    opened = await store.interactions.create(session.id, epoch, approval("codex:open"))
    assert opened.interaction.state is InteractionState.PENDING

    def fill(conn: Conn) -> None:
        for n in range(count):
            at = (NOW - timedelta(minutes=count - n)).isoformat(timespec="microseconds")
            conn.execute(
                "INSERT INTO interactions (id, session_id, runtime_epoch, native_key, kind,"
                " title, summary, actions_json, questions_json, state, version, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, 'approval', 't', 's', '[]', '[]',"
                " 'resolved', 3, ?, ?)",
                (f"closed{n:06d}", session.id, epoch, f"k{n}", at, at),
            )
        conn.execute("ANALYZE")

    await store.writer.write(fill)


def plan_of(store: Store, conn: Conn, sql: str, params: tuple[Any, ...]) -> str:
    if store.path is not None:
        found = fetch_all(conn, f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(row["detail"]) for row in found)
    found = fetch_all(conn, f"EXPLAIN {sql}", params)
    return "\n".join(str(next(iter(dict(row).values()))) for row in found)


async def test_the_card_a_reply_names_is_found_among_the_copies_sent_by_index(
    ledger: PgTarget | None, tmp_path: Path
) -> None:
    """A reply to a card names its message: the copy is found by the index of the copies
    sent (migration 29), which a copy not sent yet is not in."""
    clock = SetClock(NOW)
    async with open_store(ledger, tmp_path / "data", clock=clock) as store:
        await many_closed(store, clock, 3000)

        def copies(conn: Conn) -> None:
            for n in range(3000):
                sent = n % 2 == 0
                conn.execute(
                    "INSERT INTO interaction_messages (interaction_id, platform, space, channel,"
                    " thread, message_ref, state, rendered_version, updated_at)"
                    " VALUES (?, 'telegram', '', ?, '', ?, ?, 3, ?)",
                    (
                        f"closed{n:06d}",
                        f"chat{n % 7}",
                        f"{n}" if sent else None,
                        "sent" if sent else "pending",
                        NOW.isoformat(timespec="microseconds"),
                    ),
                )
            conn.execute("ANALYZE")

        await store.writer.write(copies)
        shown_by = (
            f"SELECT {_COLUMNS} FROM interaction_messages m WHERE m.platform = ?"
            " AND m.space = ? AND m.channel = ? AND m.thread = ? AND m.message_ref = ?"
            " ORDER BY m.id DESC LIMIT 1"
        )
        plan = await store.writer.read(
            lambda conn: plan_of(store, conn, shown_by, ("telegram", "", "chat2", "", "2004"))
        )
        found = await store.cards.shown_by(TELEGRAM_CHAT2, "2004")

        def partial(conn: Conn) -> bool:
            if store.path is not None:
                rows = fetch_all(conn, "PRAGMA index_list(interaction_messages)", ())
                return any(r["name"] == "interaction_messages_ref" and r["partial"] for r in rows)
            rows = fetch_all(
                conn,
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'interaction_messages_ref'",
                (),
            )
            return "WHERE (message_ref IS NOT NULL)" in str(rows[0]["indexdef"])

        only_sent = await store.writer.read(partial)
    assert found is not None and found.interaction_id == "closed002004"
    assert only_sent
    if store.path is not None:
        assert plan.splitlines()[0].startswith(
            "SEARCH m USING INDEX interaction_messages_ref (platform=? AND space=? AND"
        ), plan
    else:
        assert "interaction_messages_ref" in plan, plan
        assert "Seq Scan" not in plan, plan


async def test_the_consoles_first_page_and_pending_are_read_by_index(
    ledger: PgTarget | None, tmp_path: Path
) -> None:
    from gateway.store.interaction_rows import IS_CLOSED, IS_LIVE, SELECT_INTERACTION

    clock = SetClock(NOW)
    async with open_store(ledger, tmp_path / "data", clock=clock) as store:
        await many_closed(store, clock, 3000)
        first_page = (
            f"{SELECT_INTERACTION} WHERE {IS_CLOSED} ORDER BY i.created_at DESC, i.id DESC LIMIT ?"
        )
        pending = (
            f"{SELECT_INTERACTION} WHERE {IS_LIVE}"
            " AND (CAST(? AS TEXT) IS NULL OR i.session_id = ?) ORDER BY i.created_at, i.id"
        )

        def plans(conn: Conn) -> tuple[str, str]:
            return (
                plan_of(store, conn, first_page, (50,)),
                plan_of(store, conn, pending, (None, None)),
            )

        page_plan, pending_plan = await store.writer.read(plans)
        # the pages' reads still answer as they did
        live, closed = await store.interactions.list_open_and_closed(closed_limit=50)
    assert [i.native_key for i in live] == ["codex:open"]
    assert [i.id for i in closed][:2] == ["closed002999", "closed002998"]
    if store.path is not None:
        # the newest first, straight off the index: no scan and sort of the whole table (a
        # TEMP B-TREE further down orders one request's votes)
        assert page_plan.splitlines()[0] == "SCAN i USING INDEX interactions_created", page_plan
        assert pending_plan.splitlines()[0] == "SCAN i USING INDEX interactions_live", pending_plan
    else:
        assert "Index Scan Backward using interactions_created" in page_plan, page_plan
        assert "interactions_live" in pending_plan, pending_plan
        assert "Seq Scan on interactions i" not in page_plan + pending_plan


def test_the_states_the_indexes_spell_are_the_live_states() -> None:
    """The partial indexes and the queries that read them spell a request's liveness as
    equalities (gateway/store/interaction_rows.py): the states named are the live ones."""
    from gateway.interactions.machine import LIVE_STATES
    from gateway.store.interaction_rows import IS_CLOSED, IS_LIVE

    named = {InteractionState(s) for s in re.findall(r"i\.state = '(\w+)'", IS_LIVE)}
    excluded = {InteractionState(s) for s in re.findall(r"i\.state <> '(\w+)'", IS_CLOSED)}
    assert named == excluded == LIVE_STATES


async def test_pruning_finds_what_it_prunes_by_index(
    ledger: PgTarget | None, tmp_path: Path
) -> None:
    """Pruning's two questions about requests (whose details go, which go whole) read the
    partial indexes of closed requests by age, not the whole table."""
    from gateway.store.retention import _DETAILS, _INTERACTIONS

    clock = SetClock(NOW)
    async with open_store(ledger, tmp_path / "data", clock=clock) as store:
        await many_closed(store, clock, 3000)
        old = (NOW - timedelta(minutes=2900)).isoformat(timespec="microseconds")

        def plans(conn: Conn) -> tuple[str, str]:
            return (
                plan_of(store, conn, f"SELECT i.id {_DETAILS} LIMIT ?", (old, old, old, 100)),
                plan_of(store, conn, f"SELECT i.id {_INTERACTIONS} LIMIT ?", (old, old, 100)),
            )

        details_plan, whole_plan = await store.writer.read(plans)
    if store.path is not None:
        assert details_plan.splitlines()[0] == (
            "SEARCH i USING INDEX interactions_detail_kept (updated_at<?)"
        ), details_plan
        assert whole_plan.splitlines()[0] == (
            "SEARCH i USING INDEX interactions_closed (updated_at<?)"
        ), whole_plan
    else:
        assert "interactions_detail_kept" in details_plan, details_plan
        assert "interactions_closed" in whole_plan, whole_plan
        assert "Seq Scan on interactions i" not in details_plan + whole_plan


async def test_each_hosts_config_in_force_is_found_past_any_number_of_entries(
    ledger: PgTarget | None, tmp_path: Path
) -> None:
    """/status on a shared ledger compares the newest ``config.in_force`` of each live host:
    host "a" started long ago and 600 reloads of host "b" came since (the compare read the
    500 newest entries), among a ledger's other entries; found by index, not by a walk."""
    from gateway.store.audit import _NEWEST_IN_FORCE

    clock = SetClock(NOW)
    async with open_store(ledger, tmp_path / "data", clock=clock) as store:
        event = "config.in_force"
        await store.audit.record(event, actor="gateway", details={"host": "a", "config_hash": "A"})

        def reloads(conn: Conn) -> None:
            for n in range(600):
                store.writer.audit(conn, event, details={"host": "b", "config_hash": f"B{n}"})
                for _ in range(10):  # the approvals between two reloads
                    store.writer.audit(conn, "interaction.decided", actor="telegram:100")
            conn.execute("ANALYZE")

        await store.writer.write(reloads)
        newest = await store.audit.newest_in_force({"a", "b", "c"})
        plan = await store.writer.read(
            lambda conn: plan_of(store, conn, f"{_NEWEST_IN_FORCE} LIMIT 1", ("a",))
        )
    assert {host: entry.details["config_hash"] for host, entry in newest.items()} == {
        "a": "A",
        "b": "B599",
    }
    assert "audit_config_in_force" in plan, plan


async def test_the_exports_schedule_changes_are_found_among_the_audits_entries_by_index(
    ledger: PgTarget | None, tmp_path: Path
) -> None:
    """The audit export lists a year's schedule changes: read from the partial index of the
    schedule events (migration 31), not from a walk through every approval's entries."""
    from gateway.store.audit_export import _SCHEDULE_CHANGES, SCHEDULE_CHANGES_SINCE

    clock = SetClock(NOW)
    async with open_store(ledger, tmp_path / "data", clock=clock) as store:

        def entries(conn: Conn) -> None:
            for n in range(3000):
                store.writer.audit(conn, "interaction.decided", actor="telegram:100")
                if n % 500 == 0:
                    store.writer.audit(conn, "schedule.paused", details={"schedule": n})
            conn.execute("ANALYZE")

        await store.writer.write(entries)
        changes = SCHEDULE_CHANGES_SINCE
        since = (NOW - timedelta(days=365)).isoformat(timespec="microseconds")
        plan = await store.writer.read(
            lambda conn: plan_of(store, conn, changes, (*_SCHEDULE_CHANGES, since))
        )
        found = await store.writer.read(
            lambda conn: fetch_all(conn, changes, (*_SCHEDULE_CHANGES, since))
        )
    assert [json.loads(row["details_json"])["schedule"] for row in found] == [
        0, 500, 1000, 1500, 2000, 2500,
    ]  # fmt: skip
    assert "audit_schedule_changes" in plan, plan


# --- the command ---------------------------------------------------------------------------


def config_file(tmp_path: Path, data_dir: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    path = tmp_path / "gateway.toml"
    path.write_text(
        f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}

[gateway.retention]
text_days = 30
audit_days = 365
batch_rows = 1

[projects.demo]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"

[projects.demo.auth.memory]
allow_from = ["alice"]

[platforms.memory]
"""
    )
    return path


def cli(*args: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


async def test_prune_dry_run_says_what_would_go_and_prune_does_it(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    clock = SetClock(now)
    data_dir = tmp_path / "data"
    async with Store.open(data_dir, clock=clock) as store:
        old = await story(store, clock, now - timedelta(days=400), prompt="old")
        middle = await story(store, clock, now - timedelta(days=100), prompt="middle")
        await story(store, clock, now - timedelta(days=1), prompt="new")
    config = config_file(tmp_path, data_dir)
    async with Store.open(data_dir) as store:
        before = await rows(store)

    said = cli("prune", "--config", str(config), "--dry-run")
    assert said.splitlines() == [
        "Would prune (texts older than 30 days, the audit older than 365 days):",
        "  prompt texts:       2",
        "  turn timeline text: 2 turns",
        "  request details:    1",
        "  interactions:       1 (with decisions, votes, cards, audit)",
        "  other audit entries: 0",
    ]
    async with Store.open(data_dir) as store:
        assert await rows(store) == before

    said = cli("prune", "--config", str(config))
    assert said.splitlines()[0] == (
        "Pruned (texts older than 30 days, the audit older than 365 days):"
    )
    assert said.splitlines()[1:] == [
        "  prompt texts:       2",
        "  turn timeline text: 2 turns",
        "  request details:    1",
        "  interactions:       1 (with decisions, votes, cards, audit)",
        "  other audit entries: 0",
    ]
    assert "0" in cli("prune", "--config", str(config), "--dry-run").splitlines()[1]

    since = (now - timedelta(days=500)).date().isoformat()
    exported = [
        json.loads(line)
        for line in cli("audit", "--data-dir", str(data_dir), "--since", since).splitlines()
    ]
    by_id = {record["interaction"]: record for record in exported}
    assert old.interaction_id not in by_id
    record = by_id[middle.interaction_id]
    assert (record["asked_by"], record["decided_by"], record["decision"]) == (
        "telegram:100",
        ALICE.key(),
        "accept",
    )
    assert record["delivered"] == "ok" and record["resolved"] == "answered"


# --- a click on a pruned card ----------------------------------------------------------------


class Ahead:
    """The gateway's injected clock: ``days`` ahead of the wall clock, moving with it."""

    def __init__(self, days: float) -> None:
        self.ahead = timedelta(days=days)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.ahead


async def test_a_click_on_a_pruned_card_is_too_old_and_not_forged(tmp_path: Path) -> None:
    from gateway.store.retention import rules_of
    from tests.gateway_harness import ALICE as MEMORY_ALICE
    from tests.gateway_harness import ROOM
    from tests.scripted_gateway import open_card, scripted_config, scripted_gateway

    config = scripted_config(tmp_path, fast=ExpiryPolicy())
    async with scripted_gateway(config) as (gw, _):
        asked = await open_card(gw, ROOM, "approve")
        ack = await gw.memory.click(ROOM, MEMORY_ALICE, asked.token("Approve"))
        assert ack.accepted, ack
    # a year and more later, after the gateway pruned its ledger
    async with scripted_gateway(config, clock=Ahead(400)) as (gw, _):
        store = gw.gateway.store
        pruned = await store.retention.prune(rules_of(config.gateway.retention))
        assert pruned is not None and pruned.interactions == 1
        assert await store.interactions.get(asked.interaction.id) is None
        for press in (gw.memory.click, gw.memory.open_form):  # a button, a form's pre-check
            refused = await press(ROOM, MEMORY_ALICE, asked.token("Deny"))
            assert (refused.accepted, refused.text) == (
                False,
                "This request is too old: its record is no longer kept.",
            )
    # the pre-check's refusal is audited after its answer: read once the gateway stopped
    async with Store.open(config.gateway.data_dir) as store:
        entries = await store.audit.entries(event="click.rejected")
    assert [(e.interaction_id, e.details["reason"]) for e in entries] == [
        (asked.interaction.id, "too_old")
    ] * 2


async def test_one_host_prunes_a_shared_ledger_at_a_time(
    ledger: PgTarget | None, tmp_path: Path
) -> None:
    if ledger is None:
        pytest.skip("a SQLite ledger has one host: no lease")
    from gateway.store.retention import LEASE

    clock = SetClock(NOW)
    async with open_store(ledger, tmp_path / "data", clock=clock) as store:
        old = await story(store, clock, NOW - timedelta(days=400), prompt="p")
        clock.at = NOW

        def other_host_prunes(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO leases (name, holder, fence, expires_at)"
                " VALUES (?, 'host-b', 7, now() + make_interval(secs => 60))",
                (LEASE,),
            )

        await store.writer.write(other_host_prunes)
        assert await store.retention.prune(RULES, holder="host-a") is None
        assert await store.interactions.get(old.interaction_id) is not None

        def it_lapses(conn: Conn) -> None:
            conn.execute("UPDATE leases SET expires_at = now() - make_interval(secs => 1)")

        await store.writer.write(it_lapses)
        pruned = await store.retention.prune(RULES, holder="host-a")
        assert pruned is not None and pruned.interactions == 1

        def lease_row(conn: Conn) -> list[Any]:
            return fetch_all(
                conn,
                "SELECT holder, fence, expires_at < now() AS lapsed FROM leases WHERE name = ?",
                (LEASE,),
            )

        [row] = await store.writer.read(lease_row)
    # taken with a new fence, and given back at the end (lapsed: the next host may take it)
    assert (row["holder"], row["fence"], row["lapsed"]) == ("host-a", 8, True)


async def test_the_gateway_prunes_in_the_background(tmp_path: Path) -> None:
    from tests.gateway_harness import ALICE as MEMORY_ALICE
    from tests.gateway_harness import ROOM
    from tests.scripted_gateway import open_card, scripted_config, scripted_gateway

    config = scripted_config(tmp_path, fast=ExpiryPolicy())
    async with scripted_gateway(config) as (gw, _):
        asked = await open_card(gw, ROOM, "approve")
        assert (await gw.memory.click(ROOM, MEMORY_ALICE, asked.token("Approve"))).accepted
    often = config.gateway.model_copy(
        update={"retention": config.gateway.retention.model_copy(update={"every_minutes": 0.001})}
    )
    later = config.model_copy(update={"gateway": often})
    async with scripted_gateway(later, clock=Ahead(400)) as (gw, _):
        await asyncio.wait_for(gw.gateway.pruned.wait(), 30)
        assert gw.gateway.last_prune is not None  # the round's counts (a later one's: zero)
        store = gw.gateway.store
        assert await store.interactions.get(asked.interaction.id) is None
        turn = await store.turns.get(asked.interaction.turn_id or 0)
        assert turn is not None and turn.prompt_id is not None  # the skeleton stays
        assert await prompt_text(store, turn.prompt_id) == ""  # "approve", emptied


# --- readers that never wait behind the writer ---------------------------------------------


async def test_pages_pending_and_the_audit_export_answer_while_a_write_is_held(
    ledger: PgTarget | None, tmp_path: Path
) -> None:
    """A write that takes its time (PostgreSQL: held open on a writer's thread; SQLite: waiting
    for the lock another process holds, as an ``agent-gateway`` command may): the console's
    first page, its timeline, ``/pending`` and the audit export answer meanwhile, several at
    once, and show what was committed before it."""
    import threading

    clock = SetClock(NOW)
    async with open_store(ledger, tmp_path / "data", clock=clock) as store:
        done = await story(store, clock, NOW - timedelta(days=1), prompt="p")
        session, epoch = await running_session(store)
        waiting = (await store.interactions.create(session.id, epoch, approval())).interaction
        release = threading.Event()
        holding = threading.Event()

        def slow_write(conn: Conn) -> None:
            conn.execute("UPDATE sessions SET name = 'held' WHERE id = ?", (session.id,))
            holding.set()
            release.wait(30)

        def name_it(conn: Conn) -> None:
            conn.execute("UPDATE sessions SET name = 'held' WHERE id = ?", (session.id,))

        other = None
        if ledger is None:  # another process's connection holds SQLite's write lock
            other = sqlite3.connect(tmp_path / "data" / DATABASE_FILE, isolation_level=None)
            other.execute("BEGIN IMMEDIATE")
        async with asyncio.TaskGroup() as tasks:
            held = tasks.create_task(store.writer.write(name_it if other else slow_write))
            if other is None:
                await asyncio.to_thread(holding.wait, 30)
            try:
                async with asyncio.timeout(10):
                    page, pending, turns, export = await asyncio.gather(
                        store.interactions.list_open_and_closed(closed_limit=50),
                        store.interactions.list_pending_view(session.id),
                        store.timeline.of_session(done.session_id),
                        audit_records(store, NOW - timedelta(days=30), None),
                    )
                assert not held.done()  # all of it answered while the write was held
            finally:
                release.set()
                if other is not None:
                    other.execute("ROLLBACK")
                    other.close()
        live, closed = page
        assert (await store.sessions.get(session.id)).name == "held"  # then it was written
    assert [i.id for i in live] == [waiting.id] and [i.id for i in closed] == [done.interaction_id]
    assert [i.id for i in pending] == [waiting.id]
    assert [t.prompt.text for t in turns if t.prompt] == ["p"]
    assert {r["interaction"] for r in export} == {done.interaction_id, waiting.id}
