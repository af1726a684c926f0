"""The tokens that buttons carry (DESIGN.md, Authorization); who may use them is
:mod:`gateway.config.access`.

Everything here is a pure function on plain data.

A button carries an :class:`ActionToken`: interaction id, a short *choice* (which button),
the runtime epoch the interaction belongs to, and a truncated HMAC-SHA256 tag under the
gateway's key. On the wire::

    a1:<interaction id>:<choice>:<epoch>:<tag>      e.g. a1:Xk3f9Qa2:0:7:Hc2mB0q1n8Zk

Choices: ``"0"`` to ``"99"``, an action by its index in the interaction's ``actions``;
``"q<i>.<j>"`` option *j* of question *i* (both below 100); ``"s"`` submit a form. Epochs
have up to 8 digits, the tag is 12 base64url characters (72 bits). A token is at most 32
bytes more than its interaction id (:func:`token_bytes`): 42 for the ledger's ids, and every
token for an id of up to 32 characters fits Telegram's 64-byte ``callback_data``.
:func:`encode_token` refuses what is outside that alphabet or would not fit the platform's
payload; a platform whose payload cannot hold the longest token is refused at start
(:func:`require_callback_room`), never given a shorter tag.

:func:`verify_token` rejects malformed and forged tokens (:class:`TokenRejected`); whether a
genuine token is still current (same epoch, interaction still pending), shown where it was
clicked, and clicked by someone allowed, is decided against the ledger by the pure checks
below, each of which returns a :class:`Rejection` or None.
"""

from __future__ import annotations

import base64
import functools
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from gateway.domain import SHORT_ID_CHARS, InteractionState
from gateway.errors import ConfigError, TokenRejected

__all__ = [
    "LONGEST_TOKEN_BYTES",
    "REJECTION_TEXT",
    "TOKEN_MAX_BYTES",
    "ActionToken",
    "Rejection",
    "check_token_current",
    "encode_token",
    "form_choice",
    "interaction_named",
    "require_callback_room",
    "token_bytes",
    "token_factory",
    "verify_token",
]

TOKEN_VERSION = "a1"
TOKEN_MAX_BYTES = 64  # the longest token verified: Telegram's callback_data
_TAG_BYTES = 9  # 72 bits: a forgery needs ~2**71 clicks, each one rejected and audited
_TAG_CHARS = 12  # base64url of 9 bytes
_CHOICE_MAX_CHARS = 6  # q99.99
_EPOCH_MAX_DIGITS = 8

_ID = r"[A-Za-z0-9_-]{1,48}"
_CHOICE = r"[0-9]{1,2}|q[0-9]{1,2}\.[0-9]{1,2}|s"
_TOKEN = re.compile(
    rf"^{TOKEN_VERSION}:(?P<iid>{_ID}):(?P<choice>{_CHOICE}):(?P<epoch>0|[1-9][0-9]{{0,7}})"
    rf":(?P<tag>[A-Za-z0-9_-]{{12}})$"
)


class Rejection(StrEnum):
    """Why a click, form or command was refused. Every one is audited."""

    MALFORMED = "malformed"  # not a token of ours at all
    FORGED = "forged"  # well formed, but the tag does not verify under our key
    FOREIGN = "foreign"  # its session is not shown in the conversation it was clicked in
    NOT_ALLOWED = "not_allowed"  # the person may not use this project from this platform
    NOT_APPROVER = "not_approver"  # may talk, but may not decide
    STALE = "stale"  # made for another runtime epoch (the agent process it asked for ended)
    NOT_OPEN = "not_open"  # the interaction is no longer pending (decided, cancelled...)
    # a genuine token (its tag verifies) whose interaction is no longer in the ledger: pruned
    # by retention (gateway/store/retention.py), since the ledger never deletes otherwise
    TOO_OLD = "too_old"


REJECTION_TEXT: dict[Rejection, str] = {
    Rejection.MALFORMED: "This button is not valid.",
    Rejection.FORGED: "This button is not valid.",
    Rejection.FOREIGN: "This request does not belong to this conversation.",
    Rejection.NOT_ALLOWED: "You may not use this project here.",
    Rejection.NOT_APPROVER: "You may not decide this request.",
    Rejection.STALE: "This request belongs to an agent process that has ended.",
    Rejection.NOT_OPEN: "This request is no longer open.",
    Rejection.TOO_OLD: "This request is too old: its record is no longer kept.",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class ActionToken:
    """What a button means: a choice on one interaction of one runtime epoch."""

    interaction_id: str
    choice: str
    epoch: int

    @classmethod
    def for_action(cls, interaction_id: str, index: int, epoch: int) -> ActionToken:
        return cls(interaction_id=interaction_id, choice=str(index), epoch=epoch)

    @classmethod
    def for_option(cls, interaction_id: str, question: int, option: int, epoch: int) -> ActionToken:
        return cls(interaction_id=interaction_id, choice=f"q{question}.{option}", epoch=epoch)

    @classmethod
    def for_submit(cls, interaction_id: str, epoch: int) -> ActionToken:
        return cls(interaction_id=interaction_id, choice="s", epoch=epoch)

    @property
    def action_index(self) -> int | None:
        return int(self.choice) if self.choice.isdigit() else None

    @property
    def option(self) -> tuple[int, int] | None:
        """(question index, option index) for an option button."""
        if not self.choice.startswith("q"):
            return None
        question, _, option = self.choice[1:].partition(".")
        return int(question), int(option)

    @property
    def is_submit(self) -> bool:
        return self.choice == "s"

    def _message(self) -> str:
        return f"{TOKEN_VERSION}:{self.interaction_id}:{self.choice}:{self.epoch}"


def _tag(key: bytes, message: str) -> str:
    digest = hmac.digest(key, message.encode("ascii"), "sha256")[:_TAG_BYTES]  # one C call
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def token_bytes(interaction_id_chars: int) -> int:
    """The longest token for an interaction id of that length (``a1:``, the id, the
    longest choice and epoch, the tag, and the separators)."""
    return (
        len(TOKEN_VERSION)
        + interaction_id_chars
        + _CHOICE_MAX_CHARS
        + _EPOCH_MAX_DIGITS
        + _TAG_CHARS
        + 4
    )


LONGEST_TOKEN_BYTES = token_bytes(SHORT_ID_CHARS)  # for the ids the ledger makes: 42


def require_callback_room(platform: str, callback_max_bytes: int) -> None:
    """Refuse (ConfigError) a platform whose button payload cannot hold every action token.

    The tag is never shortened to fit: its 72 bits are what makes a forgery hopeless
    (docs/decisions.md)."""
    if callback_max_bytes < LONGEST_TOKEN_BYTES:
        raise ConfigError(
            f"platform {platform} takes button payloads of {callback_max_bytes} bytes; "
            f"action tokens need {LONGEST_TOKEN_BYTES} (a 72-bit tag is never shortened)"
        )


def encode_token(key: bytes, token: ActionToken, *, max_bytes: int = TOKEN_MAX_BYTES) -> str:
    """The compact ASCII form of ``token``; ValueError if it would not fit ``max_bytes``
    (the platform's payload limit; at most :data:`TOKEN_MAX_BYTES`)."""
    text = f"{token._message()}:{_tag(key, token._message())}"
    if _TOKEN.match(text) is None:
        raise ValueError(f"cannot encode {token!r}: id or choice outside the token alphabet")
    limit = min(max_bytes, TOKEN_MAX_BYTES)
    if len(text) > limit:
        raise ValueError(
            f"token for interaction {token.interaction_id!r} is {len(text)} bytes, "
            f"more than {limit}: interaction ids must be shorter"
        )
    return text


def token_factory(
    key: bytes, interaction_id: str, epoch: int, *, max_bytes: int = TOKEN_MAX_BYTES
) -> Callable[[str], str]:
    """``choice → token`` for one interaction, each within ``max_bytes`` (the platform's
    ``callback_max_bytes``): what the card renderer takes."""

    def make(choice: str) -> str:
        return _encoded(key, interaction_id, choice, epoch, max_bytes)

    return make


@functools.lru_cache(maxsize=4096)
def _encoded(key: bytes, interaction_id: str, choice: str, epoch: int, max_bytes: int) -> str:
    """A button's token, remembered: a card is drawn again at each change of its request
    (sent, clicked, decided, delivered), each time with the same tokens."""
    token = ActionToken(interaction_id=interaction_id, choice=choice, epoch=epoch)
    return encode_token(key, token, max_bytes=max_bytes)


def interaction_named(text: str) -> str | None:
    """The request a token names, unverified: for finding the card a click was on, never
    for deciding (verify_token checks every token handed to the core)."""
    match = _TOKEN.match(text) if len(text) <= TOKEN_MAX_BYTES else None
    return match["iid"] if match is not None else None


def form_choice(text: str) -> bool:
    """Whether ``text`` has the shape of a form button's token (an option ``q<i>.<j>`` or
    the submit ``s``), unverified: a platform asks only to know whether a click needs the
    card's form, and verify_token still checks every token it hands the core."""
    match = _TOKEN.match(text) if len(text) <= TOKEN_MAX_BYTES else None
    return match is not None and match["choice"][0] in "qs"


def verify_token(key: bytes, text: str) -> ActionToken:
    """Parse and authenticate a token; raise :class:`TokenRejected` (MALFORMED or FORGED)."""
    match = _TOKEN.match(text) if len(text) <= TOKEN_MAX_BYTES else None
    if match is None:
        raise TokenRejected(Rejection.MALFORMED, "malformed action token")
    token = ActionToken(
        interaction_id=match["iid"], choice=match["choice"], epoch=int(match["epoch"])
    )
    expected = _tag(key, token._message())
    if not hmac.compare_digest(expected.encode("ascii"), match["tag"].encode("ascii")):
        raise TokenRejected(Rejection.FORGED, "action token does not verify")
    return token


def check_token_current(
    token: ActionToken, interaction_epoch: int, interaction_state: InteractionState
) -> Rejection | None:
    """A genuine token still means something: same runtime epoch, interaction pending."""
    if token.epoch != interaction_epoch:
        return Rejection.STALE
    if interaction_state is not InteractionState.PENDING:
        return Rejection.NOT_OPEN
    return None
