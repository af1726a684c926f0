"""What a person is told when the agent process ends unexpectedly (pure).

The notice says what happened and what to do next, in a person's words; the agent's last
lines on stderr follow, labelled as its last output, never as the cause: they are often
startup noise that has nothing to do with the end (Codex's "could not find bubblewrap" is
an ERROR line printed at every start on a machine without it). So the tail is cleaned
before it is shown:

- terminal escape sequences (colours, cursor moves, titles) and other control characters
  are taken out, and a line redrawn with carriage returns keeps only what was drawn last;
- the timestamp in front of a tracing line goes (the level and the message stay);
- lines known to be unrelated (:data:`UNRELATED`) are left out;
- at most :data:`TAIL_LINES` lines are kept, each cut at :data:`LINE_CHARS` characters.

Commands are named as the gateway names them (``/new``); each platform spells them its own
way when the notice is sent (gateway.render.commands.spell_commands).
"""

from __future__ import annotations

import re

from gateway.render.queue_notes import held_note

__all__ = ["LINE_CHARS", "TAIL_LINES", "UNRELATED", "exit_notice", "last_output"]

TAIL_LINES = 5
LINE_CHARS = 300

# Lines an agent prints at start, whatever then happens: never the reason it ended.
UNRELATED = (
    re.compile(r"could not find bubblewrap", re.IGNORECASE),  # codex 0.171, no bwrap on PATH
    re.compile(r"could not create PATH aliases", re.IGNORECASE),  # codex under a temp dir
    re.compile(r"curated plugin", re.IGNORECASE),  # codex's plugin sync, offline
)

# ECMA-48: CSI (ESC [ or the 8-bit CSI), OSC (ended by BEL or ST), and the two-byte escapes
_ESCAPE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]"
)
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_TRACE_TIME = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+Z?\s+")


def _clean(line: str) -> str:
    line = line.rstrip("\r").rsplit("\r", 1)[-1]  # a redrawn line: what was drawn last
    line = _ESCAPE.sub("", line).replace("\t", " ")
    line = _CONTROL.sub("", line).strip()
    line = _TRACE_TIME.sub("", line)
    if len(line) > LINE_CHARS:
        line = line[: LINE_CHARS - 1] + "…"
    return line


def last_output(stderr_tail: str) -> list[str]:
    """The last lines of ``stderr_tail`` worth showing a person, cleaned (module docstring)."""
    kept = []
    for raw in stderr_tail.split("\n"):
        line = _clean(raw)
        if line and not any(pattern.search(line) for pattern in UNRELATED):
            kept.append(line)
    return kept[-TAIL_LINES:]


def _fenced(lines: list[str]) -> str:
    body = "\n".join(lines)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{body}\n{fence}"


def exit_notice(description: str, stderr_tail: str, *, turn_cut: bool, held: int = 0) -> str:
    """The notice for an agent process that ended on its own (``description``: how, in
    words, e.g. "killed by a signal"); ``turn_cut``: a turn was running and is cut short;
    ``held``: how many messages queued behind it are held (gateway/render/queue_notes.py)."""
    text = f"⚠ The agent process ended unexpectedly ({description})."
    if turn_cut:
        text += " Its answer to your last message is cut short."
    text += (
        " Your next message starts it again and carries on the same conversation;"
        " /new starts a fresh one."
    )
    if held:
        text += " " + held_note(held, typed_now=False)
    output = last_output(stderr_tail)
    if output:
        text += "\n\nThe agent's last output (it may not say why):\n" + _fenced(output)
    return text
