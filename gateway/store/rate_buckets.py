"""Rate budgets in the shared ledger (issue 19, design point 7): the SQL and the budgets.

A bot's hosts each run an outbox with windows of its own (platforms/outbox.py); in front of
them, :class:`LedgerRates` keeps the bot's budget in ``rate_buckets`` (migration 14,
PostgreSQL only), a row per (platform, bot, bucket), by the database's clock:

- **take** (:data:`_TAKE`, one statement): locks the call's rows in key order (two hosts
  never lock them in opposite orders), and either appends to every counting bucket a *mark*
  (``now() + IN_FLIGHT_CAP``, or the host lease if shorter: the call is in flight, counted
  as if it returned then; a host that dies with a call in flight holds nothing past its
  lease, so the host that reaps it edits its cards at once) or, if any bucket is full or the
  lane's hold is set, takes nothing and answers how long to wait: until the oldest call that
  must leave the window has left it, or until the hold ends; while that call is still in
  flight, a whole window (it cannot leave sooner: it returns now at the earliest);
- **return** (:data:`_RETURN`, one statement for every call returned meanwhile on one bot):
  each mark is replaced by the time the call returned, by the database's clock (its now,
  less how long ago the call returned by this host's monotonic clock: the return is written
  a moment later, batched), since a window counts a call from its return, as the outbox's
  own windows do (a request slow on its way cannot land closer to the next host's than the
  limit); a 429's retry-after becomes the lane's ``hold_until``, which every host's next
  take waits out. Returns ride in the next take's round trip (a pipeline: one transaction
  that locks every row it touches first, in one order, :data:`_LOCK_ALL`); those no take
  carried within :data:`RETURN_DELAY` (far less than any window), and a 429's at once, are
  written by a task of their own. So a send costs about one trip.

A row is made the first time a host meets its bucket (``INSERT ... ON CONFLICT DO
NOTHING``, then the take again), and deleted once idle for :data:`IDLE_ROW`: its last take
(``used_at``) and its hold that long past (each host's :meth:`LedgerRates.purge`, every
:data:`PURGE_EVERY`). Takes and returns go one at a time on a connection of this host's own
(never behind the ledger's writer); a take not answered in :data:`TAKE_TIMEOUT`, or any
database error, lets the call go with this host's windows alone (said in the log once per
outage), and so do the takes of the next :data:`RETRY_AFTER_LOSS` seconds (no send waits
for a ledger that is gone): a 429 then is the platform's answer, handled as one, never a
lost message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import psycopg

from gateway.config.ledger_url import PgTarget
from gateway.rate_budget import Bucket, RateBudget, Ticket
from gateway.store.leases import connect
from gateway.store.postgresql import close_quietly

__all__ = [
    "IDLE_ROW",
    "IN_FLIGHT_CAP",
    "MIN_WAIT",
    "PURGE_EVERY",
    "RETRY_AFTER_LOSS",
    "RETURN_DELAY",
    "TAKE_TIMEOUT",
    "LedgerRates",
]

log = logging.getLogger(__name__)

IN_FLIGHT_CAP = 15.0  # a call in flight longer (its host died) counts as returned then
MIN_WAIT = 0.01  # the least wait answered (a window that ends in a microsecond)
TAKE_TIMEOUT = 2.0  # a take not answered by then: this host's own windows alone
RETRY_AFTER_LOSS = 5.0  # after a failed trip, the ledger is asked again after this
RETURN_DELAY = 0.25  # a return waits this long for a take to carry it (windows are >= 1 s)
PURGE_EVERY = 600.0  # each host deletes the idle rows this often
IDLE_ROW = 3600.0  # a row with nothing counted nor held for this long (windows are <= 60 s)

_TAKE = """
WITH wanted AS (
    SELECT * FROM unnest(%(keys)s::text[], %(calls)s::int[], %(spans)s::float8[],
                         %(counts)s::bool[]) AS w(key, calls, span, counts)
), locked AS (
    SELECT key, times, hold_until FROM rate_buckets
    WHERE platform = %(platform)s AND bot = %(bot)s AND key = ANY(%(keys)s::text[])
    ORDER BY key
    FOR UPDATE
), clock AS (
    SELECT extract(epoch FROM now())::float8 AS now_s
), live AS (
    SELECT l.key, w.calls, w.span, w.counts, l.hold_until, c.now_s,
           ARRAY(SELECT t FROM unnest(l.times) AS t WHERE t > c.now_s - w.span ORDER BY t)
               AS times
    FROM locked l JOIN wanted w USING (key) CROSS JOIN clock c
), verdict AS (
    SELECT count(*) AS found, coalesce(max(greatest(
        hold_until - now_s,
        CASE WHEN NOT counts OR cardinality(times) < calls THEN 0
             WHEN times[cardinality(times) - calls + 1] > now_s THEN span
             ELSE times[cardinality(times) - calls + 1] + span - now_s
        END)), 0) AS wait
    FROM live
), taken AS (
    UPDATE rate_buckets r
    SET times = CASE WHEN live.counts THEN live.times || (live.now_s + %(cap)s)
                     ELSE live.times END,
        used_at = live.now_s
    FROM live, verdict
    WHERE verdict.wait <= 0 AND verdict.found = cardinality(%(keys)s::text[])
      AND r.platform = %(platform)s AND r.bot = %(bot)s AND r.key = live.key
    RETURNING 1
)
SELECT verdict.found, verdict.wait, (SELECT count(*) FROM taken), clock.now_s + %(cap)s
FROM verdict, clock
"""

_MAKE = """
INSERT INTO rate_buckets (platform, bot, key)
SELECT %(platform)s, %(bot)s, key FROM unnest(%(keys)s::text[]) AS key ORDER BY key
ON CONFLICT DO NOTHING
"""

_RETURN = """
WITH locked AS (
    SELECT key FROM rate_buckets
    WHERE platform = %(platform)s AND bot = %(bot)s AND key = ANY(%(keys)s::text[])
    ORDER BY key
    FOR UPDATE
), marks AS (
    SELECT * FROM unnest(%(marks)s::float8[], %(ages)s::float8[]) AS m(mark, age)
), holds AS (
    SELECT key, max(seconds) AS seconds
    FROM unnest(%(hold_keys)s::text[], %(holds)s::float8[]) AS h(key, seconds) GROUP BY key
), clock AS (
    SELECT extract(epoch FROM now())::float8 AS now_s
)
UPDATE rate_buckets r
SET times = ARRAY(SELECT coalesce((SELECT clock.now_s - min(m.age) FROM marks m WHERE m.mark = t),
                                   t)
                  FROM unnest(r.times) AS t ORDER BY 1),
    hold_until = greatest(r.hold_until, coalesce(clock.now_s + holds.seconds, 0))
FROM locked JOIN clock ON true LEFT JOIN holds USING (key)
WHERE r.platform = %(platform)s AND r.bot = %(bot)s AND r.key = locked.key
"""

# SKIP LOCKED: a purge never waits for a row a take holds (and so never deadlocks with one)
_PURGE = """
DELETE FROM rate_buckets r USING (
    SELECT platform, bot, key FROM rate_buckets
    WHERE greatest(used_at, hold_until) < extract(epoch FROM now()) - %(idle)s
    ORDER BY platform, bot, key
    FOR UPDATE SKIP LOCKED
) idle
WHERE (r.platform, r.bot, r.key) = (idle.platform, idle.bot, idle.key)
"""

# A take that carries returns: the three statements are one transaction (a pipeline sends
# one Sync, at its end), so every row they touch is locked first, in one order
_LOCK_ALL = """
SELECT 1 FROM rate_buckets r
JOIN unnest(%(platforms)s::text[], %(bots)s::text[], %(keys)s::text[]) AS w(platform, bot, key)
    USING (platform, bot, key)
ORDER BY r.platform, r.bot, r.key
FOR UPDATE OF r
"""


class LedgerRates:
    """Every bot budget of this host in the shared ledger, on one connection of its own.
    ``trips`` counts the statements sent by what they were for (the bench's figure):
    ``take`` (a token taken), ``wait`` (answered: wait), ``make`` (a bucket's row made),
    ``return`` (a batch of returns), ``purge``."""

    def __init__(
        self,
        target: PgTarget,
        *,
        take_timeout: float = TAKE_TIMEOUT,
        in_flight_cap: float = IN_FLIGHT_CAP,
    ) -> None:
        self._target = target
        self._take_timeout = take_timeout
        # a host that died with a call in flight is reaped once its lease lapsed: its marks
        # must have lapsed by then, or the reaper's edits of its cards wait for them
        self._in_flight_cap = min(in_flight_cap, IN_FLIGHT_CAP)
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()  # one statement at a time on the connection
        # (platform, bot): (ticket, 429's retry-after, monotonic time it returned)
        self._returned: dict[tuple[str, str], list[tuple[Ticket, float | None, float]]] = {}
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._down = False  # said in the log once per outage
        self._retry_at = 0.0  # monotonic: while down, not asked before then (no send waits)
        self.trips: Counter[str] = Counter()
        self.carried = 0  # returns written in a take's round trip (no trip of their own)

    async def __aenter__(self) -> LedgerRates:
        self._writer = asyncio.create_task(self._write_returns())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._writer is not None:
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
        await self.flush()  # what returned last: its marks would hold the windows longer
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    def budget(self, platform: str, bot: str) -> RateBudget:
        return _LedgerBudget(self, platform, bot)

    # --- take -----------------------------------------------------------------------------

    async def take(
        self, platform: str, bot: str, buckets: Sequence[Bucket], hold_key: str
    ) -> Ticket | float:
        rows = sorted(
            [*buckets, Bucket(key=hold_key, calls=1, seconds=0.0, counts=False)],
            key=lambda b: b.key,
        )
        if self._down and time.monotonic() < self._retry_at:
            return Ticket(keys=(), hold_key=hold_key)  # this host's own windows alone
        params = {
            "platform": platform,
            "bot": bot,
            "keys": [b.key for b in rows],
            "calls": [b.calls for b in rows],
            "spans": [b.seconds for b in rows],
            "counts": [b.counts for b in rows],
            "cap": self._in_flight_cap,
        }
        try:
            async with asyncio.timeout(self._take_timeout):
                found, wait, taken, mark = await self._one(_TAKE, params)
                if found < len(rows):  # a bucket this bot's hosts never used yet
                    await self._execute(_MAKE, params, "make")
                    found, wait, taken, mark = await self._one(_TAKE, params)
        except (psycopg.Error, TimeoutError) as exc:
            await self._lost(exc)
            return Ticket(keys=(), hold_key=hold_key)  # this host's own windows alone
        self._back()
        if taken:
            return Ticket(keys=tuple(b.key for b in buckets), hold_key=hold_key, mark=mark)
        return max(float(wait), MIN_WAIT)

    # --- return ---------------------------------------------------------------------------

    def returned(self, platform: str, bot: str, ticket: Ticket, retry_after: float | None) -> None:
        if ticket.mark is None and retry_after is None:
            return
        returned = (ticket, retry_after, time.monotonic())
        self._returned.setdefault((platform, bot), []).append(returned)
        self._wake.set()

    async def _write_returns(self) -> None:
        """Write the returns no take carried within :data:`RETURN_DELAY` (a 429's at once);
        every :data:`PURGE_EVERY` seconds, purge."""
        purge_at = time.monotonic() + PURGE_EVERY
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, purge_at - time.monotonic())):
                    await self._wake.wait()
            if self._wake.is_set():
                self._wake.clear()
                if not self._holds_waiting():
                    await asyncio.sleep(RETURN_DELAY)  # a batch: a take may carry it meanwhile
                await self.flush()
            if time.monotonic() >= purge_at:
                purge_at = time.monotonic() + PURGE_EVERY
                await self.purge()

    async def purge(self, idle: float = IDLE_ROW) -> None:
        """Delete the rows nothing was counted in nor held for ``idle`` seconds (a chat the
        bot no longer writes to); a later call in it makes its rows again."""
        try:
            async with asyncio.timeout(self._take_timeout):
                await self._execute(_PURGE, {"idle": idle}, "purge")
        except (psycopg.Error, TimeoutError) as exc:
            await self._lost(exc)

    def _holds_waiting(self) -> bool:
        return any(
            seconds is not None for returns in self._returned.values() for _, seconds, _ in returns
        )

    async def flush(self) -> None:
        """Write every return said so far (the writer does it by itself; tests and the
        close wait for it), and wait for a take that carries some."""
        for params in self._pop_returns():
            try:
                async with asyncio.timeout(self._take_timeout):
                    await self._execute(_RETURN, params, "return")
            except (psycopg.Error, TimeoutError) as exc:
                await self._lost(exc)  # the marks lapse by themselves (IN_FLIGHT_CAP)
        async with self._lock:
            pass  # the statements sent before this one are answered

    def _pop_returns(self) -> list[dict[str, Any]]:
        """The returns said so far, as one :data:`_RETURN`'s parameters per bot; forgotten
        here (whoever pops them writes them)."""
        batches, self._returned = self._returned, {}
        now = time.monotonic()
        statements = []
        for (platform, bot), returns in batches.items():
            keys = sorted({key for t, _, _ in returns for key in (*t.keys, t.hold_key)})
            held = [(t.hold_key, seconds) for t, seconds, _ in returns if seconds is not None]
            marked = [(t.mark, now - at) for t, _, at in returns if t.mark is not None]
            statements.append(
                {
                    "platform": platform,
                    "bot": bot,
                    "keys": keys,
                    "marks": [mark for mark, _ in marked],
                    "ages": [age for _, age in marked],
                    "hold_keys": [key for key, _ in held],
                    "holds": [seconds for _, seconds in held],
                }
            )
        return statements

    # --- the connection -------------------------------------------------------------------

    async def _one(self, sql: str, params: dict[str, Any]) -> tuple[int, float, int, float]:
        """A take, and before it in the same round trip (a pipeline) the returns said so
        far: they ride along instead of a trip of their own."""
        async with self._lock:
            conn = await self._connection()
            riding = self._pop_returns()
            if riding:
                rows = sorted(
                    {
                        (each["platform"], each["bot"], key)
                        for each in (*riding, params)
                        for key in each["keys"]
                    }
                )
                everything = {
                    "platforms": [row[0] for row in rows],
                    "bots": [row[1] for row in rows],
                    "keys": [row[2] for row in rows],
                }
                async with conn.pipeline():
                    await conn.execute(_LOCK_ALL, everything)
                    for returned in riding:
                        await conn.execute(_RETURN, returned)
                    cursor = await conn.execute(sql, params)
                self.carried += len(riding)
            else:
                cursor = await conn.execute(sql, params)
            row = await cursor.fetchone()
        assert row is not None
        found, wait, taken, mark = int(row[0]), float(row[1]), int(row[2]), float(row[3])
        if found == len(params["keys"]):  # else: rows to make first, counted with them
            self.trips["take" if taken else "wait"] += 1
        else:
            self.trips["make"] += 1
        return found, wait, taken, mark

    async def _execute(self, sql: str, params: dict[str, Any], kind: str) -> None:
        async with self._lock:
            conn = await self._connection()
            self.trips[kind] += 1
            await conn.execute(sql, params)

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = await connect(self._target)
        return self._conn

    async def _lost(self, exc: BaseException) -> None:
        if not self._down:
            log.warning(
                "rate budgets: the ledger did not answer (%s); this host's own pace alone",
                type(exc).__name__,
            )
            self._down = True
        self._retry_at = time.monotonic() + RETRY_AFTER_LOSS
        conn, self._conn = self._conn, None
        await close_quietly(conn)

    def _back(self) -> None:
        if self._down:
            log.info("rate budgets: shared again through the ledger")
            self._down = False


class _LedgerBudget:
    """One bot's budget on one platform, in :class:`LedgerRates`."""

    def __init__(self, rates: LedgerRates, platform: str, bot: str) -> None:
        self._rates = rates
        self._platform = platform
        self._bot = bot

    async def take(self, buckets: Sequence[Bucket], hold_key: str) -> Ticket | float:
        return await self._rates.take(self._platform, self._bot, buckets, hold_key)

    def returned(self, ticket: Ticket, *, retry_after: float | None = None) -> None:
        self._rates.returned(self._platform, self._bot, ticket, retry_after)
