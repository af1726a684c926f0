"""Crash points: a deliberate fault-injection seam for the durability tests.

The ledger promises that a decision is committed before it is written to the agent, and that
a crash between any commit and the write that follows never delivers twice nor loses a
decision silently. The only honest test of that is a real process death at that exact point,
so the engine calls :func:`crashpoint` there. It does nothing unless the environment variable
``AGENT_GATEWAY_CRASH_AT`` names the point, in which case the process ends at once with
``os._exit`` (no cleanup, no flush: exactly what SIGKILL would leave behind).
"""

from __future__ import annotations

import os

__all__ = ["CRASHPOINTS", "CRASH_EXIT_CODE", "crashpoint"]

CRASH_EXIT_CODE = 86
CRASHPOINTS = frozenset(
    {
        "decision_committed",  # the decision is in the ledger, nothing written to the agent
        "response_written",  # the response line reached the agent, delivery not recorded
        "delivery_recorded",  # delivery recorded, the agent's confirmation not yet seen
        "expiry_committed",  # an expiry is in the ledger, its "timed out" not yet written
        "schedule_claimed",  # a scheduled run claimed (its row in), its session not yet made
    }
)

_ARMED = frozenset(filter(None, os.environ.get("AGENT_GATEWAY_CRASH_AT", "").split(",")))


def crashpoint(name: str) -> None:
    if name not in CRASHPOINTS:
        raise ValueError(f"unknown crash point {name!r}")
    if name in _ARMED:
        os._exit(CRASH_EXIT_CODE)
