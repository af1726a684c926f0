"""What the console says became of a message typed in its message box (pure).

The gateway decides what a typed text is (gateway/render/commands.py): a command is carried
out by the gateway, a prompt is queued for the agent, and it runs at once only when the agent
is free. The box's receipt says which, so that "/status" is not answered "Sent to the agent."
and a message typed while a turn runs is not said to have reached the agent already.
"""

from __future__ import annotations

from gateway.render.commands import ChatPrompt, parse_chat_text

__all__ = ["message_receipt"]


def message_receipt(text: str, *, held: bool, turn_running: bool, card_waiting: bool) -> str:
    """The receipt of ``text``: ``held`` if the gateway holds it (after a /stop), and what
    the session was doing when it came (a turn running, a card waiting for an answer)."""
    if not isinstance(parse_chat_text(text), ChatPrompt):
        command = text.split()[0]
        return f"{command} is a command for the gateway: its answer is in the conversation."
    if held:
        return "Held, with the messages held before it: /resume sends them, /clear drops them."
    if card_waiting:
        return (
            "Queued for the agent, which reads it once the request waiting above is answered"
            " (a message is never that answer)."
        )
    if turn_running:
        return "Queued: the agent reads it when its current turn ends."
    return "Sent to the agent."
