"""How every surface writes a time, a duration and a quoted name: one style everywhere.

A card's status line, the console's card timeline and the notices the runner sends said the
same things in different ways ("at 09:17 UTC" and "09:17:03 UTC", "after 2 min" and "after
95 s", "Allow once" in straight quotes here and curly ones there). They all write through
these helpers now. Pure.

- A clock time is hours and minutes in UTC: "09:17 UTC" (the gateway's clock is UTC; a
  platform that can show each reader their own local time may do so from the datetime).
- A duration is seconds under a minute ("0.5 s", "42 s"), then minutes and seconds ("1 min
  35 s"), then minutes ("12 min"), then hours ("2 h 5 min").
- A count is said with its noun, singular for one: "1 line", "20,000 characters"; an
  attached file's notice says how long it is in those words.
- A name a person chose or reads on a button (a label, a card's title) is in straight double
  quotes; a command is in backticks (Markdown), only where the text is rendered as Markdown
  (the turn's tool lines), never on a card, whose text is drawn as plain text.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = [
    "attached_notice",
    "clock_time",
    "count",
    "duration",
    "file_size",
    "line_count",
    "named",
    "one_line",
    "platform_title",
    "quoted",
]


def clock_time(at: datetime) -> str:
    """ "09:17 UTC"."""
    utc = at if at.tzinfo is UTC else at.astimezone(UTC)
    return f"{utc.hour:02d}:{utc.minute:02d} UTC"  # strftime costs several times this


def duration(seconds: float) -> str:
    """ "0.5 s", "42 s", "1 min 35 s", "12 min", "2 h 5 min"."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f}".removesuffix(".0") + " s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    if minutes < 10:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def quoted(text: str) -> str:
    """A name in straight double quotes: "Allow once"."""
    return f'"{text}"'


def one_line(name: str) -> str:
    """A name as sent, on one line (a name cannot add lines of its own)."""
    return "".join(" " if ch.isspace() or not ch.isprintable() else ch for ch in name)


def named(name: str) -> str:
    """A file's name or path (or a cron line) as a code span on one line: shown as written
    where the platform renders Markdown (``__init__.py`` is not made bold, a ``*`` not taken
    for emphasis). Its backticks are shown as quotes, which cannot end the span."""
    return "`" + one_line(name).replace("`", "'") + "`"


_PLATFORM_TITLES = {"telegram": "Telegram", "slack": "Slack", "discord": "Discord"}


def platform_title(name: str) -> str:
    """A platform as its people call it: "Telegram" for ``telegram``; "the console"."""
    if name == "console":
        return "the console"
    return _PLATFORM_TITLES.get(name, name)


def count(number: int, noun: str) -> str:
    """ "1 line", "2 lines", "20,000 characters": the noun singular for one."""
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


def line_count(content: str) -> int:
    """How many lines a person sees in ``content`` (a last line without its newline counts)."""
    return content.count("\n") + (0 if content.endswith("\n") or not content else 1)


def attached_notice(what: str, name: str, content: str) -> str:
    """What a card says in place of what did not fit: "The full command (1 line, 20,000
    characters) is attached as command.sh."."""
    size = f"{count(line_count(content), 'line')}, {count(len(content), 'character')}"
    return f"The full {what} ({size}) is attached as {name}."


def file_size(size: int) -> str:
    """ "812 bytes", "12.0 KiB", "3.4 MiB": a file's size as a person reads it."""
    if size < 1024:
        return count(size, "byte")
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"
