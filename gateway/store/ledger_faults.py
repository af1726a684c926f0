"""Ledger faults: a deliberate fault-injection seam for the tests of what a ledger error does.

Like the crash points (:mod:`gateway.sessions.faults`), nothing here does anything unless a
test asks: through the environment, ``AGENT_GATEWAY_LEDGER_FAULTS`` (read when a store
opens), or by setting :attr:`gateway.store.database.Database.faults` on a store it holds.
A fault names a store call by its label (the store method, as :func:`~gateway.store.
trip_tally.label_of` gives it: ``PromptQueue.claim_next``; ``*`` for every call) and which
of its calls (counted from 1), and what happens to it:

- ``fail``: refused before it runs, as a connection lost before its statements were sent
  (nothing was written);
- ``cut``: run and committed, then its answer lost, as a connection cut after its COMMIT was
  sent (what it wrote is in the ledger; the caller cannot know it);
- ``hang``: no answer until the call's deadline (PostgreSQL's client deadline; with none,
  a second), then given up as the deadline gives it up (nothing was written).

Written ``LABEL#N=FAULT``, several separated by commas:
``AGENT_GATEWAY_LEDGER_FAULTS="TurnLedger.start#1=fail,*#40=cut"``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["ENVIRONMENT", "Fault", "FaultRule", "LedgerFaults"]

ENVIRONMENT = "AGENT_GATEWAY_LEDGER_FAULTS"
ANY = "*"


class Fault(StrEnum):
    FAIL = "fail"
    CUT = "cut"
    HANG = "hang"


@dataclass(frozen=True, kw_only=True, slots=True)
class FaultRule:
    label: str  # a store call's label, or "*" for every call
    nth: int  # which of its calls, from 1
    fault: Fault

    @classmethod
    def parse(cls, text: str) -> FaultRule:
        """``LABEL#N=FAULT`` (see the module); ValueError names what is wrong."""
        where, _, fault = text.strip().partition("=")
        label, _, nth = where.partition("#")
        if not label or not nth.isdigit() or int(nth) < 1:
            raise ValueError(f"a ledger fault is LABEL#N=FAULT (N from 1), not {text!r}")
        return cls(label=label, nth=int(nth), fault=Fault(fault))


@dataclass
class LedgerFaults:
    """The faults armed, and how many calls of each label (and in all) were seen."""

    rules: tuple[FaultRule, ...]
    seen: dict[str, int] = field(default_factory=dict)
    fired: list[tuple[str, Fault]] = field(default_factory=list)  # (label, fault), in order

    @classmethod
    def parse(cls, text: str) -> LedgerFaults:
        return cls(rules=tuple(FaultRule.parse(part) for part in text.split(",") if part.strip()))

    @classmethod
    def from_environment(cls) -> LedgerFaults | None:
        text = os.environ.get(ENVIRONMENT, "")
        return cls.parse(text) if text.strip() else None

    @property
    def calls(self) -> int:
        """Every call seen."""
        return self.seen.get(ANY, 0)

    def next_call(self, label: str) -> Fault | None:
        """A call of ``label`` is about to run: the fault armed for it, if any."""
        for key in (label, ANY):
            self.seen[key] = self.seen.get(key, 0) + 1
        for rule in self.rules:
            if rule.label in (label, ANY) and self.seen[rule.label] == rule.nth:
                self.fired.append((label, rule.fault))
                return rule.fault
        return None
