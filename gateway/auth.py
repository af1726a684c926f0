"""Who may talk, who may decide, and the tokens that buttons carry (DESIGN.md, Authorization).

Everything here is a pure function on plain data except :func:`load_or_create_hmac_key`.

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
import hashlib
import hmac
import os
import re
import secrets
import stat
from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from gateway.config import Config, PlatformAuth
from gateway.domain import Actor, InteractionState
from gateway.errors import ConfigError, TokenRejected
from gateway.interactions import SHORT_ID_CHARS

__all__ = [
    "HMAC_KEY_BYTES",
    "HMAC_KEY_FILE",
    "LONGEST_TOKEN_BYTES",
    "REJECTION_TEXT",
    "ROLE_PREFIX",
    "TOKEN_MAX_BYTES",
    "ActionToken",
    "Rejection",
    "check_click",
    "check_token_current",
    "encode_token",
    "form_choice",
    "interaction_named",
    "load_or_create_hmac_key",
    "may_decide",
    "may_talk",
    "read_hmac_key",
    "require_callback_room",
    "stranger_refusal",
    "token_bytes",
    "token_factory",
    "verify_token",
]

TOKEN_VERSION = "a1"
TOKEN_MAX_BYTES = 64  # the longest token verified: Telegram's callback_data
HMAC_KEY_BYTES = 32
HMAC_KEY_FILE = "hmac.key"
_TAG_BYTES = 9  # 72 bits: a forgery needs ~2**71 clicks, each one rejected and audited
_TAG_CHARS = 12  # base64url of 9 bytes
_CHOICE_MAX_CHARS = 6  # q99.99
_EPOCH_MAX_DIGITS = 8
_ANYONE = "*"
ROLE_PREFIX = "role:"  # an auth entry naming a role (Discord): everyone who holds it

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


REJECTION_TEXT: dict[Rejection, str] = {
    Rejection.MALFORMED: "This button is not valid.",
    Rejection.FORGED: "This button is not valid.",
    Rejection.FOREIGN: "This request does not belong to this conversation.",
    Rejection.NOT_ALLOWED: "You may not use this project here.",
    Rejection.NOT_APPROVER: "You may not decide this request.",
    Rejection.STALE: "This request belongs to an agent process that has ended.",
    Rejection.NOT_OPEN: "This request is no longer open.",
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
    digest = hmac.new(key, message.encode("ascii"), hashlib.sha256).digest()[:_TAG_BYTES]
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
        token = ActionToken(interaction_id=interaction_id, choice=choice, epoch=epoch)
        return encode_token(key, token, max_bytes=max_bytes)

    return make


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


# --- people --------------------------------------------------------------------------------


def _rules(config: Config, project: str, actor: Actor) -> PlatformAuth | None:
    settings = config.projects.get(project)
    return None if settings is None else settings.auth.get(actor.platform)


def _listed(entries: Collection[str], actor: Actor) -> bool:
    """``actor`` is in ``entries``: by user id, or by a role they hold (``role:<id>``).

    Roles fail closed: an actor seen without a member (a DM) holds none, and a user id
    that looks like a role entry never matches one."""
    if _ANYONE in entries:
        return True
    if not actor.user_id.startswith(ROLE_PREFIX) and actor.user_id in entries:
        return True
    return any(f"{ROLE_PREFIX}{role}" in entries for role in actor.roles if role)


def may_talk(config: Config, project: str, actor: Actor) -> bool:
    """Fail closed: only people listed in the project's allow_from for their platform
    (by user id, or ``role:<id>`` for a role they hold)."""
    rules = _rules(config, project, actor)
    if rules is None:
        return False
    return _listed(rules.allow_from, actor)


def stranger_refusal(actor: Actor) -> str:
    """What a person who may not talk is told in their private conversation with the bot:
    their id on that platform, which is what ``allow_from`` takes and what they have no
    other way to find (no project name: a stranger learns nothing of the config). In a
    shared conversation they are told nothing (gateway/control.py)."""
    platform = actor.platform.capitalize()
    return (
        f"You are not allowed to use this bot. Your {platform} id is {actor.user_id}: ask its "
        f'owner to add "{actor.user_id}" to allow_from in the project\'s auth.{actor.platform} '
        "settings."
    )


def may_decide(config: Config, project: str, actor: Actor, session_initiator: Actor | None) -> bool:
    """May talk, and is an approver: listed (by id or role), or ``"*"``, or (by default)
    the initiator."""
    if not may_talk(config, project, actor):
        return False
    rules = _rules(config, project, actor)
    if rules is None:  # pragma: no cover - may_talk already said no
        return False
    if rules.approvers is None:
        return session_initiator is not None and session_initiator.key() == actor.key()
    return _listed(rules.approvers, actor)


def approver_ids(
    config: Config, project: str, platform: str, session_initiator: Actor | None
) -> tuple[str, ...]:
    """Who may decide the session's requests on ``platform`` (its auth table's name), by
    their ids there: the listed approvers who may talk, else (none listed) the initiator;
    nobody for ``"*"`` (anyone: a platform mentions nobody then). A listed role stays as
    ``role:<id>`` when allow_from lets it talk (``"*"`` or the same role): the platform
    mentions the role."""
    settings = config.projects.get(project)
    rules = None if settings is None else settings.auth.get(platform)
    if rules is None:
        return ()
    if rules.approvers is None:
        if session_initiator is None or session_initiator.platform != platform:
            return ()
        listed: tuple[str, ...] = (session_initiator.user_id,)
    elif _ANYONE in rules.approvers:
        return ()
    else:
        listed = tuple(dict.fromkeys(rules.approvers))
    return tuple(
        user
        for user in listed
        if (
            _ANYONE in rules.allow_from or user in rules.allow_from
            if user.startswith(ROLE_PREFIX)
            else may_talk(config, project, Actor(platform=platform, user_id=user, display=user))
        )
    )


def check_click(
    config: Config,
    *,
    token: ActionToken,
    actor: Actor,
    project: str,
    session_id: str,
    sessions_shown: Collection[str],
    session_initiator: Actor | None,
    interaction_epoch: int,
    interaction_state: InteractionState,
) -> Rejection | None:
    """Everything a verified click must pass, in order; None when it may be decided.

    ``sessions_shown`` are the sessions bound to the conversation the click came from.
    Who-may checks come before state so that a stranger learns nothing about the request.
    """
    if session_id not in sessions_shown:
        return Rejection.FOREIGN
    if not may_talk(config, project, actor):
        return Rejection.NOT_ALLOWED
    if not may_decide(config, project, actor, session_initiator):
        return Rejection.NOT_APPROVER
    return check_token_current(token, interaction_epoch, interaction_state)


# --- the key -------------------------------------------------------------------------------


def load_or_create_hmac_key(data_dir: Path) -> bytes:
    """The gateway's HMAC key: 32 random bytes in ``<data_dir>/hmac.key`` (0600).

    Created on first start (the data dir too, 0700). An existing key that others may read,
    or of the wrong size, is refused rather than used or replaced. The key is never logged.
    """
    path = data_dir / HMAC_KEY_FILE
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not path.exists():
            _create_key_file(path)
    except OSError as exc:
        raise ConfigError(f"cannot use HMAC key {path}: {exc.strerror or exc}") from exc
    try:
        return _read_key_file(path, wrong_size=": remove it")
    except FileNotFoundError as exc:  # removed since it was made or found
        raise ConfigError(f"cannot use HMAC key {path}: {exc.strerror or exc}") from exc


def read_hmac_key(path: Path) -> bytes:
    """The HMAC key every host shares (``[gateway] hmac_key_file``): read, never created,
    since a key made here would not be the one the other hosts sign with. Refused if it is
    missing, readable by others, or not :data:`HMAC_KEY_BYTES` long. Never logged."""
    try:
        return _read_key_file(path)
    except FileNotFoundError as exc:
        raise ConfigError(
            f"HMAC key {path} does not exist: copy the one the other hosts use (or, for the "
            f"first host, write {HMAC_KEY_BYTES} random bytes, mode 600)"
        ) from exc


def _read_key_file(path: Path, *, wrong_size: str = "") -> bytes:
    """The key in ``path``: a regular file nobody else may read, of :data:`HMAC_KEY_BYTES`
    (``wrong_size`` ends the refusal of another length). FileNotFoundError passes through;
    every other failure is a ConfigError naming the file."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"HMAC key {path} is not a regular file")
        if info.st_mode & 0o077:
            raise ConfigError(f"HMAC key {path} is readable by others: chmod 600 it")
        key = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f"cannot use HMAC key {path}: {exc.strerror or exc}") from exc
    if len(key) != HMAC_KEY_BYTES:
        raise ConfigError(f"HMAC key {path} is not {HMAC_KEY_BYTES} bytes{wrong_size}")
    return key


def _create_key_file(path: Path) -> None:
    """Write a new key to a temporary file, then link it into place (first writer wins)."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(secrets.token_bytes(HMAC_KEY_BYTES))
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process created it first: use theirs
    finally:
        temporary.unlink(missing_ok=True)
