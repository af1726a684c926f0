"""What the transcript recorders in ``scripts/record_*_transcripts.py`` share.

A recorder runs scenarios against a real agent binary and the fake model, prints what a
person would notice as :func:`check` lines, and writes a :class:`Transcript`: one JSON object
a line, ``{"t": seconds since the scenario began, "dir": ">>" (to the agent) | "<<" (from it)
| "--" (the recorder's own note), "msg": ...}``, with real paths replaced by placeholders.
``tests/transcript_replay.py`` and ``tests/claude_replay.py`` read them back.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ScenarioFailed", "Transcript", "check"]


class ScenarioFailed(Exception):
    """The binary did not behave as the scenario expects (nothing is written)."""


def check(condition: bool, what: str) -> None:
    print(f"    {'ok ' if condition else 'BAD'} {what}")
    if not condition:
        raise ScenarioFailed(what)


@dataclass
class Transcript:
    substitutions: list[tuple[str, str]]  # (real path, placeholder), longest first
    t0: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)

    def add(self, direction: str, msg: Any) -> None:
        text = json.dumps(msg)
        for real, placeholder in self.substitutions:
            text = text.replace(real, placeholder)
        record = {"t": round(time.monotonic() - self.t0, 4), "dir": direction}
        self.lines.append(json.dumps(record)[:-1] + f', "msg": {text}}}')

    def tap(self, direction: str, line: bytes) -> None:
        """A :data:`tests.agent_driver.Tap`: every JSON line in and out goes in."""
        self.add(direction, json.loads(line))

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(self.lines) + "\n", encoding="utf-8")
