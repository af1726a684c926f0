"""The SQLite ledger (DESIGN.md, "Storage"): ``async with Store.open(data_dir) as store``.

Modules: ``store`` (opening), ``database`` (the connection, transactions, clock),
``datadir`` (0700, not inside a work dir, one gateway at a time: ``hold_data_dir``),
``clicks`` (what a click is checked against, in one read, on either connection),
``migrations`` (the schema), ``codec`` (JSON columns, secret redaction), ``records`` (what is
returned), and one module per concern: ``sessions``, ``turns``, ``timeline`` (each turn's
text, tool lines and requests, in order), ``prompts``, ``ledger`` (interactions), ``cards``,
``audit``.
"""

from __future__ import annotations

from gateway.store.audit import AuditLog
from gateway.store.cards import CardCopies
from gateway.store.clicks import ClickView, ClickViews
from gateway.store.codec import SECRET_MARKER
from gateway.store.database import Clock, utc_now
from gateway.store.datadir import LOCK_FILE, check_data_dir, hold_data_dir, prepare_data_dir
from gateway.store.ledger import InteractionLedger
from gateway.store.migrations import MIGRATIONS, Migration
from gateway.store.prompts import PromptQueue
from gateway.store.records import (
    AuditEntry,
    CardCopy,
    CopyState,
    EnqueueOutcome,
    EnqueueResult,
    EpochRecord,
    Grant,
    InteractionUpdate,
    Opened,
    PromptRecord,
    PromptState,
    SessionRecord,
    TimelineEntry,
    TurnRecord,
    TurnTimeline,
)
from gateway.store.sessions import SessionLedger
from gateway.store.store import DATABASE_FILE, Store
from gateway.store.timeline import TimelineLedger
from gateway.store.turns import TurnLedger

__all__ = [
    "DATABASE_FILE",
    "LOCK_FILE",
    "MIGRATIONS",
    "SECRET_MARKER",
    "AuditEntry",
    "AuditLog",
    "CardCopies",
    "CardCopy",
    "ClickView",
    "ClickViews",
    "Clock",
    "CopyState",
    "EnqueueOutcome",
    "EnqueueResult",
    "EpochRecord",
    "Grant",
    "InteractionLedger",
    "InteractionUpdate",
    "Migration",
    "Opened",
    "PromptQueue",
    "PromptRecord",
    "PromptState",
    "SessionLedger",
    "SessionRecord",
    "Store",
    "TimelineEntry",
    "TimelineLedger",
    "TurnLedger",
    "TurnRecord",
    "TurnTimeline",
    "check_data_dir",
    "hold_data_dir",
    "prepare_data_dir",
    "utc_now",
]
