"""What a card says of where its request stands, in a person's words. Pure.

A card's status line tells three facts of an interaction (the decision, its delivery, how
it ended) as a person reads them: what happened, what the agent was told (or that nothing
reached it), and what to do next. The ledger keeps its own words for these facts (a skipped
delivery's "not written: the runtime ended first", a resolution "orphaned, by gateway");
they are records, never shown as they are: each phrase here is built from the facts.

:func:`delivery_words` and :func:`ending` say the same facts one at a time, for a surface
that lists them (the console's card timeline), so that the line and the list agree.

Each way a request can end is one case of :func:`ended_because`; a new one (a person's
/stop, say) is one more case there and reads right on the line and in the list.

:func:`status_parts` keeps the line's instants as instants (:class:`gateway.cards.At`), for a
card that each platform shows in its reader's own time; :func:`status_line` is the same line
as text, its times in UTC, for replies and notices.
"""

from __future__ import annotations

from gateway.cards import At, StatusPart, status_text
from gateway.domain import (
    Effect,
    InteractionKind,
    InteractionOrigin,
    InteractionState,
    OutgoingFile,
    Resolution,
    Scope,
)
from gateway.interactions.expiry import waited
from gateway.interactions.machine import DecisionFact, DeliveryOutcome, Interaction
from gateway.interactions.setting_change import accepted
from gateway.wording import quoted

__all__ = [
    "action_label",
    "after_decision",
    "delivered_words",
    "delivery_words",
    "ended_because",
    "ending",
    "status_line",
    "status_parts",
    "undelivered",
]

_SCOPE_HINT = {
    Scope.TURN: "for this turn",
    Scope.SESSION: "for this session",
    Scope.ALWAYS: "always",
}
_SCOPE_WORDS = ("turn", "session", "always", "forever", "permanent")
_VERDICT = {Effect.ALLOW: "Approved", Effect.DENY: "Denied", Effect.CANCEL: "Denied and stopped"}
# what the expiry policy's outcome words (gateway/interactions/expiry.py) mean to a person
_REFUSAL = {"deny": "a refusal", "deny and stop": "a refusal that stops the turn"}
_NEXT_START = "your next message starts the agent again"
_NEXT_STOP = "/stop the turn, then send a new message"
_TURN_ENDED = "the turn ended"  # the runner's note for a request left open at its turn's end


def action_label(label: str, scope: Scope) -> str:
    """A button's label: the agent's words, without Markdown's backticks, plus how far the
    grant reaches where the label does not say it."""
    label = label.replace("`", "")
    hint = _SCOPE_HINT.get(scope)
    if hint and not any(word in label.lower() for word in _SCOPE_WORDS):
        return f"{label} ({hint})"
    return label


def _gateway_plan(interaction: Interaction) -> bool:
    """The gateway's own plan card (a Codex plan): its decision is the next turn, queued, and
    reaches the agent when that turn starts (gateway/interactions/plans.py)."""
    return interaction.origin is InteractionOrigin.PLAN


def delivered_words(interaction: Interaction) -> str:
    """What a delivered decision became: "sent to the agent", or for the gateway's own plan
    "queued as the next turn" (nothing reached the agent yet), or for a file the agent asked
    to send what became of the file."""
    if interaction.origin is InteractionOrigin.SETTING:  # applied by the gateway, not written
        return "applied from the agent's next turn" if accepted(interaction) else "nothing changed"
    if isinstance(interaction.detail, OutgoingFile):
        return _file_words(interaction)
    return "queued as the next turn" if _gateway_plan(interaction) else "sent to the agent"


def _file_words(interaction: Interaction) -> str:
    """What became of a file the agent asked to send (gateway/sessions/file_sends.py keeps
    the upload's outcome with the delivery: "sent NAME (SIZE) to the chat[; not to …]" or
    "not sent: why"): "sent to the chat", "not sent", "not sent: why"; the card names the
    file already. Without the outcome (a record from before it was kept): "the agent was
    told", never a guess. The agent read the same outcome as its tool's result."""
    delivery = interaction.delivery
    became = (delivery.error if delivery is not None else None) or ""
    if became.startswith("sent "):
        _, _, elsewhere = became.partition(" to the chat")
        return "sent to the chat" + elsewhere
    fact = interaction.decision
    chosen = fact.decision.action_id if fact is not None else None
    action = interaction.action(chosen) if chosen else None
    refused = action is not None and action.effect is not Effect.ALLOW
    if not became.startswith("not sent: "):
        return "the agent was told"  # a record from before the outcome was kept: no guess
    return "not sent" if refused else became  # a refusal: the line says who said no


def _stopped_host(note: str) -> str | None:
    """The host a reaper's note names ("host a stopped"), if it is one."""
    first = note.split(";", 1)[0].strip()
    if first.startswith("host ") and first.endswith(" stopped"):
        return first.removeprefix("host ").removesuffix(" stopped") or None
    return None


def _next_start(interaction: Interaction) -> str:
    """What the person's next message does, after the request's agent ended: another host
    that stopped answering runs it only once it is back (its agent may even still run)."""
    end = interaction.resolution
    host = _stopped_host(end.note) if end is not None else None
    if host is not None:
        return f"once host {host} is back, a new message resumes the session"
    return _NEXT_START


def _process_end(note: str) -> str:
    """Why an epoch's requests ended, from the note the runner or the recovery gave."""
    host = _stopped_host(note)
    if host is not None:  # what is known: it stopped answering, not that its agent ended
        return f"host {host} stopped answering the ledger"
    first = note.split(";", 1)[0].strip()
    if first == "the gateway restarted":
        return "the gateway restarted and ended the agent process"
    if first.startswith("the gateway stopped"):
        return "the gateway stopped and ended the agent process"
    if first.startswith("stopped by the gateway"):  # its shutdown, a /stop past its grace
        return "the gateway ended the agent process"
    return f"the agent process ended ({first})" if first else "the agent process ended"


def ended_because(interaction: Interaction) -> str:
    """Why a request that was not answered through to the end stopped being open: "the agent
    withdrew the request", "the agent process ended (exited with code 17)"..."""
    end = interaction.resolution
    note = end.note if end is not None else ""
    match interaction.state:
        case InteractionState.CANCELLED if end is not None and end.how is Resolution.SUPERSEDED:
            if interaction.native_key is None:  # the gateway's own plan
                return "a message to the agent came first"
            return "a newer request replaced it"
        case InteractionState.CANCELLED if end is not None and end.how is Resolution.STOPPED:
            return f"{end.note or end.by} stopped the turn"
        case InteractionState.CANCELLED if note == _TURN_ENDED:
            return _TURN_ENDED
        case InteractionState.CANCELLED:
            return "the agent withdrew the request"
        case InteractionState.ORPHANED:
            return _process_end(note)
        case InteractionState.UNKNOWN:
            return "the agent runs on its own and outlived the gateway, which cannot ask it"
        case InteractionState.EXPIRED:
            return f"nobody answered within {waited(interaction)}"
        case _:
            return ""


def _decided(interaction: Interaction, fact: DecisionFact) -> tuple[StatusPart, ...]:
    action = interaction.action(fact.decision.action_id) if fact.decision.action_id else None
    if interaction.kind is InteractionKind.QUESTION and (
        action is None or action.effect is Effect.ALLOW
    ):
        verdict = "Answered"
    elif interaction.kind is InteractionKind.PLAN and action is not None:
        verdict = "Sent back" if action.effect is Effect.DENY else _VERDICT[action.effect]
    elif action is not None:
        verdict = _VERDICT[action.effect]
    else:
        verdict = "Decided"
    choice = ""
    if action is not None and verdict != "Answered":
        choice = f" ({quoted(action_label(action.label, action.scope))})"
    return f"{verdict}{choice} by {fact.actor}", At(fact.at)


def _refusal(interaction: Interaction) -> str:
    outcome = interaction.resolution.note if interaction.resolution else ""
    return _REFUSAL.get(outcome, outcome or "a refusal")


def _expired(interaction: Interaction) -> str:
    """Nobody decided in time: what the gateway told the agent, never "denied by" anyone."""
    head = f"Timed out: {ended_because(interaction)}"
    sent = _refusal(interaction)
    delivery = interaction.delivery
    if delivery is None:
        return f"{head} · sending {sent} to the agent…"
    match delivery.outcome:
        case DeliveryOutcome.OK:
            return f"{head} · {sent} was sent to the agent"
        case DeliveryOutcome.FAILED:
            why = delivery.error or "the write failed"
            return f"{head} · {sent} did not reach the agent ({why}) · {_NEXT_STOP}"
        case DeliveryOutcome.UNKNOWN:
            why = _process_end(delivery.error or "")
            return f"{head} · whether {sent} reached the agent is not known: {why}"
        case DeliveryOutcome.SKIPPED:
            why = (delivery.error or "").removeprefix("not written: ")
            return f"{head} · nothing was sent to the agent" + (f": {why}" if why else "")


def undelivered(interaction: Interaction) -> str | None:
    """What a person must know, and do, when a decision's write failed while the agent still
    waits (DECIDED with a failed delivery); None otherwise. The answer is never resent on its
    own (DESIGN.md rule 3): the person ends the turn and says what they want now."""
    delivery = interaction.delivery
    if (
        interaction.state is not InteractionState.DECIDED
        or delivery is None
        or delivery.outcome is not DeliveryOutcome.FAILED
    ):
        return None
    why = delivery.error or "the write failed"
    return f"the answer did not reach the agent ({why}) and was not resent: {_NEXT_STOP}"


def end_how(interaction: Interaction) -> Resolution | None:
    return interaction.resolution.how if interaction.resolution is not None else None


def _unanswered(interaction: Interaction) -> tuple[StatusPart, ...]:
    """A request that ended with nobody's decision."""
    why = ended_because(interaction)
    match interaction.state:
        case InteractionState.EXPIRED:
            return (_expired(interaction),)
        case InteractionState.ORPHANED:
            why = why[:1].upper() + why[1:]
            return (
                f"{why} before anyone answered: no answer can reach it now · "
                f"{_next_start(interaction)}",
            )
        case InteractionState.CANCELLED if end_how(interaction) is Resolution.STOPPED:
            end = interaction.resolution
            assert end is not None
            who = end.note or end.by
            return (
                f"Stopped by {who}",
                At(end.at),
                " before anyone answered · nothing was sent to the agent",
            )
        case InteractionState.CANCELLED:
            return (f"Closed before anyone answered: {why} · nothing was sent to the agent",)
        case state:
            return (f"Closed ({state.value})",)


def _after_decision(interaction: Interaction) -> str:
    """What became of a decision: its delivery, then how the request ended."""
    state, delivery = interaction.state, interaction.delivery
    outcome = delivery.outcome if delivery is not None else None
    error = (delivery.error if delivery is not None else None) or "the write failed"
    why = ended_because(interaction)
    plan = _gateway_plan(interaction)
    match state:
        case InteractionState.DECIDED if outcome is DeliveryOutcome.FAILED:
            return undelivered(interaction) or ""
        case InteractionState.DECIDED if isinstance(interaction.detail, OutgoingFile):
            return "sending it to the chat…"
        case InteractionState.DECIDED:
            return "queuing it as the next turn…" if plan else "sending it to the agent…"
        case InteractionState.DELIVERED:
            return delivered_words(interaction)
        case InteractionState.RESOLVED if plan:
            return "sent to the agent as the next turn"
        case InteractionState.RESOLVED if interaction.origin is InteractionOrigin.SETTING:
            return delivered_words(interaction)  # applied (or not) by the gateway, at once
        case InteractionState.RESOLVED:
            if outcome is DeliveryOutcome.OK:
                return f"{delivered_words(interaction)} · done"
            return "done"
        case InteractionState.UNKNOWN:
            return f"sent to the agent, but whether it got it is not known: {why}"
        case InteractionState.CANCELLED | InteractionState.ORPHANED:
            next_step = (
                f" · {_next_start(interaction)}" if state is InteractionState.ORPHANED else ""
            )
            if outcome is DeliveryOutcome.OK:
                return f"{delivered_words(interaction)}, then {why}{next_step}"
            if outcome is DeliveryOutcome.FAILED:
                return f"it did not reach the agent ({error}), then {why}{next_step}"
            if outcome is None and state is InteractionState.ORPHANED:
                # a gateway that died between the decision and recording its write
                return (
                    "whether it reached the agent is not known: the gateway stopped before "
                    f"recording it, and the agent process was ended{next_step}"
                )
            return f"nothing reached the agent: {why} first{next_step}"
        case _:
            return ""


def after_decision(interaction: Interaction) -> str:
    """What became of a decision, without the decision itself ("sent to the agent"): for a
    receipt that has just said what was decided (gateway/sessions/decisions.py). Not how the
    request then ended ("· done", the agent's close): that may come just before the receipt
    or just after it, and the card says it."""
    return _after_decision(interaction).removesuffix(" · done")


def status_parts(interaction: Interaction) -> tuple[StatusPart, ...]:
    """One line: what happened, what the agent was told, and what to do next; its times
    kept as instants (:class:`gateway.cards.At`) for a card to show in each reader's zone."""
    if interaction.kind is InteractionKind.AUTHENTICATION:
        return ("Sign-in requests are not supported in chat: answer it where the agent runs",)
    if interaction.state is InteractionState.PENDING:
        if interaction.kind is InteractionKind.QUESTION:
            return ("Waiting for an answer",)
        return ("Waiting for a decision",)
    if interaction.decision is None:
        return _unanswered(interaction)
    after = _after_decision(interaction)
    head = _decided(interaction, interaction.decision)
    return (*head, f" · {after}") if after else head


def status_line(interaction: Interaction) -> str:
    """:func:`status_parts` as one text, its times in UTC ("at 09:17 UTC")."""
    return status_text(status_parts(interaction))


def delivery_words(interaction: Interaction) -> str | None:
    """The delivery fact alone ("sent to the agent"), for a list of the facts; None where
    there is none to tell: nothing was decided, so nothing was for the agent (an expired
    request's refusal excepted), or it ended first (the ending says why)."""
    delivery = interaction.delivery
    if delivery is None:
        return None
    if interaction.decision is None and interaction.state is not InteractionState.EXPIRED:
        return None
    match delivery.outcome:
        case DeliveryOutcome.OK:
            return delivered_words(interaction)
        case DeliveryOutcome.FAILED:
            return f"did not reach the agent ({delivery.error or 'the write failed'}); not resent"
        case DeliveryOutcome.UNKNOWN:
            return f"not known whether it reached the agent: {_process_end(delivery.error or '')}"
        case DeliveryOutcome.SKIPPED:
            why = (delivery.error or "").removeprefix("not written: ")
            if interaction.state is InteractionState.EXPIRED and why:
                return f"nothing was sent to the agent: {why}"
            return "nothing was sent to the agent"


def ending(interaction: Interaction) -> tuple[str, str] | None:
    """(heading, words) of how the request ended, for a list of the facts: ("Done", …) for
    an answer the agent confirmed, ("Ended", why) otherwise; None while it is live."""
    end = interaction.resolution
    if end is None:
        return None
    if end.how is Resolution.ANSWERED and _gateway_plan(interaction):
        return "Sent", "the next turn started"
    if end.how is Resolution.ANSWERED:
        return "Done", "the agent went on with the answer"
    if interaction.state is InteractionState.EXPIRED:
        return "Timed out", ended_because(interaction)
    return "Ended", ended_because(interaction) or end.how.value.replace("_", " ")
