"""What the gateway says about the prompt queue after /stop or a restart; pure.

The rule (DESIGN.md, control channel; docs/decisions.md): /stop holds the messages queued
before it, and what a person types afterwards runs next. The held messages wait, in order,
until /resume (which sends them after what was typed since) or /clear (which drops them). A
person is told so in one line, with commands named as ``/resume`` and ``/clear``: each
platform's outlet spells them its own way (``commands.spell_commands``).
"""

from __future__ import annotations

__all__ = ["held_note", "stopped_notice"]


def _messages(count: int) -> str:
    return "1 earlier message is held" if count == 1 else f"{count} earlier messages are held"


def held_note(count: int, *, typed_now: bool) -> str:
    """One line on the ``count`` held messages. ``typed_now``: said under a message typed
    while they are held (it runs first); else after /stop or a restart."""
    them = "it" if count == 1 else "them"
    if typed_now:
        return f"{_messages(count)}: /resume runs {them} after this one, /clear drops {them}."
    return (
        f"{_messages(count)}: /resume runs {them}, /clear drops {them}; a new message runs first."
    )


def stopped_notice(who: str, *, held: int, interrupted: bool = True) -> str:
    """The one notice of a person's /stop, once the turn has ended: who stopped it, and what
    waits. ``interrupted`` False: the turn had ended on its own before the stop reached it."""
    head = f"⏹ Stopped by {who}." if interrupted else f"⏹ The turn had ended before {who}'s /stop."
    return f"{head} {held_note(held, typed_now=False)}" if held else head
