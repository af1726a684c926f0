"""Reading an interaction and its three facts out of the ledger's rows."""

from __future__ import annotations

import json
from collections.abc import Callable

from gateway.domain import (
    Actor,
    Decision,
    InteractionKind,
    InteractionOrigin,
    InteractionRequest,
    InteractionState,
    Resolution,
)
from gateway.errors import UnknownInteraction
from gateway.interactions.content_hash import content_hash
from gateway.interactions.machine import (
    DecisionFact,
    DeliveryFact,
    DeliveryOutcome,
    Interaction,
    ResolutionFact,
    VoteFact,
)
from gateway.store import codec
from gateway.store.cards import COPIES_JSON, copies_from_json
from gateway.store.database import Conn, Row, by_name, fetch_one, parse_time
from gateway.store.dialect import FOR_UPDATE_OF_I
from gateway.store.records import CardCopy, CardSession, CardsRead

__all__ = [
    "IS_CLOSED",
    "IS_LIVE",
    "SELECT_FOR_CARDS",
    "SELECT_INTERACTION",
    "actor_from_row",
    "for_cards_from_row",
    "interaction_by_native_key",
    "interaction_from_row",
    "locked_for_cards",
    "new_interaction",
    "require_interaction",
    "select_interaction_with",
]

# An interaction with its decision, its latest delivery and its resolution.
_INTERACTION_COLUMNS = """
SELECT i.id, i.session_id, i.runtime_epoch, i.turn_id, i.native_key, i.kind, i.title,
       i.summary, i.detail_json, i.actions_json, i.questions_json, i.state, i.version,
       i.created_at, i.updated_at, i.origin, i.pruned_hash,
       d.actor_platform, d.actor_user_id, d.actor_display, d.action_id, d.answers_json,
       d.message, d.decided_at,
       v.outcome AS delivery_outcome, v.error AS delivery_error, v.at AS delivered_at,
       r.how, r.by AS resolved_by, r.note AS resolution_note, r.at AS resolved_at,
       (SELECT json_group_array(json_array(s.person, s.actor_platform, s.actor_user_id,
                    s.actor_display, s.action_id, s.needed, s.surface, s.content_hash,
                    s.voted_at))
        FROM (SELECT * FROM votes WHERE interaction_id = i.id AND withdrawn_at IS NULL
              ORDER BY voted_at, person) s) AS votes_json"""
_INTERACTION_JOINS = """
FROM interactions i
LEFT JOIN decisions d ON d.interaction_id = i.id
LEFT JOIN deliveries v
       ON v.id = (SELECT max(id) FROM deliveries WHERE interaction_id = i.id)
LEFT JOIN resolutions r ON r.interaction_id = i.id
"""
SELECT_INTERACTION = _INTERACTION_COLUMNS + _INTERACTION_JOINS

# A request live (``LIVE_STATES``) or closed, spelled as the partial indexes of migration 28
# spell it, so that the planner can read them (it matches a query's terms to an index's
# WHERE as written): equalities, where an IN list of three made SQLite build a temporary
# table each time it tested a row it wrote, at every step of every request.
IS_LIVE = "(i.state = 'pending' OR i.state = 'decided' OR i.state = 'delivered')"
IS_CLOSED = "i.state <> 'pending' AND i.state <> 'decided' AND i.state <> 'delivered'"


def select_interaction_with(columns: str, joins: str = "") -> str:
    """``SELECT_INTERACTION`` with more ``columns``, of more ``joins`` (aliases other than
    ``i``, ``d``, ``v`` and ``r``): what else a call needs, in the request's own statement."""
    return f"{_INTERACTION_COLUMNS},\n       {columns}{_INTERACTION_JOINS}{joins}"


# A locked read (PostgreSQL: FOR UPDATE OF i) with the version its statement's snapshot saw.
# A row lock that waited for another writer's COMMIT returns that writer's row but the
# joins (the facts) and subqueries as the snapshot had them: a version that moved in
# between says so, and the request is read again under the lock (whole: every writer of
# facts also bumps the version, and waits for the lock to do it). Never moved (almost
# always), the one read is whole as it is: no write reads its request back.
_SEEN_VERSION = "(SELECT version FROM interactions WHERE id = i.id) AS seen_version"
_SELECT_LOCKED = select_interaction_with(_SEEN_VERSION)
# the request with its card's copies, and what they show of its session (its project and
# name: for_cards_from_row): what drawing the cards needs, one statement
_FOR_CARDS = f"n.project AS session_project, n.name AS session_name, {COPIES_JSON}"
_SESSION_JOIN = "LEFT JOIN sessions n ON n.id = i.session_id\n"
SELECT_FOR_CARDS = select_interaction_with(_FOR_CARDS, _SESSION_JOIN)
# both: a write that changes the card reads what redrawing it needs as it locks the request
_SELECT_LOCKED_FOR_CARDS = select_interaction_with(f"{_SEEN_VERSION}, {_FOR_CARDS}", _SESSION_JOIN)


def for_cards_from_row(row: Row) -> tuple[Interaction, list[CardCopy], CardSession | None]:
    """A row of ``SELECT_FOR_CARDS``: the request, its copies, its session's project and name."""
    row = by_name(row)
    interaction = interaction_from_row(row)
    copies = copies_from_json(row["copies_json"])
    project = row["session_project"]
    session = None if project is None else CardSession(project=project, name=row["session_name"])
    return interaction, copies, session


def require_interaction(conn: Conn, interaction_id: str, *, lock: bool = False) -> Interaction:
    """The interaction; with ``lock``, its row locked until the transaction ends (a write
    that reads it and then writes on what it read: PostgreSQL's other writers wait), and
    read whole (its facts as the lock found them: ``_SELECT_LOCKED``)."""
    if not lock:
        row = fetch_one(conn, f"{SELECT_INTERACTION} WHERE i.id = ?", (interaction_id,))
    else:
        row = fetch_one(
            conn, f"{_SELECT_LOCKED} WHERE i.id = ?{FOR_UPDATE_OF_I}", (interaction_id,)
        )
        row = _whole(conn, row)
    if row is None:
        raise UnknownInteraction(interaction_id)
    return interaction_from_row(row)


def locked_for_cards(
    conn: Conn, where: str, params: tuple[object, ...]
) -> tuple[Interaction, CardsRead] | None:
    """The request ``where`` says (terms on ``i``), locked and read whole as
    :func:`require_interaction` reads it, with its card's copies and what they show of its
    session, read by the same statement (``CardsRead``: the card lanes read nothing more)."""
    row = fetch_one(conn, f"{_SELECT_LOCKED_FOR_CARDS} WHERE {where}{FOR_UPDATE_OF_I}", params)
    row = _whole(conn, row, SELECT_FOR_CARDS)
    if row is None:
        return None
    interaction, copies, session = for_cards_from_row(row)
    return interaction, CardsRead(copies=tuple(copies), session=session)


def _whole(conn: Conn, locked: Row | None, select: str = SELECT_INTERACTION) -> Row | None:
    """A locked read's row, read again (by ``select``, the same columns without the seen
    version) if the row moved while the lock waited."""
    if locked is None or locked["seen_version"] == locked["version"]:
        return locked
    return fetch_one(conn, f"{select} WHERE i.id = ?", (locked["id"],))


def interaction_by_native_key(
    conn: Conn, session_id: str, epoch: int, native_key: str
) -> Interaction | None:
    return interaction_by_native_key_sent(conn, session_id, epoch, native_key)()


def interaction_by_native_key_sent(
    conn: Conn, session_id: str, epoch: int, native_key: str
) -> Callable[[], Interaction | None]:
    """``interaction_by_native_key``'s SELECT, sent; what it returns reads the answer (a
    locked read by native key, the agent's close: :func:`locked_for_cards`)."""
    cursor = conn.execute(
        f"{SELECT_INTERACTION} WHERE i.session_id = ? AND i.runtime_epoch = ? AND i.native_key = ?",
        (session_id, epoch, native_key),
    )

    def read() -> Interaction | None:
        row = cursor.fetchone()
        return None if row is None else interaction_from_row(row)

    return read


# the stored value -> the member, by one dict lookup (an Enum call costs a dozen times that,
# and a request's row is decoded several times per approval); a value not among them goes
# through the Enum itself, which raises as before
_KINDS = {member.value: member for member in InteractionKind}
_ORIGINS = {member.value: member for member in InteractionOrigin}
_STATES = {member.value: member for member in InteractionState}


def actor_from_row(row: Row) -> Actor:
    return Actor(
        platform=row["actor_platform"],
        user_id=row["actor_user_id"],
        display=row["actor_display"],
    )


def interaction_from_row(found: Row) -> Interaction:
    row = by_name(found)
    decision = None
    if row["decided_at"] is not None:
        decision = DecisionFact(
            actor=actor_from_row(row),
            decision=Decision(
                action_id=row["action_id"],
                answers=codec.decode_answers(row["answers_json"]),
                message=row["message"],
            ),
            at=parse_time(row["decided_at"]),
        )
    delivery = None
    if row["delivered_at"] is not None:
        delivery = DeliveryFact(
            outcome=DeliveryOutcome(row["delivery_outcome"]),
            at=parse_time(row["delivered_at"]),
            error=row["delivery_error"],
        )
    resolution = None
    if row["resolved_at"] is not None:
        resolution = ResolutionFact(
            how=Resolution(row["how"]),
            at=parse_time(row["resolved_at"]),
            by=row["resolved_by"],
            note=row["resolution_note"],
        )
    return Interaction(
        id=row["id"],
        session_id=row["session_id"],
        runtime_epoch=row["runtime_epoch"],
        turn_id=row["turn_id"],
        native_key=row["native_key"],
        kind=_KINDS.get(row["kind"]) or InteractionKind(row["kind"]),
        origin=_ORIGINS.get(row["origin"]) or InteractionOrigin(row["origin"]),
        title=row["title"],
        summary=row["summary"],
        detail=codec.decode_detail(row["detail_json"]),
        actions=codec.decode_actions(row["actions_json"]),
        questions=codec.decode_questions(row["questions_json"]),
        state=_STATES.get(row["state"]) or InteractionState(row["state"]),
        version=row["version"],
        created_at=parse_time(row["created_at"]),
        updated_at=parse_time(row["updated_at"]),
        decision=decision,
        delivery=delivery,
        resolution=resolution,
        votes=_votes(row["votes_json"]),
        # details pruned by retention (gateway/store/retention.py): the hash they had
        content_hash=row["pruned_hash"]
        or content_hash(
            kind=row["kind"],
            title=row["title"],
            summary=row["summary"],
            detail_json=row["detail_json"] or "",
            actions_json=row["actions_json"] or "",
            questions_json=row["questions_json"] or "",
        ),
    )


def new_interaction(
    interaction_id: str,
    *,
    session_id: str,
    epoch: int,
    turn_id: int | None,
    request: InteractionRequest,
    texts: tuple[str | None, str, str],
    now: str,
) -> Interaction:
    """The interaction a row just inserted holds (PENDING, version 1, no facts, no votes),
    as :func:`interaction_from_row` would read it: decoded from the texts written
    (``texts``: detail, actions, questions), so that nothing differs from a read of it."""
    detail_json, actions_json, questions_json = texts
    at = parse_time(now)
    return Interaction(
        id=interaction_id,
        session_id=session_id,
        runtime_epoch=epoch,
        turn_id=turn_id,
        native_key=request.native_key or None,
        kind=request.kind,
        origin=request.origin,
        title=request.title,
        summary=request.summary,
        detail=codec.decode_detail(detail_json),
        actions=codec.decode_actions(actions_json),
        questions=codec.decode_questions(questions_json),
        state=InteractionState.PENDING,
        version=1,
        created_at=at,
        updated_at=at,
        content_hash=content_hash(
            kind=request.kind.value,
            title=request.title,
            summary=request.summary,
            detail_json=detail_json or "",
            actions_json=actions_json or "",
            questions_json=questions_json or "",
        ),
    )


def _votes(text: str | None) -> tuple[VoteFact, ...]:
    if not text or text == "[]":  # no standing vote: most requests
        return ()
    return tuple(
        VoteFact(
            person=person,
            actor=Actor(platform=platform, user_id=user_id, display=display),
            action_id=action_id,
            needed=needed,
            surface=surface,
            content_hash=seen,
            at=parse_time(at),
        )
        for person, platform, user_id, display, action_id, needed, surface, seen, at in json.loads(
            text
        )
    )
