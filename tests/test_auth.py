"""Button tokens and who may talk or decide: forgeries and strangers are turned away."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from gateway.action_tokens import (
    LONGEST_TOKEN_BYTES,
    REJECTION_TEXT,
    TOKEN_MAX_BYTES,
    ActionToken,
    Rejection,
    check_token_current,
    encode_token,
    require_callback_room,
    token_bytes,
    token_factory,
    verify_token,
)
from gateway.config.access import approver_ids, check_click, may_decide, may_talk
from gateway.config.hmac_key import load_or_create_hmac_key
from gateway.config.model import Config
from gateway.domain import Actor, InteractionState
from gateway.errors import AuthorizationError, ConfigError, TokenRejected
from platforms.console.config import ConsoleConfig
from platforms.registry import parse_config

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))


def rejection_of(key: bytes, text: str) -> str:
    with pytest.raises(TokenRejected) as caught:
        verify_token(key, text)
    assert isinstance(caught.value, AuthorizationError)
    return caught.value.reason


# --- tokens --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    [
        ActionToken.for_action("Xk3f9Qa2", 0, 1),
        ActionToken.for_action("Xk3f9Qa2", 12, 99_999_999),
        ActionToken.for_option("i-1_b", 3, 99, 4),
        ActionToken.for_submit("z", 0),
    ],
)
def test_a_token_round_trips(token: ActionToken) -> None:
    text = encode_token(KEY, token)
    assert text.isascii()
    assert verify_token(KEY, text) == token


def test_choices_say_what_the_button_does() -> None:
    assert ActionToken.for_action("i", 2, 1).action_index == 2
    assert ActionToken.for_action("i", 2, 1).option is None
    assert ActionToken.for_option("i", 1, 4, 1).option == (1, 4)
    assert ActionToken.for_option("i", 1, 4, 1).action_index is None
    assert ActionToken.for_submit("i", 1).is_submit


def test_tokens_fit_telegram_callback_data_for_long_ids() -> None:
    uuid_hex = "0123456789abcdef0123456789abcdef"  # 32 characters
    for token in (
        ActionToken.for_action(uuid_hex, 99, 99_999_999),
        ActionToken.for_option(uuid_hex, 99, 99, 99_999_999),
        ActionToken.for_submit(uuid_hex, 99_999_999),
    ):
        assert len(encode_token(KEY, token).encode()) <= TOKEN_MAX_BYTES


def test_a_token_is_32_bytes_more_than_its_id_and_fits_the_platform_or_is_refused() -> None:
    assert LONGEST_TOKEN_BYTES == token_bytes(10) == 42  # the ledger's ids are 10 characters
    longest = ActionToken.for_option("k3m9x2p7qa", 99, 99, 99_999_999)
    assert len(encode_token(KEY, longest)) == LONGEST_TOKEN_BYTES
    assert encode_token(KEY, longest, max_bytes=42) == encode_token(KEY, longest)
    with pytest.raises(ValueError, match="more than 41"):
        encode_token(KEY, longest, max_bytes=41)
    make = token_factory(KEY, "k3m9x2p7qa", 99_999_999, max_bytes=41)
    assert len(make("0")) <= 41  # a shorter choice fits...
    with pytest.raises(ValueError, match="more than 41"):
        make("q99.99")  # ...the longest does not: the tag is never shortened


def test_a_platform_whose_payload_cannot_hold_every_token_is_refused() -> None:
    require_callback_room("telegram", 64)
    require_callback_room("tight", 42)
    with pytest.raises(ConfigError, match="platform tight takes button payloads of 41 bytes"):
        require_callback_room("tight", 41)


def test_an_id_too_long_to_fit_is_refused_when_encoding() -> None:
    with pytest.raises(ValueError, match="more than 64"):
        encode_token(KEY, ActionToken.for_action("x" * 45, 0, 1))
    for outside in (
        ActionToken(interaction_id="a:b", choice="0", epoch=1),
        ActionToken.for_action("abc", 100, 1),
        ActionToken.for_action("abc", 0, -1),
    ):
        with pytest.raises(ValueError, match="alphabet"):
            encode_token(KEY, outside)


def test_a_changed_field_or_tag_is_forged() -> None:
    text = encode_token(KEY, ActionToken.for_action("abc123", 0, 7))
    version, iid, choice, epoch, tag = text.split(":")
    other_action = ":".join((version, iid, "1", epoch, tag))
    other_epoch = ":".join((version, iid, choice, "8", tag))
    other_id = ":".join((version, "abc124", choice, epoch, tag))
    flipped = text[:-1] + ("A" if text[-1] != "A" else "B")
    for forged in (other_action, other_epoch, other_id, flipped):
        assert rejection_of(KEY, forged) == Rejection.FORGED


def test_a_token_made_under_another_key_is_forged() -> None:
    text = encode_token(OTHER_KEY, ActionToken.for_action("abc123", 0, 7))
    assert rejection_of(KEY, text) == Rejection.FORGED


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ok",
        "a1:abc:0:7",  # no tag
        "a2:abc:0:7:AAAAAAAAAAAA",  # unknown version
        "a1:abc:0:07:AAAAAAAAAAAA",  # leading zero: one epoch, one spelling
        "a1:abc:x:7:AAAAAAAAAAAA",  # no such choice
        "a1:ab c:0:7:AAAAAAAAAAAA",
        "a1:abc:0:7:AAAAAAAAAAA",  # tag one character short
        "a1:abc:0:7:AAAAAAAAAAAA:extra",
        "a1:" + "a" * 80 + ":0:7:AAAAAAAAAAAA",
        "a1:abç:0:7:AAAAAAAAAAAA",
    ],
)
def test_malformed_tokens_are_rejected(text: str) -> None:
    assert rejection_of(KEY, text) == Rejection.MALFORMED


def test_a_truncated_token_is_rejected() -> None:
    text = encode_token(KEY, ActionToken.for_action("abc123", 0, 7))
    for cut in range(len(text)):
        assert rejection_of(KEY, text[:cut]) in (Rejection.MALFORMED, Rejection.FORGED)


def test_token_factory_makes_verifiable_tokens_for_each_choice() -> None:
    make = token_factory(KEY, "iid9", 3)
    assert verify_token(KEY, make("1")) == ActionToken.for_action("iid9", 1, 3)
    assert verify_token(KEY, make("q0.2")) == ActionToken.for_option("iid9", 0, 2, 3)


def test_a_token_of_another_epoch_is_stale_and_a_closed_interaction_not_open() -> None:
    token = ActionToken.for_action("abc", 0, 7)
    assert check_token_current(token, 7, InteractionState.PENDING) is None
    assert check_token_current(token, 8, InteractionState.PENDING) is Rejection.STALE
    for state in InteractionState:
        if state is not InteractionState.PENDING:
            assert check_token_current(token, 7, state) is Rejection.NOT_OPEN
    assert set(REJECTION_TEXT) == set(Rejection)


# --- people --------------------------------------------------------------------------------

AUTH = """\
[projects.web]
work_dir = "/srv/web"
agent = "codex-app-server"
auth.telegram = { allow_from = ["1", "2", "3"], approvers = ["1"] }
auth.local = { allow_from = ["U1", "U2"] }
auth.memory = { allow_from = ["*"], approvers = ["*"] }

[projects.api]
work_dir = "/srv/api"
agent = "codex-app-server"
auth.telegram = { allow_from = ["2"] }

[platforms.memory]
"""


@pytest.fixture
def config() -> Config:
    return parse_config(AUTH.replace("[platforms.memory]", ""), env={})


def tg(user: str) -> Actor:
    return Actor(platform="telegram", user_id=user)


def local(user: str) -> Actor:
    return Actor(platform="local", user_id=user)


def test_only_listed_people_may_talk(config: Config) -> None:
    assert may_talk(config, "web", tg("1"))
    assert not may_talk(config, "web", tg("9"))
    assert may_talk(config, "api", tg("2"))
    assert not may_talk(config, "api", tg("1"))  # allowed on web, not on api
    assert not may_talk(config, "api", local("U1"))  # no rules for local: nobody
    assert not may_talk(config, "nope", tg("1"))  # no such project
    assert not may_talk(config, "web", Actor(platform="matrix", user_id="1"))
    assert may_talk(config, "web", Actor(platform="memory", user_id="anyone"))


def test_the_same_id_on_another_platform_is_another_person(config: Config) -> None:
    assert not may_talk(config, "web", local("1"))


def test_listed_approvers_decide_and_others_do_not(config: Config) -> None:
    assert may_decide(config, "web", tg("1"), session_initiator=tg("2"))
    assert not may_decide(config, "web", tg("2"), session_initiator=tg("2"))  # not listed
    assert not may_decide(config, "web", tg("9"), session_initiator=tg("9"))


def test_approvers_default_to_the_initiator(config: Config) -> None:
    assert may_decide(config, "web", local("U1"), session_initiator=local("U1"))
    assert not may_decide(config, "web", local("U2"), session_initiator=local("U1"))
    assert not may_decide(config, "web", local("U1"), session_initiator=None)
    # the initiator's id on another platform is not the initiator
    assert not may_decide(config, "web", local("1"), session_initiator=tg("1"))


def test_who_a_new_card_mentions_is_who_may_decide_it(config: Config) -> None:
    assert approver_ids(config, "web", "telegram", tg("2")) == ("1",)  # listed
    assert approver_ids(config, "web", "local", local("U2")) == ("U2",)  # the initiator
    assert approver_ids(config, "web", "local", None) == ()
    assert approver_ids(config, "web", "local", tg("1")) == ()  # another platform's id
    assert approver_ids(config, "web", "memory", local("U1")) == ()  # anyone: nobody named
    assert approver_ids(config, "api", "telegram", tg("7")) == ()  # may no longer talk
    assert approver_ids(config, "api", "slack", tg("2")) == ()  # no rules there


def test_an_initiator_no_longer_allowed_may_not_decide(config: Config) -> None:
    assert not may_decide(config, "api", tg("7"), session_initiator=tg("7"))


def test_star_approvers_are_anyone_who_may_talk(config: Config) -> None:
    anyone = Actor(platform="memory", user_id="42")
    assert may_decide(config, "web", anyone, session_initiator=None)


def test_the_console_is_held_to_its_identity() -> None:
    text = AUTH.replace("[platforms.memory]", '[platforms.console]\nidentity = "telegram:1"')
    config = parse_config(text, env={})
    settings = config.platforms.get("console", ConsoleConfig)
    assert settings is not None
    console = settings.actor()
    assert may_decide(config, "web", console, session_initiator=tg("3"))
    assert not may_talk(config, "api", console)


def click(config: Config, actor: Actor, **changes: object) -> Rejection | None:
    facts: dict[str, object] = {
        "token": ActionToken.for_action("abc", 0, 7),
        "actor": actor,
        "project": "web",
        "session_id": "s1",
        "sessions_shown": {"s1", "s2"},
        "session_initiator": tg("2"),
        "interaction_epoch": 7,
        "interaction_state": InteractionState.PENDING,
    }
    facts.update(changes)
    return check_click(config, **facts)  # type: ignore[arg-type]


def test_a_click_passes_every_check_in_order(config: Config) -> None:
    assert click(config, tg("1")) is None
    assert click(config, tg("1"), sessions_shown={"s2"}) is Rejection.FOREIGN
    assert click(config, tg("9")) is Rejection.NOT_ALLOWED
    assert click(config, tg("2")) is Rejection.NOT_APPROVER
    assert click(config, tg("1"), interaction_epoch=8) is Rejection.STALE
    decided = InteractionState.DECIDED
    assert click(config, tg("1"), interaction_state=decided) is Rejection.NOT_OPEN
    # a stranger learns nothing about the state of the request
    assert click(config, tg("9"), interaction_state=decided) is Rejection.NOT_ALLOWED


# --- the key -------------------------------------------------------------------------------


def test_the_key_is_created_once_private_and_then_reused(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    key = load_or_create_hmac_key(data_dir)
    assert len(key) == 32
    assert stat.S_IMODE((data_dir / "hmac.key").stat().st_mode) == 0o600
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert load_or_create_hmac_key(data_dir) == key
    assert [path.name for path in data_dir.iterdir()] == ["hmac.key"]


def test_a_key_others_can_read_or_of_the_wrong_size_is_refused(tmp_path: Path) -> None:
    load_or_create_hmac_key(tmp_path)
    path = tmp_path / "hmac.key"
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="readable by others"):
        load_or_create_hmac_key(tmp_path)
    path.chmod(0o600)
    path.write_bytes(b"short")
    with pytest.raises(ConfigError, match="not 32 bytes") as caught:
        load_or_create_hmac_key(tmp_path)
    assert "short" not in str(caught.value)


def test_a_remembered_token_is_the_one_encode_token_makes_under_that_key() -> None:
    make = token_factory(KEY, "iid9", 3)
    token = ActionToken.for_action("iid9", 1, 3)
    assert make("1") == make("1") == encode_token(KEY, token)
    other_key = bytes(reversed(KEY))
    assert token_factory(other_key, "iid9", 3)("1") == encode_token(other_key, token)
    assert token_factory(other_key, "iid9", 3)("1") != make("1")
    tight = token_factory(KEY, "k3m9x2p7qa", 99_999_999, max_bytes=41)
    for _ in range(2):  # a refusal is not remembered as a token
        with pytest.raises(ValueError, match="more than 41"):
            tight("q99.99")
