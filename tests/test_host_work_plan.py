"""The safety sweep's question grows with what is open, not with a host's sessions (issue 36).

``store.host_work.of_host`` is the one read-only query an idle host's rare sweep makes. With
1,000 sessions on the host, each with its finished prompts, and only a few things open, its
plan (EXPLAIN, on SQLite and on the real PostgreSQL cluster) must start from the open rows'
indexes and look sessions up by key: no pass over the sessions, nor over the prompts. And it
still finds exactly the open work: a claimable prompt, a decided request never delivered, and
not a held prompt, one behind a prompt in flight, nor another host's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.config.ledger_url import PgTarget
from gateway.store.database import Conn, fetch_all
from gateway.store.host_work import _PASSED, _STRANDED, _WAITING
from gateway.store.store import Store
from tests.store_backends import open_store
from tests.store_helpers import running_session

SESSIONS = 1000
DONE_PER_SESSION = 5
AT = "2026-01-01T00:00:00.000000+00:00"


def prompt_row(session_id: str, n: int, state: str, *, held: int = 0) -> tuple[Any, ...]:
    return (session_id, f"{session_id}-{n}", state, n, held, AT, AT)


def plan_of(store: Store, conn: Conn, sql: str, params: tuple[Any, ...]) -> str:
    if store.path is not None:
        found = fetch_all(conn, f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(row["detail"]) for row in found)
    found = fetch_all(conn, f"EXPLAIN {sql}", params)
    return "\n".join(str(next(iter(dict(row).values()))) for row in found)


async def fill(store: Store, host: str | None, interaction_session: str, epoch: int) -> None:
    def write(conn: Conn) -> None:
        def executemany(sql: str, rows: list[tuple[Any, ...]]) -> None:
            for row in rows:  # PgConn has execute only
                conn.execute(sql, row)

        sessions = [f"idle{n:05d}" for n in range(SESSIONS)]
        executemany(
            "INSERT INTO sessions (id, project, agent_kind, created_at, host)"
            " VALUES (?, 'demo', 'codex-app-server', ?, ?)",
            [(s, AT, host) for s in sessions]
            + [(s, AT, host) for s in ("claims", "held", "behind")]
            + [("elsewhere", AT, "other-host")],
        )
        rows = [prompt_row(s, n, "done") for s in sessions for n in range(DONE_PER_SESSION)]
        rows += [
            prompt_row("claims", 1, "done"),
            prompt_row("claims", 2, "queued"),
            prompt_row("held", 1, "queued", held=1),
            prompt_row("behind", 1, "in_flight"),
            prompt_row("behind", 2, "queued"),
            prompt_row("elsewhere", 1, "queued"),
        ]
        executemany(
            "INSERT INTO prompts (session_id, platform, space, channel, thread,"
            " platform_message_id, author_platform, author_user_id, author_display, text,"
            " state, position, held, created_at, updated_at)"
            " VALUES (?, 'memory', 'team', 'c', 't', ?, 'memory', 'alice', 'Alice', 'hi',"
            " ?, ?, ?, ?, ?)",
            rows,
        )
        executemany(
            "INSERT INTO interactions (id, session_id, runtime_epoch, native_key, kind,"
            " title, summary, actions_json, questions_json, state, version, created_at,"
            " updated_at) VALUES (?, ?, ?, ?, 'approval', 't', 's', '[]', '[]', ?, 3, ?, ?)",
            [
                (f"closed{n:05d}", interaction_session, epoch, f"k{n}", "resolved", AT, AT)
                for n in range(2000)
            ]
            + [("stranded1", interaction_session, epoch, "kd", "decided", AT, AT)],
        )
        conn.execute("ANALYZE")

    await store.writer.write(write)


async def test_the_sweep_reads_what_is_open_not_every_session(
    ledger: PgTarget | None, tmp_path: Path
) -> None:
    async with open_store(ledger, tmp_path / "data") as store:
        shared = store.path is None
        host = "host-a" if shared else None  # a SQLite ledger's sweep asks for every session
        session, epoch = await running_session(store)
        if host is not None:

            def own(conn: Conn) -> None:
                conn.execute("UPDATE sessions SET host = ? WHERE id = ?", (host, session.id))

            await store.writer.write(own)
        await fill(store, host, session.id, epoch)
        if not shared:
            # one host: "elsewhere" is this host's too, as every session of a SQLite ledger

            def away(conn: Conn) -> None:
                conn.execute("UPDATE prompts SET state = 'done' WHERE session_id = 'elsewhere'")

            await store.writer.write(away)

        work = await store.host_work.of_host(host)
        parts = [_STRANDED, _WAITING] + ([_PASSED] if shared else [])

        def plans(conn: Conn) -> list[str]:
            return [plan_of(store, conn, part, (host, host)) for part in parts]

        found = await store.writer.read(plans)

    assert work.stranded == (session.id,)
    assert work.waiting == ("claims",)
    assert work.passed == ()
    everything = "\n---\n".join(found)
    stranded_plan, waiting_plan = found[0], found[1]
    if not shared:
        # each part starts from an index of the open rows; sessions only by their key
        assert "USING INDEX prompts_claimable" in waiting_plan.splitlines()[0], everything
        assert stranded_plan.splitlines()[0] == "SCAN i USING INDEX interactions_live", everything
        for line in everything.splitlines():
            # the scans are of the partial indexes, which hold the live requests and the
            # claimable prompts only
            if line.strip().startswith("SCAN"):
                assert line.strip() in {
                    "SCAN i USING INDEX interactions_live",
                    "SCAN p USING INDEX prompts_claimable",
                }, everything
            if line.strip().startswith("SEARCH s "):
                assert line.strip().endswith("(id=?)"), everything
    else:
        assert "prompts_claimable" in waiting_plan, everything
        assert "interactions_live" in stranded_plan, everything
        assert "Seq Scan on sessions" not in everything, everything
        assert "Seq Scan on prompts" not in everything, everything
        assert "Seq Scan on interactions" not in everything, everything
